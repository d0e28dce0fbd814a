"""Provisioning: pending pods -> engine -> NodeClaim + launch (control) or a recommendation (observe).

A launch is idempotent: the NodeClaim row is written before the launch and its name is the client
token, so a run killed between launch and record relaunches into the same instance on retry."""

import datetime
import random
import string

from django.db.models import Q
from django.utils import timezone

from reservations import ledger
from scheduling.loop import lending
from reservations.groups import launch_group_arn
from reservations.models import CapacityReservation
from scheduling.engine.commitments import SAVINGS_PLAN, at_basis
from scheduling.adapters.ec2.amis import variant_of
from scheduling.adapters.ec2.interface import CloudAPIError, LaunchOffering, LaunchRequest, LaunchResult, NodeClassLaunch
from scheduling.adapters.ec2.launch import NODECLAIM_TAG
from scheduling.adapters.ec2.nodeclass import planned_max_pods
from scheduling.adapters.ec2.sync import refresh_reservations
from scheduling.adapters.kube.interface import ClusterError, Condition, NodeClaimRequest
from scheduling.claim_hashes import PROVISIONER_LABEL, claim_annotations, claim_expire_after
from scheduling.loop import kube_events
from scheduling.loop.engine_run import simulate_readable
from scheduling.loop.recording import PendingDecision, record
from scheduling.engine.world import TERMINAL_PHASES
from scheduling.models import Decision, InstanceType, Mode, Node, NodeClaim, NodePool, Offering, Pod
from scheduling.modes import control_refusal, effective_mode
from scheduling.world import current_world

MAX_PODS_IN_SUBJECT = 3
# What an adapter raises when the cloud or the cluster refuses: recorded on the decision, not fatal.
ACTION_ERRORS = (CloudAPIError, ClusterError)
TERMINATION_FINALIZER = "karpenter.sh/termination"
LAUNCH_TIMEOUT = datetime.timedelta(minutes=5)  # upstream liveness.go LaunchTimeout


def provision(cloud, cluster, now=None, world_at=None, *, replanning: bool = False) -> dict:
    """`world_at(now)`: the engine World to plan from (the watch process's kept world, read only when pods
    wait); by default the database's current world. A claim whose reservation units another cluster
    holds is planned again once, from a world that counts those units as taken (`replanning`)."""
    now = now or timezone.now()
    pending, launched, failed, held_elsewhere = [], 0, 0, False
    relaunched = relaunch_unlaunched_claims(cloud, cluster, pending, now)
    if not Pod.objects.filter(node_name="").exclude(phase__in=TERMINAL_PHASES).exists() and not static_pools_short():
        # Nothing waits: no engine run (seconds at thousands of nodes), nothing to plan.
        return {**_counts(NOTHING_PLANNED, 0, 0, relaunched, record(pending, now)), "pending_pods": 0}
    # Lent units a waiting pod could use come back first, in this run (scheduling/loop/lending.py).
    reclaimed = lending.reclaim_for_pending(cloud, current_world, now)
    # The plan only: the lifecycle pass decides disruptions (its own engine run).
    decisions = simulate_readable(world_at(now) if world_at is not None else current_world(now), now, disruptions=False)
    pools = {pool.name: pool for pool in NodePool.objects.select_related("node_class")}
    reservations = {r.reservation_id: r for r in CapacityReservation.objects.all()}
    refusal = control_refusal()  # once per run: every claim of one run under the same verdict
    launched_into, refused_by = [], []  # reservation ids, refreshed from EC2 after the launches
    events = []  # Kubernetes Events about what this run did (control mode only)
    for claim in decisions["nodeClaims"]:
        pool = pools.get(claim["nodePool"])
        mode = effective_mode(pool, refusal)
        decision = PendingDecision(
            kind=Decision.Kind.LAUNCH, subject=claim_subject(claim), reason=launch_reason(claim, pool, reservations),
            mode=mode, node_pool=pool, reservation=reservations.get(claim["launch"].get("reservationID")),
            objects_involved={"pods": claim["pods"]}, details=claim,
        )
        if mode == Mode.CONTROL:
            hold, held = ledger.hold_units(claim["launch"].get("reservationID"), 1, claim_name=claim_subject(claim),
                                          now=now)  # the fleet ledger: no unit given to two clusters
            if not held:
                decision.outcome, held_elsewhere = Decision.Outcome.SKIPPED, True
                decision.reason += ("; another cluster of the fleet holds the reservation's free units: "
                                    "its pods are planned again around them")
                pending.append(decision)
                continue
            row = result = None
            try:
                row = create_claim(cluster, claim, pool)
                result = launch_claim(cloud, cluster, row)
            except ACTION_ERRORS as exc:
                decision.outcome, decision.error, failed = Decision.Outcome.FAILED, str(exc), failed + 1
                pending.append(decision)
                continue
            finally:
                ledger.settle_hold(hold, result, claim_name=row.name if row else "", now=now,  # launched or released
                                   counted=getattr(cloud, "keeps_reservations_in_database", False))
            decision.details = {**claim, "name": row.name}
            launched_into += [result.reservation_id] if result.ok and result.reservation_id else []
            refused_by += result.reservations_marked_unavailable
            if result.ok:
                decision.outcome, launched = Decision.Outcome.ACTED, launched + 1
                events += kube_events.launch_events(claim, row, result)
                if result.open_reservation_id:
                    decision.reason += (f"; open mode: EC2 runs it in open reservation {result.open_reservation_id} "
                                        "(it stays on-demand, counted in that reservation)")
            else:
                decision.outcome, failed = Decision.Outcome.FAILED, failed + 1
                decision.error = f"{result.error_code}: {result.error_message}"
                decision.reason += f"; the launch failed ({result.error_code}), the pods will be planned again"
        pending.append(decision)
    if not getattr(cloud, "keeps_reservations_in_database", False):
        refresh_reservations(cloud, launched_into, refused_by, now)
    pending += unplaced_decisions(decisions, pools)
    counts = {**_counts(decisions, launched, failed, relaunched, record(pending, now)), **reclaimed}
    events += kube_events.binding_events(controlled_bindings(decisions.get("bindings") or [], refusal))
    counts["events_written"] = kube_events.publish(cluster, events)
    if held_elsewhere and not replanning:
        again = provision(cloud, cluster, now, replanning=True)
        counts = {key: value + again.get(key, 0) for key, value in counts.items()}
    return counts


