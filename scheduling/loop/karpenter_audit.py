"""The Karpenter audit, after every Kubernetes sync: each NodeClaim karpweb did not create is judged
once (scheduling.engine.audit) against the reservations its EC2NodeClass selects as the last EC2
sync before the claim saw them; a missed reservation then accrues its cost, at the paid node's price
(list, or what a Savings Plan or zonal Reserved Instance makes it, stated beside it), for the
hours the paid node runs while the reservation still has a free unit. A paid claim is judged once
its pods have landed on its node (their own requirements may rule the reservation out), or, if
none has within the registration TTL, without them. After every lifecycle pass,
the standing opportunities: paid nodes the engine would consolidate into free reserved units now."""

import datetime
from types import SimpleNamespace

from django.conf import settings
from django.db import transaction
from django.db.models import Q

from reservations.models import CapacityReservation, UtilizationHour, UtilizationSample
from scheduling.engine.audit import (
    MISSED, USED, Candidate, Launch, PodNeeds, Placement, compare_plan, hours_overlapping, judge, judge_disruption,
    movable,
)
from reservations.commitments import current as current_commitments
from scheduling.engine.commitments import LIST, Commitments, paid_price
from scheduling.engine.labels import NODE_NAME_FIELD
from scheduling.engine.world import WorldError, parse_pod
from scheduling.loop.disruption import CONSOLIDATION, disruption_reason
from scheduling.loop.provisioning import PROVISIONER_LABEL
from scheduling.models import (
    CapacityType, Decision, KarpenterLaunch, Node, NodeClaim, Offering, Pod, StandingOpportunity,
)
from scheduling.world import POD_FIELDS, pod_object


def audit_launches(now) -> dict:
    return {"claims_audited": audit_new_claims(now), "missed_reservations_accruing": accrue_missed(now),
            "reserved_nodes_disrupted": note_disrupted_reserved(now)}


def audit_new_claims(now) -> int:
    claims = (NodeClaim.objects.exclude(labels__has_key=PROVISIONER_LABEL)
              .exclude(name__in=KarpenterLaunch.objects.values("claim_name"))
              .filter(created_at__isnull=False).exclude(instance_type="").exclude(zone="").exclude(capacity_type="")
              .select_related("node_pool", "node_class", "reservation", "node"))
    claims = list(claims)
    pods = _workload_pods([claim.node.pk for claim in claims if getattr(claim, "node", None) is not None])
    commitments = current_commitments() if claims else None  # zonal RIs and Savings Plans: each paid node's price
    wait = datetime.timedelta(minutes=settings.KARPWEB_REGISTRATION_TTL_MINUTES)
    rows = []
    for claim in claims:
        node = getattr(claim, "node", None)
        landed = pods.get(node.pk, []) if node is not None else []
        if claim.capacity_type == CapacityType.RESERVED or landed:
            rows.append(_judged(claim, now, node, landed, "", commitments))
        elif now - claim.created_at >= wait:
            rows.append(_judged(claim, now, node, [], _unknown_pods(node, wait), commitments))
    # Two workers auditing the same claim: the unique claim name keeps the first.
    KarpenterLaunch.objects.bulk_create(rows, ignore_conflicts=True)
    return len(rows)


def _workload_pods(node_ids: list[int]) -> dict[int, list[PodNeeds]]:
    """The pods on these nodes that a workload placed there (not DaemonSets'), as the engine reads
    their node selection; one query."""
    found: dict[int, list[PodNeeds]] = {}
    rows = (Pod.objects.filter(node_id__in=node_ids).exclude(owner_kind="DaemonSet")
            .order_by("namespace", "name").values("node_id", *POD_FIELDS))
    for row in rows:
        node_id = row.pop("node_id")
        try:
            pod = parse_pod(pod_object(SimpleNamespace(**row)))
        except WorldError:
            continue  # the loop's own run reports a pod the engine cannot read
        if pod is not None:
            found.setdefault(node_id, []).append(PodNeeds(f"{pod.namespace}/{pod.name}", pod.strict_alternatives))
    return found


