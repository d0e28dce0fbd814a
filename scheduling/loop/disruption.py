"""Acting on the engine's disruptions (consolidation, capacity-block expiry) and demotions.

The engine decides what and why (scheduling/engine); this module does it through the adapters,
one node at a time under a per-node lease, or records it as a recommendation in observe mode."""

from django.utils import timezone

from reservations import ledger
from reservations.models import CapacityReservation
from scheduling.loop.engine_run import simulate_readable
from scheduling.engine.timeutil import parse_time
from scheduling.loop import kube_events, leases
from scheduling.engine.refresh import drifted_claims
from scheduling.loop.nodes import disrupt
from scheduling.loop.provisioning import ACTION_ERRORS, create_claim, launch_claim, priced
from scheduling.loop.refresh import drifted_claim_objects
from scheduling.loop.recording import PendingDecision, nodes_subject, record
from scheduling.models import Decision, Mode, Node, NodeClaim, NodePool
from scheduling.modes import control_refusal, effective_mode
from scheduling.world import current_world

EXPIRY = "capacity-block-expiring"
CONSOLIDATION = "consolidation"
DRIFT = "drift"
STATIC = "static"  # a static NodePool's nodes above its spec.replicas (engine/static.py)


def engine_decisions(cloud, now, world_at=None) -> dict:
    """One engine run with DescribeInstances; `world_at(now, instances)`: the world to run on (the
    watch process's kept world), by default the database's current world."""
    instances = instance_membership(cloud)
    world = world_at(now, instances) if world_at is not None else current_world(now, instances=instances)
    return simulate_readable(with_drifted_claims(world), now)


def with_drifted_claims(world):
    """The NodeClaims marked Drifted (scheduling/loop/refresh.py), for the engine to replace their nodes."""
    claims = drifted_claim_objects()
    if isinstance(world, dict):
        return {**world, "nodeClaims": claims}
    world.drifted = drifted_claims(claims, lambda path, message: None)  # a parsed (kept) world
    return world


def instance_membership(cloud) -> list[dict]:
    """DescribeInstances, as the engine reads it: which reservation each instance sits in."""
    return [
        {
            "InstanceId": m.instance_id, "InstanceType": m.instance_type, "State": {"Name": m.state},
            "Placement": {"AvailabilityZone": m.zone},
            **({"CapacityReservationId": m.reservation_id} if m.reservation_id else {}),
            "CapacityReservationSpecification": {"CapacityReservationPreference": m.capacity_reservation_preference or "open"},
            **({"InstanceLifecycle": "capacity-block"} if m.reservation_type == "capacity-block" else {}),
            **({"InstanceLifecycle": "spot"} if m.capacity_type == "spot" else {}),
        }
        for m in cloud.describe_instances()
    ]


def act_on_disruptions(cloud, cluster, reasons: set[str], now=None, decisions: dict | None = None) -> dict:
    """Act on the engine's disruptions for `reasons` (`decisions`: an engine run to use instead of a new one)."""
    now = now or timezone.now()
    decisions = decisions or engine_decisions(cloud, now)
    wanted = [d for d in decisions["disruptions"] if d["reason"] in reasons]
    named = {name for d in wanted for name in d["nodes"]}
    nodes = {n.name: n for n in Node.objects.filter(name__in=named).select_related("node_pool", "node_claim", "reservation")}
    pools = {p.name: p for p in NodePool.objects.select_related("node_class")} if wanted else {}
    pending, counts = [], {"planned": 0, "acted": 0, "waiting": 0, "failed": 0}
    events = []  # Kubernetes Events about the disruptions acted on (control mode only)
    refusal = control_refusal() if wanted else ""  # once per run
    for disruption in wanted:
        counts["planned"] += 1
        members = [nodes[name] for name in disruption["nodes"] if name in nodes]
        pool = members[0].node_pool if members else pools.get(disruption.get("nodePool"))
        decision = PendingDecision(
            kind=_kind(disruption), subject=nodes_subject(disruption["nodes"]),
            reason=disruption_reason(disruption, members, now), mode=effective_mode(pool, refusal), node_pool=pool,
            reservation=members[0].reservation if members else None, details=disruption,
            objects_involved=involved(disruption),
        )
        drain_at = parse_time(disruption["drainAt"]) if disruption.get("drainAt") else None
        if decision.mode == Mode.CONTROL and (drain_at is None or drain_at <= now):
            outcome, error = _disrupt(cloud, cluster, disruption, members, pools, now)
            decision.outcome, decision.error = outcome, error
            if outcome == Decision.Outcome.ACTED:
                events += kube_events.disruption_events(disruption, members)
            counts[{Decision.Outcome.ACTED: "acted", Decision.Outcome.SKIPPED: "waiting"}.get(outcome, "failed")] += 1
        elif drain_at is not None and drain_at > now:
            counts["waiting"] += 1
            if decision.mode == Mode.CONTROL:
                decision.outcome = Decision.Outcome.SCHEDULED
        pending.append(decision)
    counts["decisions_recorded"] = record(pending, now)
    if CONSOLIDATION in reasons and kube_events.keeps_events(cluster):  # once per pass: why nodes are left alone
        events += kube_events.blocked_and_unconsolidatable()
    counts["events_written"] = kube_events.publish(cluster, events)
    return counts