def static_pools_short() -> bool:
    """Whether a static NodePool (spec.replicas) has fewer nodes than it keeps, within limits.nodes:
    its NodeClaims not being deleted, and its Nodes without a claim of karpweb's (the engine's count)."""
    for pool in NodePool.objects.filter(replicas__isnull=False):
        wanted = min(pool.replicas, _node_limit(pool.limits))
        claims = NodeClaim.objects.filter(node_pool=pool, deleting_since__isnull=True).count()
        bare = Node.objects.filter(node_pool=pool, node_claim__isnull=True, deleting_since__isnull=True).count()
        if claims + bare < wanted:
            return True
    return False


def _node_limit(limits) -> float:
    value = (limits or {}).get("nodes")
    try:
        return int(value) if value is not None else float("inf")
    except (TypeError, ValueError):
        return float("inf")  # the engine names the bad quantity; here it only means "look"


def controlled_bindings(bindings: list[dict], refusal: str) -> list[dict]:
    """The plan's placements on nodes whose NodePool karpweb controls (the pods it nominates)."""
    if not bindings:
        return []
    pools = dict(Node.objects.filter(name__in={b["node"] for b in bindings}).select_related("node_pool")
                 .values_list("name", "node_pool__name"))
    controlled = {pool.name for pool in NodePool.objects.filter(name__in=set(pools.values()))
                  if effective_mode(pool, refusal) == Mode.CONTROL}
    return [b for b in bindings if pools.get(b["node"]) in controlled]


NOTHING_PLANNED = {"nodeClaims": [], "unschedulable": [], "deferred": []}


def _counts(decisions: dict, launched: int, failed: int, relaunched: int, recorded: int) -> dict:
    return {"claims_planned": len(decisions["nodeClaims"]), "launched": launched, "launch_failures": failed,
            "relaunched": relaunched, "unschedulable": len(decisions["unschedulable"]),
            "deferred": len(decisions["deferred"]), "decisions_recorded": recorded}


