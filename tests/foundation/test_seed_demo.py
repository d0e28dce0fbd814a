import datetime

import pytest
from django.core.management import call_command
from django.db.models import F

from fleet.scope import cluster_scope, default_cluster
from reservations.models import CapacityReservation, EC2NodeClass, UtilizationSample
from scheduling.models import InstanceType, Node, NodeClaim, NodePool, Offering, Pod, SimulatedInstance

pytestmark = pytest.mark.django_db

NOW = "2026-11-21T12:00:00Z"
MODELS = [CapacityReservation, UtilizationSample, EC2NodeClass, InstanceType, Offering, NodePool, NodeClaim, Node, Pod,
          SimulatedInstance]


def snapshot():
    rows = {}
    for model in MODELS:
        rows[model.__name__] = sorted(
            tuple(sorted((k, repr(v)) for k, v in row.items() if k != "id" and not k.endswith("_id")))
            for row in model.objects.values()
        )
    return rows


def test_seed_demo_twice_gives_the_same_world():
    call_command("seed_demo", now=NOW)
    first = snapshot()
    call_command("seed_demo", now=NOW)
    assert snapshot() == first


def test_seed_demo_world_has_what_operators_look_at():
    call_command("seed_demo", now=NOW)
    now = datetime.datetime(2026, 11, 21, 12, tzinfo=datetime.UTC)
    assert set(Offering.objects.values_list("zone", flat=True)) == {"us-east-1a", "us-east-1b", "us-east-1c"}
    assert InstanceType.objects.count() >= 20
    assert 6 <= CapacityReservation.objects.count() <= 14
    # One future-dated ODCR, scheduled with its commitment (issue #37).
    future = CapacityReservation.objects.get(state="scheduled", reservation_type="default")
    assert future.start_date > now and future.commitment_end_date > future.start_date and future.committed_instance_count
    blocks = CapacityReservation.objects.filter(reservation_type="capacity-block")
    assert blocks.filter(end_date__gt=now, end_date__lte=now + datetime.timedelta(hours=1)).exists()
    assert CapacityReservation.objects.filter(reservation_type="default").exists()
    assert CapacityReservation.objects.filter(
        state="active", available_instance_count=F("total_instance_count")
    ).exists(), "one reservation should sit idle"
    # The first cluster's three pools, two in staging-use1 (one caught in the open-reservation trap), one in research-use1.
    with cluster_scope(default_cluster()):
        assert NodePool.objects.count() == 3
    assert NodePool.objects.count() == 6
    assert set(Node.objects.values_list("capacity_type", flat=True)) == {"reserved", "on-demand", "spot"}
    assert NodeClaim.objects.count() == Node.objects.count()
    assert Pod.objects.filter(node_name="").exists() and Pod.objects.exclude(node_name="").exists()
    assert SimulatedInstance.objects.count() == Node.objects.count()
    assert SimulatedInstance.objects.get(reservation_id="", instance_type="r5.large").capacity_type == "on-demand"
    reserved_nodes = Node.objects.filter(capacity_type="reserved", reservation__state="active")
    for reservation in CapacityReservation.objects.filter(state="active"):
        assert reserved_nodes.filter(reservation=reservation).count() == reservation.used_instance_count


def test_seed_demo_rejects_bad_now():
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="--now"):
        call_command("seed_demo", now="yesterday")


def test_seed_demo_writes_the_history_recommendations_need():
    """15 days of hourly use (a block's only since it started) and every recommendation kind computed (move and
    split too: the committed reservation beside a full one of its shape)."""
    from reservations.models import Recommendation, UtilizationHour

    call_command("seed_demo", now=NOW)
    now = datetime.datetime(2026, 11, 21, 12, tzinfo=datetime.UTC)
    odcr = CapacityReservation.objects.get(reservation_id="cr-0a1b2c3d4e5f60001")
    assert UtilizationHour.objects.filter(reservation=odcr, hour__gte=now - datetime.timedelta(days=14)).count() >= 14 * 24
    block = CapacityReservation.objects.get(reservation_id="cr-0a1b2c3d4e5f60006")
    assert not UtilizationHour.objects.filter(reservation=block, hour__lt=block.start_date - datetime.timedelta(hours=1)).exists()
    assert set(Recommendation.objects.values_list("kind", flat=True)) == set(Recommendation.Kind.values) - {"reclaim"}  # the loop reclaims (tests/ec2/test_lending.py)
    for node in Node.objects.filter(reservation__reservation_type="capacity-block"):
        assert node.created_at >= node.reservation.start_date, f"{node.name} is older than its Capacity Block"


