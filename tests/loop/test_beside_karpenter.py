"""KARPWEB_KARPENTER=present on the simulated world: the loop plans, recommends and acts on nothing."""

import pytest

from scheduling.loop import steps
from scheduling.models import Decision, NodeClaim, NodePool, SimulatedInstance

pytestmark = pytest.mark.django_db


def test_declared_karpenter_means_no_launch_no_disruption(demo_world, settings, caplog):
    settings.KARPWEB_MODE = "control"
    settings.KARPWEB_KARPENTER = "present"
    NodePool.objects.update(mode="control")  # even pools set to control by hand
    claims, instances = NodeClaim.objects.count(), SimulatedInstance.objects.count()
    counts = steps.provision()
    assert counts["claims_planned"] > 0 and counts["launched"] == 0
    assert "control mode refused, recommending only: KARPWEB_KARPENTER=present" in caplog.text
    lifecycle = steps.lifecycle()
    assert lifecycle["demote_acted"] == 0 and lifecycle["consolidate_planned"] >= 1
    assert NodeClaim.objects.count() == claims and SimulatedInstance.objects.count() == instances
    outcomes = set(Decision.objects.exclude(kind="status").values_list("outcome", flat=True))
    assert outcomes <= {"recommended", "skipped"} and "recommended" in outcomes
    assert set(Decision.objects.exclude(kind="status").values_list("mode", flat=True)) == {"observe"}

    settings.KARPWEB_KARPENTER = "auto"  # the simulated world runs no Karpenter: control again
    assert steps.provision()["launched"] > 0