def claim_subject(claim: dict) -> str:
    if claim.get("static"):
        return f"a node of static NodePool {claim['nodePool']}"
    pods = [key.split("/", 1)[-1] for key in claim["pods"]]
    shown = ", ".join(pods[:MAX_PODS_IN_SUBJECT]) + (f" and {len(pods) - MAX_PODS_IN_SUBJECT} more" if len(pods) > MAX_PODS_IN_SUBJECT else "")
    return f"pod{'s' if len(pods) > 1 else ''} {shown}"[:255]


def launch_reason(claim: dict, pool, reservations: dict) -> str:
    """'pod web-7 went to on-demand: reservation cr-0abc is full (4/4)', in that spirit."""
    launch = claim["launch"]
    where = f"a new {launch['instanceType']} in {launch['zone']} (NodePool {claim['nodePool']})"
    subject = claim_subject(claim)
    rid = launch.get("reservationID")
    if rid:
        r = reservations.get(rid)
        room = f", {r.available_instance_count} of {r.total_instance_count} free before this launch" if r else ""
        return f"{subject} went to reserved capacity: {where} in reservation {rid}{room}"
    return f"{subject} went to {launch['capacityType']}: {where}{priced(launch)}; {why_not_reserved(claim, pool, reservations)}"


def priced(launch: dict) -> str:
    """", at $0 (a zonal Reserved Instance pays for it)" when the account's commitments priced the launch; "" at list."""
    basis = launch.get("priceBasis")
    if not basis:
        return ""
    return f", {at_basis(basis)}" + (f" ${launch['price']:.4f}/h" if basis == SAVINGS_PLAN else "")


def why_not_reserved(claim: dict, pool, reservations: dict) -> str:
    allowed = _allows_reserved(pool)
    if not allowed:
        return f"NodePool {claim['nodePool']} does not allow reserved capacity"
    node_class = pool.node_class if pool else None
    if node_class is None:
        return "the NodePool has no EC2NodeClass"
    selected = [reservations[e["id"]] for e in node_class.status_capacity_reservations or [] if e["id"] in reservations]
    fitting = [r for r in selected if r.instance_type in claim["instanceTypeOptions"]]
    if not fitting:
        return f"EC2NodeClass {node_class.name} selects no reservation for {', '.join(claim['instanceTypeOptions'][:4])}"
    parts = []
    for r in fitting:
        if not r.is_usable():
            parts.append(f"reservation {r.reservation_id} is {r.state if r.state != 'active' else 'past its end'}")
        elif r.available_instance_count == 0:
            parts.append(f"reservation {r.reservation_id} is full ({r.used_instance_count}/{r.total_instance_count})")
        elif r.timing and r.timing.is_expiring(timezone.now()):
            parts.append(f"capacity block {r.reservation_id} is expiring (drain from {r.timing.drain_at:%H:%M})")
        else:
            parts.append(f"reservation {r.reservation_id} in {r.availability_zone} does not suit these pods' constraints")
    return "; ".join(parts)


def _allows_reserved(pool) -> bool:
    if pool is None:
        return False
    for requirement in pool.requirements or []:
        if requirement.get("key") == "karpenter.sh/capacity-type":
            values = requirement.get("values") or []
            if requirement.get("operator") == "In":
                return "reserved" in values
            if requirement.get("operator") == "NotIn":
                return "reserved" not in values
    return True


def unplaced_decisions(decisions: dict, pools: dict) -> list[PendingDecision]:
    mode = effective_mode(None)
    result = []
    for kind, entries in ((Decision.Kind.UNSCHEDULABLE, decisions["unschedulable"]), (Decision.Kind.DEFER, decisions["deferred"])):
        for entry in entries:
            name = entry["pod"].split("/", 1)[-1]
            result.append(PendingDecision(kind=kind, subject=f"pod {entry['pod']}", mode=mode,
                                          reason=f"pod {name} is {kind}: {entry['reason']}",
                                          objects_involved={"pods": [entry["pod"]]}))
    return result


def unique_claim_name(pool_name: str) -> str:
    alphabet = string.ascii_lowercase + string.digits
    while True:
        name = f"{pool_name}-{''.join(random.choices(alphabet, k=5))}"
        if not NodeClaim.objects.filter(name=name).exists():
            return name


