"""Recommendations from the database: the facts scheduling.engine.recommendations needs, read in a
fixed handful of queries, and the recomputed set stored after each hourly roll-up (open ones are
replaced; applied and failed ones are kept as history)."""

from __future__ import annotations

import datetime
from collections import Counter, defaultdict

from django.conf import settings
from django.core.cache import cache
from django.db import transaction
from django.db.models import Count, Prefetch
from django.utils import timezone

from fleet.defaults import UNKNOWN_ACCOUNT_ID
from fleet.models import AwsAccount, Cluster
from fleet.scope import current_cluster, unscoped
from reservations import ledger
from reservations.models import CapacityReservation, EC2NodeClass, Recommendation, ReservationVisibility, UtilizationHour
from scheduling.engine.recommendations import Hour, Policy, ReservationFacts, recommend
from scheduling.engine.timeutil import parse_optional_time
from scheduling.models import CapacityType, Node, Pod
from reservations.commitments import by_account_and_region
from scheduling.engine.commitments import effective_on_demand
from scheduling.queries import on_demand_prices

# On a pod: when its work is expected to finish (RFC 3339). A Capacity Block's pods without it, or
# with a time past the block's drain, count as work the drain would lose.
COMPLETION_ANNOTATION = "karpweb.io/expected-completion"
HOUR_KEY = "karpweb:recommendations:hour"
ACTIVE_STATES = (CapacityReservation.State.ACTIVE, CapacityReservation.State.SCHEDULED)


def recompute_hourly(now=None, extension_offerings=None) -> dict:
    """After the roll-up: once per hour (per cache) for each account and region, the set of what that
    EC2 step sees is recomputed (one marker for the fleet skipped every account after the first)."""
    now = now or timezone.now()
    hour = now.replace(minute=0, second=0, microsecond=0).isoformat()
    key = hour_key()
    if cache.get(key) == hour:
        return {}
    count = recompute(now, extension_offerings=extension_offerings)
    cache.set(key, hour, 3600)
    return {"recommendations": count}


def hour_key() -> str:
    """The "recomputed this hour" marker of the reservations in scope: its cluster's account and region
    (an EC2 step runs in the scope of its account and region's first cluster); the fleet's with none."""
    cluster = current_cluster()
    if cluster is None:
        return HOUR_KEY
    return f"{HOUR_KEY}:{cluster.account.account_id}:{cluster.region or '-'}"


def policy_from_settings() -> Policy:
    return Policy(shrink_window_days=settings.KARPWEB_RECOMMEND_SHRINK_WINDOW_DAYS,
                  headroom_instances=settings.KARPWEB_RECOMMEND_HEADROOM_INSTANCES,
                  headroom_percent=settings.KARPWEB_RECOMMEND_HEADROOM_PERCENT,
                  end_date_warning_days=settings.KARPWEB_RECOMMEND_END_DATE_WARNING_DAYS,
                  lend_idle_hours=settings.KARPWEB_LEND_IDLE_HOURS,
                  lend_margin_instances=settings.KARPWEB_LEND_MARGIN_INSTANCES)


def recompute(now=None, policy: Policy | None = None, extension_offerings=None) -> int:
    """Replace the open recommendations of the reservations in scope with what the facts say now;
    returns how many there are.
    `extension_offerings(reservation_id) -> [ExtensionOffering]` asks EC2 (None: none known)."""
    now = now or timezone.now()
    policy = policy or policy_from_settings()
    reservations = _with_selecting_classes(CapacityReservation.objects.filter(state__in=ACTIVE_STATES))
    found = recommend(facts(reservations, now, policy, extension_offerings), now, policy)
    by_id = {r.reservation_id: r for r in reservations}
    rows = [Recommendation(kind=r.kind, reservation=by_id[r.reservation_id], reason=r.reason,
                           savings_per_month=r.savings_per_month, target_count=r.target_count, end_date=r.end_date,
                           details=r.details, seen_total=by_id[r.reservation_id].total_instance_count,
                           seen_end_date=by_id[r.reservation_id].end_date, computed_at=now,
                           advised=r.details.get("advised", True))
            for r in found]
    with transaction.atomic():
        # Only the reservations this run read: an account's EC2 run (in its cluster's scope) sees its
        # own and shared ones, and leaves other accounts' advice to their runs.
        stale = {claim_key(rec): rec for rec in Recommendation.objects.select_for_update().filter(
            state=Recommendation.State.OPEN, reservation__in=CapacityReservation.objects.values("pk"))}
        kept, new = [], []
        for row in rows:
            same = stale.pop(claim_key(row), None)
            if same is None:
                new.append(row)
                continue
            # The same claim (kind, units, where to): the row, its id and its computedAt stay; the figures follow.
            for name in ("reason", "savings_per_month", "details", "seen_total", "seen_end_date", "advised", "end_date"):
                setattr(same, name, getattr(row, name))
            kept.append(same)
        Recommendation.objects.filter(pk__in=[rec.pk for rec in stale.values()]).delete()
        Recommendation.objects.bulk_update(kept, ["reason", "savings_per_month", "details", "seen_total", "seen_end_date",
                                                  "advised", "end_date"])
        Recommendation.objects.bulk_create(new)
    return len(rows)


