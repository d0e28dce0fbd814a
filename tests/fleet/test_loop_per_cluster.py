"""The loop per cluster: two real kube-apiservers as two clusters of one fleet, each Cluster row
connected through a kubeconfig file the server fixture wrote; Celery workers on the real Redis."""

import os
import time

import pytest

from tests.kube.conftest import kube_server, second_kube_server, unique  # noqa: F401 - the API servers (one each per session)
from celery.contrib.testing.worker import start_worker
from django.conf import settings

from fleet.models import AwsAccount, Cluster
from scheduling.adapters.kube.sync import mirrored_kinds
from fleet.scope import cluster_scope, default_cluster
from karpweb.celery import app as celery_app
from scheduling import tasks
from scheduling.adapters.kube.rest import KubeRest
from scheduling.adapters.kube.config import client_from_kubeconfig
from scheduling.loop import backends
from scheduling.models import NodePool, TaskRun
from tests.kube import helpers as h
from tests.support.celery_results import results_through
from tests.support.logging_state import logging_left_as_found

pytestmark = [pytest.mark.kube]


def rest_for(server):
    return KubeRest(client_from_kubeconfig(str(server.kubeconfig)))


@pytest.fixture
def fleet(kube_server, second_kube_server, unique):
    """Two kubeconfig clusters in one account, beside the cluster the migration made (simulated)."""
    account = AwsAccount.objects.create(account_id="111111111111", name=f"acct-{unique}")
    first = Cluster.objects.create(name=f"first-{unique}", account=account, region="us-east-1",
                                   connection=Cluster.Connection.KUBECONFIG, kubeconfig=str(kube_server.kubeconfig),
                                   shard=f"x{unique}")
    second = Cluster.objects.create(name=f"second-{unique}", account=account, region="us-east-1",
                                    connection=Cluster.Connection.KUBECONFIG,
                                    kubeconfig=str(second_kube_server.kubeconfig), shard=f"y{unique}")
    backends.forget()
    yield first, second
    backends.forget()


@pytest.mark.django_db
def test_each_cluster_mirrors_its_own_nodepools(fleet, kube_server, second_kube_server, unique):
    first, second = fleet
    name = f"general-{unique}"  # the same NodePool name in both clusters, with different weights
    h.nodepool(rest_for(kube_server), name, weight=10)
    h.nodepool(rest_for(second_kube_server), name, weight=20)

    for cluster in (first, second):
        assert tasks.run_on("sync_kubernetes", cluster, "test")["lists"] == len(mirrored_kinds())

    mirrored = dict(NodePool.objects.fleet().filter(name=name).values_list("cluster_id", "weight"))
    assert mirrored == {first.pk: 10, second.pk: 20}
    with cluster_scope(second):
        assert NodePool.objects.get(name=name).weight == 20
    runs = TaskRun.objects.filter(task="sync_kubernetes", task_id="test")
    assert sorted(runs.values_list("cluster_id", "status")) == sorted([(first.pk, "succeeded"), (second.pk, "succeeded")])


@pytest.fixture
def fleet_worker(transactional_db, fleet):
    """An in-process worker on the real Redis consuming this test's own default queue and the two
    clusters' shard queues (the migration's cluster moves to the first shard, so that it is served too)."""
    first, second = fleet
    Cluster.objects.filter(pk=default_cluster().pk).update(shard=first.shard)
    # The queue tests/loop's celery_worker uses: the app keeps the queues it first made (amqp.queues).
    own = f"karpweb-test-{os.environ.get('PYTEST_XDIST_WORKER', 'main')}-{os.getpid()}"
    results_through(celery_app, settings.CELERY_BROKER_URL, task_default_queue=own)
    # A worker given queues narrows the app's own list of queues to consume (Queues.select); the
    # next test's worker must consume its queues again, so that list is put back afterwards.
    consumed = celery_app.amqp.queues._consume_from
    try:
        with logging_left_as_found(), start_worker(celery_app, pool="solo", perform_ping_check=False,
                                                   shutdown_timeout=10, queues=[own, first.queue, second.queue]):
            yield celery_app
    finally:
        celery_app.amqp.queues._consume_from = consumed
        results_through(celery_app, None, task_default_queue="celery")


