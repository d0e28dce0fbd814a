"""Consolidation: delete empty nodes, delete or replace underutilised ones, and act on reservation
drift, each decision found by re-running the scheduler in FALLBACK reserved mode.

Upstream (kubernetes-sigs/karpenter `pkg/controllers/disruption/`):
  * Candidates: nodes of a NodePool (ready, not being deleted, not nominated for pending pods)
    whose instance type and price are known, without `karpenter.sh/do-not-disrupt: "true"` on the
    node or on any of its pods, and "consolidatable": no pod change for `consolidateAfter`.
  * A node's price is the offering its labels name (instance type, zone, capacity type). A reserved
    node costs its reserved offering: the on-demand price / 10,000,000. So on-demand and spot move
    into free reserved capacity, large reserved nodes move into smaller reservations, and a reserved
    node is never replaced by paid capacity (karpweb also refuses that explicitly).
  * A simulation reschedules the candidates' pods (DaemonSet and static pods stay behind) onto the
    other nodes and new claims. Every pod must find a place. No new claim: delete. One new claim,
    strictly cheaper than the candidates together (every instance type it may still launch, at
    the worst price of the capacity type it would launch): replace. More: nothing.
  * Spot to spot only behind the `SpotToSpotConsolidation` feature gate, and for one node only
    with at least 15 cheaper instance types (the launch is limited to the 15 cheapest).
  * Methods, in order: emptiness (every empty candidate, reason Empty), multi-node (a binary search
    for the longest prefix of up to 100 candidates ordered by disruption cost that can go at once,
    reason Underutilized), single-node (candidates by savings per unit of disruption cost,
    interleaved across NodePools; the first that works, reason Underutilized). Drift (reason
    Drifted) comes first of all: every empty drifted node, or else the first non-empty one whose
    pods all find a place (one per pass, as upstream). NodePool disruption budgets bound every method.
  * Disruption cost: per pod 1 + pod-deletion-cost / 2^27 + priority / 2^25 (each clamped to
    [-10, 10]), times the fraction of the node's `expireAfter` lifetime that remains.

Where karpweb decides what upstream leaves to timing:
  * One run returns several decisions (drift, emptiness, one multi-node and one single-node
    command), and they are consistent with each other: each is simulated on the cluster as the
    previous ones leave it (their pods moved, their replacements added).
  * What the provisioning plan of the same run does is part of that cluster: pods it binds to a
    node make that node "nominated" (no candidate), its new claims are nodes that are not Ready.
    Pods it could not place, and the pods of nodes being deleted or drained for capacity-block
    expiry, are simulated first (once), so consolidation only uses the room they leave.
  * A moved pod never counts on a node that is not Ready (upstream fails the whole command when
    one would); it goes to a new claim instead, or the command is not made.
  * consolidateAfter: the world has no pod events, so a node's last pod change is the newest
    creationTimestamp of its pods, or the node's own when it has none; with no timestamp at all
    a node is consolidatable only when consolidateAfter is 0.
  * Budgets count the NodePool's initialized nodes (upstream `BuildDisruptionBudgetMapping`); of
    those, nodes that are deleting or not Ready, and nodes this run already disrupts, use up the
    allowance. A node that never became Ready (no `karpenter.sh/initialized=true`) is neither
    counted nor disrupting, so one stuck node does not freeze a `nodes: "1"` budget.
  * Empty nodes are left to emptiness (reason Empty), so a budget for Empty is not bypassed by
    Underutilized; multi-node consolidation takes only nodes with pods.
  * Savings are counted at the margin: what the cluster stops paying. A node in a reservation or
    Capacity Block costs nothing at the margin (the reservation is paid whether a node runs in it or
    not), nor does a replacement launched into a free unit; nor does an on-demand node whose
    instance EC2 runs in an open ODCR (DescribeInstances, the world's `instances`). So deleting a reserved node, or moving
    its pods into another reservation, saves nothing: a reserved node with pods is never a
    consolidation candidate (upstream's "can consolidate from one reserved offering to another"
    moves them to save od/10^7 an hour; docs/simulate.md), and a command that evicts pods is made
    only when it saves strictly more than nothing. Empty reserved nodes are still deleted (no pod
    is disrupted; the keep-idle-reserved opt-in below keeps them).
  * Nodes of a reservation excluded from planning (karpweb's override) stay: no method takes them
    (drift and consolidation alike); only capacity-block expiry, which EC2 enforces, still applies.
  * Opt-in, per NodePool: the annotation `karpweb.io/keep-idle-reserved-nodes: "true"` keeps every
    node of the NodePool that sits in a reservation (capacity-type `reserved` after demotion): it
    is never deleted or replaced by consolidation, even when empty. The reservation is paid for
    whether the node runs or not, so removing it saves nothing and gives the slot away (upstream
    deletes idle reserved nodes and then may not get the unit back). Such nodes still take pods
    moved off other nodes; drift and capacity-block expiry still apply to them.
"""

from __future__ import annotations

import copy
import math
from bisect import bisect_left
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Iterable

