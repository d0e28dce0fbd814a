"""`disruptions` and `demotions` of DECISIONS.json: the reservation lifecycle (lifecycle.py) and
consolidation (consolidation.py) on top of a provisioning plan.

Order of work, each step on the cluster the previous ones leave:
  1. Demotions (relabelling only). Demoted nodes count as on-demand from here on.
  2. Capacity-block expiry: nodes whose drain is due leave the cluster; their pods and the pods
     the provisioning plan could not place (pending ones, and those of nodes being deleted, which
     the plan places with the pending ones) are simulated once, before anything else uses the room. Nodes whose drain is less than an hour
     away stay, but are neither candidates nor destinations for moved pods.
  3. Nodes in a reservation excluded from planning are kept out of everything below.
  4. Drift (reason Drifted): reservation drift found here, and the nodes whose NodeClaim carries
     `Drifted=True` (world `nodeClaims`; the loop marks them: engine/refresh.py), 5. emptiness
     (Empty), 6. multi-node and 7. single-node consolidation (Underutilized), within the NodePool
     budgets.

Output order: expiry (by drainAt, then node), then drift and consolidation in the order decided.
Demotions are sorted by node name.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from .consolidation import (
    DRIFT, Budgets, ClusterState, Command, Consolidator, disruption_cost, effective_node,
)
from .decisions import node_claim
from .launch import finalize
from .lifecycle import Demotion, Expiry, NodeReservations, demotions, drifts, expiries
from .planning import Plan
from .static import STATIC_REASON, surplus

CONSOLIDATION = "consolidation"
DRIFT_REASON = "drift"
CAPACITY_RESERVATION_DRIFT = "CapacityReservationDrift"


@dataclass(slots=True)
class Lifecycle:
    expiring: list[Expiry]
    demotions: list[Demotion]
    commands: list[Command]  # drift and consolidation, in the order decided
    state: ClusterState  # the cluster once all of them are carried out
    static: list[dict] = ()  # static NodePools' surplus deletions (static_deletions)


def lifecycle_decisions(plan: Plan) -> dict:
    """The `disruptions` and `demotions` of DECISIONS.json."""
    result = lifecycle(plan)
    bound = result.state.bound
    return {
        "disruptions": [{**e.as_dict(), "evictedPods": sorted(p.key for p in bound.get(e.node.name, ()) if p.reschedulable)}
                        for e in result.expiring] + list(result.static)
                       + [command_dict(c) for c in result.commands],
        "demotions": [d.as_dict() for d in result.demotions],
    }


def lifecycle(plan: Plan) -> Lifecycle:
    world = plan.world
    now = world.now
    known = NodeReservations(world)
    demoted = demotions(world, known)
    demoted_names = {d.node.name for d in demoted}
    expiring = expiries(world, known)
    due = {e.node.name for e in expiring if e.due(now)}
    upcoming = {e.node.name for e in expiring} - due
    drifted = drifts(world, known, plan.node_classes, demoted_names)
    static = static_deletions(world, due)
    removed = due | {name for d in static for name in d["nodes"]}

    nodes = [effective_node(n, n.name in demoted_names) for n in world.nodes if not n.deleting and n.name not in removed]
    state = ClusterState(plan, nodes)
    for name in upcoming:
        state.by_name[name].receives = False
    # The pods of nodes being deleted were planned with the pending ones (planning.displaced_by_deletion);
    # those of expiring blocks and of static NodePools' surplus are planned here.
    displaced = [p for name in sorted(removed) for p in state.bound.get(name, ()) if p.reschedulable]
    displaced += state.orphans + [f.pod for f in plan.results.failures]
    if displaced:
        baseline = state.simulate(displaced, moved=False)
        state.accept(baseline, [], [finalize(claim) for claim in baseline.results.claims])

    budgets = Budgets(world.node_pools, world.nodes, now, disrupted=[e.node for e in expiring if e.node.name in due])
    consolidator = Consolidator(state, budgets, protected=due | upcoming | kept_by_exclusion(world, known),
                                prepaid=in_open_reservations(world, known) | covered_by_reserved_instances(world))
    marked = [(name, None, d.message, d.reason) for name, d in sorted(world.drifted.items())
              if name not in removed and name not in {r.node.name for r in drifted}]
    consolidator.drift([(d.node.name, d.reservation_id, d.message, CAPACITY_RESERVATION_DRIFT) for d in drifted] + marked)
    consolidator.emptiness()
    consolidator.multi_node()
    consolidator.single_node()
    return Lifecycle(expiring, demoted, consolidator.commands, state, static)


def static_deletions(world, leaving: set[str]) -> list[dict]:
    """Per static NodePool above its replicas, one deletion of its surplus nodes (static.py). Upstream's
    static deprovisioning deletes them without disruption budgets; their pods go pending."""
    bound: dict[str, list] = {}
    for pod in world.pods:
        if pod.node_name:
            bound.setdefault(pod.node_name, []).append(pod)
    found = []
    for pool in sorted((p for p in world.node_pools if p.static), key=lambda p: p.name):
        cost = partial(disruption_cost, spec=pool.disruption, now=world.now)
        nodes = [n for n in surplus(world, pool, bound, cost) if n.name not in leaving]
        if nodes:
            found.append({"action": "delete", "reason": STATIC_REASON, "nodePool": pool.name,
                          "nodes": [n.name for n in nodes],
                          "evictedPods": sorted(p.key for n in nodes for p in bound.get(n.name, ()) if p.reschedulable),
                          "message": f"NodePool {pool.name} has {len(nodes)} node(s) more than its "
                                     f"{pool.replicas} replica(s)"})
    return found


def kept_by_exclusion(world, known: NodeReservations) -> set[str]:
    """Nodes in a reservation excluded from planning: the override's promise is that they stay."""
    return {n.name for n in world.nodes
            if (reservation := known.reservation(n)) is not None and reservation.excluded_from_planning}


def covered_by_reserved_instances(world) -> set[str]:
    """On-demand nodes a zonal Reserved Instance pays for (commitments.py): $0 at the margin, like reserved nodes."""
    return set(world.coverage.covered_nodes) if world.coverage is not None else set()


def in_open_reservations(world, known: NodeReservations) -> set[str]:
    """On-demand nodes whose instances EC2 runs in an active reservation (an open ODCR takes any
    matching on-demand launch): paid for whether they run or not, like reserved nodes."""
    found = set()
    for node in world.nodes:
        instance = known.instance(node)
        reservation = known.reservations.get(instance.reservation_id) if instance and instance.reservation_id else None
        if reservation is not None and reservation.state_at(world.now) == "active":
            found.add(node.name)
    return found


def command_dict(command: Command) -> dict:
    drift = command.kind == DRIFT
    result = {"action": command.action, "reason": DRIFT_REASON if drift else CONSOLIDATION, "nodes": command.nodes,
              "evictedPods": command.evicted_pods}
    if drift:
        result["driftReason"] = command.drift_kind or CAPACITY_RESERVATION_DRIFT
        if command.reservation_id:
            result["reservationID"] = command.reservation_id
        result["message"] = command.drift_reason
    else:
        result["consolidationType"] = command.kind
    if command.replacements:
        result["replacement"] = node_claim(command.replacements[0])
        if len(command.replacements) > 1:
            result["replacements"] = [node_claim(r) for r in command.replacements]
    if not drift:
        result["savingsPerHour"] = round(command.savings, 12)
    return result
