"""Label selectors, pod (anti-)affinity terms and topology spread constraints, as parsed from pods;
and the original per-node check of required hostname anti-affinity.

The scheduler enforces every term through `topology.py` (any topology key, required and preferred,
spread constraints, and pods already running); `hostname_anti_affinity_conflict` below is the
per-node check it used before, kept for callers that schedule without a Topology.

Hostname anti-affinity is what makes "each pod needs its own node" workloads, which matter most
against small reservations (the seeds' 10,000 pods against a 1-instance reservation). The check
is symmetric, as in the Kubernetes scheduler: a pod may not join a node holding a pod its terms
select, nor a node holding a pod whose terms select it. Adding pods to a node only adds conflicts,
so a rejection stays valid for the rest of a scheduling run (the scheduler relies on that).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping, Protocol

from .labels import HOSTNAME
from .requirements import Requirements


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """`matchLabels` and `matchExpressions` ANDed; an empty selector selects every pod."""

    requirements: Requirements
    _hash: int = field(init=False, repr=False, compare=False, default=0)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_hash", hash(self.requirements))

    def __hash__(self) -> int:  # terms are hashed for every pod signature: keep it cheap
        return self._hash

    def matches(self, labels: Mapping[str, str]) -> bool:
        return self.requirements.matches_labels(labels)


NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"  # every namespace carries it


def namespace_labels_by_name(namespace: str) -> Mapping[str, str]:
    return {NAMESPACE_NAME_LABEL: namespace}


@dataclass(frozen=True, slots=True)
class AffinityTerm:
    """One pod (anti-)affinity term. The namespaces it looks at are `namespaces` plus those its
    `namespace_selector` selects (as Kubernetes: the pod's own namespace when neither is given;
    an empty selector selects every namespace). `namespaces` None means every namespace. A term
    without a labelSelector selects no pod, as in Kubernetes."""

    selector: LabelSelector | None
    namespaces: frozenset[str] | None
    topology_key: str
    namespace_selector: LabelSelector | None = None
    _hash: int = field(init=False, repr=False, compare=False, default=0)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_hash", hash((self.selector, self.namespaces, self.topology_key,
                                                self.namespace_selector)))

    def __hash__(self) -> int:
        return self._hash

    def selects(self, namespace: str, labels: Mapping[str, str],
                namespace_labels: Callable[[str], Mapping[str, str]] = namespace_labels_by_name) -> bool:
        if self.selector is None:
            return False
        if not self.covers(namespace, namespace_labels):
            return False
        return self.selector.matches(labels)

    def covers(self, namespace: str,
               namespace_labels: Callable[[str], Mapping[str, str]] = namespace_labels_by_name) -> bool:
        """Whether the term looks at pods of this namespace."""
        if self.namespaces is None or namespace in self.namespaces:
            return True
        return self.namespace_selector is not None and self.namespace_selector.matches(namespace_labels(namespace))

    @property
    def per_node(self) -> bool:
        return self.topology_key == HOSTNAME


@dataclass(frozen=True, slots=True)
class WeightedTerm:
    """A preferredDuringScheduling pod (anti-)affinity term."""

    weight: int
    term: AffinityTerm


# whenUnsatisfiable
DO_NOT_SCHEDULE, SCHEDULE_ANYWAY = "DoNotSchedule", "ScheduleAnyway"
# nodeAffinityPolicy / nodeTaintsPolicy
HONOR, IGNORE = "Honor", "Ignore"


@dataclass(frozen=True, slots=True)
class SpreadConstraint:
    """One topologySpreadConstraint. `selector` already includes the pod's values for its
    `matchLabelKeys`. ScheduleAnyway constraints are preferences (relaxed when the pod cannot be
    placed); DoNotSchedule ones are required."""

    max_skew: int
    topology_key: str
    when_unsatisfiable: str
    selector: LabelSelector | None
    min_domains: int | None = None
    node_affinity_policy: str = HONOR
    node_taints_policy: str = IGNORE
    _hash: int = field(init=False, repr=False, compare=False, default=0)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_hash", hash((self.max_skew, self.topology_key, self.when_unsatisfiable, self.selector,
                                                self.min_domains, self.node_affinity_policy, self.node_taints_policy)))

    def __hash__(self) -> int:
        return self._hash

    @property
    def required(self) -> bool:
        return self.when_unsatisfiable == DO_NOT_SCHEDULE


class AffinityPod(Protocol):
    namespace: str
    labels: Mapping[str, str]
    anti_affinity: tuple[AffinityTerm, ...]


def hostname_anti_affinity_conflict(pod: AffinityPod, others: Iterable[AffinityPod],
                                    others_with_terms: Iterable[AffinityPod] | None = None) -> AffinityPod | None:
    """The first pod among `others` (the pods on one node) that cannot share a node with `pod`.
    `others_with_terms`, when given, lists just those of `others` that carry anti-affinity terms
    (nodes keep that list, so pods without terms are checked cheaply)."""
    own_terms = [t for t in pod.anti_affinity if t.per_node]
    if own_terms:
        for other in others:
            for term in own_terms:
                if term.selects(other.namespace, other.labels):
                    return other
    for other in others if others_with_terms is None else others_with_terms:
        for term in other.anti_affinity:
            if term.per_node and term.selects(pod.namespace, pod.labels):
                return other
    return None