from .budgets import (
    REASON_DRIFTED, REASON_EMPTY, REASON_UNDERUTILIZED, WHEN_EMPTY_OR_UNDERUTILIZED, DisruptionSpec,
)
from .cluster import DO_NOT_DISRUPT, Node, NodePool, Pod
from .instancetypes import RESERVED_PRICE_DIVISOR, InstanceType, Offering
from .labels import (
    CAPACITY_TYPE, CAPACITY_TYPE_PREFERENCE, HOSTNAME, INITIALIZED, INSTANCE_TYPE, ON_DEMAND, RESERVATION_LABELS, RESERVED, SPOT,
    ZONE,
)
from .launch import MAX_INSTANCE_TYPES, FinalClaim, finalize, node_labels
from .ledger import ReservationLedger, ReservedMode
from .nodeclaim import ExistingNode, NodeClaim, Proposal
from .pdbs import eviction_blocked
from .planning import Plan
from .quantities import CPU, ResourceList
from .requirements import Requirement, Requirements
from .static import dynamic_templates, may_replace_drifted, static_claim
from .scheduler import ClaimNamer, PoolLimits, Results, Scheduler

POD_DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"
MAX_MULTI_NODE_CANDIDATES = 100
MIN_SPOT_TO_SPOT_OPTIONS = 15

EMPTY, MULTI, SINGLE, DRIFT = "empty", "multi", "single", "drift"


# simulations that can be undone ------------------------------------------------------------------


class _Journal:
    """The state of every node a simulation changed, as it was before, so it can be put back."""

    __slots__ = ("saved",)

    def __init__(self) -> None:
        self.saved: dict[int, tuple[ExistingNode, dict]] = {}

    def save(self, node: ExistingNode) -> None:
        if id(node) not in self.saved:
            self.saved[id(node)] = (node, {name: _copy(getattr(node, name)) for name in _node_slots()})

    def undo(self) -> None:
        for node, snapshot in self.saved.values():
            for name, value in snapshot.items():
                setattr(node, name, value)
        self.saved.clear()


def _copy(value: object) -> object:
    return copy.copy(value) if isinstance(value, (list, dict, set)) else value


_SLOTS: tuple[str, ...] | None = None


def _node_slots() -> tuple[str, ...]:
    global _SLOTS
    if _SLOTS is None:
        names: dict[str, None] = {}
        for cls in ExistingNode.__mro__:
            slots = getattr(cls, "__slots__", ())
            for name in (slots,) if isinstance(slots, str) else slots:
                if not name.startswith("__"):
                    names[name] = None
        _SLOTS = tuple(names)
    return _SLOTS


class SimNode(ExistingNode):
    """An existing node in consolidation's picture of the cluster. While a simulation runs, the
    first change to each node is journalled so that a rejected command leaves no trace."""

    __slots__ = ("alive", "receives", "settled", "pseudo")
    journal: _Journal | None = None  # the running simulation's (class-wide; simulations do not nest)

    def __init__(self, node: Node, bound: Iterable[Pod], seq: int, *, pseudo: bool = False):
        super().__init__(node, bound, seq)
        self.alive = True  # False once a decision of this run removes it
        self.receives = True  # may take pods moved off other nodes
        self.settled = False  # got pods in this run (nominated): not a candidate
        self.pseudo = pseudo  # a node claim of this run, not a node of the world

    def commit(self, *args, **kwargs):
        journal = SimNode.journal
        if journal is not None:
            journal.save(self)
        return super().commit(*args, **kwargs)


@dataclass(slots=True)
class Simulation:
    results: Results
    journal: _Journal
    ledger: ReservationLedger

    def undo(self) -> None:
        self.journal.undo()


# candidates --------------------------------------------------------------------------------------


@dataclass(slots=True, eq=False)
class Candidate:
    sim: SimNode
    pool: NodePool
    instance_type: InstanceType
    capacity_type: str
    zone: str
    price: float
    pods: list[Pod]  # the pods that would move (not DaemonSet or static pods)
    cost: float  # disruption cost
    prepaid: bool = False  # labelled on-demand, but EC2 runs its instance in an open reservation

    @property
    def name(self) -> str:
        return self.sim.name

    @property
    def spec(self) -> DisruptionSpec:
        return self.pool.disruption

    @property
    def reserved(self) -> bool:
        return self.capacity_type == RESERVED

    @property
    def marginal_price(self) -> float:
        """What removing the node saves an hour: nothing for a node in a reservation (reserved, or
        on-demand in an open ODCR: the reservation is paid whether the node runs or not), else its
        offering's price."""
        return 0.0 if self.reserved or self.prepaid else self.price


@dataclass(slots=True)
class Command:
    kind: str  # empty | multi | single | drift
    candidates: list[Candidate]
    replacements: list[FinalClaim] = field(default_factory=list)
    savings: float = 0.0
    moves: dict[str, str] = field(default_factory=dict)  # pod key -> node or replacement name
    drift_reason: str = ""  # the message
    reservation_id: str | None = None
    drift_kind: str = ""  # the Drifted condition's reason: CapacityReservationDrift, AMIDrift, ...

    @property
    def evicted_pods(self) -> list[str]:
        """The pods this command evicts (DaemonSet and static pods go with their node), by key."""
        return sorted(p.key for c in self.candidates for p in c.pods)

    @property
    def action(self) -> str:
        return "replace" if self.replacements else "delete"

    @property
    def nodes(self) -> list[str]:
        return [c.name for c in self.candidates]


