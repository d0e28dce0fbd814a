"""One object the engine cannot read (a pod, a NodePool) is left out of planning with a SKIPPED
decision; the loop goes on planning for everything else."""

import pytest

from scheduling.engine.world import WorldError
from scheduling.loop import steps
from scheduling.loop.engine_run import simulate_readable
from scheduling.models import Decision, NodePool, Pod

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def broken_objects(demo):
    Pod.objects.create(namespace="default", name="no-containers", uid="broken-1", phase="Pending",
                       spec={"containers": []})
    NodePool.objects.create(name="typo", node_class=NodePool.objects.first().node_class,
                            requirements=[{"key": "karpenter.sh/capacity-type", "operator": "Between", "values": ["1"]}])


def skipped():
    return {d.subject: d.reason for d in Decision.objects.filter(outcome=Decision.Outcome.SKIPPED)}


def test_the_loop_plans_around_what_it_cannot_read(broken_objects, settings):
    settings.KARPWEB_MODE = "control"
    counts = steps.provision()
    assert counts["launched"] > 0  # the demo's pending pods still get their nodes
    reasons = skipped()
    assert set(reasons) == {"pod default/no-containers", "nodePool typo"}
    assert "spec.containers: must list at least one container" in reasons["pod default/no-containers"]
    assert "Between" in reasons["nodePool typo"]
    # The next steps neither fail nor repeat the news.
    steps.status()
    steps.provision()
    assert Decision.objects.filter(outcome=Decision.Outcome.SKIPPED).count() == 2


def test_a_problem_with_the_world_itself_still_raises(db):
    with pytest.raises(WorldError):
        simulate_readable({"now": "not a time"})
