"""Running totals: what the fleet's pages sum, counted by the loop instead of on every request.

At 50 clusters of 1,000 nodes, the pages that summed the whole fleet's rows at request time (the
nodes' totals line over 250,000 pods, the NodePools' nodes through a join over every node, the
clusters' node and pod counts) each spent 0.3 to 0.7 s in the database. Instead, each cluster's
loop step (scheduling/loop/runs.run_step: sync_kubernetes, provision, lifecycle and the steps it
groups) ends by counting that cluster's rows, in one transaction: a ClusterTotals row (nodes, pods,
pending pods), a NodePoolTotals row per pool (nodes, allocatable) and NodeGroupTotals rows per
(pool, instance type, zone, capacity type, reservation) with their pods' requests. The count reads
only that cluster's rows (its `cluster_id`), so a step's cost stays flat as the fleet grows, and a
page sums a few rows per cluster. Plain queries, no database triggers: the same on PostgreSQL and
SQLite.

The totals are as fresh as each cluster's last loop step (seconds: the beat runs provisioning
every 10 s and the Kubernetes sync every 30 s); the pages say so. A cluster the loop has not
counted yet (no ClusterTotals row: a new cluster, a world written by hand) is counted at request
time, row by row, so a page is right before the first refresh; the demo and the fleet benchmark
count theirs as they seed."""

import logging
from collections import defaultdict

from django.db import transaction
from django.db.models import BigIntegerField, Count, F, IntegerField, OuterRef, Q, Subquery, Sum
from django.db.models.functions import Coalesce
from django.utils import timezone

from scheduling.engine.world import TERMINAL_PHASES
from scheduling.models import ClusterTotals, Node, NodeGroupTotals, NodePool, NodePoolTotals, Pod

log = logging.getLogger(__name__)

# The loop steps that change a cluster's nodes or pods: each refreshes its cluster's totals as it ends.
REFRESHED_BY = frozenset({"sync_kubernetes", "provision", "lifecycle", "consolidate", "expire_capacity_blocks", "demote"})
GROUP = ("node_pool", "instance_type", "zone", "capacity_type", "reservation")  # values(): a key's pk
GROUP_COLUMNS = ("node_pool_id", "instance_type", "zone", "capacity_type", "reservation_id")


# --- written by the loop -----------------------------------------------------------------------

def refresh(cluster, now=None) -> int:
    """Count `cluster`'s nodes and pods into its totals (a Cluster or its primary key), whatever
    scope is open; returns the node groups written. One transaction, under a lock on the cluster's
    ClusterTotals row, so two steps of the cluster ending at once never interleave their rows."""
    cluster_id = getattr(cluster, "pk", cluster)
    now = now or timezone.now()
    with transaction.atomic():
        ClusterTotals.objects.fleet().get_or_create(cluster_id=cluster_id)
        ClusterTotals.objects.fleet().select_for_update().filter(cluster_id=cluster_id).values_list("pk").get()
        nodes = Node.objects.fleet().filter(cluster_id=cluster_id)
        groups = {tuple(row[key] for key in GROUP): row for row in nodes.order_by().values(*GROUP).annotate(
            nodes=Count("pk"), cpu=Sum("allocatable_cpu_millicores"), memory=Sum("allocatable_memory_bytes"))}
        # The pods of the cluster's nodes (a pod is bound to a node of its own cluster): the join reads
        # the cluster's nodes, not the fleet's. No filter on the pod's own cluster_id: with stale
        # statistics (a cluster mirrored since the last ANALYZE) PostgreSQL ANDed that index, the
        # whole cluster's pods, into each node's lookup: nodes x pods, 3.8 s a step at 5,000 nodes.
        bound = (Pod.objects.fleet().filter(node__cluster_id=cluster_id)
                 .exclude(phase__in=TERMINAL_PHASES)
                 .order_by().values(*(f"node__{key}" for key in GROUP))
                 .annotate(cpu=Sum("cpu_request_millicores"), memory=Sum("memory_request_bytes")))
        requested = {tuple(row[f"node__{key}"] for key in GROUP): row for row in bound}
        pods = Pod.objects.fleet().filter(cluster_id=cluster_id).aggregate(
            pods=Count("pk"), pending=Count("pk", filter=Q(node_name="", phase="Pending")))
        pools = {pk: [0, 0, 0] for pk in NodePool.objects.fleet().filter(cluster_id=cluster_id).values_list("pk", flat=True)}

        rows = []
        for key, row in groups.items():
            asked = requested.get(key, {})
            rows.append(NodeGroupTotals(
                cluster_id=cluster_id, **dict(zip(GROUP_COLUMNS, key)), nodes=row["nodes"], cpu_allocatable=row["cpu"] or 0,
                memory_allocatable=row["memory"] or 0, cpu_requested=asked.get("cpu") or 0,
                memory_requested=asked.get("memory") or 0))
            if key[0] in pools:
                pools[key[0]][0] += row["nodes"]
                pools[key[0]][1] += row["cpu"] or 0
                pools[key[0]][2] += row["memory"] or 0
        NodeGroupTotals.objects.fleet().filter(cluster_id=cluster_id).delete()
        NodeGroupTotals.objects.bulk_create(rows)
        NodePoolTotals.objects.fleet().filter(cluster_id=cluster_id).delete()
        NodePoolTotals.objects.bulk_create([
            NodePoolTotals(cluster_id=cluster_id, node_pool_id=pk, nodes=n, cpu_allocatable=cpu, memory_allocatable=memory)
            for pk, (n, cpu, memory) in pools.items()])
        ClusterTotals.objects.fleet().filter(cluster_id=cluster_id).update(
            nodes=sum(row["nodes"] for row in groups.values()), pods=pods["pods"], pending_pods=pods["pending"],
            refreshed_at=now)
    return len(rows)


