"""The interruption queue's messages, read on their own: each EventBridge shape karpweb acts on, the
ones it leaves alone, and anything else named as unknown (never an exception)."""

import json

import pytest

from scheduling.engine.interruptions import Interruption, Unknown, parse


def event(source, kind, detail):
    return json.dumps({"version": "0", "id": "7bf73129", "source": source, "detail-type": kind, "detail": detail})


@pytest.mark.parametrize("body, kind, instances, drains", [
    (event("aws.ec2", "EC2 Spot Instance Interruption Warning", {"instance-id": "i-1", "instance-action": "terminate"}),
     "spot_interrupted", ("i-1",), True),
    (event("aws.ec2", "EC2 Instance Rebalance Recommendation", {"instance-id": "i-2"}), "rebalance_recommendation", ("i-2",), False),
    (event("aws.ec2", "EC2 Instance State-change Notification", {"instance-id": "i-3", "state": "stopping"}),
     "instance_stopped", ("i-3",), True),
    (event("aws.ec2", "EC2 Instance State-change Notification", {"instance-id": "i-4", "state": "terminated"}),
     "instance_terminated", ("i-4",), True),
    (event("aws.health", "AWS Health Event", {"service": "EC2", "eventTypeCategory": "scheduledChange",
                                               "eventTypeCode": "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED",
                                               "affectedEntities": [{"entityValue": "i-5"}, {"entityValue": "i-6"}]}),
     "scheduled_change", ("i-5", "i-6"), True),
    (event("aws.ec2", "EC2 Capacity Reservation Instance Interruption Warning",
           {"capacity-reservation-id": "cr-0a1", "instance-ids": ["i-7", "i-8"]}),
     "capacity_reservation_interrupted", ("i-7", "i-8"), True),
])
def test_the_events_karpweb_acts_on(body, kind, instances, drains):
    meaning = parse(body)
    assert isinstance(meaning, Interruption)
    assert (meaning.kind, meaning.instance_ids, meaning.drains) == (kind, instances, drains)


def test_a_reservation_reclaim_names_its_reservation():
    meaning = parse(event("aws.ec2", "EC2 Capacity Reservation Instance Interruption Warning",
                          {"capacity-reservation-id": "cr-0a1", "instance-ids": ["i-7"]}))
    assert meaning.reservation_id == "cr-0a1" and "cr-0a1" in meaning.detail


@pytest.mark.parametrize("body", [
    event("aws.ec2", "EC2 Instance State-change Notification", {"instance-id": "i-1", "state": "running"}),
    event("aws.health", "AWS Health Event", {"service": "RDS", "eventTypeCategory": "scheduledChange"}),
])
def test_events_that_need_nothing(body):
    assert parse(body) is None


@pytest.mark.parametrize("body, reason", [
    ("{not json", "not JSON"), ("[1, 2]", "not a JSON object"), ('"text"', "not a JSON object"),
    (json.dumps({"source": "aws.ec2", "detail-type": "EC2 Spot Instance Interruption Warning"}), "no detail object"),
    (event("aws.s3", "Object Created", {"bucket": "x"}), "not an interruption event karpweb knows"),
    (event("aws.ec2", "EC2 Capacity Reservation Instance Interruption Warning", {"instance-ids": [1]}),
     "not an interruption event karpweb knows"),
])
def test_anything_else_is_unknown_with_the_reason(body, reason):
    meaning = parse(body)
    assert isinstance(meaning, Unknown) and meaning.reason.startswith(reason)
