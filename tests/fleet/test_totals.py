"""The running totals (scheduling/totals.py): each cluster's loop step counts its nodes and pods into
them, and the fleet's pages and the NodePools API read them instead of counting the whole fleet's
rows on every request; a cluster the loop has not counted yet is counted at request time."""

import pytest
from django.db import connection
from django.db.models import Count, Sum
from django.urls import reverse
from django.utils import timezone

from fleet.models import Cluster
from fleet.scope import cluster_scope
from scheduling import tasks, totals
from scheduling.models import ClusterTotals, Node, NodeGroupTotals, NodePool, NodePoolTotals, Pod
from scheduling.engine.quantities import CPU, MEMORY
from scheduling.queries import node_totals
from scheduling.tables import use_bar
from scripts import fleet_bench
from tests.factories.scheduling import NodeFactory, PodFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def fleet(settings):
    """Two clusters of 20 nodes (scripts/fleet_bench.py's world, which counts their totals as it seeds)."""
    settings.KARPWEB_MODE = "observe"
    now = timezone.now()
    fleet_bench.seed_shared(now, reservations=12)
    fleet_bench.seed_clusters(now, 0, 2, nodes=20, pods_per_node=2)
    for cluster in Cluster.objects.filter(totals__isnull=True):  # the cluster the migration made: as its loop would
        totals.refresh(cluster)
    return list(Cluster.objects.select_related("account").filter(name__startswith="fleet-").order_by("name"))


def counted_now(cluster) -> dict:
    """What the totals must say, counted afresh from the cluster's rows."""
    nodes = Node.objects.fleet().filter(cluster=cluster)
    pods = Pod.objects.fleet().filter(cluster=cluster)
    live = node_totals(nodes)
    return {
        "cluster": (nodes.count(), pods.count(), pods.filter(node_name="", phase="Pending").count()),
        "pools": {pool.pk: (pool.n, pool.cpu or 0, pool.memory or 0) for pool in NodePool.objects.fleet().filter(
            cluster=cluster).annotate(n=Count("nodes"), cpu=Sum("nodes__allocatable_cpu_millicores"),
                                      memory=Sum("nodes__allocatable_memory_bytes"))},
        "nodes": (live["nodes"], live["cpu_allocatable"], live["memory_allocatable"], live["cpu_requested"],
                  live["memory_requested"]),
        "by_reservation": dict(nodes.exclude(reservation=None).order_by().values_list("reservation").annotate(n=Count("pk"))),
    }


def kept(cluster) -> dict:
    row = ClusterTotals.objects.fleet().get(cluster=cluster)
    groups = NodeGroupTotals.objects.fleet().filter(cluster=cluster)
    sums = groups.aggregate(n=Sum("nodes"), cpu=Sum("cpu_allocatable"), memory=Sum("memory_allocatable"),
                            cpu_asked=Sum("cpu_requested"), memory_asked=Sum("memory_requested"))
    return {
        "cluster": (row.nodes, row.pods, row.pending_pods),
        "pools": {pool.node_pool_id: (pool.nodes, pool.cpu_allocatable, pool.memory_allocatable)
                  for pool in NodePoolTotals.objects.fleet().filter(cluster=cluster)},
        "nodes": (sums["n"] or 0, sums["cpu"] or 0, sums["memory"] or 0, sums["cpu_asked"] or 0,
                  sums["memory_asked"] or 0),
        "by_reservation": dict(groups.exclude(reservation=None).order_by().values_list("reservation").annotate(
            n=Sum("nodes"))),
    }


def test_seeding_counts_the_totals(fleet):
    for cluster in fleet:
        assert kept(cluster) == counted_now(cluster)
        assert kept(cluster)["cluster"][0] == 20 and kept(cluster)["by_reservation"]


def test_the_totals_equal_a_fresh_count_after_a_loop_step(fleet):
    first, second = fleet
    with cluster_scope(first):  # the world changes between steps: a node goes, pods come and go
        gone = Node.objects.order_by("name").first()
        gone.delete()
        pool = NodePool.objects.order_by("name").first()
        node = NodeFactory(node_pool=pool, instance_type="m5.large", capacity_type="spot", allocatable_cpu_millicores=3000)
        PodFactory(node=node, node_name=node.name, phase="Running", cpu_request_millicores=700)
        PodFactory(node=node, node_name=node.name, phase="Succeeded", cpu_request_millicores=9000)  # holds nothing
        PodFactory(node_name="", phase="Pending")
        NodePool.objects.create(name="empty-pool")
    before = kept(second)
    assert kept(first) != counted_now(first), "the world changed since the last count"

    tasks.cluster_step("sync_kubernetes", first.pk)

    assert kept(first) == counted_now(first)
    assert kept(first)["pools"][NodePool.objects.fleet().get(cluster=first, name="empty-pool").pk] == (0, 0, 0)
    assert kept(second) == before == counted_now(second), "a cluster's step counts that cluster only"
    assert ClusterTotals.objects.fleet().get(cluster=first).refreshed_at > ClusterTotals.objects.fleet().get(
        cluster=second).refreshed_at
    for step in fleet_bench.STEPS:  # each step that changes nodes or pods counts again as it ends
        tasks.cluster_step(step, first.pk)
        assert kept(first) == counted_now(first), step


