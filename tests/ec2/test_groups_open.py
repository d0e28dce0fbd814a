"""Issue 12 against the test server over HTTP: Capacity Reservation groups (ListGroupResources with
pagination, discovery, launches that target the group) and open mode (on-demand launches with
preference ``open`` that EC2 places inside an open reservation)."""

from __future__ import annotations

from scheduling.adapters.ec2 import LaunchOffering
from scheduling.adapters.ec2.interface import ON_DEMAND, RESERVED, SPOT
from tests.ec2.test_launch import OD_M5, ZONE_A, instance, request, server_available


def reserved(reservation_id, group=None, instance_type="m5.large", zone=ZONE_A):
    return LaunchOffering(instance_type, zone, RESERVED, OD_M5 / 1e7, reservation_id=reservation_id,
                          reservation_type="default", reservation_group_arn=group)


def template_spec(raw_ec2, world):
    """The CapacityReservationSpecification of the launch template the last CreateFleet used."""
    config = world.calls_of("CreateFleet")[-1].params["LaunchTemplateConfigs"][0]
    template_id = config["LaunchTemplateSpecification"]["LaunchTemplateId"]
    versions = raw_ec2.describe_launch_template_versions(LaunchTemplateId=template_id)["LaunchTemplateVersions"]
    return versions[0]["LaunchTemplateData"]["CapacityReservationSpecification"]


# --- groups -------------------------------------------------------------------------------------

def test_group_members_come_from_every_page_of_list_group_resources(world, clock, provider):
    ids = [world.add_reservation("m5.large", ZONE_A, 1) for _ in range(3)]
    extra = [f"cr-{i:017x}" for i in range(117)]  # members EC2 no longer knows still count as members
    arn = world.add_reservation_group("big", ids + extra)
    assert provider.group_members(arn) == sorted(ids + extra)
    pages = world.calls_of("ListGroupResources")
    assert [c.params["NextToken"] for c in pages] == [None, "50", "100"]
    assert {c.params["MaxResults"] for c in pages} == {50}
    # Discovery resolves the term through the same pages and describes only the real reservations.
    found = provider.describe_reservations([{"resourceGroupARN": arn}])
    assert sorted(r["CapacityReservationId"] for r in found) == sorted(ids)
    assert all(r["ResourceGroupArns"] == [arn] for r in found)
    assert provider.group_members(arn.replace("group/big", "group/missing")) == []


def test_a_launch_targeting_the_group_lands_in_a_member_with_room(world, clock, provider, raw_ec2):
    first = world.add_reservation("m5.large", ZONE_A, 1)
    second = world.add_reservation("m5.large", ZONE_A, 2)
    arn = world.add_reservation_group("pool", [first, second])
    provider.describe_reservations([{"resourceGroupARN": arn}])  # karpweb believes `first` has a unit
    world.set_available(first, 0)  # ... but another account's launch just took it

    by_id = provider.launch(request("nc-by-id", reserved(first)))
    assert not by_id.ok and by_id.error_code == "ReservationCapacityExceeded"

    provider.availability.sync({first: 1})
    result = provider.launch(request("nc-group", reserved(first, group=arn)))
    assert result.ok, result.error_message
    assert (result.capacity_type, result.reservation_id) == (RESERVED, second)
    assert template_spec(raw_ec2, world) == {
        "CapacityReservationPreference": "capacity-reservations-only",
        "CapacityReservationTarget": {"CapacityReservationResourceGroupArn": arn},
    }
    launched = instance(raw_ec2, result.instance_id)
    assert launched["CapacityReservationId"] == second
    assert server_available(raw_ec2, second) == 1
    assert provider.available_instance_count(second) == 1  # the unit EC2 really used is the one counted
    [member] = provider.describe_instances([result.instance_id])
    assert (member.capacity_type, member.reservation_id) == (RESERVED, second)


def test_a_full_group_fails_like_a_full_reservation(world, clock, provider):
    first = world.add_reservation("m5.large", ZONE_A, 1)
    second = world.add_reservation("m5.large", ZONE_A, 1)
    arn = world.add_reservation_group("pool", [first, second])
    provider.describe_reservations([{"resourceGroupARN": arn}])
    world.set_available(first, 0)
    world.set_available(second, 0)
    result = provider.launch(request("nc-full", reserved(first, group=arn)))
    assert not result.ok and result.error_code == "ReservationCapacityExceeded"
    assert result.reservations_marked_unavailable == [first]


# --- open mode ----------------------------------------------------------------------------------

def on_demand(instance_type="m5.large", zone=ZONE_A):
    return LaunchOffering(instance_type, zone, ON_DEMAND, OD_M5)


def test_open_mode_launches_on_demand_with_preference_open_into_an_open_reservation(world, clock, provider, raw_ec2):
    open_r = world.add_reservation("m5.large", ZONE_A, 2, match="open")
    result = provider.launch(request("nc-open", on_demand(), open_reservations=True))
    assert result.ok, result.error_message
    assert template_spec(raw_ec2, world) == {"CapacityReservationPreference": "open"}
    assert (result.capacity_type, result.reservation_id, result.open_reservation_id) == (ON_DEMAND, None, open_r)
    assert server_available(raw_ec2, open_r) == 1  # EC2 counts it in the reservation
    [member] = provider.describe_instances([result.instance_id])
    # Not reserved (upstream's rule: preference open), so nothing relabels it; but karpweb knows where it runs.
    assert (member.capacity_type, member.reservation_id, member.open_reservation_id) == (ON_DEMAND, None, open_r)
    assert member.capacity_reservation_preference == "open"


def test_without_open_mode_on_demand_stays_out_of_open_reservations(world, clock, provider, raw_ec2):
    open_r = world.add_reservation("m5.large", ZONE_A, 2, match="open")
    result = provider.launch(request("nc-plain", on_demand()))
    assert result.ok and result.open_reservation_id is None
    assert template_spec(raw_ec2, world) == {"CapacityReservationPreference": "none"}
    assert server_available(raw_ec2, open_r) == 2
    assert "CapacityReservationId" not in instance(raw_ec2, result.instance_id)


def test_open_mode_never_applies_to_spot(world, clock, provider, raw_ec2):
    world.add_reservation("m5.large", ZONE_A, 2, match="open")
    world.set_spot_price("m5.large", ZONE_A, 0.03)
    result = provider.launch(request("nc-spot", LaunchOffering("m5.large", ZONE_A, SPOT, 0.03), open_reservations=True))
    assert result.ok and result.capacity_type == SPOT and result.open_reservation_id is None
    assert template_spec(raw_ec2, world) == {"CapacityReservationPreference": "none"}