def node_price(it: InstanceType, capacity_type: str | None, zone: str | None) -> float | None:
    """What a node costs per hour, as upstream prices candidates: the offering its labels name."""
    if capacity_type == RESERVED:
        return it.on_demand_price(zone) / RESERVED_PRICE_DIVISOR
    prices = [o.price for o in it.offerings if o.capacity_type == capacity_type and o.zone == zone]
    return min(prices) if prices else None


def marginal_savings(candidates: list[Candidate], replacement: FinalClaim | None = None) -> float:
    """What the cluster stops paying an hour: the candidates' marginal prices less the
    replacement's (a launch into a free reservation unit costs nothing more)."""
    launched = 0.0 if replacement is None or replacement.offering.reserved else replacement.offering.price
    return sum(c.marginal_price for c in candidates) - launched


def eviction_cost(pod: Pod) -> float:
    cost = 1.0
    raw = pod.annotations.get(POD_DELETION_COST)
    if raw is not None:
        try:
            value = float(raw)
        except ValueError:
            value = 0.0
        if math.isfinite(value):
            cost += value / 2**27
    cost += pod.priority / 2**25
    return min(10.0, max(-10.0, cost))


def disruption_cost(node: Node, pods: list[Pod], spec: DisruptionSpec, now: datetime) -> float:
    """A candidate's disruption cost: its moving pods' eviction costs, scaled by the lifetime it has left."""
    return sum(eviction_cost(p) for p in pods) * lifetime_remaining(node, spec, now)


def lifetime_remaining(node: Node, spec: DisruptionSpec, now: datetime) -> float:
    if spec.expire_after is None or node.created is None or not spec.expire_after.total_seconds():
        return 1.0
    age = (now - node.created).total_seconds()
    return min(1.0, max(0.0, 1.0 - age / spec.expire_after.total_seconds()))


def last_pod_event(node: Node, pods: list[Pod]) -> datetime | None:
    times = [p.created for p in pods if p.created is not None]
    if times:
        return max(times)
    return node.created


def _topology_terms(pod: Pod) -> bool:
    """Whether the pod has pod (anti-)affinity or topology spread terms (the attributes that
    topology.py reads; `getattr` so that this also reads worlds from before those existed)."""
    return any(getattr(pod, name, ()) for name in (
        "anti_affinity", "affinity", "spread", "preferred_affinity", "preferred_anti_affinity"))


def do_not_disrupt(annotations: dict[str, str]) -> bool:
    """A node's `karpenter.sh/do-not-disrupt` (only "true" counts on a node, as upstream)."""
    return annotations.get(DO_NOT_DISRUPT) == "true"


# the cluster as consolidation sees it ------------------------------------------------------------


