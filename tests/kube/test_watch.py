"""The watch process against the real kube-apiserver: pending pods created in a burst make one
provisioning batch, run once the window has been quiet for its idle time; a second replica waits
for the lease and provisions nothing; without a Kubernetes cluster the command says why."""

import contextlib
import threading
import time

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from kubernetes.client.exceptions import ApiException

from scheduling.loop import leases
from scheduling.loop.watch import LEASE, WatchLoop
from scheduling.models import WatchState
from tests.support.clusters import use_cluster, use_kube_server

from . import helpers as h

pytestmark = [pytest.mark.kube, pytest.mark.django_db(transaction=True)]


def start(loop: WatchLoop, lead: bool = True) -> tuple[threading.Thread, threading.Event]:
    """Run the loop in a thread; with `lead`, return once it holds the lease (20 s at most)."""
    stop = threading.Event()

    def run():
        try:
            loop.run(stop=stop)
        finally:
            connection.close()  # the thread's own, as manage.py watch closes it: else it outlives the test database

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    deadline = time.monotonic() + 20
    while lead and not loop.leading and time.monotonic() < deadline:
        time.sleep(0.05)
    return worker, stop


def wait_for(condition, seconds: float = 30.0) -> None:
    """Until ``condition()`` holds (read while the loop's thread writes: a miss is read again)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if condition():
                return
        except (KeyError, RuntimeError):
            pass
        time.sleep(0.05)
    raise AssertionError(f"not within {seconds} s")


def test_a_burst_of_pending_pods_is_one_batch_after_the_quiet(rest, adapter, unique, settings, kube_server):
    use_kube_server(kube_server)
    batches = []
    loop = WatchLoop(adapter, provision=lambda: batches.append(time.monotonic()), idle_seconds=0.8, max_seconds=5)
    worker, stop = start(loop)
    try:
        deadline = time.monotonic() + 20
        time.sleep(2.0)  # the initial list (and any batch its pending pods open) is done
        batches.clear()
        ns = h.namespace(rest, f"watch-{unique}")
        created = []
        for index in range(3):
            h.pod(rest, ns, f"burst-{index}", node_selector={})
            created.append(time.monotonic())
            time.sleep(0.25)
        while not batches and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1.5)  # nothing more comes
    finally:
        stop.set()
        worker.join(10)
    assert len(batches) == 1, batches
    state = WatchState.current()  # what the overview and /metrics show
    assert state.holder == "" and state.events >= 3 and state.batches >= 1 and state.last_event_at is not None
    assert 0 <= state.lag_seconds < 5 and state.world_as_of >= state.last_event_at
    reaction = batches[0] - created[-1]
    print(f"reaction: one batch {reaction:.2f} s after the last of 3 pending pods (idle window 0.8 s)")
    assert 0.8 <= reaction < 3.0, reaction  # the idle time after the last pod, not a 10 s beat or a 30 s poll


def test_a_static_nodepool_short_of_its_replicas_opens_a_batch(rest, adapter, unique, settings, kube_server):
    """No pod waits: a NodePool created with spec.replicas is what opens the batch (upstream's static
    provisioning reconciles on a NodePool's creation and on a change of its replicas)."""
    use_kube_server(kube_server)
    batches = []
    loop = WatchLoop(adapter, provision=lambda: batches.append(time.monotonic()), idle_seconds=0.5, max_seconds=5)
    worker, stop = start(loop)
    try:
        time.sleep(2.0)  # the initial list (and any batch its pending pods open) is done
        batches.clear()
        h.ec2nodeclass(rest, f"nc-{unique}")
        h.nodepool(rest, f"dynamic-{unique}", node_class=f"nc-{unique}")  # no replicas: nothing to launch
        time.sleep(1.5)
        assert batches == []
        h.nodepool(rest, f"fixed-{unique}", node_class=f"nc-{unique}", replicas=2)
        wait_for(lambda: batches, 10)
    finally:
        stop.set()
        worker.join(10)
        for name in (f"fixed-{unique}", f"dynamic-{unique}"):  # the server is shared with later tests
            with contextlib.suppress(ApiException):  # not created: the test failed before it
                rest.delete(h.NODEPOOL, name)


def test_a_second_replica_waits_for_the_lease(adapter, settings, kube_server):
    use_kube_server(kube_server)
    assert leases.acquire(LEASE, "the-other-replica")
    batches = []
    result = WatchLoop(adapter, provision=lambda: batches.append(1)).run(duration=1.5)
    assert result == {"leading": False, "batches": 0, "lifecycles": 0} and batches == []
    leases.release(LEASE, "the-other-replica")


def test_the_command_needs_a_cluster(settings):
    use_cluster(connection="simulated")
    with pytest.raises(CommandError, match="needs a real Kubernetes cluster"):
        call_command("watch", duration=0.1)


def test_the_periodic_sync_counts_what_the_watch_missed(rest, adapter, unique, settings, client):
    """With a watch process leading, objects the full sync still had to change are counted as drift."""
    from django.utils import timezone

    from scheduling.adapters.kube.sync import ClusterSync
    from scheduling.loop.watch import count_drift
    from scheduling.models import EventCount

    sync = ClusterSync(adapter)
    sync.sync_once()
    assert count_drift(sync.sync_once(), timezone.now()) == 0  # nobody watches: nothing is drift
    assert leases.acquire(LEASE, "a-watch-process")
    ns = h.namespace(rest, f"drift-{unique}")
    h.pod(rest, ns, "missed", node_selector={})  # a change the (pretend) watch did not deliver
    assert count_drift(sync.sync_once(), timezone.now()) >= 1
    assert EventCount.objects.get(name="kubernetes_drift", label="Pod").value >= 1
    assert 'karpweb_kubernetes_drift_repairs_total{kind="Pod"}' in client.get("/metrics").content.decode()
    leases.release(LEASE, "a-watch-process")


def test_while_a_watch_leads_the_periodic_sync_lists_once_per_resync_interval(adapter, settings, monkeypatch, kube_server):
    """The safety net: every beat lists every kind while nobody watches; while a watch process
    holds its lease, only once per KARPWEB_KUBERNETES_RESYNC_SECONDS (Karpenter's detection still
    runs at every beat)."""
    import datetime

    import time_machine
    from django.utils import timezone

    from scheduling.loop import backends, steps

    use_kube_server(kube_server)
    settings.KARPWEB_KUBERNETES_RESYNC_SECONDS = 2
    monkeypatch.setattr(backends, "cluster", lambda: adapter)
    assert steps.sync_kubernetes()["lists"] > 0
    assert steps.sync_kubernetes()["lists"] > 0  # nobody watches: every beat lists
    assert leases.acquire(LEASE, "a-watch-process")
    try:
        first = steps.sync_kubernetes()
        assert first["lists"] > 0 and "karpenter_live" in first
        skipped = steps.sync_kubernetes()
        assert skipped["lists"] == 0 and "karpenter_live" in skipped
        # The interval passes: the leases read timezone.now(), so time moves on and nobody waits.
        with time_machine.travel(timezone.now() + datetime.timedelta(seconds=2.2), tick=True):
            assert steps.sync_kubernetes()["lists"] > 0
    finally:
        leases.release(LEASE, "a-watch-process")


def test_a_replica_that_dies_holding_the_lease_is_replaced_within_the_lease_time(adapter, settings, kube_server):
    """A second replica provisions nothing while the first holds the lease, and leads once a first
    that died without releasing it (killed, OOM) lets it lapse."""
    import datetime

    use_kube_server(kube_server)
    ttl = datetime.timedelta(seconds=2)
    assert leases.acquire(LEASE, "killed-replica", ttl)  # it took the lease, then died
    died = time.monotonic()
    second = WatchLoop(adapter, provision=lambda: None, lease_ttl=ttl)
    worker, stop = start(second, lead=False)
    try:
        time.sleep(1.0)
        assert not second.leading and leases.holder(LEASE) == "killed-replica"
        while not second.leading and time.monotonic() - died < 10:
            time.sleep(0.05)
        took_over = time.monotonic() - died
    finally:
        stop.set()
        worker.join(10)
    print(f"takeover: the second replica led {took_over:.2f} s after the first died (lease {ttl.total_seconds():.0f} s)")
    assert second.leading is False and 2.0 <= took_over < 4.0  # the lease time, plus at most one 1 s wait


def test_the_kept_world_follows_the_watch(rest, adapter, unique, settings, kube_server):
    """Pods created, changed and deleted through the API server reach the kept world through the
    watch; every provisioning batch plans from it exactly what a fresh rebuild plans."""
    from scheduling.loop.keptworld import KeptWorld
    from tests.loop.test_kept_world import fresh_plan

    from scheduling.engine.simulate import simulate
    from django.utils import timezone

    use_kube_server(kube_server)
    kept = KeptWorld()
    compared = []

    def provision():
        now = timezone.now()
        compared.append(simulate(kept.world(now)) == fresh_plan(now))

    loop = WatchLoop(adapter, provision=provision, idle_seconds=0.3, max_seconds=3, kept=kept, check_seconds=3600)
    worker, stop = start(loop)
    try:
        # Each step waits for the watch to deliver the last one (not a fixed time: a busy machine
        # delivers late), and for the batch it opened to be planned.
        ns = h.namespace(rest, f"kept-{unique}")
        for index in range(4):
            h.pod(rest, ns, f"kept-{index}", node_selector={}, cpu="300m")
        wait_for(lambda: (ns, "kept-3") in kept.pods and compared)
        rest.delete(h.POD, "kept-0", namespace=ns)
        rest.patch(h.POD, "kept-1", {"metadata": {"labels": {"tier": "batch"}}}, namespace=ns)
        h.node(rest, f"kept-node-{unique}")
        wait_for(lambda: (ns, "kept-0") not in kept.pods
                 and kept.pods[(ns, "kept-1")][0]["metadata"].get("labels") == {"tier": "batch"})
        batches = len(compared)
        h.pod(rest, ns, "kept-late", node_selector={}, cpu="2")
        wait_for(lambda: (ns, "kept-late") in kept.pods and len(compared) > batches)
    finally:
        stop.set()
        worker.join(10)
    assert len(compared) >= 2 and all(compared), compared
    assert kept.check() == {}
    assert (ns, "kept-0") not in kept.pods and (ns, "kept-late") in kept.pods
    assert kept.pods[(ns, "kept-1")][0]["metadata"]["labels"] == {"tier": "batch"}


def test_the_watch_process_runs_the_lifecycle_pass_and_the_beat_leaves_it_to_it(adapter, settings, monkeypatch, kube_server):
    """While it leads, the watch process runs the lifecycle pass on its kept world every
    KARPWEB_LIFECYCLE_SECONDS (never while a batch window is open); the beat's lifecycle run, meanwhile,
    does nothing, so the pass never runs twice."""
    from scheduling.loop import backends, steps
    from scheduling.loop.keptworld import KeptWorld

    use_kube_server(kube_server)
    monkeypatch.setattr(backends, "cluster", lambda: adapter)
    kept = KeptWorld()
    passes = []
    loop = WatchLoop(adapter, provision=lambda: None, kept=kept, check_seconds=3600, lifecycle_seconds=1,
                     lifecycle=lambda: passes.append((time.monotonic(), kept.loaded)))
    worker, stop = start(loop)
    try:
        wait_for(lambda: len(passes) >= 2, seconds=20)
        assert steps.lifecycle() == {"skipped": "the watch process runs the lifecycle pass on the world it keeps"}
    finally:
        stop.set()
        worker.join(10)
    assert len(passes) >= 2 and all(loaded for _, loaded in passes), passes  # on a loaded kept world
    assert all(later - earlier >= 0.9 for (earlier, _), (later, _) in zip(passes, passes[1:]))  # 1 s apart
    loop.window.trigger(0.0)  # pods wait for their batch: the pass waits for it
    assert not loop._lifecycle_due(100.0, None)
    loop.window.close()
    assert loop._lifecycle_due(100.0, None) and not loop._lifecycle_due(100.5, 100.0)
    assert "skipped" not in steps.lifecycle()  # the watch stopped: the beat runs the pass again


def test_the_watch_command_runs_the_lifecycle_pass_on_its_kept_world(adapter, settings, monkeypatch, kube_server):
    """`manage.py watch` as operators start it: once the first lists are in, it runs the lifecycle
    pass (a `lifecycle` task run, done in this process on the kept world) and says so when it stops."""
    import io

    from scheduling.loop import backends
    from scheduling.models import TaskRun

    use_kube_server(kube_server)
    monkeypatch.setattr(backends, "cluster", lambda: adapter)
    out = io.StringIO()
    call_command("watch", duration=4, stdout=out)
    passes = TaskRun.objects.filter(task="lifecycle")
    assert passes.count() == 1 and passes.get().status == TaskRun.Status.SUCCEEDED, list(passes.values())
    assert "skipped" not in passes.get().counts and "status_node_pools_changed" in passes.get().counts
    assert "1 lifecycle pass" in out.getvalue()
