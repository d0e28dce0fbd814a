"""Launches with CreateFleet against the test server: reservations, capacity blocks, fallbacks,
throttling and client tokens."""

from __future__ import annotations

from datetime import timedelta

import pytest

from scheduling.adapters.ec2 import LaunchOffering, LaunchRequest
from scheduling.adapters.ec2.interface import ON_DEMAND, RESERVED, SPOT
from scheduling.adapters.ec2.launch import NODECLAIM_TAG, fleet_request, plan
from tests.ec2.conftest import T0

ZONE_A, ZONE_B = "us-east-1a", "us-east-1b"
AMI = "ami-12c6146b"
OD_M5 = 0.096


def reserved(reservation_id, instance_type="m5.large", zone=ZONE_A, price=OD_M5 / 1e7, **kw):
    return LaunchOffering(instance_type, zone, RESERVED, price, reservation_id=reservation_id,
                          reservation_type=kw.pop("reservation_type", "default"), **kw)


def on_demand(instance_type="m5.large", zone=ZONE_A, price=OD_M5):
    return LaunchOffering(instance_type, zone, ON_DEMAND, price)


def spot(instance_type="m5.large", zone=ZONE_A, price=0.04):
    return LaunchOffering(instance_type, zone, SPOT, price)


def request(name, *offerings, **kw):
    return LaunchRequest(nodeclaim_name=name, nodeclass_name="default", image_id=AMI, offerings=list(offerings), **kw)


def server_available(raw_ec2, reservation_id) -> int:
    answer = raw_ec2.describe_capacity_reservations(CapacityReservationIds=[reservation_id])
    return answer["CapacityReservations"][0]["AvailableInstanceCount"]


def instance(raw_ec2, instance_id):
    return raw_ec2.describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"][0]


def template_data(raw_ec2, template_id):
    versions = raw_ec2.describe_launch_template_versions(LaunchTemplateId=template_id)["LaunchTemplateVersions"]
    return versions[0]["LaunchTemplateData"]


def fleet_calls(world):
    return [c.params for c in world.calls_of("CreateFleet")]


def instances_of(raw_ec2, nodeclaim):
    answer = raw_ec2.describe_instances(
        Filters=[{"Name": f"tag:{NODECLAIM_TAG}", "Values": [nodeclaim]}, {"Name": "instance-state-name", "Values": ["running"]}]
    )
    return [i["InstanceId"] for r in answer["Reservations"] for i in r["Instances"]]


@pytest.fixture
def subnets(raw_ec2):
    return {s["AvailabilityZone"]: s["SubnetId"] for s in raw_ec2.describe_subnets()["Subnets"] if s["DefaultForAz"]}


def test_launch_lands_in_the_reservation(world, clock, provider, raw_ec2, subnets):
    r = world.add_reservation("m5.large", ZONE_A, 2)
    provider.describe_reservations([{"id": r}])
    result = provider.launch(request("nc-1", reserved(r), on_demand(), subnet_ids=subnets, tags={"team": "ml"}))
    assert result.ok, result.error_message
    assert (result.capacity_type, result.reservation_id, result.reservation_type) == (RESERVED, r, "default")
    assert (result.instance_type, result.zone) == ("m5.large", ZONE_A)
    assert server_available(raw_ec2, r) == 1
    assert provider.available_instance_count(r) == 1

    launched = instance(raw_ec2, result.instance_id)
    assert launched["CapacityReservationId"] == r
    assert launched["CapacityReservationSpecification"]["CapacityReservationPreference"] == "capacity-reservations-only"
    assert launched["SubnetId"] == subnets[ZONE_A]
    tags = {t["Key"]: t["Value"] for t in launched["Tags"]}
    assert tags[NODECLAIM_TAG] == "nc-1" and tags["team"] == "ml"

    [params] = fleet_calls(world)
    assert params["Type"] == "instant"
    assert params["TargetCapacitySpecification"] == {"TotalTargetCapacity": 1, "DefaultTargetCapacityType": "on-demand"}
    assert params["OnDemandOptions"] == {"AllocationStrategy": "lowest-price"}
    assert params["ClientToken"].startswith("karpweb-")
    [config] = params["LaunchTemplateConfigs"]
    assert config["Overrides"] == [
        {"InstanceType": "m5.large", "AvailabilityZone": ZONE_A, "Priority": OD_M5 / 1e7, "SubnetId": subnets[ZONE_A]}
    ]
    data = template_data(raw_ec2, config["LaunchTemplateSpecification"]["LaunchTemplateId"])
    assert data["CapacityReservationSpecification"] == {
        "CapacityReservationPreference": "capacity-reservations-only",
        "CapacityReservationTarget": {"CapacityReservationId": r},
    }
    assert "InstanceMarketOptions" not in data