class ClusterState:
    """The nodes after the provisioning plan and after each accepted decision of this run, the
    reservation ledger, NodePool usage for limits, and per pod signature the nodes that could take
    such a pod (kept across simulations: nodes only ever gain pods, so a node that refuses a
    signature keeps refusing it)."""

    def __init__(self, plan: Plan, nodes: list[Node]):
        self.world = plan.world
        self.now = plan.world.now
        self.templates = dynamic_templates(plan.templates)  # moved pods never open a static NodePool's claim
        self.static_templates = {t.name: t for t in plan.templates if t.pool.static}
        self.ledger = plan.results.ledger.copy()
        self.world_pools = {p.name: p for p in self.world.node_pools}
        self.world_types = {it.name: it for it in self.world.instance_types}
        # Each NodePool's types as its catalog prices them (NodeOverlays change prices per pool).
        self.pool_types = {t.name: t.catalog.by_name for t in plan.templates if t.catalog is not None}
        bound: dict[str, list[Pod]] = {}
        for pod in self.world.pods:
            if pod.node_name:
                bound.setdefault(pod.node_name, []).append(pod)
        self.bound = bound  # the world's pods per node name
        self.nodes: list[SimNode] = []
        self.by_name: dict[str, SimNode] = {}
        for seq, node in enumerate(nodes):
            sim = SimNode(node, bound.get(node.name, ()), seq)
            self.by_name[node.name] = sim
            self.nodes.append(sim)
        self._seq = len(nodes)
        self.taken = set(self.by_name) | {claim.name for claim in plan.claims}
        self.used = self._pool_usage()
        self.acceptors: dict[tuple, list[SimNode]] = {}
        self._weeded: dict[tuple, int] = {}  # signature -> `removals` when its list was last weeded
        self.removals = 0
        self._by_cpu: tuple[list[int], list[SimNode]] | None = None
        # Provisioning's bindings (pods bound to a node left out, e.g. one draining, are `orphans`)
        # and its claims.
        self.orphans: list[Pod] = []
        pods = {p.key: p for p in self.world.pods}
        for pod_key, node_name in plan.results.bindings.items():
            sim = self.by_name.get(node_name)
            if sim is None:
                self.orphans.append(pods[pod_key])
            else:
                sim.settled = True
                sim.commit(pods[pod_key])
        for final in plan.claims:
            self._add_claim_node(final)
        self._sort()

    def _pool_usage(self) -> dict[str, ResourceList]:
        used: dict[str, ResourceList] = {}
        for node in self.world.nodes:
            pool = node.nodepool
            if pool is None:
                continue
            total = used.setdefault(pool, ResourceList())
            for name, amount in node.capacity.items():
                total[name] = total.get(name, 0) + amount
            total["nodes"] = total.get("nodes", 0) + 1
        return used

    def _sort(self) -> None:
        self.nodes.sort(key=lambda n: (not n.node.ready, n.name))

    def _add_claim_node(self, final: FinalClaim) -> SimNode:
        """A node claim of this run as a node that is not Ready yet, holding its pods."""
        claim = final.claim
        template = claim.template
        it = final.instance_type
        labels = {**final.labels, HOSTNAME: claim.name}
        node = Node(name=claim.name, labels=labels, allocatable=it.allocatable.sub(template.daemon_overhead),
                    capacity=it.capacity, taints=template.taints, ready=False, created=self.now)
        sim = SimNode(node, claim.pods, self._seq, pseudo=True)
        self._seq += 1
        sim.settled = True
        self.nodes.append(sim)
        self.by_name[node.name] = sim
        self.taken.add(node.name)
        total = self.used.setdefault(template.name, ResourceList())
        for name, amount in it.capacity.items():
            total[name] = total.get(name, 0) + amount
        total["nodes"] = total.get("nodes", 0) + 1
        return sim

    def remove(self, sim: SimNode) -> None:
        sim.alive = False
        sim.receives = False
        self.nodes.remove(sim)
        self.removals += 1

    # simulation ---------------------------------------------------------------------------------

    def receivers(self, pod: Pod) -> list[SimNode]:
        """Ready nodes that could take a pod of this signature, in scheduling order (computed on
        first use). Only nodes with the CPU to spare are looked at: an index by spare CPU, built
        once, may be stale, but nodes only lose room, so it still lists every node with enough."""
        found = self.acceptors.get(pod.signature)
        if found is None:
            if self._by_cpu is None:
                ready = [n for n in self.nodes if n.alive and n.receives and n.node.ready]
                ready.sort(key=lambda n: n.available.get(CPU, 0))
                self._by_cpu = ([n.available.get(CPU, 0) for n in ready], ready)
            spare, ready = self._by_cpu
            roomy = ready[bisect_left(spare, pod.requests.get(CPU, 0)):]
            if not pod.anti_affinity and not pod.host_ports and all(not len(alt) for alt in pod.alternatives):
                # Nothing but room can stop such a pod on an untainted node none of whose pods
                # repel others: skip the full check there.
                requests = pod.requests
                found = [n for n in roomy if n.alive and (
                    requests.fits(n.available) if not n.taints and not n.anti_pods else n.fit(pod) is None)]
            else:
                found = [n for n in roomy if n.alive and n.fit(pod) is None]
            found.sort(key=lambda n: (not n.node.ready, n.name))
            self.acceptors[pod.signature] = found
            self._weeded[pod.signature] = self.removals
        return found

    def limits(self) -> dict[str, PoolLimits]:
        return {t.name: PoolLimits(t.pool.limits, self.used.get(t.name, ResourceList()))
                for t in self.templates if t.pool.limits is not None}

    def simulate(self, pods: list[Pod], leaving: list[SimNode] = (), *, moved: bool = True) -> Simulation:
        """Schedule `pods` on the cluster without the `leaving` nodes (in fallback reserved mode).
        Moved pods only go to Ready nodes that take moved pods; other pods (pending ones, those
        of draining nodes) may go to any node, as provisioning would place them.

        The leaving nodes stay in the node lists but have no room while the simulation runs. The
        scheduler gets, per pod, the nodes that could take it (`receivers`). When none of the
        moved pods has pod topology terms (spread, pod affinity or anti-affinity), the only other
        thing the existing nodes are read for is the required anti-affinity of the pods already
        running (it can repel a moved pod from a whole domain), so only the nodes running such
        pods are handed over: a thousand nodes cost more to hand over than to schedule on."""
        journal = _Journal()
        for sim in leaving:
            journal.save(sim)
            sim.available = ResourceList()  # every pod requests `pods: 1`: nothing fits
        order = None
        existing = [n for n in self.nodes if n.available]
        if moved:
            for pod in pods:
                self.receivers(pod)
            order = self._order
            if not any(_topology_terms(p) for p in pods):
                existing = [n for n in existing if n.anti_pods]
        ledger = self.ledger.copy()
        SimNode.journal = journal
        try:
            scheduler = Scheduler(self.templates, existing, ledger, ReservedMode.FALLBACK, self.limits(),
                                  self.taken, node_order=order)
            results = scheduler.solve(pods)
        finally:
            SimNode.journal = None
        return Simulation(results, journal, ledger)

    def _order(self, pod: Pod) -> list[ExistingNode]:
        """The scheduler's hook: the nodes that could take this pod (dead ones weeded out lazily)."""
        signature = pod.signature
        found = self.acceptors[signature]
        if self._weeded.get(signature) != self.removals:
            found = self.acceptors[signature] = [n for n in found if n.alive]
            self._weeded[signature] = self.removals
        return list(found)

    def accept(self, simulation: Simulation | None, removed: list[SimNode], claims: list[FinalClaim]) -> None:
        """Keep what a simulation did: its pods stay where it put them, `removed` go, `claims`
        become nodes that are not Ready yet, and its ledger becomes the cluster's."""
        if simulation is not None:
            for node_name in set(simulation.results.bindings.values()):
                target = self.by_name.get(node_name)
                if target is not None:
                    target.settled = True
            self.ledger = simulation.ledger
        for sim in removed:
            self.remove(sim)
        for final in claims:
            self._add_claim_node(final)
        self._sort()

    # a lower bound for pruning ------------------------------------------------------------------

    def cheapest_claim(self, pods: list[Pod], reserved_only: bool) -> float:
        """A lower bound on the launch price of ONE new claim that takes all `pods`: the cheapest
        available offering of any instance type that some NodePool could launch for them together
        (inf when none can). The reservation ledger is the cluster's."""
        best = math.inf
        for template in self.templates:
            if template.problem is not None or template.catalog is None:
                continue
            claim = NodeClaim(template, template.instance_types, -1)
            ledger = self.ledger.copy()
            for index, pod in enumerate(pods):
                outcome = claim.fit(pod, ledger, ReservedMode.FALLBACK)
                if not isinstance(outcome, Proposal):
                    break
                claim.commit(pod, outcome, ledger, name="lower-bound" if index == 0 else None)
            else:
                for it in claim.instance_types:
                    for offering in _offers(it, claim.requirements):
                        if offering.reserved:
                            if self.ledger.remaining(offering.reservation.id) <= 0:
                                continue
                        elif reserved_only:
                            continue
                        best = min(best, offering.price)
        return best