def involved(disruption: dict) -> dict:
    """The nodes a disruption takes and the pods it evicts (the pod page lists the decision)."""
    pods = disruption.get("evictedPods") or []
    return {"nodes": disruption["nodes"], **({"pods": pods} if pods else {})}


def _kind(disruption: dict) -> str:
    if disruption["reason"] == EXPIRY:
        return Decision.Kind.DRAIN
    if disruption["reason"] == DRIFT:
        return Decision.Kind.DRIFT
    if disruption["reason"] == STATIC:
        return Decision.Kind.SCALE_DOWN
    return Decision.Kind.CONSOLIDATE_REPLACE if disruption["action"] == "replace" else Decision.Kind.CONSOLIDATE_DELETE


def disruption_reason(disruption: dict, members: list, now) -> str:
    names = ", ".join(disruption["nodes"])
    if disruption["reason"] == EXPIRY:
        block = members[0].reservation if members else None
        drain_at = parse_time(disruption["drainAt"])
        ends = f" because capacity block {block.reservation_id} ends at {block.end_date:%H:%M}" if block and block.end_date else ""
        when = "drains now" if drain_at <= now else f"drains at {drain_at:%H:%M}"
        return f"node {names} {when}{ends} (EC2 reclaims it from {block.timing.termination_at:%H:%M})" if block and block.timing else f"node {names} {when}{ends}"
    if disruption["reason"] == DRIFT:
        action = "replace" if disruption["action"] == "replace" else "delete"
        return f"drift ({disruption.get('driftReason', '')}): {action} {names}: {disruption.get('message', '')}"
    if disruption["reason"] == STATIC:
        return f"static NodePool scale-down: delete {names}: {disruption.get('message', '')}"
    savings = disruption.get("savingsPerHour")
    # At the margin: what stops being paid (a reserved unit is paid for whether a node runs in it or not).
    saved = f", saving ${savings:.4f}/h at the margin" if savings else ""
    if disruption["action"] == "replace":
        launch = disruption["replacement"]["launch"]
        where = f"{launch['instanceType']} {launch['capacityType']}" + (f" in reservation {launch['reservationID']}" if launch.get("reservationID") else "")
        return f"consolidation: replace {names} with one {where}{priced(launch)}{saved}"
    if "evictedPods" in disruption and not disruption["evictedPods"]:
        return f"consolidation: delete {names}, which runs no pods{saved}"
    return f"consolidation: delete {names}, its pods fit elsewhere{saved}"


def _disrupt(cloud, cluster, disruption: dict, members: list, pools: dict, now=None) -> tuple[str, str]:
    holder = leases.holder_id()
    locks = [f"node:{node.name}" for node in members] + [f"node:{claim.name}" for claim in _unregistered(disruption, members)]
    taken = [lock for lock in locks if leases.acquire(lock, holder)]
    try:
        if len(taken) != len(locks):
            return Decision.Outcome.SKIPPED, "another worker is acting on one of these nodes"
        return _replace_and_drain(cloud, cluster, disruption, members, pools, now)
    except ACTION_ERRORS as exc:
        return Decision.Outcome.FAILED, str(exc)
    finally:
        for lock in taken:
            leases.release(lock, holder)


