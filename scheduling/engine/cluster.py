"""The Kubernetes objects the engine schedules with: pods, nodes, NodePools, EC2NodeClasses,
DaemonSets, and the world that holds them. Plain data; `world.py` builds them from JSON."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any
from datetime import datetime, timedelta, timezone

from .budgets import DisruptionSpec, SpecError, parse_duration
from .hostports import HostPort
from .instances import Instance
from .instancetypes import InstanceType
from .labels import NODEPOOL
from .ec2types import NodeClassShape
from .overhead import KubeletConfig
from .podaffinity import AffinityTerm, SpreadConstraint, WeightedTerm
from .quantities import CPU, MEMORY, ResourceList
from .requirements import EMPTY, Requirements
from .reservations import CapacityReservation
from .taints import Taint, Toleration
from .volumes import Storage

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"


def do_not_disrupt_active(value: str | None, started: datetime | None, now: datetime) -> bool:
    """`karpenter.sh/do-not-disrupt` on a pod: "true", or a Go duration ("2m", "1h") that holds until
    that long after the pod started (no start time yet: it holds). Any other value counts as absent
    (upstream `IsDoNotDisruptActive`)."""
    if value is None:
        return False
    if value == "true":
        return True
    try:
        duration = parse_duration(value)
    except SpecError:
        return False
    if duration <= timedelta(0):
        return False
    return started is None or now - started < duration


def _and(terms: list[Requirements]) -> Requirements:
    result = EMPTY
    for term in terms:
        result = result.intersect(term)
    return result


@dataclass(slots=True, eq=False)
class Pod:
    namespace: str
    name: str
    requests: ResourceList  # effective requests, including `pods: 1`
    uid: str = ""
    created: datetime | None = None
    labels: dict[str, str] = field(default_factory=dict)
    node_selector: Requirements = EMPTY
    # Required node affinity: the nodeSelectorTerms (ORed), or None when the pod has none.
    affinity_terms: tuple[Requirements, ...] | None = None
    tolerations: tuple[Toleration, ...] = ()
    anti_affinity: tuple[AffinityTerm, ...] = ()  # required pod anti-affinity terms
    node_name: str | None = None
    # Disruption (consolidation.py): annotations (do-not-disrupt, pod-deletion-cost), spec.priority,
    # and whether a DaemonSet owns it or it is a static pod (never rescheduled).
    annotations: dict[str, str] = field(default_factory=dict)
    priority: int = 0
    daemon: bool = False
    # metadata.deletionTimestamp is set (the pod is going), status.startTime, and whether a
    # StatefulSet owns it (its replacement needs the name, so it is planned while it terminates).
    terminating: bool = False
    started: datetime | None = None
    stateful: bool = False
    owner: tuple[str, str] | None = None  # (kind, name) of its controller (buying.py groups gangs by it)
    # Pod affinity and topology spread (enforced by topology.py). Preferred terms and ScheduleAnyway
    # spread constraints are preferences, which the scheduler drops one at a time (`relax`).
    affinity: tuple[AffinityTerm, ...] = ()  # required pod affinity terms
    spread: tuple[SpreadConstraint, ...] = ()  # topologySpreadConstraints, both kinds
    preferred_affinity: tuple[WeightedTerm, ...] = ()
    preferred_anti_affinity: tuple[WeightedTerm, ...] = ()
    preferred_node_terms: tuple[tuple[int, Requirements], ...] = ()  # preferred node affinity: (weight, term)
    relaxed: int = 0  # how many preferences have been dropped, in `preferences()` order
    # Its persistent volumes (volumes.py): the claims spec.volumes use, and, once the world's storage
    # is read, where they let it run (ORed alternatives; None: anywhere), why they cannot be used, and
    # the claims it attaches per CSI driver (a node's volume limits).
    volume_claims: tuple[str, ...] = ()
    volume_terms: tuple[Requirements, ...] | None = None
    volume_problem: str = ""
    volume_usage: tuple[tuple[str, frozenset[str]], ...] = ()
    host_ports: tuple[HostPort, ...] = ()  # its containers' hostPorts (hostports.py)
    # Required node affinity alone (nodeSelector AND each required term); `alternatives` also ANDs
    # the preferred node affinity terms still in force.
    strict_alternatives: tuple[Requirements, ...] = field(init=False)
    alternatives: tuple[Requirements, ...] = field(init=False)
    active_affinity: tuple[AffinityTerm, ...] = field(init=False)  # required + preferred in force
    active_anti_affinity: tuple[AffinityTerm, ...] = field(init=False)
    active_spread: tuple[SpreadConstraint, ...] = field(init=False)
    signature: tuple = field(init=False)

    def __post_init__(self) -> None:
        self.strict_alternatives = self._alternatives()
        dropped = set(self.preferences()[:self.relaxed])
        active_node = [term for i, (_, term) in enumerate(self.preferred_node_terms) if ("node", i) not in dropped]
        if active_node:
            combined = tuple(alt.intersect(term) for alt in self.strict_alternatives for term in [_and(active_node)])
            self.alternatives = tuple(alt for alt in combined if alt.satisfiable())
        else:
            self.alternatives = self.strict_alternatives
        if self.volume_problem:
            self.alternatives = ()
        elif self.volume_terms is not None:
            # Where its volumes are: narrows where it lands, not its node affinity as spread counts it.
            combined = tuple(alt.intersect(term) for alt in self.alternatives for term in self.volume_terms)
            self.alternatives = tuple(alt for alt in combined if alt.satisfiable())
        self.active_affinity = self.affinity + tuple(
            w.term for i, w in enumerate(self.preferred_affinity) if ("affinity", i) not in dropped)
        self.active_anti_affinity = self.anti_affinity + tuple(
            w.term for i, w in enumerate(self.preferred_anti_affinity) if ("anti-affinity", i) not in dropped)
        self.active_spread = tuple(c for i, c in enumerate(self.spread) if ("spread", i) not in dropped)
        self.signature = self._signature()

    def preferences(self) -> list[tuple[str, int]]:
        """The pod's preferences in the order `relax` drops them (see scheduler.py): preferred pod
        affinity terms, then preferred pod anti-affinity terms, then preferred node affinity terms
        (each kind lightest weight first, and among equal weights the last listed first), then
        ScheduleAnyway topology spread constraints in the order listed."""
        order: list[tuple[str, int]] = []
        for kind, terms in (("affinity", self.preferred_affinity), ("anti-affinity", self.preferred_anti_affinity)):
            order += [(kind, i) for i in sorted(range(len(terms)), key=lambda i: (terms[i].weight, -i))]
        node = self.preferred_node_terms
        order += [("node", i) for i in sorted(range(len(node)), key=lambda i: (node[i][0], -i))]
        order += [("spread", i) for i, c in enumerate(self.spread) if not c.required]
        return order

    def can_relax(self) -> bool:
        return self.relaxed < len(self.preferences())

    def relax(self) -> "Pod":
        """A copy of the pod with its next preference dropped (`can_relax` must be true)."""
        return replace(self, relaxed=self.relaxed + 1)

    def describe_relaxed(self) -> list[str]:
        """The preferences dropped so far, in words."""
        words = []
        for kind, i in self.preferences()[:self.relaxed]:
            if kind == "node":
                words.append(f"preferred node affinity ({self.preferred_node_terms[i][1]}, weight {self.preferred_node_terms[i][0]})")
            elif kind == "spread":
                c = self.spread[i]
                words.append(f"ScheduleAnyway topology spread on {c.topology_key} (maxSkew {c.max_skew})")
            else:
                term = (self.preferred_affinity if kind == "affinity" else self.preferred_anti_affinity)[i]
                words.append(f"preferred pod {kind} on {term.term.topology_key} (weight {term.weight})")
        return words

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def reschedulable(self) -> bool:
        """Whether disrupting its node means placing it again (upstream `IsReschedulable`): not a
        DaemonSet's or static pod, and not terminating unless a StatefulSet owns it."""
        return not self.daemon and (not self.terminating or self.stateful)

    def blocks_disruption(self, now: datetime) -> bool:
        """An active pod whose do-not-disrupt holds (upstream `IsDisruptable`, negated)."""
        return not self.terminating and do_not_disrupt_active(self.annotations.get(DO_NOT_DISRUPT), self.started, now)

    def _alternatives(self) -> tuple[Requirements, ...]:
        """nodeSelector ANDed with each required node affinity term; the pod may land on a node
        satisfying any one of them. A term with no expressions, or a contradictory one, matches
        no node (Kubernetes)."""
        terms = (self.node_selector,) if self.affinity_terms is None else tuple(
            self.node_selector.intersect(term) for term in self.affinity_terms if len(term))
        return tuple(term for term in terms if term.satisfiable())

    def _signature(self) -> tuple:
        """Pods with equal signatures fit exactly the same places. Namespace and labels are part
        of it because pod (anti-)affinity and topology spread read them."""
        return (
            tuple(sorted(self.requests.items())),
            self.alternatives,  # Requirements compare by their key and cache their hash
            self.tolerations,
            self.namespace,
            tuple(sorted(self.labels.items())),
            self.active_anti_affinity,
            self.active_affinity,
            self.active_spread,
            self.host_ports,
        )

    def sort_key(self) -> tuple:
        """First-fit-decreasing order: CPU then memory descending, then oldest first, then uid,
        then name for a total order (upstream `queue.go`)."""
        return (-self.requests.get(CPU, 0), -self.requests.get(MEMORY, 0), self.created or _EPOCH,
                self.uid, self.key)


