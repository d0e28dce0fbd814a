"""The EC2 test server's interruptible capacity, over HTTP with boto3: lending idle units of an ODCR
(CreateInterruptibleCapacityReservationAllocation), reclaiming them (UpdateInterruptibleCapacityReservationAllocation)
with the two-minute warning on the SQS interruption queue, and what DescribeCapacityReservations shows."""

import json
from datetime import timedelta

import pytest
from botocore.exceptions import ClientError

ZONE = "us-east-1a"


def refused(call, **params) -> str:
    with pytest.raises(ClientError) as exc:
        call(**params)
    return exc.value.response["Error"]["Code"]


def described(raw_ec2, rid):
    return raw_ec2.describe_capacity_reservations(CapacityReservationIds=[rid])["CapacityReservations"][0]


@pytest.fixture
def queue(world, boto_session, ec2_endpoint):
    sqs = boto_session.client("sqs", region_name="us-east-1", endpoint_url=ec2_endpoint)
    name = "karpweb-lending-warnings"
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    sqs.purge_queue(QueueUrl=url)
    world.deliver_events_to(name)
    return sqs, url


def test_lend_moves_available_units_into_an_interruptible_reservation(world, raw_ec2):
    source = world.add_reservation("m5.large", ZONE, 5)
    answer = raw_ec2.create_interruptible_capacity_reservation_allocation(
        CapacityReservationId=source, InstanceCount=3, ClientToken="lend-1",
        TagSpecifications=[{"ResourceType": "capacity-reservation", "Tags": [{"Key": "lent-by", "Value": "ml"}]}])
    assert (answer["SourceCapacityReservationId"], answer["TargetInstanceCount"], answer["Status"]) == (source, 3, "active")
    seen = described(raw_ec2, source)
    allocation = seen["InterruptibleCapacityAllocation"]
    assert (seen["TotalInstanceCount"], seen["AvailableInstanceCount"]) == (5, 2)
    assert (allocation["InstanceCount"], allocation["TargetInstanceCount"], allocation["Status"]) == (3, 3, "active")
    lent = described(raw_ec2, allocation["InterruptibleCapacityReservationId"])
    assert lent["Interruptible"] is True and lent["InterruptionInfo"]["SourceCapacityReservationId"] == source
    assert (lent["TotalInstanceCount"], lent["AvailableInstanceCount"], lent["Tags"]) == (3, 3, [{"Key": "lent-by", "Value": "ml"}])
    # The same token again: the first answer, nothing lent twice.
    raw_ec2.create_interruptible_capacity_reservation_allocation(CapacityReservationId=source, InstanceCount=3, ClientToken="lend-1")
    assert described(raw_ec2, source)["AvailableInstanceCount"] == 2


def test_lend_refusals(world, raw_ec2, clock):
    source = world.add_reservation("m5.large", ZONE, 2)
    lend = raw_ec2.create_interruptible_capacity_reservation_allocation
    assert refused(lend, CapacityReservationId=source, InstanceCount=3) == "InvalidParameterValue"  # more than available
    ending = world.add_reservation("m5.large", ZONE, 2, end=clock() + timedelta(days=3))
    assert refused(lend, CapacityReservationId=ending, InstanceCount=1) == "InvalidParameterValue"  # has an end date
    world.set_state(source, "pending")
    assert refused(lend, CapacityReservationId=source, InstanceCount=1) == "IncorrectState"
    assert refused(raw_ec2.update_interruptible_capacity_reservation_allocation, CapacityReservationId=ending,
                   TargetInstanceCount=0) == "InvalidParameterValue"  # nothing lent


def test_a_reclaim_of_free_units_is_immediate(world, raw_ec2):
    source = world.add_reservation("m5.large", ZONE, 4)
    lent = world.lend(source, 3)
    answer = raw_ec2.update_interruptible_capacity_reservation_allocation(CapacityReservationId=source, TargetInstanceCount=1)
    assert (answer["InstanceCount"], answer["TargetInstanceCount"], answer["Status"]) == (1, 1, "active")
    assert described(raw_ec2, source)["AvailableInstanceCount"] == 3
    assert described(raw_ec2, lent)["TotalInstanceCount"] == 1


def test_a_reclaim_warns_the_borrower_on_the_queue_and_terminates_it_two_minutes_later(world, raw_ec2, clock, queue):
    sqs, url = queue
    source = world.add_reservation("m5.large", ZONE, 2)
    lent = world.lend(source, 2)
    borrower = world.launch_borrower(lent)
    assert described(raw_ec2, lent)["AvailableInstanceCount"] == 1

    answer = raw_ec2.update_interruptible_capacity_reservation_allocation(CapacityReservationId=source, TargetInstanceCount=0)
    # The free unit came back at once; the borrower's comes back once it is gone.
    assert (answer["InstanceCount"], answer["Status"]) == (1, "updating")
    assert described(raw_ec2, source)["AvailableInstanceCount"] == 1
    [message] = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    event = json.loads(message["Body"])
    assert (event["source"], event["detail-type"]) == ("aws.ec2", "EC2 Capacity Reservation Instance Interruption Warning")
    assert event["detail"] == {"instance-id": borrower, "instance-action": "terminate"}

    clock.advance(seconds=119)
    assert world.instance(borrower).state == "running"
    clock.advance(seconds=1)
    seen = described(raw_ec2, source)
    assert world.instance(borrower).state == "terminated"
    assert seen["AvailableInstanceCount"] == 2
    assert (seen["InterruptibleCapacityAllocation"]["InstanceCount"], seen["InterruptibleCapacityAllocation"]["Status"]) == (0, "canceled")
    assert described(raw_ec2, lent)["State"] == "cancelled"  # ZeroSizePreference default
