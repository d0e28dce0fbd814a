"""The fleet scale benchmark (scripts/fleet_bench.py) at a tiny size, so that the command cannot rot,
and the property it measures: a cluster's loop steps read that cluster's rows, not the fleet's."""

import re

import pytest
import time_machine
from django.apps import apps
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from fleet.managers import ClusterScopedManager
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


def test_a_cluster_step_reads_only_its_cluster_and_no_more_with_more_clusters(db, observe):
    """The benchmark's flat line, in the SQL: a cluster's Kubernetes, provisioning and lifecycle steps
    make the same queries before and after three more clusters (three times its rows) join the fleet,
    and every one that reads a Kubernetes-side table narrows it to the cluster (cluster_id, or a
    primary key it already holds). A read of the fleet's rows would cost every cluster's step more
    with each cluster added."""
    now = timezone.now()
    fleet_bench.seed_shared(now, reservations=12)
    fleet_bench.seed_clusters(now, 0, 1, nodes=20, pods_per_node=2)
    first = Cluster.objects.select_related("account").get(name="fleet-000")
    # One moment throughout: the simulated workloads stand still, so each run finds the same world.
    with time_machine.travel(now, tick=False):
        fleet_bench.run_round([first], fleet_bench.Meter())  # the first run writes conditions; then steady
        before = queries_of_steps(first)

        fleet_bench.seed_clusters(now, 1, 4, nodes=20, pods_per_node=2)
        first.refresh_from_db()
        # Their nodes took units of the reservations it sees: its conditions change once, then steady.
        fleet_bench.run_round([first], fleet_bench.Meter())
        after = queries_of_steps(first)

    assert {step: len(sqls) for step, sqls in after.items()} == {step: len(sqls) for step, sqls in before.items()}
    fleet_wide = [(step, sql) for step, sqls in after.items() for sql in sqls if unnarrowed(sql)]
    assert fleet_wide == []


SCOPED_TABLES = {model._meta.db_table for model in apps.get_models()
                 if isinstance(model._default_manager, ClusterScopedManager)}
FROM_TABLE = re.compile(r'FROM "(\w+)"(?: (U\d+))?')


def unnarrowed(sql: str) -> list[str]:
    """The Kubernetes-side tables `sql` reads (FROM, subqueries too) without narrowing them to one
    cluster or to rows it names by key."""
    if not sql.startswith(("SELECT", "UPDATE", "DELETE")):
        return []
    tables = []
    for table, alias in FROM_TABLE.findall(sql):
        name = re.escape(alias or f'"{table}"')
        if table in SCOPED_TABLES and not re.search(name + r'\."(cluster_id|id|node_claim_id|node_id)" (=|IN)', sql):
            tables.append(table)
    return tables


def queries_of_steps(cluster) -> dict[str, list[str]]:
    from scheduling import tasks

    queries = {}
    for step in fleet_bench.STEPS:
        with CaptureQueriesContext(connection) as captured:
            tasks.cluster_step(step, cluster.pk)
        queries[step] = [query["sql"] for query in captured.captured_queries]
    return queries


def test_a_read_of_every_clusters_rows_is_told_apart():
    """What the check above looks for, on SQL the loop makes."""
    assert unnarrowed('SELECT "scheduling_pod"."id" FROM "scheduling_pod" WHERE "scheduling_pod"."node_name" = \'\'') \
        == ["scheduling_pod"]
    assert unnarrowed('SELECT "scheduling_pod"."id" FROM "scheduling_pod" WHERE ("scheduling_pod"."cluster_id" = 3 '
                      'AND "scheduling_pod"."node_name" = \'\')') == []
    assert unnarrowed('SELECT U0."instance_type" FROM "scheduling_instancetype" WHERE "scheduling_instancetype"."name" IN '
                      '(SELECT U0."instance_type" FROM "scheduling_node" U0)') == ["scheduling_node"]
    assert unnarrowed('SELECT "scheduling_instancetype"."id" FROM "scheduling_instancetype" WHERE "scheduling_instancetype"'
                      '."name" IN (SELECT U0."instance_type" FROM "scheduling_node" U0 WHERE U0."cluster_id" = 3)') == []


def test_a_consolidation_of_many_nodes_names_them_within_the_subject_column():
    """At 1,000 nodes a multi-node consolidation named 40 nodes in its decision's subject: longer than
    the column, and the lifecycle step failed writing it."""
    from scheduling.loop.recording import SUBJECT_LENGTH, nodes_subject

    names = [f"ip-10-1-{i}-4.ec2.internal" for i in range(40)]
    subject = nodes_subject(names)
    assert len(subject) <= SUBJECT_LENGTH == 255
    assert subject.startswith("nodes ip-10-1-0-4.ec2.internal, ip-10-1-1-4.ec2.internal, ")
    shown = subject.split(" and ")[0].removeprefix("nodes ").split(", ")
    assert subject.endswith(f" and {40 - len(shown)} more") and shown == names[:len(shown)]
    assert nodes_subject(names[:2]) == "nodes ip-10-1-0-4.ec2.internal, ip-10-1-1-4.ec2.internal"
    assert nodes_subject(names[:1]) == "node ip-10-1-0-4.ec2.internal"