def create_claim(cluster, claim: dict, pool) -> NodeClaim:
    """Create the NodeClaim in the cluster and its row, with the launch it is meant for."""
    launch = claim["launch"]
    name = unique_claim_name(claim["nodePool"])
    labels = {**claim["labels"], PROVISIONER_LABEL: "karpweb"}
    request = NodeClaimRequest(
        nodepool=claim["nodePool"], name=name, labels=labels,
        node_class_ref=(pool.node_class_ref if pool and pool.node_class_ref else
                        {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": pool.node_class.name if pool and pool.node_class else ""}),
        requirements=[{"key": key, "operator": "In", "values": [value]} for key, value in sorted(claim["labels"].items())],
        # Deleting the claim then waits for karpweb to drain its node and terminate its instance.
        finalizers=[TERMINATION_FINALIZER],
        annotations=claim_annotations(pool), expire_after=claim_expire_after(pool) or None,  # drift and expiry
        resources=dict(claim.get("resources") or {}),  # Initialized waits for its extended resources
    )
    created = cluster.create_nodeclaim(request)
    reservation = CapacityReservation.objects.filter(reservation_id=launch.get("reservationID") or "").first()
    row, _ = NodeClaim.objects.update_or_create(name=name, defaults=dict(
        uid=((created or {}).get("metadata") or {}).get("uid", ""),  # Events about it name it by UID
        node_pool=pool, node_class=pool.node_class if pool else None, labels=labels,
        requirements=request.requirements, resources=request.resources, instance_type=launch["instanceType"], zone=launch["zone"],
        capacity_type=launch["capacityType"], reservation=reservation, reservation_label=launch.get("reservationID") or "",
        created_at=timezone.now(), annotations=request.annotations, expire_after=request.expire_after or "",
    ))
    return row


def launch_claim(cloud, cluster, row: NodeClaim, *, retry: bool = False, launched: LaunchResult | None = None):
    """Launch the instance a NodeClaim row is meant for; the claim name is the client token.
    `retry`: an earlier run may have launched it already; if the cloud has an instance for this
    claim, that instance is the launch (a fresh worker may not know enough to relaunch it).
    `launched`: that instance, when the caller already looked it up."""
    offering = LaunchOffering(
        instance_type=row.instance_type, zone=row.zone, capacity_type=row.capacity_type, price=0.0,
        reservation_id=row.reservation_label or None,
        reservation_type=row.labels.get("karpenter.k8s.aws/capacity-reservation-type"),
        reservation_group_arn=launch_group_arn(row.node_class, row.reservation_label),
    )
    node_class = row.node_class
    request = LaunchRequest(
        nodeclaim_name=row.name, nodeclass_name=node_class.name if node_class else "", image_id="", offerings=[offering],
        tags={"karpenter.sh/nodeclaim": row.name, "karpenter.sh/nodepool": row.node_pool.name if row.node_pool else ""},
        open_reservations=bool(node_class and node_class.open_reservations),
        node_class=node_class_launch(row) if node_class else None,
    )
    result = launched or (already_launched(cloud, row.name) if retry else None) or cloud.launch(request)
    if result.ok and result.reservation_id and row.reservation_label and result.reservation_id != row.reservation_label:
        record_group_member(cluster, row, result.reservation_id)
    if result.ok:
        # The cluster hears of the launch first and the row last: until the row has its
        # provider id, a retry relaunches with the same client token and gets the same instance.
        provider_id = f"aws:///{result.zone}/{result.instance_id}"
        cluster.set_conditions("NodeClaim", row.name, [Condition("Launched", "True", "Launched")],
                               status_fields={"providerID": provider_id})
        row.refresh_from_db()
        row.provider_id, row.launched_at = provider_id, timezone.now()
        row.set_condition("Launched", "True", "Launched")
        row.save(update_fields=["provider_id", "launched_at", "conditions"])
    else:
        row.delete()
        delete = getattr(cluster, "delete_nodeclaim", None)
        if delete:
            delete(row.name)
        mark_unavailable(result.reservations_marked_unavailable)
    return result


def node_class_launch(row: NodeClaim) -> NodeClassLaunch:
    """What the cloud provider resolves the launch from: the EC2NodeClass as Kubernetes has it, the
    NodeClaim's labels, the NodePool's taints and startup taints, and the instance type's image needs."""
    pool, node_class = row.node_pool, row.node_class
    instance_type = InstanceType.objects.filter(name=row.instance_type).only(
        "arch", "labels", "max_pods", "cpu_millicores").first()
    shapes = {row.instance_type: (instance_type.arch, variant_of(instance_type.labels or {}))} if instance_type else {}
    pods = planned_max_pods(node_class.spec or {}, instance_type.max_pods, instance_type.cpu_millicores // 1000,
                            instance_type.arch) if instance_type else None
    return NodeClassLaunch(
        uid=node_class.uid, spec=node_class.spec or {}, nodepool=pool.name if pool else "", labels=row.labels,
        taints=[*(pool.taints or []), *(pool.startup_taints or [])] if pool else [], shapes=shapes,
        max_pods={row.instance_type: pods} if pods else {},
        status_profile=(node_class.status_launch or {}).get("instanceProfile", ""))


def record_group_member(cluster, row: NodeClaim, reservation_id: str) -> None:
    """The launch targeted a Capacity Reservation group and EC2 chose another member than the
    plan's: the NodeClaim (and so its Node) says where the instance really is."""
    relabel = getattr(cluster, "set_reservation_label", None)
    if relabel:
        relabel(row.name, reservation_id)
    row.refresh_from_db()
    reservation = CapacityReservation.objects.filter(reservation_id=reservation_id).first()
    for obj in (row, Node.objects.filter(node_claim=row).first()):  # the Node, when a retry finds it registered
        if obj is not None:
            obj.labels = {**obj.labels, "karpenter.k8s.aws/capacity-reservation-id": reservation_id}
            obj.reservation_label, obj.reservation = reservation_id, reservation
            obj.save(update_fields=["labels", "reservation_label", "reservation"])


def mark_unavailable(reservation_ids) -> None:
    """EC2 said these reservations are full (ReservationCapacityExceeded and the like): until the
    next sync says otherwise, the engine sees no free unit in them and plans elsewhere (on-demand)."""
    if not reservation_ids:
        return
    CapacityReservation.objects.filter(reservation_id__in=list(reservation_ids)).update(available_instance_count=0)
    Offering.objects.filter(reservation__reservation_id__in=list(reservation_ids)).update(available=False)


def already_launched(cloud, nodeclaim_name: str) -> LaunchResult | None:
    """The live instance an earlier launch of this NodeClaim started, found by its nodeclaim tag."""
    for instance in cloud.describe_instances(tags={NODECLAIM_TAG: nodeclaim_name}):
        if instance.state in ("pending", "running"):
            return LaunchResult(
                instance_id=instance.instance_id, instance_type=instance.instance_type, zone=instance.zone,
                capacity_type=instance.capacity_type, reservation_id=instance.reservation_id,
                reservation_type=instance.reservation_type, interruptible=instance.interruptible,
            )
    return None


def relaunch_unlaunched_claims(cloud, cluster, decisions: list | None = None, now=None) -> int:
    """Claims written by an earlier run whose launch was not recorded (the run died, or the launch
    raised): find the instance that launch started, or launch again (the client token makes this
    the same instance if the first launch went through). A claim still not launched LAUNCH_TIMEOUT
    after it was created is deleted, as upstream's liveness does: it stops being capacity and its
    pods are planned again. Each outcome goes to `decisions`, so the log says how the claim ended."""
    now = now or timezone.now()
    unlaunched = NodeClaim.objects.filter(
        provider_id="", deleting_since__isnull=True, labels__has_key=PROVISIONER_LABEL
    ).exclude(Q(instance_type="") | Q(capacity_type=""))
    relaunched = 0
    counted = getattr(cloud, "keeps_reservations_in_database", False)
    for row in unlaunched.select_related("node_class", "node_pool"):
        hold = result = None
        try:
            found = already_launched(cloud, row.name)  # launched before: EC2 gave it its unit already
            hold, held = (None, True) if found else ledger.hold_units(row.reservation_label, 1, claim_name=row.name, now=now)
            if not held:
                # Another cluster holds the reservation's free units: relaunching now would take a unit
                # the ledger gave it. Tried again next run; deleted after the launch timeout as any.
                raise ReservationHeldElsewhere(f"another cluster of the fleet holds the free units of reservation "
                                               f"{row.reservation_label}")
            result = launch_claim(cloud, cluster, row, launched=found)
        except (*ACTION_ERRORS, ReservationHeldElsewhere) as exc:
            if row.created_at and now - row.created_at >= LAUNCH_TIMEOUT:
                timed_out = launch_timeout(cluster, row, str(exc), now)
                if decisions is not None:
                    decisions.append(timed_out)
            elif decisions is not None and isinstance(exc, ReservationHeldElsewhere):
                decisions.append(relaunch_held_elsewhere(row, str(exc)))
            continue  # otherwise left unlaunched: the next run tries again with the same client token
        finally:
            ledger.settle_hold(hold, result, claim_name=row.name, now=now, counted=counted)  # launched or released
        relaunched += result.ok
        if decisions is not None:
            decisions.append(relaunch_decision(row, result))
    return relaunched


class ReservationHeldElsewhere(Exception):
    """A relaunch into a reservation whose free units the fleet ledger gives other clusters."""


def relaunch_held_elsewhere(row: NodeClaim, why: str) -> PendingDecision:
    return PendingDecision(
        kind=Decision.Kind.LAUNCH, subject=f"NodeClaim {row.name}"[:255], mode=effective_mode(row.node_pool),
        node_pool=row.node_pool, reservation=row.reservation, outcome=Decision.Outcome.SKIPPED,
        reason=(f"NodeClaim {row.name} ({row.instance_type} in {row.zone}, reservation {row.reservation_label}): an "
                f"earlier run stopped before recording its launch; not relaunched now: {why} (tried again next run)"),
        details={"name": row.name, "retry": True})


def launch_timeout(cluster, row: NodeClaim, error: str, now) -> PendingDecision:
    """kubernetes-sigs/karpenter pkg/controllers/nodeclaim/lifecycle/liveness.go (LaunchTimeout): a
    claim not launched within 5 minutes is deleted (control mode; a recommendation otherwise) and
    counts as a registration failure of its NodePool."""
    from scheduling.loop import registration_health

    mode = effective_mode(row.node_pool)
    minutes = int(LAUNCH_TIMEOUT.total_seconds() // 60)
    decision = PendingDecision(
        kind=Decision.Kind.REGISTRATION_TIMEOUT, subject=f"NodeClaim {row.name}"[:255], mode=mode,
        node_pool=row.node_pool, reservation=row.reservation, details={"name": row.name, "timeout": "launch"},
        reason=(f"NodeClaim {row.name} ({row.instance_type} {row.capacity_type} in {row.zone}) was not launched within "
                f"{minutes} minutes (last error: {error}): deleting it, so that its pods are planned again"))
    if mode != Mode.CONTROL:
        return decision
    try:
        cluster.delete_nodeclaim(row.name)
    except ClusterError as exc:
        decision.outcome, decision.error = Decision.Outcome.FAILED, str(exc)
        return decision
    # Its finalizer goes once nothing is left to terminate (nodes.finalize); a simulated cluster deleted the row.
    NodeClaim.objects.filter(pk=row.pk).update(deleting_since=now)
    registration_health.record_result(cluster, row.node_pool, False, now, reason="LaunchFailed",
                                      message=f"NodeClaim {row.name} was not launched: {error}"[:1000])
    decision.outcome = Decision.Outcome.ACTED
    return decision


def relaunch_decision(row: NodeClaim, result) -> PendingDecision:
    where = f"{row.instance_type} {row.capacity_type} in {row.zone}" + (f", reservation {row.reservation_label}" if row.reservation_label else "")
    decision = PendingDecision(
        kind=Decision.Kind.LAUNCH, subject=f"NodeClaim {row.name}"[:255], mode=effective_mode(row.node_pool),
        node_pool=row.node_pool, reservation=row.reservation, outcome=Decision.Outcome.ACTED,
        reason=f"NodeClaim {row.name} ({where}): an earlier run stopped before recording its launch; "
               f"{'launched as instance ' + result.instance_id if result.ok else 'the launch failed'}",
        details={"name": row.name, "instanceID": result.instance_id, "retry": True},
    )
    if not result.ok:
        decision.outcome = Decision.Outcome.FAILED
        decision.error = f"{result.error_code}: {result.error_message}"
    return decision
