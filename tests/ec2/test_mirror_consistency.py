"""#47 (11): one consistent mirror. After every EC2 sync a reservation's total, available, used, capacity
allocations and "last seen" agree with each other and with what EC2 answered, through the loop's real EC2 step
against the EC2 test server (instances launched into the reservation and terminated over boto3), and the admin
page shows the same figures."""

import re

import pytest

from reservations.models import CapacityReservation
from scheduling.loop import steps
from tests.support.ec2_fixtures import *  # noqa: F403 - the EC2 test server and providers

pytestmark = pytest.mark.django_db
ZONE = "us-east-1a"


@pytest.fixture(autouse=True)
def _aws(aws_test_credentials, settings, provider, monkeypatch):
    settings.KARPWEB_PROVIDER = "aws"
    from scheduling.loop import backends

    monkeypatch.setattr(backends, "cloud", lambda: provider)  # the loop's EC2 provider, on the test server


def launch_into(raw_ec2, reservation_id: str, count: int) -> list[str]:
    image = raw_ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    answer = raw_ec2.run_instances(
        ImageId=image, InstanceType="m5.large", MinCount=count, MaxCount=count, Placement={"AvailabilityZone": ZONE},
        CapacityReservationSpecification={"CapacityReservationTarget": {"CapacityReservationId": reservation_id}})
    return [i["InstanceId"] for i in answer["Instances"]]


def assert_agrees(reservation_id: str, *, total: int, used: int, seen_at) -> CapacityReservation:
    row = CapacityReservation.objects.get(reservation_id=reservation_id)
    assert (row.total_instance_count, row.available_instance_count, row.used_instance_count) == (total, total - used, used)
    assert row.capacity_allocations == ([{"AllocationType": "used", "Count": used}] if used else [])
    assert row.last_seen == seen_at
    return row


def test_counts_allocations_and_last_seen_agree_after_every_sync(world, clock, raw_ec2, admin_user_client, time_machine):
    rid = world.add_reservation("m5.large", ZONE, 10, tags={"team": "web"})
    instances = launch_into(raw_ec2, rid, 6)
    time_machine.move_to(clock(), tick=False)
    steps.sync_ec2(clock())
    assert_agrees(rid, total=10, used=6, seen_at=clock())

    raw_ec2.terminate_instances(InstanceIds=instances[:4])
    clock.advance(seconds=30)  # the next sync
    time_machine.move_to(clock(), tick=False)
    steps.sync_ec2(clock())
    row = assert_agrees(rid, total=10, used=2, seen_at=clock())

    page = admin_user_client.get(f"/admin/reservations/capacityreservation/{row.pk}/change/").content.decode()
    for label, value in (("Total", "10"), ("Available", "8"), ("Used", "2"), ("Capacity allocations", "used: 2"),
                         ("Last seen \\(UTC\\)", "2026-11-21 12:00:30Z")):
        assert re.search(rf"{label}:</label>\s*<div class=\"readonly\">{value}</div>", page), label
    listing = admin_user_client.get("/admin/reservations/capacityreservation/").content.decode()
    assert "2 / 8 / 10 (20%)" in listing