# pricing a replacement ---------------------------------------------------------------------------


def _offers(it: InstanceType, requirements: Requirements) -> list[Offering]:
    return [o for o in it.offerings if o.available and o.compatible(requirements)]


def worst_launch_price(offers: list[Offering]) -> float:
    """Upstream `WorstLaunchPrice`: the dearest offering of the capacity type the launch would
    use (reserved, else spot, else on-demand)."""
    for capacity_type in (RESERVED, SPOT, ON_DEMAND):
        prices = [o.price for o in offers if o.capacity_type == capacity_type]
        if prices:
            return max(prices)
    return math.inf


def price_replacement(final: FinalClaim, candidates: list[Candidate], *, multi: bool, spot_to_spot: bool) -> FinalClaim | None:
    """The replacement as it may launch: only instance types strictly cheaper than the candidates
    together, pinned to spot when it may be either; None when no such launch exists."""
    claim = final.claim
    budget = sum(c.price for c in candidates)
    requirements = final.requirements
    if claim.hold is not None:
        options = [(final.instance_type, [final.offering])]
    else:
        if all(c.reserved for c in candidates):
            return None  # a reserved node is never replaced by paid capacity
        options = [(it, offers) for it in claim.instance_types if (offers := _offers(it, requirements))]
    capacity = requirements.get(CAPACITY_TYPE)
    allows_spot = capacity is None or capacity.has(SPOT)
    if claim.hold is None and allows_spot and all(c.capacity_type == SPOT for c in candidates):
        # Upstream: spot nodes whose replacement may be spot take the spot-to-spot path, even
        # when an on-demand launch would be cheaper.
        if not spot_to_spot:
            return None
        requirements = requirements.intersect([Requirement.single(CAPACITY_TYPE, SPOT)])
        options = [(it, spot) for it, offers in options if (spot := [o for o in offers if o.capacity_type == SPOT])]
        options = _cheaper(options, budget)
        if multi:
            options = _not_same_type(options, candidates)
        elif len(options) < MIN_SPOT_TO_SPOT_OPTIONS:
            return None
        else:
            options = options[:MIN_SPOT_TO_SPOT_OPTIONS]
    else:
        options = _cheaper(options, budget)
        if multi:
            options = _not_same_type(options, candidates)
        if claim.hold is None and (capacity is None or (capacity.has(SPOT) and capacity.has(ON_DEMAND))) and any(
                o.capacity_type == SPOT for _, offers in options for o in offers):
            # Priced as spot: do not let an unavailable spot launch fall back to dearer on-demand.
            requirements = requirements.intersect([Requirement.single(CAPACITY_TYPE, SPOT)])
            options = [(it, spot) for it, offers in options if (spot := [o for o in offers if o.capacity_type == SPOT])]
    if not options:
        return None
    it, offering = min(((it, o) for it, offers in options for o in offers),
                       key=lambda item: (CAPACITY_TYPE_PREFERENCE[item[1].capacity_type], item[1].price,
                                         item[0].name, item[1].zone))
    labels = node_labels(claim, requirements, it, offering)
    return FinalClaim(claim, requirements, [it for it, _ in options][:MAX_INSTANCE_TYPES], it, offering, labels)