@dataclass(slots=True, eq=False)
class Node:
    name: str
    labels: dict[str, str]
    allocatable: ResourceList
    capacity: ResourceList
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    deleting: bool = False
    ready: bool = True
    created: datetime | None = None
    annotations: dict[str, str] = field(default_factory=dict)
    provider_id: str = ""  # aws:///<zone>/<instance id>
    volume_limits: dict[str, int] = field(default_factory=dict)  # CSI driver -> volumes it may attach (CSINode)

    @property
    def nodepool(self) -> str | None:
        return self.labels.get(NODEPOOL)


@dataclass(slots=True, eq=False)
class NodePool:
    name: str
    node_class: str
    requirements: Requirements = EMPTY
    labels: dict[str, str] = field(default_factory=dict)  # spec.template.metadata.labels
    taints: tuple[Taint, ...] = ()
    weight: int = 0
    limits: ResourceList | None = None
    disruption: DisruptionSpec = field(default_factory=DisruptionSpec)
    # spec.replicas (alpha upstream): a static NodePool keeps this many nodes whatever the pods.
    replicas: int | None = None

    @property
    def static(self) -> bool:
        return self.replicas is not None

    def order_key(self) -> tuple:
        """Weight descending, then name descending, as upstream `OrderByWeight`."""
        return (-self.weight, _descending(self.name))