def _unknown_pods(node: Node | None, wait: datetime.timedelta) -> str:
    minutes = int(wait.total_seconds() // 60)
    if node is None:
        return f"its node did not register within {minutes} minutes, so its pods' own requirements were not checked"
    return f"no pod landed on its node within {minutes} minutes, so no pod's own requirements were checked"


def _judged(claim: NodeClaim, now, node: Node | None, pods: list[PodNeeds], pods_note: str,
            commitments: Commitments) -> KarpenterLaunch:
    pool = claim.node_pool
    labels = {**(claim.labels or {}), **((node.labels or {}) if node is not None else {})}
    if node is not None:
        labels[NODE_NAME_FIELD] = node.name
    launch = Launch(claim=claim.name, node_pool=pool.name if pool else "", node_class=claim.node_class.name if claim.node_class else "",
                    instance_type=claim.instance_type, zone=claim.zone, capacity_type=claim.capacity_type,
                    created_at=claim.created_at, pool_requirements=tuple(pool.requirements or ()) if pool else (),
                    reservation_id=claim.reservation_label, node_labels=tuple(sorted(labels.items())),
                    pods=tuple(pods), pods_note=pods_note)
    verdict = judge(launch, _candidates(claim))
    reservation = CapacityReservation.objects.filter(reservation_id=verdict.reservation_id).first() \
        if verdict.reservation_id else None
    price, basis = _price(claim, commitments)
    return KarpenterLaunch(
        claim_name=claim.name, node_claim=claim, node_pool=pool, node_pool_name=launch.node_pool,
        instance_type=claim.instance_type, zone=claim.zone, capacity_type=claim.capacity_type,
        launched_at=claim.created_at, outcome=verdict.outcome, reason=verdict.reason, reservation=reservation,
        reservation_label=verdict.reservation_id, ec2_sync_at=verdict.sync_at, free_units=verdict.free_units,
        price_per_hour=price, price_basis=basis, audited_at=now)


def _candidates(claim: NodeClaim) -> list[Candidate]:
    if claim.node_class is None:
        return []
    candidates = []
    for reservation in claim.node_class.selected_reservations.filter(instance_type=claim.instance_type,
                                                                     availability_zone=claim.zone):
        sample = UtilizationSample.objects.filter(reservation=reservation, sampled_at__lte=claim.created_at).first()
        taken = 0
        if sample is not None:
            taken = NodeClaim.objects.filter(
                Q(reservation=reservation) | Q(reservation_label=reservation.reservation_id),
                created_at__gt=sample.sampled_at, created_at__lte=claim.created_at).exclude(pk=claim.pk).count()
        candidates.append(Candidate(
            reservation_id=reservation.reservation_id, instance_type=reservation.instance_type,
            zone=reservation.availability_zone, reservation_type=reservation.reservation_type,
            free_at_sync=sample.available if sample else 0, sync_at=sample.sampled_at if sample else None,
            taken_since_sync=taken, interruptible=reservation.interruptible))
    return candidates


def _price(claim: NodeClaim, commitments: Commitments) -> tuple[float | None, str]:
    """The paid claim's price an hour and its basis: list, or what the account's commitments make it
    (engine/commitments.py paid_price: a zonal RI covers the oldest on-demand instances of its type and zone)."""
    if claim.capacity_type not in (CapacityType.ON_DEMAND, CapacityType.SPOT):
        return None, LIST
    listed = Offering.objects.filter(instance_type__name=claim.instance_type, zone=claim.zone,
                                     capacity_type=claim.capacity_type, reservation__isnull=True) \
        .values_list("price", flat=True).first()
    if commitments.empty or claim.capacity_type != CapacityType.ON_DEMAND:
        return listed, LIST
    older = Q(created_at__lt=claim.created_at) | Q(created_at=claim.created_at, name__lte=claim.name)  # oldest first
    rank = NodeClaim.objects.filter(older, instance_type=claim.instance_type, zone=claim.zone,
                                    capacity_type=CapacityType.ON_DEMAND, deleting_since__isnull=True).count()
    return paid_price(listed, claim.instance_type, claim.zone, claim.capacity_type, commitments, rank)


def accrue_missed(now) -> int:
    """Bring each running missed reservation's cost up to now; close the ones whose claim is gone."""
    running = list(KarpenterLaunch.objects.filter(outcome=MISSED, ended_at__isnull=True).select_related("node_claim"))
    for row in running:
        if row.node_claim is None:
            row.ended_at = now
        end = row.ended_at or now
        hours = UtilizationHour.objects.filter(
            reservation_id=row.reservation_id, hour__gte=row.launched_at - datetime.timedelta(hours=1), hour__lt=end,
        ).values_list("hour", "available")
        row.idle_hours = hours_overlapping(row.launched_at, end, list(hours))
        row.missed_dollars = (row.price_per_hour or 0) * row.idle_hours
    KarpenterLaunch.objects.bulk_update(running, ["ended_at", "idle_hours", "missed_dollars"])
    return len(running)


def note_disrupted_reserved(now) -> int:
    """Karpenter's reserved NodeClaims that went away since the last sync: a disruption that left
    paid nodes running where the freed unit could have held one is recorded as such."""
    gone = list(KarpenterLaunch.objects.filter(outcome=USED, ended_at__isnull=True, node_claim__isnull=True)
                .select_related("reservation"))
    disrupted = 0
    for row in gone:
        row.ended_at = now
        reservation = row.reservation
        if reservation is None:
            continue
        nodes = list(Node.objects.filter(
            capacity_type__in=(CapacityType.ON_DEMAND, CapacityType.SPOT), instance_type=row.instance_type, zone=row.zone,
            node_pool__node_class__in=reservation.node_classes.all()).order_by("name").select_related("node_pool"))
        pods = _workload_pods([n.pk for n in nodes])
        unit = Candidate(reservation_id=reservation.reservation_id, instance_type=row.instance_type, zone=row.zone,
                         reservation_type=reservation.reservation_type, free_at_sync=1, sync_at=None,
                         interruptible=reservation.interruptible)
        paid = [(n.name, n.capacity_type) for n in nodes
                if movable(unit, tuple(n.node_pool.requirements or ()), {**(n.labels or {}), NODE_NAME_FIELD: n.name},
                           pods.get(n.pk, []))]
        prices = dict(Offering.objects.filter(instance_type__name=row.instance_type, zone=row.zone, reservation__isnull=True)
                      .values_list("capacity_type", "price"))
        active = reservation.state == reservation.State.ACTIVE and (reservation.end_date is None or reservation.end_date > now)
        verdict = judge_disruption(row.claim_name, reservation.reservation_id, row.instance_type, row.zone, active,
                                   [(name, prices.get(kind)) for name, kind in paid], now)
        if verdict is not None:
            row.outcome, row.reason = verdict.outcome, verdict.reason
            row.price_per_hour = min((p for _, kind in paid if (p := prices.get(kind)) is not None), default=None)
            disrupted += 1
    KarpenterLaunch.objects.bulk_update(gone, ["ended_at", "outcome", "reason", "price_per_hour"])
    return disrupted


def record_standing_opportunities(decisions: dict, now) -> int:
    """From the lifecycle pass's engine run: every consolidation that replaces paid nodes with a
    reserved one, as it stands now (the previous pass's list is replaced)."""
    rows = []
    consolidations = [d for d in decisions.get("disruptions", []) if d.get("reason") == CONSOLIDATION
                      and d.get("action") == "replace"
                      and (d.get("replacement") or {}).get("launch", {}).get("capacityType") == CapacityType.RESERVED]
    names = {name for d in consolidations for name in d["nodes"]}
    nodes = {n.name: n for n in Node.objects.filter(name__in=names).select_related("node_pool")}
    for disruption in consolidations:
        members = [nodes[name] for name in disruption["nodes"] if name in nodes]
        paid = {n.capacity_type for n in members} & {CapacityType.ON_DEMAND, CapacityType.SPOT}
        if not members or len(paid) != 1 or any(n.capacity_type == CapacityType.RESERVED for n in members):
            continue
        launch = disruption["replacement"]["launch"]
        rows.append(StandingOpportunity(
            computed_at=now, nodes=list(disruption["nodes"]), capacity_type=paid.pop(),
            node_pool_name=members[0].node_pool.name if members[0].node_pool else "",
            reservation_label=launch.get("reservationID") or "", replacement_instance_type=launch["instanceType"],
            savings_per_hour=float(disruption.get("savingsPerHour") or 0.0),
            reason=disruption_reason(disruption, members, now)))
    with transaction.atomic():
        StandingOpportunity.objects.all().delete()
        StandingOpportunity.objects.bulk_create(rows)
    return len(rows)


def plans_beside_karpenter(limit: int = 20) -> list[dict]:
    """The latest launches karpweb recommended (observe mode), each beside the claims Karpenter
    launched for the same pods, in four queries whatever the count."""
    plans = list(Decision.objects.filter(kind=Decision.Kind.LAUNCH, outcome=Decision.Outcome.RECOMMENDED)
                 .order_by("-created_at", "-id")[:limit])
    keys = {key for plan in plans for key in (plan.objects_involved or {}).get("pods", [])}
    names = {key.split("/", 1)[-1] for key in keys}
    pods = Pod.objects.filter(name__in=names).select_related("node__node_claim__karpenter_launch")
    placed = {f"{pod.namespace}/{pod.name}": pod for pod in pods}
    rows = []
    for plan in plans:
        claims = {}
        for key in (plan.objects_involved or {}).get("pods", []):
            pod = placed.get(key)
            audited = getattr(getattr(getattr(pod, "node", None), "node_claim", None), "karpenter_launch", None) \
                if pod else None
            if audited is not None:
                claims[audited.claim_name] = Placement(audited.claim_name, audited.instance_type, audited.capacity_type,
                                                       audited.reservation_label if audited.capacity_type == "reserved" else "",
                                                       audited.price_per_hour, audited.price_basis or LIST)
        launch = (plan.details or {}).get("launch", {})
        rows.append({"decision": plan, "plan": launch, "karpenter": list(claims.values()),
                     **compare_plan(launch, list(claims.values()))})
    return rows
