"""The EC2 test server's CreateCapacityReservationBySplitting and MoveCapacityReservationInstances,
over HTTP with boto3: EC2's validations and error codes, the counts they change, client tokens."""

from datetime import timedelta

import pytest
from botocore.exceptions import ClientError

ZONE = "us-east-1a"


def code(exc: pytest.ExceptionInfo) -> str:
    return exc.value.response["Error"]["Code"]


def refused(call, **params) -> str:
    with pytest.raises(ClientError) as exc:
        call(**params)
    return code(exc)


def test_split_off_available_units_into_a_reservation_of_the_same_shape(world, raw_ec2):
    source = world.add_reservation("m5.large", ZONE, 10, tags={"team": "web"})
    world.set_available(source, 6)
    answer = raw_ec2.create_capacity_reservation_by_splitting(
        SourceCapacityReservationId=source, InstanceCount=4, ClientToken="split-1",
        TagSpecifications=[{"ResourceType": "capacity-reservation", "Tags": [{"Key": "team", "Value": "shared"}]}])
    new = answer["DestinationCapacityReservation"]
    assert answer["InstanceCount"] == 4 and answer["SourceCapacityReservation"]["TotalInstanceCount"] == 6
    assert (new["TotalInstanceCount"], new["AvailableInstanceCount"], new["InstanceType"], new["AvailabilityZone"]) == (
        4, 4, "m5.large", ZONE)
    assert new["Tags"] == [{"Key": "team", "Value": "shared"}] and new["CapacityReservationId"] != source
    assert (world.reservation(source)["TotalInstanceCount"], world.reservation(source)["AvailableInstanceCount"]) == (6, 2)
    again = raw_ec2.create_capacity_reservation_by_splitting(SourceCapacityReservationId=source, InstanceCount=4,
                                                             ClientToken="split-1")
    assert again["DestinationCapacityReservation"]["CapacityReservationId"] == new["CapacityReservationId"]
    assert world.reservation(source)["TotalInstanceCount"] == 6  # the retry split nothing more


def test_split_refusals(world, raw_ec2, clock):
    split = raw_ec2.create_capacity_reservation_by_splitting
    idle = world.add_reservation("m5.large", ZONE, 3)
    assert refused(split, SourceCapacityReservationId=idle, InstanceCount=3) == "InvalidParameterValue"  # leaves none
    assert refused(split, SourceCapacityReservationId=idle, InstanceCount=0) == "InvalidParameterValue"
    busy = world.add_reservation("m5.large", ZONE, 4)
    world.set_available(busy, 1)
    assert refused(split, SourceCapacityReservationId=busy, InstanceCount=2) == "InvalidParameterValue"  # 1 available
    block = world.add_capacity_block("p5.48xlarge", ZONE, 2, start=clock() - timedelta(hours=1), end=clock() + timedelta(days=1))
    assert refused(split, SourceCapacityReservationId=block, InstanceCount=1) == "UnsupportedOperation"
    world.set_state(idle, "pending")
    assert refused(split, SourceCapacityReservationId=idle, InstanceCount=1) == "IncorrectState"
    assert refused(split, SourceCapacityReservationId="cr-0000000000000000a", InstanceCount=1) == \
        "InvalidCapacityReservationId.NotFound"
    foreign = world.add_reservation("m5.large", ZONE, 4, owner_id="999999999999")  # shared with us by its owner
    assert refused(split, SourceCapacityReservationId=foreign, InstanceCount=1) == "InvalidParameterValue"
    ours = world.add_reservation("m5.large", ZONE, 4)
    assert refused(raw_ec2.move_capacity_reservation_instances, SourceCapacityReservationId=ours,
                   DestinationCapacityReservationId=foreign, InstanceCount=1) == "InvalidParameterValue"


def test_move_between_reservations_of_one_shape(world, raw_ec2):
    source = world.add_reservation("m5.large", ZONE, 6)
    world.set_available(source, 4)
    destination = world.add_reservation("m5.large", ZONE, 2, match="open")  # eligibility and tags may differ
    world.set_available(destination, 0)
    answer = raw_ec2.move_capacity_reservation_instances(SourceCapacityReservationId=source,
                                                         DestinationCapacityReservationId=destination, InstanceCount=3,
                                                         ClientToken="move-1")
    assert answer["InstanceCount"] == 3
    assert (world.reservation(source)["TotalInstanceCount"], world.reservation(source)["AvailableInstanceCount"]) == (3, 1)
    assert (world.reservation(destination)["TotalInstanceCount"], world.reservation(destination)["AvailableInstanceCount"]) == (5, 3)
    raw_ec2.move_capacity_reservation_instances(SourceCapacityReservationId=source, DestinationCapacityReservationId=destination,
                                                InstanceCount=3, ClientToken="move-1")
    assert world.reservation(destination)["TotalInstanceCount"] == 5  # the retry moved nothing more
    empty = world.add_reservation("m5.large", ZONE, 2)
    raw_ec2.move_capacity_reservation_instances(SourceCapacityReservationId=empty, DestinationCapacityReservationId=destination,
                                                InstanceCount=2)
    assert world.reservation(empty)["State"] == "cancelled"  # all of it moved, nothing ran in it


def test_move_refusals(world, raw_ec2, clock):
    move = raw_ec2.move_capacity_reservation_instances
    source = world.add_reservation("m5.large", ZONE, 6)
    for other in (world.add_reservation("m5.xlarge", ZONE, 2), world.add_reservation("m5.large", "us-east-1b", 2),
                  world.add_reservation("m5.large", ZONE, 2, end=clock() + timedelta(days=3))):
        assert refused(move, SourceCapacityReservationId=source, DestinationCapacityReservationId=other,
                       InstanceCount=1) == "InvalidParameterValue"
    same = world.add_reservation("m5.large", ZONE, 2)
    world.reservation(same)["Tenancy"] = "dedicated"
    assert refused(move, SourceCapacityReservationId=source, DestinationCapacityReservationId=same,
                   InstanceCount=1) == "InvalidParameterValue"
    world.reservation(same)["Tenancy"] = "default"
    assert refused(move, SourceCapacityReservationId=source, DestinationCapacityReservationId=same,
                   InstanceCount=7) == "InvalidParameterValue"  # more than available
    assert refused(move, SourceCapacityReservationId=source, DestinationCapacityReservationId=source,
                   InstanceCount=1) == "InvalidParameterValue"
    world.set_state(same, "cancelled")
    assert refused(move, SourceCapacityReservationId=source, DestinationCapacityReservationId=same,
                   InstanceCount=1) == "IncorrectState"
    assert world.reservation(source)["TotalInstanceCount"] == 6
