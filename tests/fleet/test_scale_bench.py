"""The fleet scale benchmark (scripts/fleet_bench.py) at a tiny size, so that the command cannot rot,
and the property it measures: a cluster's loop steps read that cluster's rows, not the fleet's."""

import pytest
import time_machine
from django.db import connection
from django.utils import timezone

from fleet.models import Cluster
from reservations.models import CapacityReservation
from scheduling.models import Node, Pod, TaskRun
from scripts import fleet_bench


@pytest.fixture
def observe(settings):
    settings.KARPWEB_MODE = "observe"  # as the benchmark runs: recorded, nothing acted on


def test_the_benchmark_seeds_a_tiny_fleet_and_runs_every_step(db, observe):
    now = timezone.now()
    fleet_bench.seed_shared(now, reservations=12)
    fleet_bench.seed_clusters(now, 0, 2, nodes=20, pods_per_node=2)

    clusters = list(Cluster.objects.select_related("account").filter(name__startswith="fleet-").order_by("name"))
    assert [c.name for c in clusters] == ["fleet-000", "fleet-001"]
    assert clusters[0].account != clusters[1].account
    for cluster in clusters:
        nodes = Node.objects.fleet().filter(cluster=cluster)
        assert nodes.count() == 20
        assert Pod.objects.fleet().filter(cluster=cluster).count() == 20 * 2 + fleet_bench.PENDING_PER_CLUSTER
        reserved = set(nodes.exclude(reservation=None).values_list("reservation", flat=True))
        assert reserved, "some of its nodes run in reservations"
        # Only in reservations its account sees (owned, or shared with it through RAM).
        assert reserved <= set(CapacityReservation.objects.fleet().visible_to(cluster).values_list("pk", flat=True))
    shared = CapacityReservation.objects.fleet().filter(visibilities__shared=True).distinct().count()
    assert 0 < shared < 12

    figures = fleet_bench.run_round(clusters, fleet_bench.Meter())

    assert set(figures) == {fleet_bench.EC2_STEP, *fleet_bench.STEPS}
    for step in fleet_bench.STEPS:
        assert len(figures[step]) == 2
    assert all(run["queries"] > 0 and run["wall"] > 0 for runs in figures.values() for run in runs)
    runs = TaskRun.objects.filter(cluster__in=clusters, task__in=fleet_bench.STEPS)
    assert sorted(runs.values_list("task", "status")) == sorted((step, "succeeded") for step in fleet_bench.STEPS * 2)
    # The pending pods fit no node of theirs: each provisioning run plans new ones.
    assert all(run.counts["claims_planned"] > 0 for run in runs.filter(task="provision"))
    rows = fleet_bench.report(2, figures, 20)
    assert [row[1] for row in rows] == [fleet_bench.EC2_STEP, *fleet_bench.STEPS]


def test_a_cluster_step_reads_no_more_when_other_clusters_are_added(db, observe):
    """The benchmark's flat line, in queries and in the rows the database reads: a cluster's
    Kubernetes, provisioning and lifecycle steps read the same before and after three more clusters
    (three times its rows) join the fleet. Sequential scans are discouraged, as the planner does on
    the large tables of a real fleet: a query not narrowed to the cluster by an index reads the
    other clusters' rows too, and shows here."""
    now = timezone.now()
    fleet_bench.seed_shared(now, reservations=12)
    fleet_bench.seed_clusters(now, 0, 1, nodes=20, pods_per_node=2)
    first = Cluster.objects.select_related("account").get(name="fleet-000")
    # One moment throughout: the simulated workloads stand still, so each run finds the same world.
    with time_machine.travel(now, tick=False):
        fleet_bench.run_round([first], fleet_bench.Meter())  # the first run writes conditions; then steady
        before = read_by_steps(first)

        fleet_bench.seed_clusters(now, 1, 4, nodes=20, pods_per_node=2)
        first.refresh_from_db()
        # Their nodes took units of the reservations it sees: its conditions change once, then steady.
        fleet_bench.run_round([first], fleet_bench.Meter())

        assert read_by_steps(first) == before


def read_by_steps(cluster) -> dict[str, tuple[int, int]]:
    """Per step: (queries, tuples the database read for them) on `cluster`."""
    from scheduling import tasks

    meter, read = fleet_bench.Meter(), {}
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL enable_seqscan = off")
    for step in fleet_bench.STEPS:
        tuples = tuples_read()
        figures = meter.measure(lambda: tasks.cluster_step(step, cluster.pk))
        read[step] = (figures["queries"], tuples_read() - tuples)
    return read


def tuples_read() -> int:
    """Rows this transaction's scans have read so far, every table (PostgreSQL's statistics views;
    0 on SQLite, where the query counts alone are compared)."""
    if connection.vendor != "postgresql":
        return 0
    with connection.cursor() as cursor:
        cursor.execute("SELECT COALESCE(SUM(seq_tup_read + COALESCE(idx_tup_fetch, 0)), 0) FROM pg_stat_xact_user_tables")
        return int(cursor.fetchone()[0])