def _cheaper(options: list[tuple[InstanceType, list[Offering]]], budget: float) -> list[tuple[InstanceType, list[Offering]]]:
    kept = [(it, offers) for it, offers in options if worst_launch_price(offers) < budget]
    kept.sort(key=lambda item: (min(o.price for o in item[1]), item[0].name))
    return kept


def _not_same_type(options: list[tuple[InstanceType, list[Offering]]], candidates: list[Candidate]) -> list:
    """Upstream `filterOutSameType`: if the replacement could be one of the candidates' own
    instance types, it must be cheaper than that candidate, else deleting the others is better."""
    own: dict[str, float] = {}
    for c in candidates:
        own[c.instance_type.name] = min(own.get(c.instance_type.name, math.inf), c.price)
    ceiling = min((own[it.name] for it, _ in options if it.name in own), default=math.inf)
    return [(it, offers) for it, offers in options if worst_launch_price(offers) < ceiling]


# the consolidator --------------------------------------------------------------------------------


class Consolidator:
    def __init__(self, state: ClusterState, budgets: "Budgets", protected: set[str], prepaid: set[str] = frozenset()):
        self.state = state
        self.budgets = budgets
        self.protected = protected  # nodes no method may take (expiring, drifting, ...)
        self.prepaid = prepaid  # on-demand nodes whose instances EC2 runs in an open reservation
        self.commands: list[Command] = []

    # candidates ---------------------------------------------------------------------------------

    def candidate(self, sim: SimNode, *, consolidation: bool = True) -> Candidate | None:
        state = self.state
        node = sim.node
        if not sim.alive or sim.pseudo or sim.settled or not node.ready or node.deleting or sim.name in self.protected:
            return None
        pool = state.world_pools.get(node.nodepool or "")
        if pool is None or do_not_disrupt(node.annotations):
            return None
        type_name = node.labels.get(INSTANCE_TYPE, "")
        it = state.pool_types.get(pool.name, {}).get(type_name) or state.world_types.get(type_name)
        capacity_type = node.labels.get(CAPACITY_TYPE)
        zone = node.labels.get(ZONE)
        price = node_price(it, capacity_type, zone) if it is not None else None
        if price is None:
            return None
        bound = state.bound.get(sim.name, [])
        spec = pool.disruption
        pods = [p for p in bound if p.reschedulable]
        budgets = state.world.pod_disruption_budgets
        if any(p.blocks_disruption(state.now) for p in bound) or eviction_blocked(pods, budgets):
            # A pod that will not leave (do-not-disrupt, or a PodDisruptionBudget allowing none now, upstream's
            # CanEvictPods) holds its node, except for drift where the NodePool bounds the wait with a
            # terminationGracePeriod (upstream's eventual disruption): those pods get no replacement then,
            # they go when the grace period ends.
            if consolidation or spec.termination_grace_period is None:
                return None
            pods = [p for p in pods if not p.blocks_disruption(state.now) and not eviction_blocked([p], budgets)]
        if consolidation:
            if pool.static:
                return None  # upstream ignores consolidationPolicy and consolidateAfter for static pools
            if spec.consolidate_after is None:
                return None
            if spec.keep_idle_reserved and capacity_type == RESERVED:
                return None
            if spec.consolidate_after.total_seconds() > 0:
                last = last_pod_event(node, pods)
                if last is None or state.now - last < spec.consolidate_after:
                    return None
        cost = disruption_cost(node, pods, spec, state.now)
        return Candidate(sim, pool, it, capacity_type, zone, price, pods, cost, prepaid=sim.name in self.prepaid)

    def candidates(self) -> list[Candidate]:
        found = (self.candidate(sim) for sim in list(self.state.nodes))
        return [c for c in found if c is not None]

    # running a command --------------------------------------------------------------------------

    def compute(self, candidates: list[Candidate], kind: str) -> tuple[Command | None, Simulation | None]:
        """Simulate removing the candidates; the simulation is left applied for the caller to
        accept or undo (None when a cheap check showed that no simulation is needed)."""
        if self._cannot_work(candidates):
            return None, None
        pods = [p for c in candidates for p in c.pods]
        simulation = self.state.simulate(pods, [c.sim for c in candidates])
        results = simulation.results
        if results.failures:
            return None, simulation
        if not results.claims:
            savings = marginal_savings(candidates)
            if savings <= 0:
                return None, simulation  # evicting pods for nothing is no consolidation
            return Command(kind, candidates, [], savings, dict(results.bindings)), simulation
        if len(results.claims) > 1:
            return None, simulation
        final = price_replacement(finalize(results.claims[0]), candidates, multi=kind == MULTI,
                                  spot_to_spot=self.state.world.spot_to_spot)
        if final is None:
            return None, simulation
        savings = marginal_savings(candidates, final)
        if savings <= 0:
            return None, simulation
        moves = dict(results.bindings)
        moves.update({p.key: final.name for p in final.claim.pods})
        return Command(kind, candidates, [final], savings, moves), simulation

    def accept(self, command: Command, simulation: Simulation | None) -> None:
        self.state.accept(simulation, [c.sim for c in command.candidates], command.replacements)
        for c in command.candidates:
            self.budgets.take(c.pool.name)
        self.commands.append(command)

    # methods ------------------------------------------------------------------------------------

    def drift(self, drifted: list[tuple[str, str | None, str, str]]) -> None:
        """Drifted nodes (name, reservation id, message, drift reason), cheapest to disrupt first,
        within the Drifted budget, as upstream's drift method per pass: every empty one (no
        simulation needed), or else the first non-empty one whose pods all find a place."""
        entries = []
        for name, rid, message, kind in drifted:
            sim = self.state.by_name.get(name)
            c = self.candidate(sim, consolidation=False) if sim is not None else None
            if c is not None:
                entries.append((c, rid, message, kind))
        entries.sort(key=lambda e: (e[0].cost, e[0].name))
        self._static_drifts([e for e in entries if e[0].pool.static])  # upstream's StaticDrift, a method of its own
        entries = [e for e in entries if not e[0].pool.static]
        took_empty = False
        for c, rid, message, kind in entries:
            if not c.pods and self.budgets.allows(c.pool, REASON_DRIFTED):
                self.accept(Command(DRIFT, [c], [], 0.0, {}, drift_reason=message, reservation_id=rid, drift_kind=kind), None)
                took_empty = True
        if took_empty:
            return
        for c, rid, message, kind in entries:
            if c.pods and self.budgets.allows(c.pool, REASON_DRIFTED) and self._replace_drifted(c, rid, message, kind):
                return

    def _replace_drifted(self, c: Candidate, rid: str | None, message: str, kind: str) -> bool:
        simulation = self.state.simulate(c.pods, [c.sim])
        results = simulation.results
        if results.failures:
            simulation.undo()
            return False
        finals = [finalize(claim) for claim in results.claims]
        moves = dict(results.bindings)
        for final in finals:
            moves.update({p.key: final.name for p in final.claim.pods})
        command = Command(DRIFT, [c], finals, 0.0, moves, drift_reason=message, reservation_id=rid, drift_kind=kind)
        self.accept(command, simulation)
        return True

    def _static_drifts(self, entries: list) -> None:
        """Static pools' drifted nodes, each replaced by a new claim of its pool (static.py) within the
        pool's Drifted budget and its limits.nodes (counting this pass's replacements)."""
        replacing: dict[str, int] = {}
        for c, rid, message, kind in entries:
            if self.budgets.allows(c.pool, REASON_DRIFTED) and self._static_drift(
                    c, rid, message, kind, replacing.get(c.pool.name, 0)):
                replacing[c.pool.name] = replacing.get(c.pool.name, 0) + 1

    def _static_drift(self, c: Candidate, rid: str | None, message: str, kind: str, replacing: int) -> bool:
        """A static pool's drifted node: replaced by a new claim of its pool; its pods go where
        they fit, else wait for the replacement."""
        state = self.state
        template = state.static_templates.get(c.pool.name)
        if template is None or not may_replace_drifted(state.world, c.pool, replacing):
            return False
        namer = ClaimNamer(state.taken)
        claim = static_claim(template, state.ledger, namer.next, lambda: 0)
        if claim is None:
            return False
        simulation = state.simulate(c.pods, [c.sim], moved=False)
        if simulation.results.failures or simulation.results.claims:
            simulation.undo()  # no new claim for them here: they wait, as upstream's, for the replacement
            simulation = None
        moves = dict(simulation.results.bindings) if simulation is not None else {}
        final = finalize(claim)
        self.accept(Command(DRIFT, [c], [final], 0.0, moves, drift_reason=message, reservation_id=rid,
                            drift_kind=kind), simulation)
        return True

    def emptiness(self) -> None:
        empty = [c for c in self.candidates() if not c.pods]
        empty.sort(key=lambda c: (c.cost, c.name))
        for c in empty:
            if self.budgets.allows(c.pool, REASON_EMPTY):
                self.accept(Command(EMPTY, [c], [], c.marginal_price), None)

    def _underutilized(self) -> list[Candidate]:
        """Nodes with pods whose removal could save something: a node in a reservation saves nothing."""
        return [c for c in self.candidates() if c.pods and c.marginal_price > 0
                and c.spec.consolidation_policy == WHEN_EMPTY_OR_UNDERUTILIZED]

    def multi_node(self) -> None:
        ordered = sorted(self._underutilized(), key=lambda c: (c.cost, c.name))
        allowance: dict[str, int] = {}
        usable = []
        for c in ordered:
            left = allowance.setdefault(c.pool.name, self.budgets.allowed(c.pool, REASON_UNDERUTILIZED))
            if left <= 0:
                continue
            allowance[c.pool.name] = left - 1
            usable.append(c)
        usable = usable[:MAX_MULTI_NODE_CANDIDATES]
        if len(usable) < 2:
            return
        low, high = 1, len(usable) - 1
        best = None
        while low <= high:
            mid = (low + high) // 2
            command, simulation = self.compute(usable[:mid + 1], MULTI)
            if simulation is not None:
                simulation.undo()
            if command is not None:
                best, low = mid, mid + 1
            else:
                high = mid - 1
        if best is None:
            return
        command, simulation = self.compute(usable[:best + 1], MULTI)
        if command is None:  # cannot happen: the same simulation on the same cluster
            if simulation is not None:
                simulation.undo()
            return
        self.accept(command, simulation)

    def single_node(self) -> None:
        for c in self._single_order(self._underutilized()):
            if not self.budgets.allows(c.pool, REASON_UNDERUTILIZED):
                continue
            command, simulation = self.compute([c], SINGLE)
            if command is None:
                if simulation is not None:
                    simulation.undo()
                continue
            self.accept(command, simulation)
            return

    @staticmethod
    def _single_order(candidates: list[Candidate]) -> list[Candidate]:
        """By savings per unit of disruption cost, interleaved across NodePools (upstream
        interleaves so that one large NodePool does not starve the others)."""
        def key(c: Candidate) -> tuple:
            return (-(c.price / c.cost) if c.cost > 0 else -math.inf, c.name)
        by_pool: dict[str, list[Candidate]] = {}
        for c in sorted(candidates, key=key):
            by_pool.setdefault(c.pool.name, []).append(c)
        ordered = []
        queues = [by_pool[name] for name in sorted(by_pool)]
        for index in range(max((len(q) for q in queues), default=0)):
            ordered += [q[index] for q in queues if index < len(q)]
        return ordered

    def _cannot_work(self, candidates: list[Candidate]) -> bool:
        """A cheap necessary condition, checked before simulating. Pods that no Ready node outside
        the candidates could take need a new claim, one claim for all of them (more is no
        consolidation), and that claim costs at least the cheapest launch that fits them
        together: if that is not below the candidates' price, nothing can come of it."""
        state = self.state
        leaving = {id(c.sim) for c in candidates}
        homeless = [p for c in candidates for p in c.pods
                    if not any(id(n) not in leaving and n.alive for n in state.receivers(p))]
        if not homeless:
            return False
        price = sum(c.price for c in candidates)
        return state.cheapest_claim(homeless, reserved_only=all(c.reserved for c in candidates)) >= price