def _replace_and_drain(cloud, cluster, disruption: dict, members: list, pools: dict, now=None) -> tuple[str, str]:
    """Launch the replacement first (if any), then delete the nodes' NodeClaims: termination drains
    them pass after pass (PDBs, do-not-disrupt) until their instances are gone."""
    now = now or timezone.now()
    if disruption["action"] == "replace":
        # Drift may need several new nodes (`replacements`); consolidation needs exactly one.
        for replacement in disruption.get("replacements") or [disruption["replacement"]]:
            fallback_pool = members[0].node_pool.name if members and members[0].node_pool else ""
            claim = {**replacement, "nodePool": replacement.get("nodePool") or fallback_pool}
            # A replacement into a reservation holds its unit in the fleet ledger as any launch does.
            subject = "replacement for " + nodes_subject([node.name for node in members])
            hold, held = ledger.hold_units((claim.get("launch") or {}).get("reservationID"), 1, claim_name=subject, now=now)
            if not held:
                return Decision.Outcome.SKIPPED, (f"another cluster of the fleet holds the free units of reservation "
                                                  f"{claim['launch']['reservationID']}: the replacement waits for the next pass")
            row = launched = None
            try:
                row = create_claim(cluster, claim, pools.get(claim["nodePool"]))
                launched = launch_claim(cloud, cluster, row)
            finally:
                ledger.settle_hold(hold, launched, claim_name=row.name if row else "", now=now,
                                   counted=getattr(cloud, "keeps_reservations_in_database", False))
            if not launched.ok:
                return Decision.Outcome.FAILED, f"replacement launch failed: {launched.error_code}: {launched.error_message}"
    # Disrupting a node = deleting its NodeClaim; termination drains it (scheduling/loop/nodes.py).
    problems = [problem for node in members if (problem := disrupt(cloud, cluster, node))]
    problems += [problem for claim in _unregistered(disruption, members) if (problem := disrupt(cloud, cluster, None, claim))]
    return (Decision.Outcome.FAILED, "; ".join(problems)) if problems else (Decision.Outcome.ACTED, "")


def _unregistered(disruption: dict, members: list) -> list[NodeClaim]:
    """A static scale-down's NodeClaims whose Node has not registered: the world names their node by
    the claim (scheduling/world.py in_flight_nodes), and upstream deletes these first."""
    if disruption.get("reason") != STATIC:
        return []
    registered = {node.name for node in members}
    names = [name for name in disruption["nodes"] if name not in registered]
    return list(NodeClaim.objects.filter(name__in=names, deleting_since__isnull=True).order_by("name")) if names else []


def demote(cloud, cluster, now=None, decisions: dict | None = None) -> dict:
    now = now or timezone.now()
    decisions = decisions or engine_decisions(cloud, now)
    named = {d["node"] for d in decisions["demotions"]}
    nodes = {n.name: n for n in Node.objects.filter(name__in=named).select_related("node_pool", "node_claim")}
    reservations = {r.reservation_id: r for r in CapacityReservation.objects.filter(
        reservation_id__in={d["reservationID"] for d in decisions["demotions"]})}
    pending, acted = [], 0
    refusal = control_refusal() if decisions["demotions"] else ""  # once per run
    for demotion in decisions["demotions"]:
        node = nodes.get(demotion["node"])
        pool = node.node_pool if node else None
        decision = PendingDecision(
            kind=Decision.Kind.DEMOTE, subject=f"node {demotion['node']}", mode=effective_mode(pool, refusal), node_pool=pool,
            reservation=reservations.get(demotion["reservationID"]), details=demotion,
            objects_involved={"nodes": [demotion["node"]]},
            reason=(f"node {demotion['node']} left reservation {demotion['reservationID'] or '(unlabelled)'}: "
                    f"{demotion.get('reason', 'EC2 no longer holds it there')}; relabelled {demotion['from']} -> "
                    f"{demotion['to']}, every reservation label removed"),
        )
        if decision.mode == Mode.CONTROL and node is not None:
            try:
                cluster.demote(nodeclaim=node.node_claim.name if node.node_claim else None, node=node.name)
                decision.outcome, acted = Decision.Outcome.ACTED, acted + 1
            except ACTION_ERRORS as exc:
                decision.outcome, decision.error = Decision.Outcome.FAILED, str(exc)
        pending.append(decision)
    return {"demotions": len(decisions["demotions"]), "acted": acted, "decisions_recorded": record(pending, now)}