def test_one_launch_template_per_reservation(world, clock, provider, raw_ec2):
    a = world.add_reservation("m5.large", ZONE_A, 1)
    b = world.add_reservation("m5.xlarge", ZONE_A, 1)
    provider.describe_reservations([{"instanceMatchCriteria": "targeted"}])
    result = provider.launch(request("nc-1", reserved(a), reserved(b, "m5.xlarge", price=0.192 / 1e7)))
    assert result.reservation_id == a  # the cheaper one
    configs = fleet_calls(world)[0]["LaunchTemplateConfigs"]
    targets = {
        template_data(raw_ec2, c["LaunchTemplateSpecification"]["LaunchTemplateId"])["CapacityReservationSpecification"][
            "CapacityReservationTarget"
        ]["CapacityReservationId"]: [o["InstanceType"] for o in c["Overrides"]]
        for c in configs
    }
    assert targets == {a: ["m5.large"], b: ["m5.xlarge"]}


def test_same_type_and_zone_uses_the_reservation_with_most_capacity(world, clock, provider, raw_ec2):
    small = world.add_reservation("m5.large", ZONE_A, 1)
    big = world.add_reservation("m5.large", ZONE_A, 3)
    provider.describe_reservations([{"instanceMatchCriteria": "targeted"}])
    result = provider.launch(request("nc-1", reserved(small), reserved(big)))
    assert result.reservation_id == big
    assert len(fleet_calls(world)[0]["LaunchTemplateConfigs"]) == 1
    assert server_available(raw_ec2, small) == 1


def test_full_reservation_is_marked_unavailable_not_ice_cached(world, clock, provider, raw_ec2):
    r = world.add_reservation("m5.large", ZONE_A, 1)
    provider.describe_reservations([{"id": r}])
    world.set_available(r, 0)  # taken by someone else since the last sync
    failed = provider.launch(request("nc-1", reserved(r), on_demand()))
    assert not failed.ok
    assert failed.error_code == "ReservationCapacityExceeded"
    assert [(e.code, e.reservation_id, e.capacity_type) for e in failed.errors] == [("ReservationCapacityExceeded", r, RESERVED)]
    assert failed.reservations_marked_unavailable == [r]
    assert provider.available_instance_count(r) == 0
    assert provider.unavailable.keys() == []

    # The next launch of this claim skips the reservation and falls back to on-demand.
    fallback = provider.launch(request("nc-1", reserved(r), on_demand()))
    assert fallback.ok and fallback.capacity_type == ON_DEMAND and fallback.reservation_id is None
    launched = instance(raw_ec2, fallback.instance_id)
    assert "CapacityReservationId" not in launched
    assert launched["CapacityReservationSpecification"]["CapacityReservationPreference"] == "none"
    params = fleet_calls(world)
    assert params[0]["ClientToken"] != params[1]["ClientToken"]

    # Unavailable only until the next sync.
    world.set_available(r, 1)
    clock.advance(minutes=1, seconds=1)
    provider.describe_reservations([{"id": r}])
    assert provider.available_instance_count(r) == 1


