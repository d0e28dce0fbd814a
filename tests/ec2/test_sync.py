"""A sync pointed at the test server fills the models and the EC2NodeClass status."""

from __future__ import annotations

from datetime import timedelta

import pytest

from reservations.models import CapacityReservation, EC2NodeClass, UtilizationSample
from scheduling.adapters.ec2 import LaunchOffering, LaunchRequest
from scheduling.adapters.ec2.interface import RESERVED
from scheduling.adapters.ec2.sync import sync_catalogue, sync_reservations
from scheduling.models import CapacityType, InstanceType, Offering
from tests.ec2.conftest import T0

pytestmark = pytest.mark.django_db

ZONE_A, ZONE_B = "us-east-1a", "us-east-1b"
OTHER_ACCOUNT = "210987654321"


@pytest.fixture
def synced_catalogue(world, clock, provider):
    return sync_catalogue(provider, now=clock())


def test_catalogue_sync_writes_instance_types_and_offerings(world, clock, provider):
    world.set_spot_price("m5.large", ZONE_A, 0.035, T0 - timedelta(minutes=5))
    stats = sync_catalogue(provider, now=clock())
    assert stats.instance_types == InstanceType.objects.count() >= 11
    m5 = InstanceType.objects.get(name="m5.large")
    assert (m5.cpu_millicores, m5.memory_bytes, m5.max_pods, m5.arch, m5.family, m5.size) == (
        2000, 8 * 2**30, 29, "amd64", "m5", "large",
    )
    assert m5.labels["karpenter.k8s.aws/instance-family"] == "m5"
    p5 = InstanceType.objects.get(name="p5.48xlarge")
    assert (p5.gpu_count, p5.gpu_name) == (8, "H100")
    assert p5.labels["karpenter.k8s.aws/instance-gpu-name"] == "h100"
    od = Offering.objects.get(instance_type=m5, capacity_type=CapacityType.ON_DEMAND, zone=ZONE_A)
    assert od.price == 0.096 and od.available and od.zone_id.startswith("use1-az")
    spot = Offering.objects.get(instance_type=m5, capacity_type=CapacityType.SPOT, zone=ZONE_A)
    assert spot.price == 0.035
    assert stats.price_source == "bundled"

    # A second sync updates in place; a pool that disappears is removed; the ICE cache shows.
    world.clear_spot_prices()
    clock.advance(minutes=6)  # past the catalogue's five-minute cache
    provider.unavailable.mark("m5.large", ZONE_B, CapacityType.ON_DEMAND, "InsufficientInstanceCapacity")
    again = sync_catalogue(provider, now=clock())
    assert again.offerings_created == 0 and again.offerings_removed >= 1
    assert not Offering.objects.filter(capacity_type=CapacityType.SPOT).exists()
    assert not Offering.objects.get(instance_type=m5, capacity_type=CapacityType.ON_DEMAND, zone=ZONE_B).available