def wait_for(condition, what: str, seconds: float = 60):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.2)
    pytest.fail(f"{what}: not within {seconds} s")


def test_the_dispatcher_sends_one_task_per_cluster_to_its_shard_queue(fleet, fleet_worker):
    first, second = fleet
    result = fleet_worker.send_task("karpweb.sync_kubernetes").get(timeout=60)
    assert result == {"dispatched": 3, f"queue {first.queue}": 2, f"queue {second.queue}": 1}
    assert first.queue == f"karpweb-shard-{first.shard}" and second.queue == f"karpweb-shard-{second.shard}"
    wait_for(lambda: TaskRun.objects.filter(task="sync_kubernetes", status="succeeded").count() == 3,
             "the three clusters' syncs")
    assert set(TaskRun.objects.filter(task="sync_kubernetes").values_list("cluster_id", flat=True)) == \
        {first.pk, second.pk, default_cluster().pk}


def test_a_cluster_whose_api_server_is_down_fails_alone(fleet, fleet_worker, second_kube_server):
    first, second = fleet
    # The broken cluster is served first on the one worker: its failure must not hold the other up.
    Cluster.objects.filter(pk=second.pk).update(name=f"a-{second.name}")
    second_kube_server.stop_apiserver()
    try:
        sent = time.monotonic()
        fleet_worker.send_task("karpweb.sync_kubernetes").get(timeout=60)
        wait_for(lambda: TaskRun.objects.filter(task="sync_kubernetes", cluster=first, status="succeeded").exists(),
                 "the healthy cluster's sync", seconds=30)
        took = time.monotonic() - sent
        wait_for(lambda: TaskRun.objects.filter(task="sync_kubernetes", cluster=second, status="failed").exists(),
                 "the broken cluster's failed run")
    finally:
        second_kube_server.start_apiserver()
    assert took < 20, f"the healthy cluster's sync waited {took:.1f} s"
    failed = TaskRun.objects.filter(task="sync_kubernetes", cluster=second, status="failed").first()
    assert failed.error and "Traceback" in failed.error
    assert not TaskRun.objects.filter(task="sync_kubernetes", cluster=first, status="failed").exists()


def test_watch_follows_each_named_cluster_in_its_scope(transactional_db, fleet, kube_server, second_kube_server,
                                                      unique):
    from io import StringIO

    from django.core.management import call_command

    from scheduling.loop.watch import LEASE
    from scheduling.models import Lease, WatchState

    first, second = fleet
    name = f"watched-{unique}"
    h.nodepool(rest_for(kube_server), name, weight=30)
    h.nodepool(rest_for(second_kube_server), name, weight=40)
    out = StringIO()
    call_command("watch", "--cluster", first.name, "--cluster", second.name, "--duration", "6", stdout=out)

    assert f"watch of {first.name} stopped: led" in out.getvalue()
    assert f"watch of {second.name} stopped: led" in out.getvalue()
    # Each thread wrote its own cluster's rows and heartbeat, under its own lease.
    assert dict(NodePool.objects.fleet().filter(name=name).values_list("cluster_id", "weight")) == \
        {first.pk: 30, second.pk: 40}
    assert set(WatchState.objects.fleet().exclude(heartbeat_at=None).values_list("cluster_id", flat=True)) >= \
        {first.pk, second.pk}
    assert {f"{LEASE}:cluster-{first.pk}", f"{LEASE}:cluster-{second.pk}"} <= \
        set(Lease.objects.values_list("name", flat=True))


@pytest.mark.django_db
def test_watch_refuses_an_unknown_cluster_or_shard(fleet):
    from django.core.management import CommandError, call_command

    with pytest.raises(CommandError, match="no cluster is named nowhere"):
        call_command("watch", "--cluster", "nowhere", "--duration", "0")
    with pytest.raises(CommandError, match="no cluster is in shard 'none'"):
        call_command("watch", "--shard", "none", "--duration", "0")
    with pytest.raises(CommandError, match="needs a real Kubernetes cluster"):
        call_command("watch", "--cluster", default_cluster().name, "--duration", "0")


