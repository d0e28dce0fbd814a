"""Membership: which reservation each instance sits in (the input to demotion), and termination."""

from __future__ import annotations

from scheduling.adapters.ec2 import LaunchOffering, LaunchRequest
from scheduling.adapters.ec2.interface import ON_DEMAND, RESERVED, SPOT
from scheduling.adapters.ec2.membership import capacity_type_of

ZONE_A = "us-east-1a"
AMI = "ami-12c6146b"


def launch(provider, name, *offerings):
    result = provider.launch(LaunchRequest(name, "default", AMI, list(offerings)))
    assert result.ok, result.error_message
    return result.instance_id


def test_capacity_type_per_instance(world, clock, provider, raw_ec2):
    r = world.add_reservation("m5.large", ZONE_A, 2)
    provider.describe_reservations([{"id": r}])
    in_reservation = launch(provider, "nc-r", LaunchOffering("m5.large", ZONE_A, RESERVED, 1e-8, reservation_id=r))
    paid = launch(provider, "nc-od", LaunchOffering("m5.large", ZONE_A, ON_DEMAND, 0.096))
    cheap = launch(provider, "nc-spot", LaunchOffering("m5.large", ZONE_A, SPOT, 0.03))
    # Launched outside karpweb with EC2's default preference "open" into an open reservation: EC2
    # reports the reservation, but the preference is not capacity-reservations-only, so upstream
    # (and karpweb) call it on-demand.
    open_odcr = world.add_reservation("c5.large", ZONE_A, 1, match="open")
    outside = raw_ec2.run_instances(
        ImageId=AMI, MinCount=1, MaxCount=1, InstanceType="c5.large", Placement={"AvailabilityZone": ZONE_A}
    )["Instances"][0]
    assert outside["CapacityReservationId"] == open_odcr
    outside = outside["InstanceId"]

    members = {m.instance_id: m for m in provider.describe_instances([in_reservation, paid, cheap, outside])}
    assert (members[in_reservation].capacity_type, members[in_reservation].reservation_id) == (RESERVED, r)
    assert members[in_reservation].reservation_type == "default"
    assert members[in_reservation].capacity_reservation_preference == "capacity-reservations-only"
    assert members[paid].capacity_type == ON_DEMAND and members[paid].reservation_id is None
    assert members[cheap].capacity_type == SPOT
    assert members[outside].capacity_type == ON_DEMAND
    assert members[in_reservation].tags["karpweb.io/nodeclaim"] == "nc-r"


def test_by_tags_and_unknown_ids(world, clock, provider):
    a = launch(provider, "nc-a", LaunchOffering("m5.large", ZONE_A, ON_DEMAND, 0.096))
    launch(provider, "nc-b", LaunchOffering("m5.large", ZONE_A, ON_DEMAND, 0.096))
    assert [m.instance_id for m in provider.describe_instances(tags={"karpweb.io/nodeclaim": "nc-a"})] == [a]
    assert [m.instance_id for m in provider.describe_instances([a, "i-0000000000000dead"])] == [a]
    assert provider.describe_instances([]) == []
    assert len(provider.describe_instances(tags={"karpweb.io/managed": "true"})) == 2


def test_cancelled_reservation_demotes_its_instances(world, clock, provider, raw_ec2):
    r = world.add_reservation("m5.large", ZONE_A, 1)
    provider.describe_reservations([{"id": r}])
    instance_id = launch(provider, "nc-r", LaunchOffering("m5.large", ZONE_A, RESERVED, 1e-8, reservation_id=r))
    assert provider.describe_instances([instance_id])[0].capacity_type == RESERVED
    raw_ec2.cancel_capacity_reservation(CapacityReservationId=r)
    [member] = provider.describe_instances([instance_id])
    assert (member.capacity_type, member.reservation_id, member.state) == (ON_DEMAND, None, "running")


def test_terminate_returns_the_unit(world, clock, provider, raw_ec2):
    r = world.add_reservation("m5.large", ZONE_A, 1)
    provider.describe_reservations([{"id": r}])
    instance_id = launch(provider, "nc-r", LaunchOffering("m5.large", ZONE_A, RESERVED, 1e-8, reservation_id=r))
    result = provider.terminate([instance_id])
    assert result.terminating == [instance_id] and result.not_found == [] and result.errors == []
    answer = raw_ec2.describe_capacity_reservations(CapacityReservationIds=[r])
    assert answer["CapacityReservations"][0]["AvailableInstanceCount"] == 1
    assert provider.describe_instances([instance_id]) == []


def test_terminate_unknown_instances(world, clock, provider):
    r = world.add_reservation("m5.large", ZONE_A, 2)
    provider.describe_reservations([{"id": r}])
    instance_id = launch(provider, "nc-r", LaunchOffering("m5.large", ZONE_A, RESERVED, 1e-8, reservation_id=r))
    assert provider.available_instance_count(r) == 1
    # The instance is gone from EC2 (moto forgets it on reset of its reservation list).
    world.backend.reservations.clear()
    result = provider.terminate([instance_id])
    assert result.not_found == [instance_id] and result.terminating == []
    assert provider.available_instance_count(r) == 2  # upstream MarkTerminated: the unit is back


def test_terminate_mixed_known_and_unknown(world, clock, provider):
    a = launch(provider, "nc-a", LaunchOffering("m5.large", ZONE_A, ON_DEMAND, 0.096))
    result = provider.terminate([a, "i-0000000000000dead"])
    assert result.terminating == [a] and result.not_found == ["i-0000000000000dead"]


def test_capacity_type_rules():
    reserved = {
        "InstanceId": "i-1",
        "CapacityReservationId": "cr-1",
        "CapacityReservationSpecification": {"CapacityReservationPreference": "capacity-reservations-only"},
        "InstanceLifecycle": "capacity-block",
    }
    assert capacity_type_of(reserved) == (RESERVED, "cr-1", "capacity-block", False)
    assert capacity_type_of(reserved, reserved_capacity=False)[0] == ON_DEMAND
    assert capacity_type_of({"SpotInstanceRequestId": "sir-1"})[0] == SPOT
    assert capacity_type_of({"InstanceLifecycle": "spot"})[0] == SPOT
    assert capacity_type_of({"CapacityReservationId": "cr-1"})[0] == ON_DEMAND