def test_the_pages_read_the_totals_not_the_rows(fleet, viewer_client):
    first = fleet[0]
    with cluster_scope(first):  # written past the loop: the pages keep the last count until the next step
        pool = NodePool.objects.order_by("name").first()
        added = [NodeFactory(node_pool=pool, capacity_type="on-demand") for _ in range(3)]
        PodFactory(node=added[0], node_name=added[0].name, phase="Running")
    old_nodes, new_nodes = 40, 43

    def figures():
        clusters = viewer_client.get(reverse("fleet:clusters")).content.decode()
        overview = viewer_client.get(reverse("fleet_overview")).content.decode()
        nodes = viewer_client.get(reverse("scheduling:nodes")).content.decode()
        api = viewer_client.get("/api/v1/nodepools/", {"cluster": first.name}).json()
        return clusters, overview, nodes, next(p["nodeCount"] for p in api["results"] if p["name"] == pool.name)

    def cluster_row(overview):
        return overview.split(f'id="cluster-{first.name}"', 1)[1].split("</tr>", 1)[0]

    clusters, overview, nodes, pool_count = figures()
    assert "last loop step" in clusters and "not counted by the loop yet" not in clusters
    assert f"<td>20</td>\n    <td>{fleet_bench.PENDING_PER_CLUSTER}</td>" in cluster_row(overview)
    assert f'id="node-totals">{old_nodes} nodes<' in nodes and "as of the last loop step" in nodes
    assert pool_count == NodePoolTotals.objects.fleet().get(node_pool=pool).nodes == Node.objects.fleet().filter(
        node_pool=pool).count() - 3
    # A filter the node groups cannot answer (a search) is counted from the rows.
    searched = viewer_client.get(reverse("scheduling:nodes"), {"q": "."}).content.decode()
    assert f'id="node-totals">{new_nodes} nodes<' in searched and "as of the last loop step" not in searched

    totals.refresh(first)
    clusters, overview, nodes, pool_count = figures()
    assert f"<td>23</td>\n    <td>{fleet_bench.PENDING_PER_CLUSTER}</td>" in cluster_row(overview)
    assert f'id="node-totals">{new_nodes} nodes<' in nodes
    assert pool_count == Node.objects.fleet().filter(node_pool=pool).count()


def test_a_cluster_not_counted_yet_is_counted_at_request_time(fleet, viewer_client):
    first, second = fleet
    ClusterTotals.objects.fleet().filter(cluster=second).delete()
    NodeGroupTotals.objects.fleet().filter(cluster=second).delete()
    NodePoolTotals.objects.fleet().filter(cluster=second).delete()
    with cluster_scope(second):
        NodeFactory(node_pool=NodePool.objects.order_by("name").first())
    page = viewer_client.get(reverse("fleet:clusters"), {"ordering": "name"}).content.decode()
    assert "1 cluster not counted by the loop yet, counted now" in page
    nodes = viewer_client.get(reverse("scheduling:nodes")).content.decode()
    assert 'id="node-totals">41 nodes<' in nodes  # 20 kept + 21 counted now
    # The same figures as counting every row.
    live = node_totals(Node.objects.fleet().all())
    assert use_bar(live["cpu_requested"], live["cpu_allocatable"], CPU) in nodes
    assert use_bar(live["memory_requested"], live["memory_allocatable"], MEMORY) in nodes
    assert viewer_client.get(reverse("scheduling:nodepools")).status_code == 200
    api = viewer_client.get("/api/v1/nodepools/", {"limit": 1000}).json()["results"]
    assert sum(pool["nodeCount"] for pool in api) == 41


def rows_read(tables=("scheduling_node", "scheduling_pod")) -> dict:
    """Rows this transaction has read from these tables so far (PostgreSQL's own statistics)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT relname, coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0) "
                       "FROM pg_stat_xact_user_tables WHERE relname = ANY(%s)", [list(tables)])
        found = dict(cursor.fetchall())
    return {table: found.get(table, 0) for table in tables}


@pytest.mark.skipif(connection.vendor != "postgresql", reason="reads PostgreSQL's statistics of rows read")
def test_the_fleet_pages_read_no_node_or_pod_rows_once_counted(fleet, viewer_client):
    """The pages that summed the fleet's rows read none of them once the loop has counted them: the
    clusters' nodes and pods, the pools' nodes and the nodes' totals line are the totals' few rows (the
    node list itself reads its page of nodes and their pods, and counts its nodes for the paginator)."""
    viewer_client.get(reverse("fleet:clusters"))  # the session, the kept list of clusters
    for url in (reverse("fleet:clusters"), reverse("fleet_overview"), reverse("scheduling:nodepools"),
                "/api/v1/nodepools/", reverse("scheduling:overview")):
        before = rows_read()
        assert viewer_client.get(url).status_code == 200
        after = rows_read()
        assert after["scheduling_pod"] == before["scheduling_pod"], url
        # (The overviews also join the Capacity Blocks to their nodes: a few reservations' nodes.)
        if url not in (reverse("scheduling:overview"), reverse("fleet_overview")):
            assert after["scheduling_node"] == before["scheduling_node"], url
    pods = Pod.objects.fleet().count()
    before = rows_read()
    assert viewer_client.get(reverse("scheduling:nodes"), {"per_page": 5}).status_code == 200
    read = rows_read()["scheduling_pod"] - before["scheduling_pod"]
    # Its 5 nodes' pods (2 each: a count and two sums), not the fleet's pods for the totals line.
    assert read <= 5 * 2 * 3 < pods, read
