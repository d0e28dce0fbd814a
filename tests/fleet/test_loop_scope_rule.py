"""Issue #46: every loop step runs in its cluster's scope, from its row, whatever the number of
clusters; loop code that touches Kubernetes-side rows with no scope open raises (fleet.scope.require_scope)."""

import pytest

from fleet import scope
from fleet.scope import NoClusterScope, cluster_scope, default_cluster, unscoped
from scheduling import tasks
from scheduling.loop import backends, steps
from scheduling.loop.runs import run_step
from scheduling.loop.simulated import SimulatedCluster
from scheduling.models import Node, NodePool, Pod, TaskRun
from tests.factories.scheduling import NodeFactory, PodFactory

pytestmark = pytest.mark.django_db


def test_a_step_that_reads_pods_with_no_scope_raises_and_its_run_says_why():
    PodFactory(name="web-1")  # outside loop code, unscoped as before: the default cluster's
    with pytest.raises(NoClusterScope, match="Pod: loop code touched Kubernetes-side rows with no cluster scope"):
        run_step("probe", lambda: {"pods": Pod.objects.count()})
    run = TaskRun.objects.get(task="probe")
    assert run.status == TaskRun.Status.FAILED
    assert run.error.splitlines()[0] == (
        "NoClusterScope: Pod: loop code touched Kubernetes-side rows with no cluster scope open; run it in "
        "fleet.scope.cluster_scope(cluster), or in fleet.scope.unscoped() where it works on the whole fleet")


def test_a_save_or_a_related_read_with_no_scope_raises_too():
    node = NodeFactory(name="node-1")
    with pytest.raises(NoClusterScope, match="^Node: "):
        run_step("probe", lambda: node.save() or {})
    with pytest.raises(NoClusterScope, match="^Pod: "):
        run_step("probe-related", lambda: {"pods": node.pods.count()})
    with pytest.raises(NoClusterScope, match="^NodePool: "):
        run_step("probe-create", lambda: NodePool(name="made-in-a-step").save() or {})
    assert not NodePool.objects.filter(name="made-in-a-step").exists()


def test_the_same_step_in_a_scope_or_said_fleet_wide_runs():
    PodFactory(name="web-1")
    here = default_cluster()
    with cluster_scope(here):
        assert run_step("in-a-scope", lambda: {"pods": Pod.objects.count()}).status == TaskRun.Status.SUCCEEDED

    def fleet_wide():
        with unscoped():
            pods = Pod.objects.count()
            NodeFactory(name="made-fleet-wide")  # to the default cluster, said on purpose
        return {"pods": pods, "nodes": Node.objects.fleet().count()}

    run = run_step("fleet-wide", fleet_wide)
    assert run.status == TaskRun.Status.SUCCEEDED and run.counts["pods"] == Pod.objects.count()
    assert Node.objects.get(name="made-fleet-wide").cluster_id == here.pk
    # A fleet-wide block around the step does not carry in: the step says itself where it is fleet-wide.
    with unscoped(), pytest.raises(NoClusterScope):
        run_step("around", lambda: {"pods": Pod.objects.count()})


def test_outside_loop_code_unscoped_reads_and_writes_as_before():
    PodFactory(name="web-1")
    assert Pod.objects.filter(name="web-1").count() == 1
    assert NodeFactory(name="node-1").cluster_id == default_cluster().pk


def test_the_settings_made_cluster_alone_runs_scoped_from_its_row(settings, monkeypatch):
    """The fleet's one cluster, made from the settings, runs in its scope; changing the settings after
    its row exists changes nothing the loop does (here: its row says simulated, the settings a real
    cluster at a kubeconfig that does not exist)."""
    only = default_cluster()
    assert only.connection == only.Connection.SIMULATED and len(scope.fleet_clusters(fresh=True)) == 1
    settings.KARPWEB_CLUSTER = "kubernetes"
    settings.KARPWEB_KUBECONFIG = "/nonexistent/kubeconfig"
    backends.forget()
    seen = {}

    def probe(now=None):
        seen["scope"] = scope.current_cluster()
        seen["adapter"] = backends.cluster()
        return {"pools": NodePool.objects.count()}  # in loop code: raises unless the scope is open

    monkeypatch.setattr(steps, "status", probe)
    assert tasks.sync_kubernetes.name  # the dispatcher of a fleet of one runs the step here, at once
    counts = tasks.run_on("status", only, "scoped-probe")
    assert counts["pools"] == NodePool.objects.count()
    assert seen["scope"] == only and isinstance(seen["adapter"], SimulatedCluster)
    assert TaskRun.objects.get(task_id="scoped-probe").cluster_id == only.pk


def test_a_row_that_cannot_be_used_says_which_field(settings):
    from scheduling.adapters.kube.config import ClusterConfigError

    settings.KARPWEB_KUBECONFIG_DIR = "/nonexistent-dir"
    only = default_cluster()
    only.connection, only.kubeconfig = only.Connection.KUBECONFIG, ""
    only.save()
    backends.forget()
    with cluster_scope(default_cluster()), pytest.raises(ClusterConfigError, match="^kubeconfig: cluster .* names none"):
        backends.cluster()
    only.kubeconfig = "/etc/elsewhere/kubeconfig"
    only.save()
    with cluster_scope(default_cluster()), pytest.raises(ClusterConfigError,
                                                         match="^kubeconfig: cluster .* outside KARPWEB_KUBECONFIG_DIR"):
        backends.cluster()
    backends.forget()
