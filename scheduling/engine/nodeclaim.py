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
from .labels import CAPACITY_TYPE, HOSTNAME, INSTANCE_TYPE, NODE_NAME_FIELD, NODEPOOL, RESERVATION_CAPACITY_BLOCK
from .ledger import ReservationLedger, ReservedMode
from .hostports import host_port_conflict
from .podaffinity import hostname_anti_affinity_conflict
from .quantities import ResourceList, format_resource
from .requirements import Requirement, Requirements
from .taints import UNSCHEDULABLE_TAINT_KEY, NO_SCHEDULE, Taint, untolerated
# The scheduler and the explanations import the rejection kinds from here too.
from .rejection import LIMITS, MIN_VALUES, NO_INSTANCE_TYPE, PAID_ONLY, RESERVED_HELD, Rejection
from .topology import Attempt
from .volumes import exceeds_limits


@dataclass(slots=True)
class Proposal:
    requirements: Requirements
    requests: ResourceList
    mask: int  # the instance types left, as a catalog bitmask
    hold: Offering | None
    catalog: Catalog

    @property
    def instance_types(self) -> list[InstanceType]:
        return self.catalog.types(self.mask)

    def open_price(self) -> float:
        """The cheapest on-demand or spot launch this claim would have (inf when none)."""
        return self.catalog.view(self.requirements).cheapest_open_price(self.mask)


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

    __slots__ = ("node", "name", "labels", "available", "taints", "pods", "anti_pods", "seq", "hostname", "attached",
                 "ports")

    def __init__(self, node: Node, bound: Iterable[Pod], seq: int):
        self.node = node
        self.name = node.name
        self.labels = {**node.labels, NODE_NAME_FIELD: node.name}
        self.hostname = node.labels.get(HOSTNAME) or node.name  # its hostname topology domain
        self.pods = list(bound)
        self.anti_pods = [p for p in self.pods if p.anti_affinity]
        self.ports = tuple(port for p in self.pods for port in p.host_ports)  # host ports its pods use
        self.available = node.allocatable.sub(sum_requests(self.pods))
        taints = node.taints
        if node.unschedulable:
            taints = taints + (Taint(UNSCHEDULABLE_TAINT_KEY, "", NO_SCHEDULE),)
        self.taints = taints
        self.seq = seq
        self.attached: dict[str, set[str]] = {}  # CSI driver -> the claims its pods attach (volumes.py)
        if node.volume_limits:
            for pod in self.pods:
                self._attach(pod)

    def fit(self, pod: Pod, attempt: Attempt | None = None) -> Rejection | None:
        """`attempt`: the pod's topology constraints (topology.py); without one, only required
        hostname anti-affinity is checked, against the node's own pods."""
        taint = untolerated(self.taints, pod.tolerations)
        if taint is not None:
            return Rejection(f"taint {taint} is not tolerated")
        if not any(alt.matches_labels(self.labels) for alt in pod.alternatives):
            return Rejection("node labels do not match the pod's node selector or affinity")
        if not pod.requests.fits(self.available):
            return Rejection(f"not enough room ({', '.join(pod.requests.exceeding(self.available))})")
        if pod.host_ports and self.ports:
            clash = host_port_conflict(pod.host_ports, self.ports)
            if clash is not None:
                return Rejection(clash)
        if pod.volume_usage and self.node.volume_limits:
            beyond = exceeds_limits(self.node.volume_limits, self.attached, pod.volume_usage)
            if beyond is not None:
                return Rejection(beyond)
        if attempt is not None:
            return attempt.check_node(self)
        if hostname_anti_affinity_conflict(pod, self.pods, self.anti_pods) is not None:
            return Rejection("pod anti-affinity")
        return None

    def commit(self, pod: Pod) -> None:
        self.pods.append(pod)
        if pod.anti_affinity:
            self.anti_pods.append(pod)
        if pod.host_ports:
            self.ports += pod.host_ports
        self.available = self.available.sub(pod.requests)
        if self.node.volume_limits:
            self._attach(pod)

    def _attach(self, pod: Pod) -> None:
        for driver, claims in pod.volume_usage:
            self.attached.setdefault(driver, set()).update(claims)


def sum_requests(pods: Iterable[Pod]) -> ResourceList:
    total = ResourceList()
    for pod in pods:
        for name, amount in pod.requests.items():
            total[name] = total.get(name, 0) + amount
    return total