def refresh_all(now=None) -> int:
    """Every cluster's totals (after seeding a world: the demo, the fleet benchmark); the clusters counted."""
    from fleet.models import Cluster

    cluster_ids = list(Cluster.objects.order_by("pk").values_list("pk", flat=True))
    for cluster_id in cluster_ids:
        refresh(cluster_id, now)
    return len(cluster_ids)


def after_step(name: str, cluster) -> dict:
    """run_step's end: the counts to add to the run of step `name` on `cluster` (None: the working
    cluster, when one can be told). A failed count is logged and said in the run's counts; it fails
    no step (the pages count a cluster without totals themselves, and the next step counts again)."""
    if name not in REFRESHED_BY:
        return {}
    if cluster is None:
        from fleet.scope import NoClusterScope, working_cluster

        try:
            cluster = working_cluster()
        except NoClusterScope:
            return {}
    try:
        return {"totals_node_groups": refresh(cluster)}
    except Exception as exc:  # noqa: BLE001 - the step itself succeeded; say why the totals did not
        log.exception("refreshing the totals of cluster %s failed", getattr(cluster, "pk", cluster))
        return {"totals_failed": f"{type(exc).__name__}: {exc}"[:200]}


# --- read by the pages and the API ---------------------------------------------------------------

def _live(queryset, outer: str, field=None):
    """A correlated count (or sum of `field`) of `queryset`'s rows whose `outer` is the outer row:
    the fallback of a row without totals, which PostgreSQL and SQLite evaluate only for such rows
    (COALESCE stops at its first non-null argument)."""
    rows = queryset.filter(**{outer: OuterRef("pk")}).order_by().values(outer)
    value = Sum(field) if field else Count("pk")
    return Coalesce(Subquery(rows.annotate(n=value).values("n"), output_field=BigIntegerField()), 0)


def _kept_or_live(kept: str, live, needed: bool, output_field):
    """The kept total `kept`, or with `needed` (some row has none) the live count for the rows without.
    Without any row to count, the SQL holds no fallback at all: its correlated subqueries, though never
    run, are costed as if run per row, and that estimate alone made PostgreSQL compile the query (JIT):
    85 ms of the fleet overview's 95 at 50 clusters."""
    if needed:
        return Coalesce(F(kept), live, output_field=output_field)
    return Coalesce(F(kept), 0, output_field=output_field)


def cluster_counts(fallback: bool | None = None) -> dict:
    """Annotations of a Cluster queryset: `node_count`, `pod_count`, `pending_pods` from its totals
    (counted now for a cluster without any; `fallback`: whether one may lack them, else asked: one
    query), and `totals_at`, when they were counted (None: now)."""
    from fleet.models import Cluster

    if fallback is None:
        fallback = Cluster.objects.filter(totals__isnull=True).exists()
    return {
        "node_count": _kept_or_live("totals__nodes", _live(Node.objects.fleet(), "cluster"), fallback, IntegerField()),
        "pod_count": _kept_or_live("totals__pods", _live(Pod.objects.fleet(), "cluster"), fallback, IntegerField()),
        "pending_pods": _kept_or_live(
            "totals__pending_pods", _live(Pod.objects.fleet().filter(node_name="", phase="Pending"), "cluster"),
            fallback, IntegerField()),
        "totals_at": F("totals__refreshed_at"),
    }


