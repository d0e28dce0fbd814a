"""The cluster scope (fleet/scope.py): what the Kubernetes-side models read and write inside and
outside one."""

import threading

import pytest
from django.db import IntegrityError, transaction

from fleet import scope
from fleet.models import Cluster
from scheduling.models import ControllerGuard, Decision, Node, NodePool, Pod, WatchState
from tests.factories.scheduling import NodeFactory, NodePoolFactory, PodFactory

pytestmark = pytest.mark.django_db


def test_a_scope_reads_its_cluster_and_no_scope_reads_the_fleet(two_clusters):
    _home, east, west = two_clusters
    with scope.cluster_scope(east):
        NodePoolFactory(name="web")
        NodePoolFactory(name="batch")
    with scope.cluster_scope(west):
        NodePoolFactory(name="web")
        assert sorted(NodePool.objects.values_list("name", flat=True)) == ["web"]
        assert NodePool.objects.get(name="web").cluster == west
    with scope.cluster_scope(east):
        assert sorted(NodePool.objects.values_list("name", flat=True)) == ["batch", "web"]
    mine = NodePool.objects.filter(cluster__in=[east, west])
    assert sorted(mine.values_list("cluster__name", "name")) == [("east", "batch"), ("east", "web"), ("west", "web")]
    with scope.cluster_scope(west):
        # fleet() and in_cluster() ignore the scope.
        assert NodePool.objects.fleet().filter(cluster__in=[east, west]).count() == 3
        assert NodePool.objects.fleet().in_cluster(east).count() == 2


def test_scopes_nest_and_restore_even_after_an_error(two_clusters):
    home, east, west = two_clusters
    assert scope.current_cluster() is None
    with scope.cluster_scope(east):
        assert scope.current_cluster() == east
        with scope.cluster_scope("west") as by_name:  # by name too
            assert by_name == west and scope.current_cluster() == west
            with scope.unscoped():
                assert scope.current_cluster() is None
            assert scope.current_cluster() == west
        assert scope.current_cluster() == east
        with pytest.raises(ZeroDivisionError), scope.cluster_scope(west):
            1 / 0
        assert scope.current_cluster() == east
    assert scope.current_cluster() is None


def test_a_scope_refuses_what_is_not_a_saved_cluster(two_clusters):
    with pytest.raises(Cluster.DoesNotExist, match='cluster: no cluster is named "nowhere"'):
        with scope.cluster_scope("nowhere"):
            pass
    with pytest.raises(TypeError, match="saved Cluster"):
        with scope.cluster_scope(Cluster(name="unsaved")):
            pass


def test_rows_created_without_a_cluster_go_to_the_scope_else_the_default(two_clusters):
    home, east, _west = two_clusters
    with scope.cluster_scope(east):
        pool = NodePool.objects.create(name="in-east")
        decision = Decision.objects.create(kind="launch", mode="observe", subject="pod a/b", reason="because")
    outside = NodePool.objects.create(name="outside")
    assert (pool.cluster, decision.cluster, outside.cluster) == (east, east, home)
    assert home.is_default  # the migration flagged the cluster it made


def test_two_clusters_may_each_have_a_nodepool_default_but_one_cluster_only_one(two_clusters):
    _home, east, west = two_clusters
    for cluster in (east, west):
        with scope.cluster_scope(cluster):
            NodePool.objects.create(name="default")
            PodFactory(namespace="default", name="web-0")
            NodeFactory(name="ip-10-0-0-1.ec2.internal")
    assert NodePool.objects.filter(name="default", cluster__in=[east, west]).count() == 2
    assert Pod.objects.filter(namespace="default", name="web-0", cluster__in=[east, west]).count() == 2
    with scope.cluster_scope(east):
        for make in (lambda: NodePool.objects.create(name="default"),
                     lambda: Pod.objects.create(namespace="default", name="web-0"),
                     lambda: Node.objects.create(name="ip-10-0-0-1.ec2.internal")):
            with pytest.raises(IntegrityError), transaction.atomic():
                make()