def _descending(text: str) -> tuple[int, ...]:
    return tuple(-ord(c) for c in text) + (1,)


@dataclass(slots=True, eq=False)
class NodeClass:
    name: str
    selector_terms: object = None  # raw spec.capacityReservationSelectorTerms, validated later
    kubelet: KubeletConfig = field(default_factory=KubeletConfig)
    shape: NodeClassShape = field(default_factory=NodeClassShape)  # AMI family, root volume
    # Why its status says it is not Ready (Karpenter's launch gate), None when it is or says nothing.
    not_ready: str | None = None


@dataclass(slots=True, eq=False)
class DaemonSet:
    namespace: str
    name: str
    pod: Pod  # the pod template, as a pod


@dataclass(slots=True, eq=False)
class World:
    now: datetime
    reserved_capacity: bool = True
    instance_types: list[InstanceType] = field(default_factory=list)
    reservations: list[CapacityReservation] = field(default_factory=list)
    reservation_groups: dict[str, frozenset[str]] = field(default_factory=dict)
    node_classes: list[NodeClass] = field(default_factory=list)
    node_pools: list[NodePool] = field(default_factory=list)
    nodes: list[Node] = field(default_factory=list)
    pods: list[Pod] = field(default_factory=list)
    daemon_sets: list[DaemonSet] = field(default_factory=list)
    # Namespace labels, for namespaceSelectors (optional `namespaces`; see world.py).
    namespaces: dict[str, dict[str, str]] = field(default_factory=dict)
    spot_to_spot: bool = False  # the SpotToSpotConsolidation feature gate
    instances: list[Instance] | None = None  # DescribeInstances, when given (lifecycle.py)
    # Nodes whose NodeClaim is marked Drifted (optional `nodeClaims`; refresh.py): name -> Drift.
    drifted: dict = field(default_factory=dict)
    pod_disruption_budgets: list = field(default_factory=list)  # policy/v1 PodDisruptionBudgets (pdbs.py)
    node_overlays: list = field(default_factory=list)  # karpenter.sh/v1alpha1 NodeOverlays (overlays.py)
    storage: Storage | None = None  # PersistentVolumes, claims, StorageClasses, CSINodes (volumes.py)
    # Zonal Reserved Instances and Savings Plans (optional `commitments`; commitments.py), and what they cover.
    commitments: Any = None
    coverage: Any = None

    def pending_pods(self) -> list[Pod]:
        return [p for p in self.pods if not p.node_name]