def pool_usage(fallback: bool | None = None) -> dict:
    """Annotations of a NodePool queryset: `node_count`, `used_cpu`, `used_memory` (its nodes'
    allocatable) from its totals, counted now for a pool without any (new since its cluster's last
    refresh, or in a cluster not counted yet; `fallback`: whether one may lack them, else asked of the
    pools in scope: one query)."""
    if fallback is None:
        fallback = NodePool.objects.filter(totals__isnull=True).exists()
    nodes = Node.objects.fleet()
    return {
        "node_count": _kept_or_live("totals__nodes", _live(nodes, "node_pool"), fallback, IntegerField()),
        "used_cpu": _kept_or_live("totals__cpu_allocatable", _live(nodes, "node_pool", "allocatable_cpu_millicores"),
                                  fallback, BigIntegerField()),
        "used_memory": _kept_or_live("totals__memory_allocatable", _live(nodes, "node_pool", "allocatable_memory_bytes"),
                                     fallback, BigIntegerField()),
    }


def _counted(cluster_ids=None) -> tuple[list[int], dict]:
    """The clusters a page lists (`cluster_ids`; None: the scope's, or every one, from the process's
    kept list: no read of the clusters) and {cluster pk: refreshed_at} of those with totals."""
    from fleet.access import visible_clusters
    from fleet.scope import current_cluster_id, fleet_clusters

    if cluster_ids is None:
        scoped = current_cluster_id()
        cluster_ids = [scoped] if scoped is not None else [c.pk for c in visible_clusters(fleet_clusters())]
    return list(cluster_ids), dict(ClusterTotals.objects.fleet().filter(cluster_id__in=cluster_ids)
                                   .values_list("cluster_id", "refreshed_at"))


def freshness(cluster_ids=None) -> dict:
    """{oldest, counted, uncounted} of the totals of these clusters (None: the scope's, or every one):
    the oldest refresh among them, how many have totals and how many are counted at request time."""
    listed, counted = _counted(cluster_ids)
    return {"oldest": min((at for at in counted.values() if at is not None), default=None), "counted": len(counted),
            "uncounted": len(listed) - len(counted)}


# Filters of the node list the node groups can answer (each with its lookup on NodeGroupTotals).
GROUP_FILTERS = {"capacity_type": "capacity_type", "zone": "zone__iexact", "instance_type": "instance_type__iexact",
                 "node_pool": "node_pool__name", "cluster": "cluster__name", "account": "cluster__account__account_id"}


def node_list_totals(nodes, filters: dict | None) -> dict | None:
    """The node list's totals line (scheduling.queries.node_totals' figures) from the node groups, for
    `nodes` (the list's filtered queryset) filtered by `filters` (the filter form's cleaned data; None:
    none). None when a filter the groups cannot answer is set (a search, a reservation label): the
    caller counts those nodes. Clusters without totals yet are counted now and added in."""
    from scheduling.queries import node_totals, priced_node_groups

    used = {name: value for name, value in (filters or {}).items() if value not in (None, "")}
    if set(used) - set(GROUP_FILTERS):
        return None
    listed, counted = _counted()
    uncounted = [pk for pk in listed if pk not in counted]
    if not counted:
        return None  # nothing counted by the loop yet: the rows, as before the totals
    groups = NodeGroupTotals.objects.filter(**{GROUP_FILTERS[name]: value for name, value in used.items()})
    by_price = defaultdict(int)
    sums = {"nodes": 0, "cpu_requested": 0, "cpu_allocatable": 0, "memory_requested": 0, "memory_allocatable": 0}
    for row in groups.order_by().values("instance_type", "zone", "capacity_type").annotate(
            **{f"sum_{key}": Sum(key) for key in sums}):
        by_price[(row["instance_type"], row["zone"], row["capacity_type"])] += row["sum_nodes"]
        for key in sums:
            sums[key] += row[f"sum_{key}"] or 0
    cost, prices, reserved, unpriced = priced_node_groups((*key, n) for key, n in by_price.items())
    totals = {**sums, "cost": cost, "prices": prices, "reserved": reserved, "unpriced": unpriced, "kept": True,
              "as_of": min((at for at in counted.values() if at is not None), default=None)}
    if uncounted:  # counted now, as before the totals, and added in
        live = node_totals(nodes.filter(cluster_id__in=uncounted))
        for key in ("cost", "reserved", "unpriced", *sums):
            totals[key] += live[key]
        totals["prices"] = {**prices, **live["prices"]}
    return totals


def nodes_by_reservation(reservation_ids, uncounted_cluster_ids) -> list[tuple[int, int, int]]:
    """[(reservation pk, cluster pk, nodes)] in these reservations, from the node groups (the fleet
    overview's nodes by cluster); the nodes of the clusters without totals yet counted now, in the
    same query (one whatever the fleet)."""
    kept = (NodeGroupTotals.objects.fleet().filter(reservation__in=reservation_ids).order_by()
            .values_list("reservation_id", "cluster_id").annotate(n=Sum("nodes")))
    counted_now = (Node.objects.fleet().filter(reservation__in=reservation_ids, cluster_id__in=uncounted_cluster_ids)
                   .order_by().values_list("reservation_id", "cluster_id").annotate(n=Count("pk")))
    return list(kept.union(counted_now, all=True))
