"""The control loop end to end on the simulated world, through a real Celery worker and Redis."""

import threading

import pytest
from django.db import connection

from fleet.scope import default_cluster
from reservations.models import CapacityReservation
from scheduling import tasks
from scheduling.loop import provisioning, steps
from scheduling.loop.runs import run_step, scope_for
from scheduling.loop.simulated import SimulatedCloud, SimulatedCluster
from scheduling.models import Decision, NodeClaim, NodePool, Pod, SimulatedInstance, TaskRun

pytestmark = pytest.mark.django_db(transaction=True)
WAIT = 60


def run(task):
    return task.delay().get(timeout=WAIT)


def launched():
    """Instances the loop launched (the demo seeds the simulated EC2 with its own nodes' instances,
    whose client tokens are the seeded claims' names; karpweb's label is on those too: it runs the demo)."""
    seeded = NodeClaim.objects.filter(uid__startswith="demo-claim-").values("name")
    return SimulatedInstance.objects.exclude(client_token__in=seeded)


def new_claims():
    """The NodeClaims the loop created in this test (not the demo's, which karpweb's label marks too)."""
    return NodeClaim.objects.filter(labels__has_key=provisioning.PROVISIONER_LABEL).exclude(uid__startswith="demo-claim-")


def reserved_in_use():
    return {r.reservation_id: r.used_instance_count for r in CapacityReservation.objects.all()}


def test_each_task_end_to_end(demo, celery_worker, settings):
    settings.KARPWEB_MODE = "control"
    before = reserved_in_use()
    assert run(tasks.sync_ec2)["samples"] == CapacityReservation.objects.filter(state="active").count()
    assert run(tasks.sync_kubernetes)["pods_created"] > 0
    counts = run(tasks.provision)
    assert counts["launched"] == counts["claims_planned"] > 0
    assert run(tasks.status)["node_pools_changed"] >= 0
    assert run(tasks.sync_catalogue) == {"skipped": "the simulated world's catalogue is the seeded one"}
    # Every launched claim has its instance and its registered node; reserved launches took units.
    for claim in new_claims():
        assert claim.provider_id and hasattr(claim, "node")
    launched_reserved = launched().filter(capacity_type="reserved").count()
    assert sum(reserved_in_use().values()) == sum(before.values()) + launched_reserved
    assert launched_reserved > 0, "the demo's pending pods should fill free reserved capacity first"
    lifecycle = run(tasks.lifecycle)  # the demo's expired ODCR node is demoted, an idle node consolidated
    assert lifecycle["demote_acted"] == 1 and lifecycle["consolidate_planned"] >= 1 and "status_node_pools_changed" in lifecycle
    runs = TaskRun.objects.filter(status="succeeded")
    assert set(runs.values_list("task", flat=True)) == {"sync_ec2", "sync_kubernetes", "provision", "status", "sync_catalogue",
                                                       "lifecycle"}
    assert all(r.finished_at >= r.started_at for r in runs)
    assert Decision.objects.filter(kind="launch", outcome="acted").count() == counts["launched"]


def test_observe_mode_acts_on_nothing(demo, celery_worker, settings):
    settings.KARPWEB_MODE = "observe"
    claims, pods = NodeClaim.objects.count(), Pod.objects.filter(node_name="").count()
    counts = run(tasks.provision)
    assert counts["claims_planned"] > 0 and counts["launched"] == 0
    assert NodeClaim.objects.count() == claims and not launched().exists()
    assert Pod.objects.filter(node_name="").count() == pods
    assert set(Decision.objects.filter(kind="launch").values_list("outcome", flat=True)) == {"recommended"}
    assert run(tasks.provision)["decisions_recorded"] == 0, "the same recommendation is not logged twice"


def test_nodepool_override_wins_over_the_global_mode(demo, celery_worker, settings):
    settings.KARPWEB_MODE = "observe"
    NodePool.objects.filter(name="gpu-reserved").update(mode="control")
    run(tasks.provision)
    assert set(launched().values_list("instance_type", flat=True)) == {"p5.48xlarge"}
    assert Decision.objects.get(kind="launch", node_pool__name="gpu-reserved").outcome == "acted"


def test_feature_gate_off_launches_nothing_reserved(demo, celery_worker, settings):
    settings.KARPWEB_MODE = "control"
    settings.KARPWEB_FEATURE_RESERVED_CAPACITY = False
    run(tasks.sync_kubernetes)
    run(tasks.provision)
    assert launched().exists()
    assert not launched().filter(capacity_type="reserved").exists()
    for claim in new_claims():
        assert not any(key.startswith("karpenter.k8s.aws/capacity-reservation") for key in claim.labels)


