"""An hour of simulated time on the simulated world: capacity blocks end, a reservation expires,
and the loop drains and demotes at the right minutes (time-machine moves the clock)."""

import datetime

import pytest
import time_machine

from scheduling.loop import disruption, steps
from scheduling.loop.simulated import SimulatedCloud
from scheduling.models import Decision, Node, SimulatedInstance
from tests.factories.reservations import CapacityReservationFactory, EC2NodeClassFactory
from tests.factories.scheduling import InstanceTypeFactory, NodeClaimFactory, NodeFactory, NodePoolFactory, OfferingFactory
from scheduling.adapters.ec2.interface import LaunchOffering, LaunchRequest

pytestmark = pytest.mark.django_db

T0 = datetime.datetime(2026, 11, 21, 12, 0, tzinfo=datetime.UTC)
RESERVED_LABELS = ("karpenter.k8s.aws/capacity-reservation-id", "karpenter.k8s.aws/capacity-reservation-type",
                   "karpenter.k8s.aws/capacity-reservation-interruptible")


def node_in(reservation, pool, name):
    instance = SimulatedCloud().launch(LaunchRequest(
        nodeclaim_name=f"claim-{name}", nodeclass_name=pool.node_class.name, image_id="",
        offerings=[LaunchOffering(instance_type=reservation.instance_type, zone=reservation.availability_zone,
                                  capacity_type="reserved", price=0.0, reservation_id=reservation.reservation_id,
                                  reservation_type=reservation.reservation_type)]))
    assert instance.ok
    labels = {
        "karpenter.sh/nodepool": pool.name, "karpenter.sh/capacity-type": "reserved",
        "node.kubernetes.io/instance-type": reservation.instance_type, "topology.kubernetes.io/zone": reservation.availability_zone,
        "karpenter.k8s.aws/capacity-reservation-id": reservation.reservation_id,
        "karpenter.k8s.aws/capacity-reservation-type": reservation.reservation_type,
        "karpenter.k8s.aws/capacity-reservation-interruptible": "false",
    }
    claim = NodeClaimFactory(name=f"claim-{name}", node_pool=pool, capacity_type="reserved", reservation=reservation,
                             reservation_label=reservation.reservation_id, labels=labels,
                             instance_type=reservation.instance_type, provider_id=f"aws:///{reservation.availability_zone}/{instance.instance_id}")
    return NodeFactory(name=name, node_pool=pool, node_claim=claim, capacity_type="reserved", reservation=reservation,
                       reservation_label=reservation.reservation_id, labels=labels, instance_type=reservation.instance_type,
                       zone=reservation.availability_zone, provider_id=claim.provider_id, created_at=T0 - datetime.timedelta(days=1))


@pytest.fixture
def world(settings):
    settings.KARPWEB_MODE = "control"
    with time_machine.travel(T0, tick=False):
        for name in ("p5.48xlarge", "trn2.48xlarge", "m5.large"):
            OfferingFactory(instance_type=InstanceTypeFactory(name=name, cpu_millicores=192000, memory_bytes=2**40), price=1.0)
        node_class = EC2NodeClassFactory(name="ml", capacity_reservation_selector_terms=[{"tags": {"team": "ml"}}])
        # Consolidation off: the hour is about drains and demotion (lifecycle would otherwise delete the idle nodes).
        pool = NodePoolFactory(name="ml", node_class=node_class, consolidate_after="Never", requirements=[
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["reserved", "on-demand"]}])
        reservations = {
            "block": CapacityReservationFactory(reservation_id="cr-0block", capacity_block=True, instance_type="p5.48xlarge",
                                                end_date=T0 + datetime.timedelta(minutes=50), tags={"team": "ml"},
                                                total_instance_count=1, available_instance_count=1),
            "ultra": CapacityReservationFactory(reservation_id="cr-0ultra", capacity_block=True, instance_type="trn2.48xlarge",
                                                ultraserver_type="trn2u.48xlarge", end_date=T0 + datetime.timedelta(minutes=100),
                                                tags={"team": "ml"}, total_instance_count=1, available_instance_count=1),
            "odcr": CapacityReservationFactory(reservation_id="cr-0odcr", instance_type="m5.large", tags={"team": "ml"},
                                               end_date=T0 + datetime.timedelta(minutes=40), end_date_type="limited",
                                               total_instance_count=1, available_instance_count=1),
        }
        nodes = {key: node_in(r, pool, f"node-{key}") for key, r in reservations.items()}
        steps.sync_ec2(T0)
    return nodes


def acted_minute(kind, node):
    decision = Decision.objects.filter(kind=kind, subject=f"node {node}", outcome="acted").order_by("created_at").first()
    return None if decision is None else round((decision.created_at - T0).total_seconds() / 60)


def separate_steps():
    steps.expire_capacity_blocks()
    steps.demote()


@pytest.mark.parametrize("minutely", [separate_steps, steps.lifecycle], ids=["separate steps", "lifecycle"])
def test_an_hour_of_blocks_ending_and_a_reservation_expiring(world, minutely, monkeypatch):
    engine_runs = []
    real = disruption.engine_decisions
    monkeypatch.setattr(disruption, "engine_decisions", lambda *a: engine_runs.append(1) or real(*a))  # counts, runs it
    for minute in range(0, 61):
        with time_machine.travel(T0 + datetime.timedelta(minutes=minute), tick=False):
            steps.sync_ec2()
            minutely()
    assert len(engine_runs) == 61 * (2 if minutely is separate_steps else 1)
    assert acted_minute(Decision.Kind.DRAIN, "node-block") == 10   # 50 min block: drain at end - 40
    assert acted_minute(Decision.Kind.DRAIN, "node-ultra") == 30   # UltraServer: drain at end - 70
    assert acted_minute(Decision.Kind.DEMOTE, "node-odcr") == 40   # the ODCR ended at +40
    assert not Node.objects.filter(name__in=["node-block", "node-ultra"]).exists()
    assert SimulatedInstance.objects.filter(state="running", reservation_id__in=["cr-0block", "cr-0ultra"]).count() == 0
    demoted = Node.objects.get(name="node-odcr")
    assert demoted.capacity_type == "on-demand"
    assert not any(label in demoted.labels for label in RESERVED_LABELS)
    assert demoted.labels["karpenter.sh/capacity-type"] == "on-demand"
    waiting = Decision.objects.filter(kind=Decision.Kind.DRAIN, subject="node node-ultra", outcome="scheduled").first()
    assert waiting is not None and "drains at 12:30" in waiting.reason and "cr-0ultra ends at 13:40" in waiting.reason
