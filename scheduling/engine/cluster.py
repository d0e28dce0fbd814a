"""The Kubernetes objects the engine schedules with: pods, nodes, NodePools, EC2NodeClasses,
DaemonSets, and the world that holds them. Plain data; `world.py` builds them from JSON."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone

from .budgets import DisruptionSpec
from .instances import Instance
from .instancetypes import InstanceType
from .labels import NODEPOOL
from .overhead import KubeletConfig
from .podaffinity import AffinityTerm
from .quantities import CPU, MEMORY, ResourceList
from .requirements import EMPTY, Requirements
from .reservations import CapacityReservation
from .taints import Taint, Toleration

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


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
    alternatives: tuple[Requirements, ...] = field(init=False)
    signature: tuple = field(init=False)

    def __post_init__(self) -> None:
        self.alternatives = self._alternatives()
        self.signature = self._signature()

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def _alternatives(self) -> tuple[Requirements, ...]:
        """nodeSelector ANDed with each required node affinity term; the pod may land on a node
        satisfying any one of them. A term with no expressions, or a contradictory one, matches
        no node (Kubernetes)."""
        terms = (self.node_selector,) if self.affinity_terms is None else tuple(
            self.node_selector.intersect(term) for term in self.affinity_terms if len(term))
        return tuple(term for term in terms if term.satisfiable())

    def _signature(self) -> tuple:
        """Pods with equal signatures fit exactly the same places; the scheduler memoises per
        signature. Namespace and labels are part of it because anti-affinity reads them."""
        return (
            tuple(sorted(self.requests.items())),
            tuple(alt.key for alt in self.alternatives),
            self.tolerations,
            self.namespace,
            tuple(sorted(self.labels.items())),
            self.anti_affinity,
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
    spot_to_spot: bool = False  # the SpotToSpotConsolidation feature gate
    instances: list[Instance] | None = None  # DescribeInstances, when given (lifecycle.py)

    def pending_pods(self) -> list[Pod]:
        return [p for p in self.pods if not p.node_name]