def claim_key(rec) -> tuple:
    """What a recommendation asks to be done: two computations with one key are the same advice."""
    details = rec.details or {}
    return (rec.kind, rec.reservation_id, rec.target_count, details.get("count"), details.get("destination"),
            details.get("nodeClass"), details.get("shareWith"))


def _with_selecting_classes(reservations) -> list[CapacityReservation]:
    """The reservations with the EC2NodeClasses that select them in every cluster of the fleet: an account's
    EC2 step runs in its first cluster's scope, where the scoped manager would hide the other clusters'
    classes (a move's destination selected by staging's class looked unselected, and the move was dropped)."""
    classes = EC2NodeClass.objects.fleet().select_related("cluster")
    return list(reservations.prefetch_related(Prefetch("node_classes", queryset=classes)))


def current_claim(rec: Recommendation, now=None, extension_offerings=None):
    """Recompute `rec`'s evidence from the mirror now: (the recommendation of its kind the facts support
    for its reservation now, or None; that reservation's facts, or None when it is no longer active)."""
    now = now or timezone.now()
    policy = policy_from_settings()
    with unscoped():
        reservations = _with_selecting_classes(CapacityReservation.objects.fleet().filter(state__in=ACTIVE_STATES))
        all_facts = facts(reservations, now, policy, extension_offerings)
    rid = rec.reservation.reservation_id
    found = [r for r in recommend(all_facts, now, policy) if r.reservation_id == rid and r.kind == rec.kind]
    return (found[0] if found else None), next((f for f in all_facts if f.reservation_id == rid), None)


def facts(reservations: list[CapacityReservation], now, policy: Policy, extension_offerings=None) -> list[ReservationFacts]:
    since = now - datetime.timedelta(days=max(policy.shrink_window_days, policy.cancel_window_days,
                                              policy.lend_forecast_days + 1), hours=policy.lend_idle_hours)
    hours = defaultdict(list)
    for row in UtilizationHour.objects.filter(reservation__in=reservations, hour__gte=since, hour__lt=now) \
            .values("reservation_id", "hour", "used", "total", "peak_used"):
        hours[row["reservation_id"]].append(Hour(row["hour"], row["used"], row["total"], row["peak_used"]))
    prices = on_demand_prices({r.instance_type for r in reservations})
    commitments = by_account_and_region()  # Savings Plans: what the units would otherwise cost is their rate
    # The whole fleet's nodes (every cluster's), each with its cluster and account: which cluster could
    # use an idle unit is advice across the fleet.
    nodes = list(Node.objects.fleet().filter(instance_type__in={r.instance_type for r in reservations})
                 .select_related("node_pool__node_class", "cluster__account").only(
                     "name", "instance_type", "zone", "capacity_type", "reservation_id", "node_pool__name",
                     "node_pool__node_class__name", "cluster__name", "cluster__account_id", "cluster__account__account_id"))
    # On-demand nodes per (cluster, type, zone): the need a move meets, whom a split could be shared with.
    paid_where = Counter((n.cluster.name, n.instance_type, n.zone) for n in nodes if n.capacity_type == CapacityType.ON_DEMAND)
    cluster_account = {n.cluster.name: (n.cluster.account_id, n.cluster.account.account_id) for n in nodes}
    seen_by = defaultdict(set)  # reservation pk -> our accounts that see it
    shared_with = defaultdict(set)  # reservation pk -> our accounts that see it through a share
    for pk, account_pk, account_id, shared in ReservationVisibility.objects.filter(reservation__in=reservations) \
            .values_list("reservation_id", "account_id", "account__account_id", "shared"):
        seen_by[pk].add(account_pk)
        if shared:
            shared_with[pk].add(account_id)
    uses = ledger.latest_uses(r.pk for r in reservations)
    cluster_accounts = dict(Cluster.objects.values_list("name", "account__account_id"))
    # A fleet of one whose account is the placeholder (fleet.defaults: no owner or setting named it)
    # cannot tell its own reservations from shared ones: it advises on what it sees, as before the fleet.
    accounts = dict(AwsAccount.objects.values_list("account_id", "pk")[:2])
    unknown = {accounts[UNKNOWN_ACCOUNT_ID]} if set(accounts) == {UNKNOWN_ACCOUNT_ID} else set()
    busy_pools = set(Pod.objects.fleet().exclude(node__isnull=True).exclude(owner_kind="DaemonSet")
                     .values_list("node__node_pool_id", flat=True).distinct())
    pools_of_class = defaultdict(set)
    for node in nodes:
        if node.node_pool and node.node_pool.node_class:
            pools_of_class[node.node_pool.node_class.name].add(node.node_pool_id)
    block_work = _block_work([r for r in reservations if r.is_capacity_block], now)
    result = []
    for r in reservations:
        classes = tuple(sorted(nc.name for nc in r.node_classes.all()))
        paid = [n for n in nodes if n.capacity_type == CapacityType.ON_DEMAND and n.instance_type == r.instance_type
                and n.zone == r.availability_zone and (not seen_by[r.pk] or n.cluster.account_id in seen_by[r.pk])]
        by_cluster = Counter(n.cluster.name for n in paid)
        if by_cluster:  # the class a selector term goes to: the named cluster's (recommendations.select)
            chosen = min(by_cluster.items(), key=lambda c: (-c[1], c[0]))[0]
            paid = sorted(paid, key=lambda n: n.cluster.name != chosen)
        use = uses.get(r.pk)
        others = set(shared_with[r.pk]) - {r.owner_id}
        if use is not None:
            others |= set(use.other_accounts or {}) | set(use.our_accounts or {})
            others |= {cluster_accounts.get(name, "") for name in use.clusters or {}}
        others -= {r.owner_id, "", UNKNOWN_ACCOUNT_ID}
        work, block_nodes = block_work.get(r.pk, ((), 0))
        timing = r.timing
        price, basis = effective_on_demand(prices.get((r.instance_type, r.availability_zone)), r.instance_type,
                                           commitments.of(r.owner_id, r.region))
        result.append(ReservationFacts(
            reservation_id=r.reservation_id, instance_type=r.instance_type, zone=r.availability_zone,
            reservation_type=r.reservation_type, state=r.state, total=r.total_instance_count,
            used_now=r.total_instance_count - r.available_instance_count,
            price_per_hour=price, price_basis=basis, end=r.end_date,
            hours=tuple(sorted(hours.get(r.pk, []), key=lambda h: h.start)), selected_by=classes,
            pools_could_use=any(pools_of_class[c] & busy_pools for c in classes),
            matching_paid_nodes=tuple(sorted(n.name for n in paid)),
            node_class_of_paid_nodes=next((n.node_pool.node_class.name for n in paid if n.node_pool and n.node_pool.node_class), ""),
            unfinished_work=work, block_nodes=block_nodes, drain_at=timing.drain_at if timing else None,
            extension_offerings=tuple(extension_offerings(r.reservation_id)) if extension_offerings and work else (),
            owned_by_us=r.owner_account_id is not None or bool(seen_by[r.pk] & unknown), fleet_used=use.used if use is not None else 0,
            other_accounts=tuple(sorted(others)), paid_nodes_by_cluster=tuple(sorted(by_cluster.items())),
            committed_count=r.committed_instance_count, commitment_end=r.commitment_end_date,
            lends_interruptible=r.lends_interruptible_capacity, interruptible=r.interruptible, owner=r.owner_id, platform=r.instance_platform,
            tenancy=r.tenancy, placement_group=r.placement_group_arn,
            cluster_demand=tuple(sorted({(nc.cluster.name, paid_where[(nc.cluster.name, r.instance_type, r.availability_zone)])
                                         for nc in r.node_classes.all()})),
            share_candidates=_share_candidates(r, seen_by[r.pk], paid_where, cluster_account),
        ))
    return result