def test_every_unfulfillable_code_marks_the_reservation(world, clock, provider):
    r = world.add_reservation("m5.large", ZONE_A, 1)
    provider.describe_reservations([{"id": r}])
    world.faults.fleet_error("InsufficientInstanceCapacity")
    result = provider.launch(request("nc-1", reserved(r)))
    assert result.error_code == "InsufficientInstanceCapacity"
    assert provider.available_instance_count(r) == 0 and provider.unavailable.keys() == []


def test_capacity_block_launch(world, clock, provider, raw_ec2):
    block = world.add_capacity_block("p5.48xlarge", ZONE_B, 2, start=T0 - timedelta(hours=1), end=T0 + timedelta(days=1))
    other = world.add_capacity_block("p5.48xlarge", ZONE_A, 1, start=T0 - timedelta(hours=1), end=T0 + timedelta(days=1))
    provider.describe_reservations([{"instanceMatchCriteria": "targeted"}])
    cb = dict(reservation_type="capacity-block", price=98.32 / 1e7)
    result = provider.launch(request("gpu-1", reserved(block, "p5.48xlarge", ZONE_B, **cb), reserved(other, "p5.48xlarge", ZONE_A, **cb)))
    assert result.ok, result.error_message
    assert (result.reservation_id, result.reservation_type) == (block, "capacity-block")  # the roomier block
    params = fleet_calls(world)[0]
    assert params["TargetCapacitySpecification"]["DefaultTargetCapacityType"] == "capacity-block"
    assert "OnDemandOptions" not in params
    [config] = params["LaunchTemplateConfigs"]
    assert len(config["Overrides"]) == 1  # CreateFleet takes one capacity block per request
    data = template_data(raw_ec2, config["LaunchTemplateSpecification"]["LaunchTemplateId"])
    assert data["InstanceMarketOptions"] == {"MarketType": "capacity-block"}
    launched = instance(raw_ec2, result.instance_id)
    assert launched["InstanceLifecycle"] == "capacity-block" and launched["CapacityReservationId"] == block
    [member] = provider.describe_instances([result.instance_id])
    assert (member.capacity_type, member.reservation_id, member.reservation_type) == (RESERVED, block, "capacity-block")


def test_interruptible_reservation_launch(world, clock, provider, raw_ec2):
    r = world.add_reservation("m5.large", ZONE_A, 1, interruptible=True)
    provider.describe_reservations([{"id": r}])
    result = provider.launch(request("nc-1", reserved(r, interruptible=True)))
    assert result.ok and result.interruptible
    params = fleet_calls(world)[0]
    assert params["TargetCapacitySpecification"]["DefaultTargetCapacityType"] == "reserved-capacity"
    assert params["ReservedCapacityOptions"] == {"ReservationTypes": ["interruptible-capacity-reservation"]}
    [member] = provider.describe_instances([result.instance_id])
    assert member.capacity_type == RESERVED and member.interruptible


def test_on_demand_opts_out_of_open_reservations(world, clock, provider, raw_ec2):
    open_odcr = world.add_reservation("m5.large", ZONE_A, 2, match="open")
    result = provider.launch(request("nc-1", on_demand()))
    assert result.ok and result.capacity_type == ON_DEMAND
    assert "CapacityReservationId" not in instance(raw_ec2, result.instance_id)
    assert server_available(raw_ec2, open_odcr) == 2


