"""A static NodePool (`spec.replicas`, alpha upstream) through the loop's real steps on the demo (one
cluster, control mode, the simulated EC2 and cluster, PostgreSQL): provisioning launches its nodes
even when no pod waits, the lifecycle pass deletes the surplus once its replicas drop."""

import datetime

import pytest
import time_machine

from reservations.models import EC2NodeClass
from scheduling.engine.world import TERMINAL_PHASES
from scheduling.loop import steps
from scheduling.models import Decision, NodeClaim, NodePool, Pod

T0 = datetime.datetime(2026, 11, 28, 12, 0, tzinfo=datetime.UTC)
# Tainted so that none of the demo's pods lands on it: its nodes stay empty, as a warm pool's would.
DEDICATED = {"key": "dedicated", "value": "fixed", "effect": "NoSchedule"}


@pytest.fixture
def clock(transactional_db, settings):
    from django.core.management import call_command

    settings.KARPWEB_MODE = "control"
    settings.KARPWEB_PROVIDER = settings.KARPWEB_CLUSTER = "simulated"
    with time_machine.travel(T0, tick=False) as traveller:
        call_command("seed_demo", "--one-cluster", "--now", T0.isoformat())
        yield traveller


def static_pool(replicas: int) -> NodePool:
    node_class = EC2NodeClass.objects.order_by("name").first()
    return NodePool.objects.create(
        name="fixed", uid="fixed-uid", replicas=replicas, node_class=node_class, taints=[DEDICATED],
        node_class_ref={"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": node_class.name},
        requirements=[{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}])


def live_claims(pool) -> list[NodeClaim]:
    return list(NodeClaim.objects.filter(node_pool=pool, deleting_since__isnull=True))


def minute(clock, n):
    now = T0 + datetime.timedelta(minutes=n, seconds=30)
    clock.move_to(now)
    return now


def test_a_static_nodepool_reaches_its_replicas_and_shrinks_when_they_drop(clock):
    now = minute(clock, 0)
    steps.provision(now)  # the demo's pending pods get their nodes first
    steps.sync_kubernetes(now)
    Pod.objects.filter(node_name="").exclude(phase__in=TERMINAL_PHASES).update(phase="Succeeded")
    pool = static_pool(replicas=3)

    now = minute(clock, 1)
    counts = steps.provision(now)  # no pod waits: only the static pool's shortfall makes it run
    claims = live_claims(pool)
    assert len(claims) == 3, counts
    assert all(claim.provider_id for claim in claims)  # launched
    launches = Decision.objects.filter(kind=Decision.Kind.LAUNCH, node_pool=pool, outcome=Decision.Outcome.ACTED)
    assert launches.count() == 3
    assert all(d.objects_involved == {"pods": []} and "static NodePool fixed" in d.reason for d in launches)

    steps.sync_kubernetes(now)
    now = minute(clock, 2)
    steps.provision(now)
    steps.lifecycle(now)
    assert {c.name for c in live_claims(pool)} == {c.name for c in claims}  # kept: neither relaunched nor consolidated

    pool.replicas = 1
    pool.save(update_fields=["replicas"])
    now = minute(clock, 3)
    steps.lifecycle(now)
    [scale_down] = Decision.objects.filter(kind=Decision.Kind.SCALE_DOWN)
    assert scale_down.outcome == Decision.Outcome.ACTED, scale_down.error
    assert len(scale_down.objects_involved["nodes"]) == 2
    assert len(live_claims(pool)) == 1
    steps.provision(minute(clock, 4))
    assert len(live_claims(pool)) == 1  # one is what it keeps now