@pytest.mark.parametrize("setting,value", [("KARPWEB_CLUSTER", "kubernetes"), ("KARPWEB_PROVIDER", "aws")])
def test_seed_demo_refuses_a_real_cluster_or_account(settings, setting, value):
    from django.core.management.base import CommandError

    setattr(settings, setting, value)
    with pytest.raises(CommandError, match=f"Not seeding the demo world: .*{setting}={value}"):
        call_command("seed_demo", now=NOW)
    assert not CapacityReservation.objects.exists() and not NodePool.objects.exists()


def test_run_skips_the_demo_against_a_real_cluster(tmp_path):
    """`./karpweb.sh run` seeds with --skip-if-real; that command, in its own process with a real cluster's
    settings, writes nothing and says why (exit 0, so run goes on)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    script = (root / "karpweb.sh").read_text()
    run = script[script.index("run() {"):script.index("test_suite() {")]
    assert "manage.py seed_demo --skip-if-real" in run and "manage.py seed_demo\n" not in run
    env = {**os.environ, "KARPWEB_CLUSTER": "kubernetes", "KARPWEB_PROVIDER": "aws",
           "DATABASE_URL": f"sqlite:///{tmp_path / 'untouched.sqlite3'}"}
    done = subprocess.run([sys.executable, "manage.py", "seed_demo", "--skip-if-real"], cwd=root, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "Not seeding the demo world" in done.stdout and "KARPWEB_CLUSTER=kubernetes and KARPWEB_PROVIDER=aws" in done.stdout
    assert "Demo world written" not in done.stdout
    refused = subprocess.run([sys.executable, "manage.py", "seed_demo"], cwd=root, env=env, capture_output=True, text=True,
                             timeout=120)
    assert refused.returncode != 0 and "Not seeding the demo world" in refused.stderr


def test_every_demo_node_holds_what_its_pods_request():
    """#47 (10): the demo's nodes hold no more than Kubernetes could (their allocatable: the node's capacity
    less kube-reserved, system-reserved and the eviction threshold), counted here from the rows."""
    from django.db.models import Count, Sum

    call_command("seed_demo", now=NOW)
    nodes = Node.objects.fleet().annotate(cpu=Sum("pods__cpu_request_millicores"), memory=Sum("pods__memory_request_bytes"),
                                          pod_count=Count("pods"))
    assert nodes.count() > 30
    for node in nodes:
        assert (node.cpu or 0) <= node.allocatable_cpu_millicores, f"{node.name} ({node.instance_type}): cpu {node.cpu}m"
        assert (node.memory or 0) <= node.allocatable_memory_bytes, f"{node.name} ({node.instance_type}): memory {node.memory}"
        assert node.pod_count <= node.allocatable_pods, node.name


def test_seed_demo_refuses_a_node_that_holds_more_than_it_can(monkeypatch):
    """A demo that would bind more to a node than its allocatable is refused, naming the node, and writes nothing."""
    from django.core.management.base import CommandError

    from scheduling import demo

    monkeypatch.setitem(demo.PINNED_POOL_PODS, "staging-batch", ("batch-hold", {"cpu": 1900, "memory": 2048}))
    with pytest.raises(CommandError) as refused:
        call_command("seed_demo", now=NOW)
    message = str(refused.value)
    assert message.startswith("Not seeding the demo world: the demo world binds more pods to a node than it can hold")
    assert "node ip-10-1-0-8.ec2.internal (c6a.large, NodePool staging-batch): its pods request cpu " in message
    assert "of its allocatable 1930m" in message
    assert not Node.objects.fleet().exists() and not CapacityReservation.objects.fleet().exists()
