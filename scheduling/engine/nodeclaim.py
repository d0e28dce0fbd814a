"""Where a pod can go: existing nodes, and node claims planned in this run (from a NodePool template).

Each target answers `fit(pod)` with a Proposal (the target's state with the pod added) or a
Rejection, and `commit` applies a proposal. A rejection marked permanent stays true for the rest
of the run for every pod with the same signature, because targets only ever gain pods and
constraints; the scheduler uses that to skip targets cheaply.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable

from .catalog import Catalog
from .cluster import Node, NodePool, Pod
from .instancetypes import InstanceType, Offering
from .labels import CAPACITY_TYPE, HOSTNAME, NODE_NAME_FIELD, NODEPOOL, RESERVATION_CAPACITY_BLOCK
from .ledger import ReservationLedger, ReservedMode
from .podaffinity import hostname_anti_affinity_conflict
from .quantities import ResourceList
from .requirements import Requirement, Requirements
from .taints import UNSCHEDULABLE_TAINT_KEY, NO_SCHEDULE, Taint, untolerated

# Rejection kinds the explanations (explain.py) treat specially.
NO_INSTANCE_TYPE = "no-instance-type"
RESERVED_HELD = "reserved-held"
LIMITS = "limits"
PAID_ONLY = "paid-only"  # a new claim would get no reserved unit (internal, never reported)


@dataclass(frozen=True, slots=True)
class Rejection:
    reason: str
    permanent: bool = True
    kind: str = ""
    # Holds until the ledger gives a unit back (the refusal was for want of a free unit).
    until_release: bool = False

    @property
    def reserved_held(self) -> bool:
        return self.kind == RESERVED_HELD


@dataclass(slots=True)
class Proposal:
    requirements: Requirements
    requests: ResourceList
    instance_types: list[InstanceType]
    hold: Offering | None
    catalog: Catalog

    def open_price(self) -> float:
        """The cheapest on-demand or spot launch this claim would have (inf when none)."""
        prices = self.catalog.view(self.requirements).open_price
        return min((prices[it.name] for it in self.instance_types if it.name in prices), default=math.inf)


def reservation_preference(ledger: ReservationLedger):
    """Which reservation a claim takes among those it could: the cheapest (so the smallest
    instance type that fits), then default ODCRs before capacity blocks before interruptible ones
    (upstream's CapacityReservationTypeFilter tie-break), then the one with the most units left
    (upstream's ReservedOfferingFilter), then by id for determinism."""
    def key(offering: Offering) -> tuple:
        reservation = offering.reservation
        kind = 2 if reservation.interruptible else 1 if reservation.reservation_type == RESERVATION_CAPACITY_BLOCK else 0
        return (offering.price, kind, -ledger.remaining(reservation.id), reservation.id)
    return key


class ExistingNode:
    """A node of the cluster: its allocatable minus what its bound pods request."""

    __slots__ = ("node", "name", "labels", "available", "taints", "pods", "anti_pods", "seq")

    def __init__(self, node: Node, bound: Iterable[Pod], seq: int):
        self.node = node
        self.name = node.name
        self.labels = {**node.labels, NODE_NAME_FIELD: node.name}
        self.pods = list(bound)
        self.anti_pods = [p for p in self.pods if p.anti_affinity]
        self.available = node.allocatable.sub(sum_requests(self.pods))
        taints = node.taints
        if node.unschedulable:
            taints = taints + (Taint(UNSCHEDULABLE_TAINT_KEY, "", NO_SCHEDULE),)
        self.taints = taints
        self.seq = seq

    def fit(self, pod: Pod) -> Rejection | None:
        taint = untolerated(self.taints, pod.tolerations)
        if taint is not None:
            return Rejection(f"taint {taint} is not tolerated")
        if not any(alt.matches_labels(self.labels) for alt in pod.alternatives):
            return Rejection("node labels do not match the pod's node selector or affinity")
        if not pod.requests.fits(self.available):
            return Rejection(f"not enough room ({', '.join(pod.requests.exceeding(self.available))})")
        if hostname_anti_affinity_conflict(pod, self.pods, self.anti_pods) is not None:
            return Rejection("pod anti-affinity")
        return None

    def commit(self, pod: Pod) -> None:
        self.pods.append(pod)
        if pod.anti_affinity:
            self.anti_pods.append(pod)
        self.available = self.available.sub(pod.requests)


def sum_requests(pods: Iterable[Pod]) -> ResourceList:
    total = ResourceList()
    for pod in pods:
        for name, amount in pod.requests.items():
            total[name] = total.get(name, 0) + amount
    return total


class PoolTemplate:
    """A NodePool ready for scheduling: its requirements (spec requirements, template labels and
    the nodepool label), taints, DaemonSet overhead, and the instance types it can launch."""

    def __init__(self, pool: NodePool, catalog: Catalog | None, daemon_overhead: ResourceList,
                 problem: str | None = None):
        self.pool = pool
        self.name = pool.name
        self.catalog = catalog
        self.problem = problem  # why the pool cannot launch anything (its EC2NodeClass)
        self.requirements = pool.requirements.intersect(
            [Requirement.single(NODEPOOL, pool.name)] + [Requirement.single(k, v) for k, v in pool.labels.items()]
        )
        self.taints = pool.taints
        self.daemon_overhead = daemon_overhead
        self.instance_types: list[InstanceType] = []
        if catalog is not None and problem is None:
            names = catalog.view(self.requirements).names
            self.instance_types = [it for it in catalog.instance_types if it.name in names]
        self._toleration_cache: dict[tuple, Taint | None] = {}

    def untolerated(self, pod: Pod) -> Taint | None:
        key = pod.tolerations
        if key not in self._toleration_cache:
            self._toleration_cache[key] = untolerated(self.taints, pod.tolerations)
        return self._toleration_cache[key]

    def allows_reserved(self) -> bool:
        req = self.requirements.get(CAPACITY_TYPE)
        return req is None or req.has("reserved")


class NodeClaim:
    """A node this run plans to launch. Its instance types narrow as pods join; it holds at most
    one reservation unit, the one it will launch into (see scheduler.py)."""

    __slots__ = ("name", "seq", "template", "requirements", "requests", "instance_types", "pods", "anti_pods", "hold",
                 "price", "ceiling", "_ceiling_count", "_type_names")

    def __init__(self, template: PoolTemplate, instance_types: list[InstanceType], seq: int):
        self.name = ""  # given when the first pod commits, so rejected attempts use no name
        self.seq = seq
        self.template = template
        self.requirements = template.requirements
        self.requests = ResourceList(template.daemon_overhead)
        self.instance_types = instance_types
        self.pods: list[Pod] = []
        self.anti_pods: list[Pod] = []
        self.hold: Offering | None = None
        self.price = math.inf  # cheapest on-demand/spot launch; only kept while the claim holds no unit
        # At least the most of each resource any remaining instance type offers: rejects pods that
        # cannot fit without looking at every instance type. Set once the claim has pods, and
        # recomputed only when the types have thinned out (a stale ceiling is still an upper bound).
        self.ceiling: ResourceList | None = None
        self._ceiling_count = 0
        self._type_names: frozenset[str] | None = None

    # fitting ------------------------------------------------------------------------------------

    def fit(self, pod: Pod, ledger: ReservationLedger, mode: ReservedMode) -> Proposal | Rejection:
        taint = self.template.untolerated(pod)
        if taint is not None:
            return Rejection(f"taint {taint} is not tolerated")
        if self.pods and hostname_anti_affinity_conflict(pod, self.pods, self.anti_pods) is not None:
            return Rejection("pod anti-affinity")
        requests = self.requests.add(pod.requests)
        if self.ceiling is not None and not requests.fits(self.ceiling):
            return Rejection("no instance type fits", kind=NO_INSTANCE_TYPE)
        rejection: Rejection | None = None
        for alternative in pod.alternatives:
            outcome = self._fit_alternative(alternative, requests, ledger, mode)
            if isinstance(outcome, Proposal):
                return outcome
            rejection = rejection or outcome
        return rejection or Rejection("required node affinity has no term that can match a node")

    def _fit_alternative(self, alternative: Requirements, requests: ResourceList, ledger: ReservationLedger,
                         mode: ReservedMode) -> Proposal | Rejection:
        problem = self.requirements.compatible(alternative, self.template.catalog.well_known)
        if problem is not None:
            return Rejection(problem)
        requirements = self.requirements.intersect(alternative)
        instance_types = self._narrow(requirements, requests)
        if not instance_types:
            return Rejection("no instance type fits", kind=NO_INSTANCE_TYPE)
        hold = self._choose_reservation(requirements, requests, instance_types, ledger, mode)
        if isinstance(hold, Rejection):
            return hold
        if hold is not None and mode is ReservedMode.STRICT:
            # A strict claim never gives its unit up, so only types with reservations stay options.
            reserved = self.template.catalog.view(requirements).reserved
            instance_types = [it for it in instance_types if it.name in reserved]
        return Proposal(requirements, requests, instance_types, hold, self.template.catalog)

    def _narrow(self, requirements: Requirements, requests: ResourceList) -> list[InstanceType]:
        fits = requests.fits
        if requirements is self.requirements:
            return [it for it in self.instance_types if fits(it.allocatable)]
        names = self.template.catalog.view(requirements).names
        return [it for it in self.instance_types if it.name in names and fits(it.allocatable)]

    def _choose_reservation(self, requirements: Requirements, requests: ResourceList, instance_types: list[InstanceType],
                            ledger: ReservationLedger, mode: ReservedMode) -> Offering | None | Rejection:
        view = self.template.catalog.view(requirements)
        options = self._reserved_options(view, requests, instance_types)
        if self.hold is not None and self.hold in options:
            return self.hold
        free = [o for o in options if ledger.can_reserve(self.name, o.reservation.id)] if ledger.free_units else []
        if free:
            return min(free, key=reservation_preference(ledger))
        if self.hold is not None and mode is ReservedMode.STRICT:
            return Rejection(f"it would take the claim's last reserved option ({self.hold.reservation.id})",
                             permanent=False, until_release=True)
        if any(it.name in view.open_names for it in instance_types):
            return None
        return Rejection(held_message(options, ledger), permanent=False, kind=RESERVED_HELD, until_release=True)

    def _reserved_options(self, view, requests: ResourceList, instance_types: list[InstanceType]) -> list[Offering]:
        """Compatible reserved offerings of the remaining instance types; walks the (few)
        reserved types rather than every instance type."""
        if not view.reserved:
            return []
        allowed = self.type_names() if self.pods else {it.name for it in instance_types}
        by_name = self.template.catalog.by_name
        return [o for name, offers in view.reserved.items()
                if name in allowed and requests.fits(by_name[name].allocatable) for o in offers]

    # committing ---------------------------------------------------------------------------------

    def commit(self, pod: Pod, proposal: Proposal, ledger: ReservationLedger, name: str | None = None) -> None:
        if name is not None:
            self.name = name
            self.requirements = self.requirements.intersect([Requirement.single(HOSTNAME, name)])
            proposal.requirements = proposal.requirements.intersect([Requirement.single(HOSTNAME, name)])
        self.take(proposal.hold, ledger)
        keys = self.template.catalog.relevant_keys
        # Instance types only ever narrow: the same count means the same types.
        same_types = bool(self.pods) and len(proposal.instance_types) == len(self.instance_types)
        same_offerings = same_types and proposal.requirements.restricted_key(keys) == self.requirements.restricted_key(keys)
        self.requirements = proposal.requirements
        self.requests = proposal.requests
        self.instance_types = proposal.instance_types
        if proposal.hold is not None:
            self.price = math.inf
        elif not same_offerings or self.price == math.inf:
            self.price = proposal.open_price()
        if not same_types:
            self._type_names = None
            if self.ceiling is None or len(self.instance_types) * 4 <= self._ceiling_count * 3:
                self.ceiling = ceiling(self.instance_types)
                self._ceiling_count = len(self.instance_types)
        self.pods.append(pod)
        if pod.anti_affinity:
            self.anti_pods.append(pod)

    def type_names(self) -> frozenset[str]:
        if self._type_names is None:
            self._type_names = frozenset(it.name for it in self.instance_types)
        return self._type_names

    def grows_paid_launch(self, proposal: Proposal) -> bool:
        """Whether the pod makes this paid claim launch a more expensive instance."""
        return self.hold is None and proposal.hold is None and proposal.open_price() > self.price

    def take(self, hold: Offering | None, ledger: ReservationLedger) -> None:
        if hold is self.hold:
            return
        if hold is None:
            ledger.release(self.name)
        else:
            ledger.reserve(self.name, hold.reservation.id)
        self.hold = hold

    def free_reservation(self, ledger: ReservationLedger) -> Offering | None:
        """The best reservation unit this claim could take now, if it holds none."""
        view = self.template.catalog.view(self.requirements)
        options = [o for o in self._reserved_options(view, self.requests, self.instance_types)
                   if ledger.can_reserve(self.name, o.reservation.id)]
        return min(options, key=reservation_preference(ledger)) if options else None

    def max_capacity(self, names: Iterable[str]) -> ResourceList:
        """The most of each resource any remaining instance type has (for NodePool limits)."""
        result = ResourceList({name: 0 for name in names})
        for it in self.instance_types:
            for name in result:
                amount = 1 if name == "nodes" else it.capacity.get(name, 0)
                if amount > result[name]:
                    result[name] = amount
        return result


def ceiling(instance_types: list[InstanceType]) -> ResourceList:
    result = ResourceList()
    for it in instance_types:
        for name, amount in it.allocatable.items():
            if amount > result.get(name, 0):
                result[name] = amount
    return result


def held_message(options: list[Offering], ledger: ReservationLedger) -> str:
    ids = sorted({o.reservation.id for o in options})
    usage = ", ".join(f"{rid} {ledger.planned(rid)}/{ledger.capacity(rid)} planned" for rid in ids)
    return f"compatible reserved capacity is held by other node claims in this run ({usage})"
