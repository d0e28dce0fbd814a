"""#47 (13): idle Capacity Block units are valued at the block's own price per unit-hour (upfront fee / (units x
block hours)), not the on-demand list price: from an administrator's `block_fee` (CapacityBlockFee, in the admin),
else EC2's DescribeCapacityBlockOfferings for the same type, count and duration (asked by the loop's EC2 step,
through boto3 against the EC2 test server); ODCR units stay at their on-demand rate. The reservation page and the
reservations list say each figure's source."""

from datetime import timedelta
from decimal import Decimal

import pytest
import time_machine
from django.urls import reverse

from reservations.models import CapacityBlockFee, CapacityReservation
from scheduling.adapters.ec2.sync import sync_catalogue
from scheduling.loop import steps
from scheduling.models import AuditEntry
from tests.support.ec2_fixtures import *  # noqa: F403 - the EC2 test server and providers
from tests.support.ec2_server import CAPACITY_BLOCK_HOUR_PRICE

pytestmark = pytest.mark.django_db
ZONE = "us-east-1a"
OFFERINGS = "DescribeCapacityBlockOfferings"


@pytest.fixture(autouse=True)
def _aws(aws_test_credentials, settings, provider, monkeypatch):
    settings.KARPWEB_PROVIDER = "aws"
    from scheduling.loop import backends

    monkeypatch.setattr(backends, "cloud", lambda: provider)  # the loop's EC2 provider, on the test server


@pytest.fixture
def synced(world, clock, time_machine, provider):
    """A two-day p5 block (2 units, 1 used) and an m5.large ODCR (4 idle), after the loop's EC2 step."""
    now = clock()
    sync_catalogue(provider, now=now)  # the on-demand list prices
    block = world.add_capacity_block("p5.48xlarge", ZONE, 2, start=now - timedelta(days=1), end=now + timedelta(days=1))
    world.set_available(block, 1)
    odcr = world.add_reservation("m5.large", ZONE, 4, tags={"team": "web"})
    time_machine.move_to(now, tick=False)
    steps.sync_ec2(now)
    return {"block": block, "odcr": odcr, "now": now}


def page_of(client, reservation_id: str) -> str:
    return client.get(CapacityReservation.objects.get(reservation_id=reservation_id).get_absolute_url()).content.decode()


def test_the_ec2_step_values_an_idle_block_unit_at_ec2s_offerings(synced, world, admin_user_client, clock):
    asked = world.calls_of(OFFERINGS)
    assert [(c.params["InstanceType"], int(c.params["InstanceCount"]), int(c.params["CapacityDurationHours"]))
            for c in asked] == [("p5.48xlarge", 2, 48)]  # the block's shape; none for the ODCR
    fee = CapacityBlockFee.objects.get(reservation_id=synced["block"])
    assert fee.estimated_fee == Decimal(f"{48 * 2 * CAPACITY_BLOCK_HOUR_PRICE:.2f}") and fee.estimated_hours == 48
    # 1 idle unit at $3,020.54 / (2 x 48 h), not the p5's $98.32 list price.
    page = page_of(admin_user_client, synced["block"])
    assert "$31.46/h" in page and "(EC2 offerings estimate: $3,020.54 / (2 units x 48 h))" in page
    assert "$98.32/h" not in page
    # The ODCR's idle units stay at their on-demand rate, said as such.
    assert "$0.3840/h <span class=\"muted idle-source\">(on-demand list price)</span>" in page_of(admin_user_client, synced["odcr"])
    listing = admin_user_client.get(reverse("reservations:list")).content.decode()
    assert "(EC2 offerings estimate: $3,020.54 / (2 units x 48 h))" in listing and "$98.32/h" not in listing
    # The next sync asks again for nothing: the estimate of this duration is known.
    clock.advance(seconds=30)
    steps.sync_ec2(clock())
    assert len(world.calls_of(OFFERINGS)) == 1


def test_an_entered_block_fee_comes_before_the_estimate_and_is_refused_by_field(synced, admin_user_client):
    add = reverse("admin:reservations_capacityblockfee_add")
    fee = CapacityBlockFee.objects.get(reservation_id=synced["block"])
    change = reverse("admin:reservations_capacityblockfee_change", args=[fee.pk])
    refused = admin_user_client.post(change, {"reservation_id": synced["block"], "block_fee": "0"}).content.decode()
    assert "0 is not a fee" in refused and "field-block_fee" in refused
    odcr = admin_user_client.post(add, {"reservation_id": synced["odcr"], "block_fee": "100"}).content.decode()
    assert "is an ODCR, not a Capacity Block" in odcr and "field-reservation_id" in odcr
    unknown = admin_user_client.post(add, {"reservation_id": "cr-nothing", "block_fee": "100"}).content.decode()
    assert "cr-nothing&#x27; is known" in unknown and "field-reservation_id" in unknown
    assert CapacityBlockFee.objects.count() == 1 and CapacityBlockFee.objects.get().block_fee is None

    assert admin_user_client.post(change, {"reservation_id": synced["block"], "block_fee": "4800"}).status_code == 302
    assert AuditEntry.objects.filter(source=AuditEntry.Source.ADMIN, action=AuditEntry.Action.CHANGE).exists()
    page = page_of(admin_user_client, synced["block"])  # $4,800 / (2 x 48 h) = $50 a unit-hour, 1 idle
    assert "$50.00/h <span class=\"muted idle-source\">(block fee entered: $4,800.00 / (2 units x 48 h))</span>" in page


def test_the_provider_asks_ec2_once_an_hour_and_says_none_for_a_duration_ec2_does_not_sell(provider, world, clock):
    fee = provider.capacity_block_fee_estimate("trn2.48xlarge", 4, 72)
    assert fee == pytest.approx(72 * 4 * CAPACITY_BLOCK_HOUR_PRICE)  # the cheaper of the two start dates
    assert provider.capacity_block_fee_estimate("trn2.48xlarge", 4, 72) == fee
    assert len(world.calls_of(OFFERINGS)) == 1  # cached
    clock.advance(seconds=3601)
    provider.capacity_block_fee_estimate("trn2.48xlarge", 4, 72)
    assert len(world.calls_of(OFFERINGS)) == 2
    assert provider.capacity_block_fee_estimate("trn2.48xlarge", 4, 53) is None  # EC2 sells whole days