def test_insufficient_on_demand_capacity_goes_to_the_ice_cache_for_three_minutes(world, clock, provider):
    world.set_insufficient_capacity("m5.large", ZONE_A)
    result = provider.launch(request("nc-1", on_demand(zone=ZONE_A), on_demand(zone=ZONE_B, price=0.0961)))
    assert result.ok and result.zone == ZONE_B
    assert [(e.code, e.zone) for e in result.errors] == [("InsufficientInstanceCapacity", ZONE_A)]
    assert provider.unavailable.keys() == [("m5.large", ZONE_A, ON_DEMAND)]
    # While cached, the pool is not even offered to CreateFleet.
    provider.launch(request("nc-2", on_demand(zone=ZONE_A), on_demand(zone=ZONE_B, price=0.0961)))
    assert [o["AvailabilityZone"] for o in fleet_calls(world)[-1]["LaunchTemplateConfigs"][0]["Overrides"]] == [ZONE_B]
    clock.advance(minutes=3, seconds=1)
    assert provider.unavailable.keys() == []


def test_no_capacity_anywhere(world, clock, provider):
    world.set_insufficient_capacity("m5.large", ZONE_A)
    result = provider.launch(request("nc-1", on_demand()))
    assert not result.ok and result.error_code == "InsufficientInstanceCapacity"
    again = provider.launch(request("nc-1", on_demand()))
    assert again.error_code == "InsufficientCapacity"  # every offering is in the ICE cache: no call
    assert len(fleet_calls(world)) == 1


def test_spot_launch_and_the_spot_price_ceiling(world, clock, provider, raw_ec2):
    result = provider.launch(request("nc-1", spot(price=0.04), on_demand()))
    assert result.ok and result.capacity_type == SPOT
    params = fleet_calls(world)[0]
    assert params["TargetCapacitySpecification"]["DefaultTargetCapacityType"] == "spot"
    assert params["SpotOptions"] == {"AllocationStrategy": "price-capacity-optimized"}
    [member] = provider.describe_instances([result.instance_id])
    assert member.capacity_type == SPOT
    dearer = provider.launch(request("nc-2", spot(price=0.2), on_demand()))
    assert dearer.capacity_type == ON_DEMAND


def test_throttling_is_survived_without_marking_anything(world, clock, provider, raw_ec2, sleeps):
    r = world.add_reservation("m5.large", ZONE_A, 2)
    provider.describe_reservations([{"id": r}])
    world.faults.throttle("CreateFleet", count=5)
    result = provider.launch(request("nc-1", reserved(r), on_demand()))
    assert result.ok and result.reservation_id == r
    assert sleeps  # our own retries happened after botocore's
    assert instances_of(raw_ec2, "nc-1") == [result.instance_id]
    assert provider.available_instance_count(r) == 1  # the launch, nothing else
    assert provider.unavailable.keys() == []


def test_throttling_inside_fleet_errors_marks_nothing(world, clock, provider):
    r = world.add_reservation("m5.large", ZONE_A, 2)
    provider.describe_reservations([{"id": r}])
    world.faults.fleet_error("RequestLimitExceeded")
    result = provider.launch(request("nc-1", reserved(r)))
    assert not result.ok and result.error_code == "RequestLimitExceeded"
    assert result.reservations_marked_unavailable == []
    assert provider.available_instance_count(r) == 2
    assert provider.unavailable.keys() == []


def test_throttling_that_never_ends_is_a_recorded_failure(world, clock, provider):
    world.faults.throttle("CreateFleet", count=50)
    result = provider.launch(request("nc-1", on_demand()))
    assert not result.ok and result.error_code == "RequestLimitExceeded"
    assert [e.code for e in result.errors] == ["RequestLimitExceeded"]
    assert provider.unavailable.keys() == []


def test_client_token_prevents_a_second_instance(world, clock, provider, raw_ec2, make_provider):
    r = world.add_reservation("m5.large", ZONE_A, 3)
    provider.describe_reservations([{"id": r}])
    first = provider.launch(request("nc-1", reserved(r)))
    again = provider.launch(request("nc-1", reserved(r)))
    assert again.instance_id == first.instance_id
    assert server_available(raw_ec2, r) == 2
    assert provider.available_instance_count(r) == 2  # counted once

    # A restarted controller with other offerings for the same claim finds the instance.
    restarted = make_provider()
    other = restarted.launch(request("nc-1", on_demand(zone=ZONE_B)))
    assert other.instance_id == first.instance_id and other.reservation_id == r
    assert instances_of(raw_ec2, "nc-1") == [first.instance_id]