def test_reservation_sync_fills_the_models_and_nodeclass_status(world, clock, provider, synced_catalogue):
    ml = world.add_reservation("m5.large", ZONE_A, 4, tags={"team": "ml"}, end=T0 + timedelta(days=2))
    shared = world.add_reservation("m5.xlarge", ZONE_B, 2, owner_id=OTHER_ACCOUNT, match="open")
    block = world.add_capacity_block(
        "p5.48xlarge", ZONE_A, 2, start=T0 - timedelta(hours=1), end=T0 + timedelta(minutes=39), ultraserver_type=""
    )
    upcoming = world.add_capacity_block("p5.48xlarge", ZONE_B, 1, start=T0 + timedelta(days=1), end=T0 + timedelta(days=2))
    ml_class = EC2NodeClass.objects.create(name="ml", capacity_reservation_selector_terms=[{"tags": {"team": "ml"}}])
    gpu_class = EC2NodeClass.objects.create(name="gpu", capacity_reservation_selector_terms=[{"id": block}])
    bad_class = EC2NodeClass.objects.create(name="bad", capacity_reservation_selector_terms=[{"ownerID": OTHER_ACCOUNT}])
    empty_class = EC2NodeClass.objects.create(name="none", capacity_reservation_selector_terms=[{"tags": {"team": "x"}}])

    # One instance in the ML reservation before the sync.
    provider.describe_reservations([{"id": ml}])
    assert provider.launch(
        LaunchRequest("nc-1", "ml", "ami-12c6146b", [LaunchOffering("m5.large", ZONE_A, RESERVED, 1e-8, reservation_id=ml)])
    ).ok

    stats = sync_reservations(provider, now=clock())
    assert stats.errors == []
    assert set(CapacityReservation.objects.values_list("reservation_id", flat=True)) == {ml, shared, block, upcoming}
    row = CapacityReservation.objects.get(reservation_id=ml)
    assert (row.total_instance_count, row.available_instance_count, row.used_instance_count) == (4, 3, 1)
    assert row.tags == {"team": "ml"} and row.end_date == T0 + timedelta(days=2) and row.end_date_type == "limited"
    assert row.region == "us-east-1" and row.arn.endswith(ml) and row.last_seen == clock()
    assert CapacityReservation.objects.get(reservation_id=shared).owner_id == OTHER_ACCOUNT
    assert CapacityReservation.objects.get(reservation_id=block).reservation_type == "capacity-block"
    assert CapacityReservation.objects.get(reservation_id=upcoming).state == "scheduled"

    sample = UtilizationSample.objects.get(reservation__reservation_id=ml)
    assert (sample.used, sample.available, sample.total, sample.sampled_at) == (1, 3, 4, clock())
    assert UtilizationSample.objects.count() == 4

    offering = Offering.objects.get(reservation__reservation_id=ml)
    assert offering.capacity_type == CapacityType.RESERVED and offering.price == 0.096 / 10_000_000
    assert offering.available
    assert not Offering.objects.get(reservation__reservation_id=block).available  # expiring

    ml_class.refresh_from_db()
    assert [e["id"] for e in ml_class.status_capacity_reservations] == [ml]
    assert ml_class.status_capacity_reservations[0]["endTime"] == "2026-11-23T12:00:00Z"
    assert ml_class.condition_status("CapacityReservationsReady") == "True"
    assert list(ml_class.selected_reservations.values_list("reservation_id", flat=True)) == [ml]
    gpu_class.refresh_from_db()
    assert gpu_class.status_capacity_reservations[0]["state"] == "expiring"
    bad_class.refresh_from_db()
    assert bad_class.condition("CapacityReservationsReady")["reason"] == "InvalidSelectorTerms"
    empty_class.refresh_from_db()
    assert empty_class.condition("CapacityReservationsReady")["reason"] == "NoReservationsFound"
    assert empty_class.condition_status("CapacityReservationsReady") == "False"


def test_resync_updates_counts_samples_and_gone_reservations(world, clock, provider, raw_ec2, synced_catalogue):
    keep = world.add_reservation("m5.large", ZONE_A, 2, tags={"team": "ml"})
    cancel = world.add_reservation("m5.large", ZONE_B, 2, tags={"team": "ml"})
    block = world.add_capacity_block("p5.48xlarge", ZONE_A, 1, start=T0, end=T0 + timedelta(hours=3))
    ml_class = EC2NodeClass.objects.create(name="ml", capacity_reservation_selector_terms=[{"tags": {"team": "ml"}}])
    sync_reservations(provider, now=clock())
    assert UtilizationSample.objects.count() == 3

    raw_ec2.cancel_capacity_reservation(CapacityReservationId=cancel)
    world.set_available(keep, 1)
    clock.advance(hours=3)  # the block ends
    stats = sync_reservations(provider, now=clock())
    assert stats.reservations_gone == 2
    assert CapacityReservation.objects.get(reservation_id=cancel).state == "cancelled"
    assert CapacityReservation.objects.get(reservation_id=block).state == "expired"
    assert CapacityReservation.objects.get(reservation_id=keep).available_instance_count == 1
    assert UtilizationSample.objects.filter(reservation__reservation_id=keep).count() == 2
    assert UtilizationSample.objects.filter(reservation__reservation_id=cancel).count() == 1
    assert not Offering.objects.get(reservation__reservation_id=cancel).available
    ml_class.refresh_from_db()
    assert [e["id"] for e in ml_class.status_capacity_reservations] == [keep]


def test_sync_records_api_errors_in_the_conditions(world, clock, provider, synced_catalogue):
    world.add_reservation("m5.large", ZONE_A, 2, tags={"team": "ml"})
    ml_class = EC2NodeClass.objects.create(name="ml", capacity_reservation_selector_terms=[{"tags": {"team": "ml"}}])
    sync_reservations(provider, now=clock())
    before = CapacityReservation.objects.get().available_instance_count

    world.faults.inject("DescribeCapacityReservations", "UnauthorizedOperation", count=10)
    clock.advance(minutes=2)
    stats = sync_reservations(provider, now=clock())
    assert stats.errors and "UnauthorizedOperation" in stats.errors[0]
    ml_class.refresh_from_db()
    condition = ml_class.condition("CapacityReservationsReady")
    assert (condition["status"], condition["reason"]) == ("False", "Unauthorized")
    assert CapacityReservation.objects.get().available_instance_count == before  # rows untouched