def _share_candidates(r: CapacityReservation, seen_by: set, paid_where: Counter, cluster_account: dict) -> tuple:
    """(account, cluster, on-demand nodes of its type and zone) for the fleet's clusters whose account does
    not see it: whom splitting units off and sharing them would serve. None when visibility is unknown."""
    if not seen_by:
        return ()
    found = []
    for (cluster, kind, zone), count in paid_where.items():
        account_pk, account_id = cluster_account[cluster]
        if (kind, zone) == (r.instance_type, r.availability_zone) and count and account_pk not in seen_by \
                and account_id not in ("", UNKNOWN_ACCOUNT_ID):
            found.append((account_id, cluster, count))
    return tuple(sorted(found))


def _block_work(blocks: list[CapacityReservation], now) -> dict[int, tuple[tuple, int]]:
    """Per Capacity Block: the pods on its nodes whose work will not finish before the drain, and its node count."""
    if not blocks:
        return {}
    drains = {b.pk: b.timing.drain_at for b in blocks if b.timing}
    pods = Pod.objects.fleet().filter(node__reservation_id__in=list(drains)).exclude(owner_kind="DaemonSet") \
        .values("namespace", "name", "annotations", "created_at", "node__reservation_id")
    node_counts = dict(Node.objects.fleet().filter(reservation_id__in=list(drains)).values_list("reservation_id")
                       .annotate(count=Count("id")).values_list("reservation_id", "count"))
    work = defaultdict(list)
    for pod in pods:
        block = pod["node__reservation_id"]
        done_by = parse_optional_time((pod["annotations"] or {}).get(COMPLETION_ANNOTATION))
        if done_by is None or done_by > drains[block]:
            work[block].append((f"{pod['namespace']}/{pod['name']}", pod["created_at"]))
    return {block: (tuple(sorted(items)), node_counts.get(block, 0)) for block, items in work.items()}
