"""The EC2 test server sells Capacity Blocks as EC2 does (tests/support/ec2_server_buying.py), through boto3 over
HTTP: an offering quoted is bought once with PurchaseCapacityBlock, the block is payment-pending, then scheduled
until its start, active, and expired at its end; UltraServer offerings for the types sold only inside one."""

from __future__ import annotations

from datetime import timedelta

import pytest
from botocore.exceptions import ClientError

from tests.ec2.conftest import T0


def offerings(raw_ec2, **asked):
    return raw_ec2.describe_capacity_block_offerings(CapacityDurationHours=24, **asked)["CapacityBlockOfferings"]


def state(raw_ec2, rid):
    return raw_ec2.describe_capacity_reservations(CapacityReservationIds=[rid])["CapacityReservations"][0]["State"]


def test_a_quoted_offering_is_bought_once_and_its_block_goes_payment_pending_scheduled_active_expired(world, clock, raw_ec2):
    offer = offerings(raw_ec2, InstanceType="p5.48xlarge", InstanceCount=2)[0]
    bought = raw_ec2.purchase_capacity_block(
        CapacityBlockOfferingId=offer["CapacityBlockOfferingId"], InstancePlatform="Linux/UNIX",
        TagSpecifications=[{"ResourceType": "capacity-reservation", "Tags": [{"Key": "karpweb:purchase", "Value": "k1"}]}])
    r = bought["CapacityReservation"]
    assert (r["State"], r["ReservationType"], r["InstanceType"], r["TotalInstanceCount"], r["InstanceMatchCriteria"]) == (
        "payment-pending", "capacity-block", "p5.48xlarge", 2, "targeted")
    assert (r["StartDate"], r["EndDate"]) == (offer["StartDate"], offer["EndDate"])
    assert {"Key": "karpweb:purchase", "Value": "k1"} in r["Tags"]
    assert bought["CapacityBlocks"][0]["CapacityReservationIds"] == [r["CapacityReservationId"]]
    rid = r["CapacityReservationId"]
    found = raw_ec2.describe_capacity_reservations(Filters=[{"Name": "tag:karpweb:purchase", "Values": ["k1"]}])
    assert [c["CapacityReservationId"] for c in found["CapacityReservations"]] == [rid]

    with pytest.raises(ClientError) as again:  # an offering is sold once
        raw_ec2.purchase_capacity_block(CapacityBlockOfferingId=offer["CapacityBlockOfferingId"], InstancePlatform="Linux/UNIX")
    assert again.value.response["Error"]["Code"] == "InvalidParameterValue"
    assert offer["CapacityBlockOfferingId"] not in {o["CapacityBlockOfferingId"] for o in
                                                    offerings(raw_ec2, InstanceType="p5.48xlarge", InstanceCount=2)}

    clock.advance(minutes=1)
    assert state(raw_ec2, rid) == "scheduled"
    world.clock.set(offer["StartDate"] - timedelta(seconds=1))
    assert state(raw_ec2, rid) == "scheduled"
    world.clock.set(offer["StartDate"])
    assert state(raw_ec2, rid) == "active"
    assert raw_ec2.describe_capacity_blocks()["CapacityBlocks"][0]["State"] == "active"
    world.clock.set(offer["EndDate"])
    assert state(raw_ec2, rid) == "expired"


@pytest.mark.parametrize(("asked", "code"), [
    ({"CapacityBlockOfferingId": "cb-0123456789abcdef0", "InstancePlatform": "Linux/UNIX"}, "InvalidParameterValue"),
    ({"CapacityBlockOfferingId": "QUOTED", "InstancePlatform": "Plan 9"}, "InvalidParameterValue"),
    ({"CapacityBlockOfferingId": "QUOTED", "InstancePlatform": "Linux/UNIX", "DryRun": True}, "DryRunOperation"),
])
def test_a_purchase_ec2_refuses_buys_nothing(world, clock, raw_ec2, asked, code):
    quoted = offerings(raw_ec2, InstanceType="p5.48xlarge", InstanceCount=1)[0]["CapacityBlockOfferingId"]
    with pytest.raises(ClientError) as refused:
        raw_ec2.purchase_capacity_block(**{**asked, "CapacityBlockOfferingId": asked["CapacityBlockOfferingId"].replace("QUOTED", quoted)})
    assert refused.value.response["Error"]["Code"] == code
    assert raw_ec2.describe_capacity_reservations()["CapacityReservations"] == []


def test_an_offering_whose_start_has_passed_is_no_longer_sold(world, clock, raw_ec2):
    offer = offerings(raw_ec2, InstanceType="p5.48xlarge", InstanceCount=1)[0]
    world.clock.set(offer["StartDate"])
    with pytest.raises(ClientError, match="expired"):
        raw_ec2.purchase_capacity_block(CapacityBlockOfferingId=offer["CapacityBlockOfferingId"], InstancePlatform="Linux/UNIX")


def test_ultraserver_types_are_quoted_as_ultraservers_only(world, clock, raw_ec2):
    assert offerings(raw_ec2, InstanceType="p6e-gb200.36xlarge", InstanceCount=9) == []
    ultra = offerings(raw_ec2, UltraserverType="u-p6e-gb200x36", UltraserverCount=2)
    assert ultra and all((o["InstanceType"], o["InstanceCount"], o["UltraserverType"], o["UltraserverCount"]) ==
                         ("p6e-gb200.36xlarge", 18, "u-p6e-gb200x36", 2) for o in ultra)
    bought = raw_ec2.purchase_capacity_block(CapacityBlockOfferingId=ultra[0]["CapacityBlockOfferingId"],
                                             InstancePlatform="Linux/UNIX")
    assert bought["CapacityBlocks"][0]["UltraserverType"] == "u-p6e-gb200x36"
    with pytest.raises(ClientError, match="UltraserverCount"):
        offerings(raw_ec2, UltraserverType="u-p6e-gb200x36", UltraserverCount=0)