def test_a_failed_launch_is_not_replayed(world, clock, provider):
    world.set_insufficient_capacity("m5.large", ZONE_A)
    assert not provider.launch(request("nc-1", on_demand())).ok
    clock.advance(minutes=4)  # the ICE entry expires
    world.clear_insufficient_capacity()
    launched = provider.launch(request("nc-1", on_demand()))
    assert launched.ok
    assert provider.launch(request("nc-1", on_demand())).instance_id == launched.instance_id


def test_feature_gate_off_launches_without_reservation_preferences(world, clock, make_provider, raw_ec2):
    provider = make_provider(config={"reserved_capacity": False})
    r = world.add_reservation("m5.large", ZONE_A, 1)
    result = provider.launch(request("nc-1", reserved(r), on_demand()))
    assert result.capacity_type == ON_DEMAND
    config = fleet_calls(world)[0]["LaunchTemplateConfigs"][0]
    assert "CapacityReservationSpecification" not in template_data(raw_ec2, config["LaunchTemplateSpecification"]["LaunchTemplateId"])


def test_launch_template_creation_failure_is_returned(world, clock, provider):
    world.faults.inject("CreateLaunchTemplate", "UnauthorizedOperation", count=1)
    result = provider.launch(request("nc-1", on_demand()))
    assert not result.ok and result.error_code == "UnauthorizedOperation"


# The launch plan on its own (no server needed).


def count_of(counts):
    return lambda rid: counts.get(rid, 0)


def never(*_):
    return False


def test_plan_prefers_default_reservations_on_price_ties():
    offerings = [
        reserved("cr-a", price=1e-8),
        reserved("cr-b", "p5.48xlarge", reservation_type="capacity-block", price=1e-8),
        reserved("cr-c", "m5.xlarge", interruptible=True, price=1e-8),
    ]
    p = plan(offerings, count_of({"cr-a": 1, "cr-b": 1, "cr-c": 1}), never)
    assert (p.capacity_type, p.partition, [o.reservation_id for o in p.offerings]) == (RESERVED, "default", ["cr-a"])


def test_plan_takes_the_cheapest_partition():
    offerings = [reserved("cr-a", price=2e-8), reserved("cr-b", "p5.48xlarge", reservation_type="capacity-block", price=1e-8)]
    p = plan(offerings, count_of({"cr-a": 1, "cr-b": 1}), never)
    assert p.partition == "capacity-block" and [o.reservation_id for o in p.offerings] == ["cr-b"]


def test_plan_skips_reservations_without_capacity_and_truncates():
    offerings = [reserved("cr-a")] + [on_demand(f"t{i}.large", price=i / 100) for i in range(80)]
    p = plan(offerings, count_of({}), never)
    assert p.capacity_type == ON_DEMAND and len(p.offerings) == 60
    assert p.offerings[0].instance_type == "t0.large"


def test_plan_with_nothing_left():
    assert plan([reserved("cr-a")], count_of({}), never) is None
    assert plan([on_demand()], count_of({}), lambda *_: True) is None


def test_fleet_request_carries_context_and_tags():
    p = plan([on_demand()], count_of({}), never)
    launch = request("nc-9", on_demand(), context="ctx-1", tags={"a": "b"})
    params = fleet_request(launch, p, {(None, launch.image_id, launch.user_data): "lt-1"})
    assert params["Context"] == "ctx-1"
    tags = {t["Key"]: t["Value"] for t in params["TagSpecifications"][0]["Tags"]}
    assert tags["a"] == "b" and tags[NODECLAIM_TAG] == "nc-9"
    assert [s["ResourceType"] for s in params["TagSpecifications"]] == ["instance", "volume", "fleet"]
