"""Issue #49: the DisruptionBlocked event reads do-not-disrupt as the engine does: a duration
blocks only until that long after the pod started, and a terminating pod blocks nothing."""

from datetime import timedelta

import pytest
from django.utils import timezone

from scheduling.loop.kube_events import blocked_and_unconsolidatable
from scheduling.models import Mode
from tests.factories.scheduling import NodeClaimFactory, NodeFactory, NodePoolFactory, PodFactory

pytestmark = pytest.mark.django_db


def blocked_by(**pod_fields):
    pool = NodePoolFactory(name="general", mode=Mode.CONTROL)
    node = NodeFactory(name="node-a", node_pool=pool, node_claim=NodeClaimFactory(name="claim-a", node_pool=pool))
    PodFactory(name="guarded", node=node, node_name=node.name, phase="Running", **pod_fields)
    return [e for e in blocked_and_unconsolidatable() if e.reason == "DisruptionBlocked"]


def test_a_running_duration_blocks():
    now = timezone.now()
    assert blocked_by(annotations={"karpenter.sh/do-not-disrupt": "10m"}, started_at=now - timedelta(minutes=1))


def test_an_elapsed_duration_does_not_block():
    now = timezone.now()
    assert not blocked_by(annotations={"karpenter.sh/do-not-disrupt": "10m"}, started_at=now - timedelta(hours=1))


def test_a_terminating_pod_does_not_block():
    assert not blocked_by(annotations={"karpenter.sh/do-not-disrupt": "true"}, deleting_since=timezone.now())
