"""Provisioning runs the engine only when a pod waits: at thousands of nodes an engine run takes
seconds, and most of the time nothing is pending."""

import pytest

from scheduling.loop import provisioning, steps
from scheduling.models import Pod

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def engine_runs(monkeypatch):
    runs = []
    real = provisioning.simulate_readable
    monkeypatch.setattr(provisioning, "simulate_readable", lambda *a, **k: runs.append(1) or real(*a, **k))  # counts, runs it
    return runs


def test_no_engine_run_while_nothing_waits(demo, engine_runs, settings):
    settings.KARPWEB_MODE = "control"
    assert Pod.objects.filter(node_name="").exists()
    first = steps.provision()
    assert first["launched"] > 0 and len(engine_runs) == 1
    steps.sync_kubernetes()  # the simulated cluster binds the waiting pods to the launched nodes
    Pod.objects.filter(node_name="").update(phase="Succeeded")  # anything left over finished
    assert steps.provision() == {"claims_planned": 0, "launched": 0, "launch_failures": 0, "relaunched": 0,
                                 "unschedulable": 0, "deferred": 0, "decisions_recorded": 0, "pending_pods": 0}
    assert len(engine_runs) == 1
    Pod.objects.create(namespace="default", name="new", uid="new-1", phase="Pending",
                       spec={"containers": [{"name": "app", "resources": {"requests": {"cpu": "100m"}}}]})
    steps.provision()
    assert len(engine_runs) == 2