def test_related_managers_follow_the_scope_and_foreign_keys_do_not(two_clusters):
    _home, east, west = two_clusters
    with scope.cluster_scope(east):
        node = NodeFactory(name="n1")
        PodFactory(name="p1", node=node, node_name="n1")
    with scope.cluster_scope(east):
        assert [p.name for p in node.pods.all()] == ["p1"]
        pod = Pod.objects.get(name="p1")
    with scope.cluster_scope(west):
        assert list(node.pods.all()) == []  # east's rows are not west's
        assert pod.node == node  # a row's own link reads through the base manager, in any scope


def test_a_thread_starts_unscoped_unless_its_target_is_carried(two_clusters):
    _home, east, _west = two_clusters
    seen = {}

    def look(key):
        seen[key] = scope.current_cluster()

    with scope.cluster_scope(east):
        plain = threading.Thread(target=look, args=("plain",))
        carried = threading.Thread(target=scope.carry(look), args=("carried",))
        plain.start(), carried.start()
        plain.join(), carried.join()
    assert seen == {"plain": None, "carried": east}


def test_default_cluster_is_cached_forgotten_on_change_and_refused_when_ambiguous(two_clusters, django_assert_num_queries):
    home, east, west = two_clusters
    assert scope.default_cluster() == home
    with django_assert_num_queries(0):
        assert scope.working_cluster_id() == home.pk
        NodePool(name="not-saved")  # the default costs no query once cached
    home.is_default = False
    home.save()
    with pytest.raises(scope.NoClusterScope) as refused:
        scope.default_cluster()
    assert "several clusters" in str(refused.value) and "east" in str(refused.value) and "cluster_scope" in str(refused.value)
    with pytest.raises(scope.NoClusterScope):
        NodePool.objects.create(name="where")  # never a guess
    assert scope.working_cluster_id_or_none() is None
    with scope.cluster_scope(west):
        assert NodePool.objects.create(name="here").cluster == west  # a scope needs no default
    west.is_default = True
    west.save()
    assert scope.default_cluster() == west


def test_at_most_one_cluster_is_flagged_default(two_clusters):
    home, east, _west = two_clusters
    east.is_default = True
    with pytest.raises(IntegrityError), transaction.atomic():
        east.save()


def test_an_empty_fleet_gets_its_cluster_from_the_settings(settings, db):
    from fleet.models import AwsAccount

    Cluster.objects.all().delete()  # as a flushed test database has it
    settings.KARPWEB_CLUSTER_NAME = "Prod_EU"
    settings.KARPWEB_CLUSTER = "kubernetes"
    settings.KARPWEB_KUBECONFIG = "/etc/karpweb/kubeconfig"
    cluster = scope.default_cluster()
    assert (cluster.name, cluster.connection, cluster.kubeconfig, cluster.is_default) == (
        "prod-eu", "kubeconfig", "/etc/karpweb/kubeconfig", True)
    assert AwsAccount.objects.get(pk=cluster.account_id).account_id == "000000000000"


def test_watch_state_and_controller_guard_are_one_row_per_cluster(two_clusters):
    home, east, west = two_clusters
    with scope.cluster_scope(east):
        WatchState.record(events=5)
        ControllerGuard.current()
    with scope.cluster_scope(west):
        WatchState.record(events=7)
        assert WatchState.current().events == 7
        assert ControllerGuard.found() is None  # east's guard is not west's
    with scope.cluster_scope(east):
        assert WatchState.current().events == 5
        assert ControllerGuard.found().cluster == east
    assert WatchState.objects.fleet().filter(cluster__in=[east, west]).count() == 2


def test_bulk_created_rows_get_the_scope_and_given_clusters_stay(two_clusters):
    _home, east, west = two_clusters
    with scope.cluster_scope(east):
        NodePool.objects.bulk_create([NodePool(name="bulk-a"), NodePool(name="bulk-b", cluster=west)])
    assert dict(NodePool.objects.filter(name__startswith="bulk-").values_list("name", "cluster__name")) == {
        "bulk-a": "east", "bulk-b": "west"}