def test_two_workers_started_together_launch_each_claim_once(demo, settings):
    settings.KARPWEB_MODE = "control"
    steps.sync_kubernetes()
    barrier = threading.Barrier(2)
    errors = []

    def worker():
        try:
            barrier.wait()
            with scope_for(default_cluster()):  # as tasks.run_on runs it
                run_step("provision", steps.provision)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT)
    assert not errors
    statuses = sorted(TaskRun.objects.filter(task="provision").values_list("status", flat=True))
    assert statuses in (["skipped", "succeeded"], ["succeeded", "succeeded"])
    count = launched().count()
    assert count == new_claims().count()
    # Whatever ran second found the capacity already planned: no pod got two nodes.
    assert count == Decision.objects.filter(kind="launch", outcome="acted").count()


def test_killed_between_launch_and_record_relaunches_the_same_instance(demo, celery_worker, settings, monkeypatch):
    settings.KARPWEB_MODE = "control"
    original = SimulatedCluster.set_conditions
    calls = {"n": 0}

    def dies_once(self, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 1:
            raise ConnectionError("worker killed after the launch, before the record")
        return original(self, *args, **kwargs)

    monkeypatch.setattr(SimulatedCluster, "set_conditions", dies_once)
    launches = []
    real_launch = SimulatedCloud.launch
    monkeypatch.setattr(SimulatedCloud, "launch", lambda self, request: launches.append(request.nodeclaim_name) or real_launch(self, request))
    run(tasks.provision)  # fails once, Celery retries with backoff, the retry finishes the launch
    assert TaskRun.objects.filter(task="provision", status="failed").count() == 1
    assert TaskRun.objects.filter(task="provision", status="succeeded").exists()
    first_claim = launches[0]
    # The retry found the instance the first attempt launched (by the claim's tag) and recorded it.
    assert launches.count(first_claim) == 1
    [instance] = SimulatedInstance.objects.filter(client_token=first_claim)
    assert NodeClaim.objects.get(name=first_claim).provider_id.endswith(instance.instance_id)
    assert Decision.objects.filter(subject=f"NodeClaim {first_claim}", outcome="acted").exists()
    assert launched().count() == len(set(launches))


def test_drift_when_the_node_class_no_longer_selects_the_reservation(demo, settings):
    from reservations.models import EC2NodeClass
    from reservations.status import refresh_node_class_status

    settings.KARPWEB_MODE = "observe"
    EC2NodeClass.objects.filter(name="default").update(capacity_reservation_selector_terms=[{"id": "cr-0a1b2c3d4e5f60002"}])
    refresh_node_class_status()
    steps.consolidate()
    drift = Decision.objects.filter(kind="drift")
    assert drift.exists()
    assert all("CapacityReservationDrift" in d.reason and d.outcome == "recommended" for d in drift)
    assert any("cr-0a1b2c3d4e5f60001" in d.reason or "cr-0a1b2c3d4e5f60003" in d.reason for d in drift)


def test_beat_runs_registered_tasks_each_expiring_before_its_next_run(transactional_db):
    import importlib

    from django.apps import apps
    from django_celery_beat.models import PeriodicTask

    from karpweb.celery import app

    # The schedule migrations' own functions (a transactional test's flush removed their rows).
    importlib.import_module("scheduling.migrations.0004_beat_schedules").create(apps, None)
    lifecycle = importlib.import_module("scheduling.migrations.0006_lifecycle_schedule")
    lifecycle.forwards(apps, None)

    def scheduled():
        return {entry.task for entry in PeriodicTask.objects.exclude(name="celery.backend_cleanup")}

    # The four 60 s steps share one engine run in lifecycle.
    assert scheduled() == {"karpweb.sync_ec2", "karpweb.sync_kubernetes", "karpweb.provision", "karpweb.lifecycle",
                           "karpweb.sync_catalogue"}
    for entry in PeriodicTask.objects.select_related("interval"):
        assert entry.task in app.tasks
        assert 0 < entry.expire_seconds < entry.interval.every
    lifecycle.backwards(apps, None)
    assert {"karpweb.consolidate", "karpweb.expire_capacity_blocks", "karpweb.demote", "karpweb.status"} <= scheduled()
    assert "karpweb.lifecycle" not in scheduled()