# budgets -----------------------------------------------------------------------------------------


class Budgets:
    """Allowed disruptions per NodePool and reason, less the NodePool's nodes being disrupted."""

    def __init__(self, pools: list[NodePool], nodes: list[Node], now: datetime, disrupted: Iterable[Node] = ()):
        self.now = now
        self.count: dict[str, int] = {}
        self.disrupting: dict[str, int] = {}
        for node in nodes:
            pool = node.nodepool
            if pool is None or not initialized(node):
                continue  # upstream: a node not initialized yet is neither counted nor disrupting
            self.count[pool] = self.count.get(pool, 0) + 1
            if node.deleting or not node.ready:
                self.disrupting[pool] = self.disrupting.get(pool, 0) + 1
        for node in disrupted:
            if node.nodepool is not None and initialized(node) and not node.deleting and node.ready:
                self.take(node.nodepool)
        self._allowed = {(p.name, reason): p.disruption.allowed(reason, self.count.get(p.name, 0), now)
                         for p in pools for reason in (REASON_EMPTY, REASON_UNDERUTILIZED, REASON_DRIFTED)}

    def allowed(self, pool: NodePool, reason: str) -> int:
        return max(0, self._allowed[(pool.name, reason)] - self.disrupting.get(pool.name, 0))

    def allows(self, pool: NodePool, reason: str) -> bool:
        return self.allowed(pool, reason) > 0

    def take(self, pool: str) -> None:
        self.disrupting[pool] = self.disrupting.get(pool, 0) + 1


def initialized(node: Node) -> bool:
    """Whether the node counts towards its NodePool's budgets (upstream `BuildDisruptionBudgetMapping`
    skips nodes that are not initialized). Karpenter's and karpweb's nodes carry
    `karpenter.sh/initialized=true` once initialized; a node without that label that is Ready
    (a pasted world, a cluster without Karpenter's labels) is taken as initialized, one that is
    not Ready as one still coming up (never-Ready nodes no longer use up a `nodes: "1"` budget)."""
    value = node.labels.get(INITIALIZED)
    return value == "true" if value is not None else node.ready


def effective_node(node: Node, demoted: bool) -> Node:
    """A node as it is once demoted: on-demand, without reservation labels."""
    if not demoted:
        return node
    labels = {k: v for k, v in node.labels.items() if k not in RESERVATION_LABELS}
    labels[CAPACITY_TYPE] = ON_DEMAND
    return replace(node, labels=labels)
