"""ReservationCapacityExceeded on launch, through the loop (provisioning.provision) with the EC2
provider pointed at the EC2 test server: the reservation is marked unavailable until the next
sync, the decision is FAILED with the code, and the next provision run plans on-demand."""

import pytest

from reservations.models import CapacityReservation
from scheduling.adapters.ec2.launch import NODECLAIM_TAG
from scheduling.adapters.ec2.sync import sync_reservations
from scheduling.loop import provisioning
from scheduling.loop.simulated import SimulatedCluster
from scheduling.models import Decision, NodeClaim, Offering

from . import worlds

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("aws")]


def running_instances(raw_ec2):
    answer = raw_ec2.describe_instances(Filters=[{"Name": "instance-state-name", "Values": ["running"]}])
    return [i for r in answer["Reservations"] for i in r["Instances"]]


def claim_tag(instance):
    return {t["Key"]: t["Value"] for t in instance.get("Tags", [])}.get(NODECLAIM_TAG)


def test_a_full_reservation_fails_the_launch_and_the_next_run_goes_on_demand(world, clock, provider, raw_ec2, settings):
    settings.KARPWEB_MODE = "control"
    reservation = worlds.build(world, provider, clock(), units=2, pods=1)
    cluster = SimulatedCluster()
    # Someone else (another cluster, a console launch) took the last units: EC2 knows, karpweb does not.
    world.set_available(reservation, 0)
    assert provider.available_instance_count(reservation) == 2
    assert CapacityReservation.objects.get(reservation_id=reservation).available_instance_count == 2

    synced_at = clock()
    clock.advance(seconds=5)
    first = provisioning.provision(provider, cluster, now=clock())

    assert (first["claims_planned"], first["launched"], first["launch_failures"]) == (1, 0, 1)
    failed = Decision.objects.get(kind=Decision.Kind.LAUNCH)
    assert failed.outcome == Decision.Outcome.FAILED
    assert failed.error.startswith("ReservationCapacityExceeded: ")
    assert failed.reservation.reservation_id == reservation
    assert "the launch failed (ReservationCapacityExceeded)" in failed.reason
    assert not running_instances(raw_ec2) and not NodeClaim.objects.exists()
    # Marked unavailable until the next sync: in the provider and where the engine reads it.
    assert provider.available_instance_count(reservation) == 0
    row = CapacityReservation.objects.get(reservation_id=reservation)
    assert row.available_instance_count == 0 and row.total_instance_count == 2
    assert not Offering.objects.get(reservation=row).available
    assert row.last_seen == clock() != synced_at  # refreshed from EC2 after the refusal, and still no free unit

    second = provisioning.provision(provider, cluster, now=clock())

    assert (second["claims_planned"], second["launched"], second["launch_failures"]) == (1, 1, 0)
    acted = Decision.objects.get(kind=Decision.Kind.LAUNCH, outcome=Decision.Outcome.ACTED)
    assert "went to on-demand" in acted.reason and f"reservation {reservation} is full" in acted.reason
    claim = NodeClaim.objects.get()
    assert (claim.capacity_type, claim.reservation_label) == ("on-demand", "")
    [instance] = running_instances(raw_ec2)
    assert claim_tag(instance) == claim.name and "CapacityReservationId" not in instance
    assert claim.provider_id.endswith(instance["InstanceId"])

    # The next sync brings EC2's count back, and reserved capacity is used again.
    world.set_available(reservation, 1)
    clock.advance(minutes=2)
    assert sync_reservations(provider, now=clock()).errors == []
    assert provider.available_instance_count(reservation) == 1
    assert Offering.objects.get(reservation__reservation_id=reservation).available
    worlds.pending_pod("late")
    third = provisioning.provision(provider, cluster, now=clock())
    assert third["launched"] == 1
    newest = NodeClaim.objects.exclude(pk=claim.pk).get()
    assert (newest.capacity_type, newest.reservation_label) == ("reserved", reservation)
    assert world.reservation(reservation)["AvailableInstanceCount"] == 0
    # Refreshed from EC2 right after the launch, not at the next sync: the next batch sees no unit.
    row = CapacityReservation.objects.get(reservation_id=reservation)
    assert (row.available_instance_count, row.total_instance_count) == (0, 2)
    assert not Offering.objects.get(reservation=row).available