def overfull(node: Node, bound: Iterable[Pod]) -> str | None:
    """Why `node` cannot hold the pods bound to it (their requests beyond its allocatable, which the
    kubelet would never admit), or None when they fit."""
    requested = sum_requests(bound)
    beyond = requested.exceeding(node.allocatable)
    if not beyond:
        return None
    return "its pods request " + ", ".join(
        f"{name} {format_resource(name, requested[name])} of its allocatable {format_resource(name, node.allocatable.get(name, 0))}"
        for name in beyond)


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
        self.mask = 0
        if catalog is not None and problem is None:
            self.mask = catalog.view(self.requirements).mask
            self.instance_types = catalog.types(self.mask)
        # NodePool requirements with minValues: (key, how many distinct values a claim must keep).
        self.min_values = [(req.key, req.min_values) for req in self.requirements if req.min_values]
        self.min_value_keys = frozenset(key for key, _ in self.min_values)
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
    """A node this run plans to launch. Its instance types (a catalog bitmask) narrow as pods join;
    it holds at most one reservation unit, the one it will launch into (see scheduler.py)."""

    __slots__ = ("name", "seq", "template", "requirements", "requests", "mask", "pods", "anti_pods", "ports", "hold",
                 "_price", "_steady", "_none_free", "_sizing", "_held_room", "_view")

    def __init__(self, template: PoolTemplate, instance_types: list[InstanceType] | int, seq: int):
        self.name = ""  # given when the first pod commits, so rejected attempts use no name
        self.seq = seq
        self.template = template
        self.requirements = template.requirements
        self.requests = ResourceList(template.daemon_overhead)
        if isinstance(instance_types, int):
            self.mask = instance_types
        elif instance_types is template.instance_types:
            self.mask = template.mask
        else:
            self.mask = template.catalog.mask_of(instance_types)
        self.pods: list[Pod] = []
        self.anti_pods: list[Pod] = []
        self.ports: tuple = ()  # host ports its pods use (hostports.py)
        self.hold: Offering | None = None
        self._price: float | None = None  # cheapest on-demand/spot launch, computed when asked
        self._steady: int | None = None  # see could_stay_put, computed when asked
        self._none_free = -1  # the ledger's `releases` when no other type had a free unit
        self._sizing: tuple | None = None  # see _sized: the last pod sized against this claim
        self._held_room: dict[str, int] | None = None  # see _room_in_held_unit
        self._view = None  # the catalog view of its requirements, while they stay the same

    @property
    def instance_types(self) -> list[InstanceType]:
        """The instance types the claim may still launch, in catalog order."""
        return self.template.catalog.types(self.mask)

    @property
    def view(self):
        """The catalog view of the claim's requirements."""
        if self._view is None:
            self._view = self.template.catalog.view(self.requirements)
        return self._view

    @property
    def price(self) -> float:
        """The cheapest on-demand or spot launch (inf while the claim holds a reservation unit)."""
        if self.hold is not None:
            return math.inf
        if self._price is None:
            self._price = self.view.cheapest_open_price(self.mask)
        return self._price

    # fitting ------------------------------------------------------------------------------------

    def fit(self, pod: Pod, ledger: ReservationLedger, mode: ReservedMode,
            attempt: Attempt | None = None) -> Proposal | Rejection:
        """`attempt`: the pod's topology constraints (topology.py); without one, only required
        hostname anti-affinity is checked, against the claim's own pods."""
        taint = self.template.untolerated(pod)
        if taint is not None:
            return Rejection(f"taint {taint} is not tolerated")
        if attempt is None:
            if self.pods and hostname_anti_affinity_conflict(pod, self.pods, self.anti_pods) is not None:
                return Rejection("pod anti-affinity")
        elif attempt.host:
            rejection = attempt.check_host(self.name or None)
            if rejection is not None:
                return rejection
        if pod.host_ports and self.ports:
            clash = host_port_conflict(pod.host_ports, self.ports)
            if clash is not None:
                return Rejection(clash)
        requests, fits = self._sized(pod)
        if not fits:
            return Rejection("no instance type fits", kind=NO_INSTANCE_TYPE)
        if self.refuses_outgrowing(pod, ledger, mode):
            return self._strict_rejection()
        rejection = None
        for alternative in pod.alternatives:
            outcome = self._fit_alternative(alternative, requests, fits, ledger, mode, attempt)
            if isinstance(outcome, Proposal):
                return outcome
            rejection = rejection or outcome
        return rejection or Rejection("required node affinity has no term that can match a node")

    def _sized(self, pod: Pod) -> tuple[ResourceList, int]:
        """The claim's requests with the pod's, and the types left with room for them: the
        scheduler asks could_stay_put and then fit for the same pod, so it is computed once."""
        sizing = self._sizing
        if sizing is not None and sizing[0] is pod and sizing[1] is self.requests and sizing[2] == self.mask:
            return sizing[3], sizing[4]
        requests = self.requests.add(pod.requests)
        fits = self.template.catalog.fits_mask(requests) & self.mask
        self._sizing = (pod, self.requests, self.mask, requests, fits)
        return requests, fits

    def _fit_alternative(self, alternative: Requirements, requests: ResourceList, fits: int, ledger: ReservationLedger,
                         mode: ReservedMode, attempt: Attempt | None) -> Proposal | Rejection:
        catalog = self.template.catalog
        problem = self.requirements.compatible(alternative, catalog.well_known)
        if problem is not None:
            return Rejection(problem)
        requirements = self.requirements.intersect(alternative)
        transient = False  # narrowed by topology counts that may still change
        if attempt is not None and attempt.keys:
            requirements, transient = attempt.apply(requirements, catalog, fits, self.hold, self.template.min_value_keys)
            if isinstance(requirements, Rejection):
                return requirements
        mask = fits if requirements is self.requirements else fits & catalog.view(requirements).mask
        if not mask:
            return Rejection("no instance type fits", kind=NO_INSTANCE_TYPE, permanent=not transient)
        hold = self._choose_reservation(requirements, requests, mask, ledger, mode)
        if isinstance(hold, Rejection):
            return hold
        if hold is None and self.template.min_values:
            # A reserved claim launches its reservation's type: minValues bind on-demand and spot.
            problem = self._min_values(requirements, mask & catalog.view(requirements).open_mask)
            if problem is not None:
                # A reservation unit freed later would make the claim reserved, and minValues moot.
                later = self.template.allows_reserved()
                return Rejection(problem, kind=MIN_VALUES, permanent=not (transient or later),
                                 until_release=later and not transient)
        if hold is not None and mode is ReservedMode.STRICT:
            # A strict claim never gives its unit up, so only types with reservations stay options.
            mask &= catalog.view(requirements).reserved_mask
        return Proposal(requirements, requests, mask, hold, catalog)

    def _min_values(self, requirements: Requirements, mask: int) -> str | None:
        """The NodePool's minValues (policy Strict): the types left must span enough values."""
        catalog = self.template.catalog
        for key, wanted in self.template.min_values:
            count = mask.bit_count() if key == INSTANCE_TYPE else catalog.value_count(key, mask, requirements)
            if count < wanted:
                return (f"minValues: {key} needs at least {wanted} distinct values among the instance types left, "
                        f"only {count} remain")
        return None

    def _choose_reservation(self, requirements: Requirements, requests: ResourceList, mask: int,
                            ledger: ReservationLedger, mode: ReservedMode) -> Offering | None | Rejection:
        view = self.template.catalog.view(requirements)
        hold = self.hold
        if hold is not None and mask & view.reserved_mask:
            index = self.template.catalog.index[hold.reservation.instance_type]
            if mask >> index & 1 and hold in view.reserved.get(hold.reservation.instance_type, ()):
                return hold  # the unit it holds still fits: nothing to choose
        free = self._free_options(view, mask, ledger)  # (the unit it holds was kept above if it still fits)
        if free:
            return min(free, key=reservation_preference(ledger))
        if self.hold is not None and mode is ReservedMode.STRICT:
            return self._strict_rejection()
        if mask & view.open_mask:
            return None
        return Rejection(held_message(self._reserved_options(view, mask), ledger), permanent=False, kind=RESERVED_HELD,
                         until_release=True)

    def refuses_outgrowing(self, pod: Pod, ledger: ReservationLedger, mode: ReservedMode) -> bool:
        """A strict claim refuses a pod that would outgrow the type of the unit it keeps while no
        other type it may launch has a free unit: `fit`'s answer (until a
        unit is given back) without its work, asked first because such claims are walked by every
        kind of pod once the units are taken (the claim's types only narrow meanwhile)."""
        if self.hold is None or mode is not ReservedMode.STRICT:
            return False
        room = self._held_room
        if room is None:
            room = self._held_room = self._room_in_held_unit()
        for name, amount in pod.requests.items():
            if amount > room.get(name, 0):
                break
        else:
            return False  # the unit it keeps still holds the pod
        catalog = self.template.catalog
        held_type = self.hold.reservation.instance_type
        if not ledger.free_units:
            return True
        if self._none_free == ledger.releases:
            return True
        others = self.mask & ~(1 << catalog.index[held_type])
        if others & ledger.free_type_mask(self.view):
            return False
        self._none_free = ledger.releases  # stands until a unit is given back: units are only taken
        return True

    def _room_in_held_unit(self) -> dict[str, int]:
        """What the held unit's type has left after the claim's requests (negative for a resource
        the claim asks for and the type lacks), kept until the claim's requests or unit change."""
        allocatable = self.template.catalog.by_name[self.hold.reservation.instance_type].allocatable
        requests = self.requests
        return {name: allocatable.get(name, 0) - requests.get(name, 0) for name in allocatable.keys() | requests.keys()}

    def _strict_rejection(self) -> Rejection:
        return Rejection(f"it would take the claim's last reserved option ({self.hold.reservation.id})",
                         permanent=False, until_release=True)

    def _free_options(self, view, mask: int, ledger: ReservationLedger) -> list[Offering]:
        """Reserved offerings of the types in `mask` whose reservation has a unit left, listed
        from the types with a free unit only."""
        free_types = mask & ledger.free_type_mask(view) if ledger.free_units else 0
        if not free_types:
            return []
        return [o for o in self._reserved_options(view, free_types) if ledger.remaining(o.reservation.id) > 0]

    def _reserved_options(self, view, mask: int) -> list[Offering]:
        """Compatible reserved offerings of the remaining instance types (`mask` holds only types
        with room for `requests`); walks the (few) reserved types rather than every type."""
        if not mask & view.reserved_mask:
            return []
        found, rest, reserved_at = [], mask & view.reserved_mask, view.reserved_at
        while rest:  # the few set bits, lowest (catalog order) first
            low = rest & -rest
            found += reserved_at[low.bit_length() - 1]
            rest ^= low
        return found

    # committing ---------------------------------------------------------------------------------

    def commit(self, pod: Pod, proposal: Proposal, ledger: ReservationLedger, name: str | None = None) -> None:
        if name is not None:
            self.name = name
            self.requirements = self.requirements.intersect([Requirement.single(HOSTNAME, name)])
            proposal.requirements = proposal.requirements.intersect([Requirement.single(HOSTNAME, name)])
        self.take(proposal.hold, ledger)
        if proposal.requirements is not self.requirements:
            self._view = None
        if proposal.mask != self.mask or proposal.requirements is not self.requirements:
            self._price = self._steady = None
        self.requirements = proposal.requirements
        self.requests = proposal.requests
        self._held_room = None
        self.mask = proposal.mask
        self.pods.append(pod)
        if pod.anti_affinity:
            self.anti_pods.append(pod)
        if pod.host_ports:
            self.ports += pod.host_ports

    def type_names(self) -> frozenset[str]:
        return frozenset(it.name for it in self.instance_types)

    def grows_paid_launch(self, proposal: Proposal) -> bool:
        """Whether the pod makes this paid claim launch a more expensive instance."""
        return self.hold is None and proposal.hold is None and proposal.open_price() > self.price

    def could_stay_put(self, pod: Pod) -> bool:
        """Whether `fit` could place the pod on this claim without growing its paid launch: some
        type left with room for the pod either launches at the claim's price or has a reserved
        offering. False means `fit` can only refuse the pod or grow the launch (a pod's narrower
        requirements only remove types and offerings), so the scheduler need not ask it when it
        already knows a claim to grow. A cheap bitmask test instead of a full fit."""
        if self._steady is None:
            view = self.view
            price = self.price
            if price == math.inf:
                steady = self.mask
            else:
                steady = self.mask & (view.reserved_mask | view.open_types_up_to(price))
            self._steady = steady
        return bool(self._sized(pod)[1] & self._steady)  # _steady is within the mask

    def take(self, hold: Offering | None, ledger: ReservationLedger) -> None:
        if hold is self.hold:
            return
        if hold is None:
            ledger.release(self.name)
        else:
            ledger.reserve(self.name, hold.reservation.id)
        self.hold = hold
        self._price = self._steady = self._held_room = None

    def free_reservation(self, ledger: ReservationLedger) -> Offering | None:
        """The best reservation unit this claim could take now, if it holds none."""
        options = self._free_options(self.view, self.mask, ledger)
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


def held_message(options: list[Offering], ledger: ReservationLedger) -> str:
    ids = sorted({o.reservation.id for o in options})
    usage = ", ".join(f"{rid} {ledger.planned(rid)}/{ledger.capacity(rid)} planned" for rid in ids)
    return f"compatible reserved capacity is held by other node claims in this run ({usage})"
