"""Label selectors and required pod anti-affinity per node (topology key `kubernetes.io/hostname`).

Hostname anti-affinity is what makes "each pod needs its own node" workloads, which matter most
against small reservations (the seeds' 10,000 pods against a 1-instance reservation). The check
is symmetric, as in the Kubernetes scheduler: a pod may not join a node holding a pod its terms
select, nor a node holding a pod whose terms select it. Adding pods to a node only adds conflicts,
so a rejection stays valid for the rest of a scheduling run (the scheduler relies on that).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping, Protocol

from .labels import HOSTNAME
from .requirements import Requirements


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """`matchLabels` and `matchExpressions` ANDed; an empty selector selects every pod."""

    requirements: Requirements

    def matches(self, labels: Mapping[str, str]) -> bool:
        return self.requirements.matches_labels(labels)


@dataclass(frozen=True, slots=True)
class AffinityTerm:
    """One pod (anti-)affinity term. `namespaces` None means every namespace (a
    `namespaceSelector` is taken to select all namespaces: the world carries no Namespace
    objects, and for anti-affinity the wider reading is the safe one). A term without a
    labelSelector selects no pod, as in Kubernetes."""

    selector: LabelSelector | None
    namespaces: frozenset[str] | None
    topology_key: str

    def selects(self, namespace: str, labels: Mapping[str, str]) -> bool:
        if self.selector is None:
            return False
        if self.namespaces is not None and namespace not in self.namespaces:
            return False
        return self.selector.matches(labels)

    @property
    def per_node(self) -> bool:
        return self.topology_key == HOSTNAME


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