@pytest.mark.django_db
def test_a_kubeconfig_kept_in_a_secret_reaches_its_cluster(settings, kube_server, second_kube_server, unique):
    """Cluster.kubeconfig "secret:<namespace>/<name>/<key>": the kubeconfig is read from a Secret of
    karpweb's own cluster (KARPWEB_KUBECONFIG's), and the cluster it names is the one reached."""
    import base64

    from scheduling.adapters.kube.config import ClusterConfigError
    from scheduling.adapters.kube.resources import NODEPOOL, Resource

    own = rest_for(kube_server)
    ns = h.namespace(own, f"karpweb-{unique}")
    own.create(Resource("Secret", "", "v1", "secrets", namespaced=True), {
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "eu-prod"},
        "data": {"config": base64.b64encode(second_kube_server.inline_kubeconfig()).decode()}}, namespace=ns)
    only_there = f"only-in-the-second-{unique}"
    h.nodepool(rest_for(second_kube_server), only_there)
    settings.KARPWEB_KUBECONFIG = str(kube_server.kubeconfig)
    account = AwsAccount.objects.create(account_id="111111111111", name=f"acct-{unique}")
    eu = Cluster.objects.create(name=f"eu-{unique}", account=account, connection=Cluster.Connection.KUBECONFIG,
                                kubeconfig=f"secret:{ns}/eu-prod/config")
    backends.forget()
    with cluster_scope(eu):
        names = {item["metadata"]["name"] for item in backends.cluster().list(NODEPOOL.kind).items}
    assert only_there in names
    Cluster.objects.filter(pk=eu.pk).update(kubeconfig=f"secret:{ns}/eu-prod")  # the default key: none there
    eu.refresh_from_db()
    with cluster_scope(eu), pytest.raises(ClusterConfigError, match=f"Secret {ns}/eu-prod has no key 'kubeconfig'"):
        backends.cluster()
    backends.forget()


@pytest.mark.django_db
def test_the_last_cluster_left_runs_from_its_own_row_not_the_settings(fleet, kube_server, second_kube_server,
                                                                        unique, settings):
    """Issue #46: the settings describe the cluster they made (here: on the first API server); once it and
    every other cluster are gone, the one left mirrors its own API server, never the settings' one."""
    from fleet.scope import forget_default
    from scheduling.loop.runs import scope_for

    first, second = fleet
    settings.KARPWEB_CLUSTER, settings.KARPWEB_KUBECONFIG = "kubernetes", str(kube_server.kubeconfig)
    name = f"pool-{unique}"
    h.nodepool(rest_for(kube_server), f"{name}-of-the-settings")
    h.nodepool(rest_for(second_kube_server), name)
    made_by_the_settings = default_cluster()
    Cluster.objects.exclude(pk=second.pk).delete()  # the settings' cluster and the first leave
    forget_default()
    with scope_for(second) as scoped:
        assert scoped == second and backends.cluster() is not None
    assert tasks.run_on("sync_kubernetes", second, "test")["lists"] == len(mirrored_kinds())
    mirrored = set(NodePool.objects.fleet().filter(name__startswith=name).values_list("cluster__name", "name"))
    assert mirrored == {(second.name, name)}  # its own server's pool; nothing of the settings' server
    # Unscoped code works on the default cluster: the one left, from its own row too.
    listed = {item["metadata"]["name"] for item in backends.cluster().list("NodePool").items}
    assert name in listed and f"{name}-of-the-settings" not in listed

    # Even named as the settings' cluster and alone, it runs in its scope from its own row (the second
    # server), not from the settings (the first): the settings only made the first cluster.
    Cluster.objects.filter(pk=second.pk).update(name=made_by_the_settings.name)
    forget_default()
    second.refresh_from_db()
    with scope_for(second) as scoped:
        assert scoped == second and backends.current_cluster() == second
        listed = {item["metadata"]["name"] for item in backends.cluster().list("NodePool").items}
    assert name in listed and f"{name}-of-the-settings" not in listed
