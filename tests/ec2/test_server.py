"""The test server itself, through plain boto3 over HTTP: it must answer as EC2 does."""

from __future__ import annotations

from datetime import timedelta

import pytest
from botocore.exceptions import ClientError

from tests.ec2.conftest import T0

ZONE_A, ZONE_B = "us-east-1a", "us-east-1b"
OTHER_ACCOUNT = "210987654321"
AMI = "ami-12c6146b"


def ids(answer) -> set[str]:
    return {r["CapacityReservationId"] for r in answer["CapacityReservations"]}


def code(exc: pytest.ExceptionInfo) -> str:
    return exc.value.response["Error"]["Code"]


def create(raw_ec2, instance_type="m5.large", zone=ZONE_A, count=2, match="targeted", tags=None, end=None):
    params = dict(
        InstanceType=instance_type,
        InstancePlatform="Linux/UNIX",
        AvailabilityZone=zone,
        InstanceCount=count,
        InstanceMatchCriteria=match,
    )
    if tags:
        params["TagSpecifications"] = [
            {"ResourceType": "capacity-reservation", "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}
        ]
    if end:
        params.update(EndDateType="limited", EndDate=end)
    return raw_ec2.create_capacity_reservation(**params)["CapacityReservation"]


def test_create_returns_the_ec2_shape(world, clock, raw_ec2):
    r = create(raw_ec2, tags={"team": "ml"}, end=T0 + timedelta(hours=3))
    assert r["CapacityReservationId"].startswith("cr-")
    assert r["State"] == "active"
    assert (r["TotalInstanceCount"], r["AvailableInstanceCount"]) == (2, 2)
    assert r["InstanceMatchCriteria"] == "targeted"
    assert r["ReservationType"] == "default"
    assert r["EndDateType"] == "limited" and r["EndDate"] == T0 + timedelta(hours=3)
    assert r["Tags"] == [{"Key": "team", "Value": "ml"}]
    assert r["OwnerId"] == world.account_id and r["AvailabilityZoneId"]


def test_create_is_idempotent_by_client_token(world, clock, raw_ec2):
    params = dict(InstanceType="m5.large", InstancePlatform="Linux/UNIX", AvailabilityZone=ZONE_A, InstanceCount=1)
    first = raw_ec2.create_capacity_reservation(ClientToken="t-1", **params)["CapacityReservation"]
    again = raw_ec2.create_capacity_reservation(ClientToken="t-1", **params)["CapacityReservation"]
    assert first["CapacityReservationId"] == again["CapacityReservationId"]
    assert len(raw_ec2.describe_capacity_reservations()["CapacityReservations"]) == 1


def test_create_rejects_a_past_end_date(world, clock, raw_ec2):
    with pytest.raises(ClientError) as exc:
        create(raw_ec2, end=T0 - timedelta(minutes=1))
    assert code(exc) == "InvalidParameterValue"


def test_describe_filters(world, clock, raw_ec2):
    ml = create(raw_ec2, tags={"team": "ml", "env": "prod"})["CapacityReservationId"]
    web = create(raw_ec2, "c5.large", ZONE_B, match="open", tags={"team": "web"})["CapacityReservationId"]
    shared = world.add_reservation("m5.large", ZONE_B, 1, owner_id=OTHER_ACCOUNT, tags={"team": "ml"})
    block = world.add_capacity_block("p5.48xlarge", ZONE_A, 1, start=T0 - timedelta(hours=1), end=T0 + timedelta(days=1))
    gone = create(raw_ec2, tags={"team": "ml"})["CapacityReservationId"]
    raw_ec2.cancel_capacity_reservation(CapacityReservationId=gone)

    def query(*filters):
        return ids(raw_ec2.describe_capacity_reservations(Filters=[{"Name": n, "Values": v} for n, v in filters]))

    assert query(("state", ["active"])) == {ml, web, shared, block}
    assert query(("state", ["cancelled"])) == {gone}
    assert query(("owner-id", [OTHER_ACCOUNT])) == {shared}
    assert query(("owner-id", [world.account_id]), ("state", ["active"])) == {ml, web, block}
    assert query(("tag:team", ["ml"]), ("state", ["active"])) == {ml, shared}
    assert query(("tag:team", ["ml"]), ("tag:env", ["prod"])) == {ml}
    assert query(("tag:team", ["w*"])) == {web}
    assert query(("tag-key", ["env"])) == {ml}
    assert query(("instance-type", ["c5.large", "p5.48xlarge"])) == {web, block}
    assert query(("availability-zone", [ZONE_B])) == {web, shared}
    assert query(("instance-match-criteria", ["open"])) == {web}
    assert query(("reservation-type", ["capacity-block"])) == {block}
    with pytest.raises(ClientError) as exc:
        query(("no-such-filter", ["x"]))
    assert code(exc) == "InvalidParameterValue"


def test_describe_by_ids_and_its_errors(world, clock, raw_ec2):
    a = create(raw_ec2)["CapacityReservationId"]
    b = create(raw_ec2, "c5.large")["CapacityReservationId"]
    assert ids(raw_ec2.describe_capacity_reservations(CapacityReservationIds=[b])) == {b}
    assert ids(
        raw_ec2.describe_capacity_reservations(
            CapacityReservationIds=[a, b], Filters=[{"Name": "instance-type", "Values": ["m5.large"]}]
        )
    ) == {a}
    with pytest.raises(ClientError) as exc:
        raw_ec2.describe_capacity_reservations(CapacityReservationIds=[a, "cr-0123456789abcdef0"])
    assert code(exc) == "InvalidCapacityReservationId.NotFound"
    with pytest.raises(ClientError) as exc:
        raw_ec2.describe_capacity_reservations(CapacityReservationIds=[a], MaxResults=10)
    assert code(exc) == "InvalidParameterCombination"
    with pytest.raises(ClientError) as exc:
        raw_ec2.describe_capacity_reservations(MaxResults=1001)
    assert code(exc) == "InvalidParameterValue"


def test_describe_pages(world, clock, raw_ec2):
    made = {world.add_reservation("m5.large", ZONE_A, 1) for _ in range(7)}
    seen, pages, token = set(), 0, None
    while True:
        params = {"MaxResults": 3, **({"NextToken": token} if token else {})}
        page = raw_ec2.describe_capacity_reservations(**params)
        pages += 1
        assert len(page["CapacityReservations"]) <= 3
        seen |= ids(page)
        token = page.get("NextToken")
        if not token:
            break
    assert (seen, pages) == (made, 3)
    paginated = raw_ec2.get_paginator("describe_capacity_reservations").paginate(PaginationConfig={"PageSize": 2})
    assert {r["CapacityReservationId"] for page in paginated for r in page["CapacityReservations"]} == made


def test_cancel(world, clock, raw_ec2):
    r = create(raw_ec2)["CapacityReservationId"]
    assert raw_ec2.cancel_capacity_reservation(CapacityReservationId=r)["Return"] is True
    assert raw_ec2.describe_capacity_reservations(CapacityReservationIds=[r])["CapacityReservations"][0]["State"] == "cancelled"
    with pytest.raises(ClientError) as exc:
        raw_ec2.cancel_capacity_reservation(CapacityReservationId="cr-0000000000000000f")
    assert code(exc) == "InvalidCapacityReservationId.NotFound"


def run_into(raw_ec2, reservation_id, instance_type="m5.large", zone=ZONE_A, **extra):
    return raw_ec2.run_instances(
        ImageId=AMI,
        MinCount=1,
        MaxCount=1,
        InstanceType=instance_type,
        Placement={"AvailabilityZone": zone},
        CapacityReservationSpecification={"CapacityReservationTarget": {"CapacityReservationId": reservation_id}},
        **extra,
    )["Instances"][0]


def available(raw_ec2, reservation_id) -> int:
    answer = raw_ec2.describe_capacity_reservations(CapacityReservationIds=[reservation_id])
    return answer["CapacityReservations"][0]["AvailableInstanceCount"]


def test_run_instances_into_a_reservation_until_full(world, clock, raw_ec2):
    r = create(raw_ec2, count=1)["CapacityReservationId"]
    instance = run_into(raw_ec2, r)
    assert instance["CapacityReservationId"] == r
    assert instance["CapacityReservationSpecification"]["CapacityReservationPreference"] == "capacity-reservations-only"
    assert available(raw_ec2, r) == 0
    with pytest.raises(ClientError) as exc:
        run_into(raw_ec2, r)
    assert code(exc) == "ReservationCapacityExceeded"
    with pytest.raises(ClientError) as exc:
        run_into(raw_ec2, r, instance_type="c5.large")
    assert code(exc) == "InvalidParameterCombination"

    described = raw_ec2.describe_instances(Filters=[{"Name": "capacity-reservation-id", "Values": [r]}])
    assert [i["InstanceId"] for res in described["Reservations"] for i in res["Instances"]] == [instance["InstanceId"]]
    raw_ec2.terminate_instances(InstanceIds=[instance["InstanceId"]])
    assert available(raw_ec2, r) == 1


def test_open_reservations_catch_untargeted_launches_unless_preference_is_none(world, clock, raw_ec2):
    r = create(raw_ec2, count=1, match="open")["CapacityReservationId"]
    base = dict(ImageId=AMI, MinCount=1, MaxCount=1, InstanceType="m5.large", Placement={"AvailabilityZone": ZONE_A})
    opted_out = raw_ec2.run_instances(
        CapacityReservationSpecification={"CapacityReservationPreference": "none"}, **base
    )["Instances"][0]
    assert "CapacityReservationId" not in opted_out
    assert available(raw_ec2, r) == 1
    default = raw_ec2.run_instances(**base)["Instances"][0]
    assert default["CapacityReservationId"] == r
    assert default["CapacityReservationSpecification"]["CapacityReservationPreference"] == "open"
    assert available(raw_ec2, r) == 0


def test_cancelled_reservation_lets_its_instances_go(world, clock, raw_ec2):
    r = create(raw_ec2, count=1)["CapacityReservationId"]
    instance = run_into(raw_ec2, r)["InstanceId"]
    raw_ec2.cancel_capacity_reservation(CapacityReservationId=r)
    described = raw_ec2.describe_instances(InstanceIds=[instance])["Reservations"][0]["Instances"][0]
    assert described["State"]["Name"] == "running"
    assert "CapacityReservationId" not in described


def test_capacity_block_lifecycle(world, clock, raw_ec2):
    start, end = T0 + timedelta(hours=1), T0 + timedelta(hours=4)
    block = world.add_capacity_block("p5.48xlarge", ZONE_A, 2, start=start, end=end)

    def state():
        return raw_ec2.describe_capacity_reservations(CapacityReservationIds=[block])["CapacityReservations"][0]["State"]

    assert state() == "scheduled"
    with pytest.raises(ClientError):
        run_into(raw_ec2, block, "p5.48xlarge", InstanceMarketOptions={"MarketType": "capacity-block"})
    clock.advance(hours=1)
    assert state() == "active"
    instance = run_into(raw_ec2, block, "p5.48xlarge", InstanceMarketOptions={"MarketType": "capacity-block"})
    assert instance["InstanceLifecycle"] == "capacity-block"
    assert instance["CapacityReservationId"] == block
    lifecycle = raw_ec2.describe_instances(Filters=[{"Name": "instance-lifecycle", "Values": ["capacity-block"]}])
    assert [i["InstanceId"] for r in lifecycle["Reservations"] for i in r["Instances"]] == [instance["InstanceId"]]
    with pytest.raises(ClientError) as exc:
        run_into(raw_ec2, block, "p5.48xlarge")  # without MarketType capacity-block
    assert code(exc) == "InvalidParameterCombination"

    clock.advance(hours=2, minutes=31)  # EC2 terminates 30 minutes before the end
    assert state() == "active"
    terminated = raw_ec2.describe_instances(InstanceIds=[instance["InstanceId"]])["Reservations"][0]["Instances"][0]
    assert terminated["State"]["Name"] == "terminated"
    clock.advance(minutes=30)
    assert state() == "expired"
    assert raw_ec2.describe_capacity_blocks()["CapacityBlocks"][0]["State"] == "expired"
    with pytest.raises(ClientError) as exc:
        raw_ec2.cancel_capacity_reservation(CapacityReservationId=block)
    assert code(exc) == "InvalidParameterValue"


def test_ultraserver_blocks_terminate_an_hour_before_the_end(world, clock, raw_ec2):
    block = world.add_capacity_block(
        "p5.48xlarge", ZONE_A, 1, start=T0, end=T0 + timedelta(hours=2), ultraserver_type="u-p6e-gb200x72"
    )
    instance = run_into(raw_ec2, block, "p5.48xlarge", InstanceMarketOptions={"MarketType": "capacity-block"})
    assert raw_ec2.describe_capacity_blocks()["CapacityBlocks"][0]["UltraserverType"] == "u-p6e-gb200x72"
    clock.advance(minutes=61)
    described = raw_ec2.describe_instances(InstanceIds=[instance["InstanceId"]])["Reservations"][0]["Instances"][0]
    assert described["State"]["Name"] == "terminated"


def test_expire_ends_a_block_now(world, clock, raw_ec2):
    block = world.add_capacity_block("p5.48xlarge", ZONE_A, 1, start=T0, end=T0 + timedelta(days=1))
    instance = run_into(raw_ec2, block, "p5.48xlarge", InstanceMarketOptions={"MarketType": "capacity-block"})
    world.expire(block)
    assert available(raw_ec2, block) == 0
    assert raw_ec2.describe_instances(InstanceIds=[instance["InstanceId"]])["Reservations"][0]["Instances"][0]["State"]["Name"] == "terminated"


def fleet(raw_ec2, template, token=None, overrides=None, default_type="on-demand"):
    params = dict(
        Type="instant",
        TargetCapacitySpecification={"TotalTargetCapacity": 1, "DefaultTargetCapacityType": default_type},
        LaunchTemplateConfigs=[
            {
                "LaunchTemplateSpecification": {"LaunchTemplateName": template, "Version": "$Latest"},
                "Overrides": overrides or [{"InstanceType": "m5.large", "AvailabilityZone": ZONE_A}],
            }
        ],
    )
    if token:
        params["ClientToken"] = token
    return raw_ec2.create_fleet(**params)


def targeted_template(raw_ec2, name, reservation_id, market=None):
    data = {
        "ImageId": AMI,
        "CapacityReservationSpecification": {
            "CapacityReservationPreference": "capacity-reservations-only",
            "CapacityReservationTarget": {"CapacityReservationId": reservation_id},
        },
    }
    if market:
        data["InstanceMarketOptions"] = {"MarketType": market}
    raw_ec2.create_launch_template(LaunchTemplateName=name, LaunchTemplateData=data)


def test_instant_fleet_into_a_reservation_reports_errors_in_the_errors_list(world, clock, raw_ec2):
    r = create(raw_ec2, count=1)["CapacityReservationId"]
    targeted_template(raw_ec2, "lt-r", r)
    first = fleet(raw_ec2, "lt-r")
    assert first["Errors"] == []
    [item] = first["Instances"]
    assert item["Lifecycle"] == "on-demand" and item["InstanceType"] == "m5.large"
    assert available(raw_ec2, r) == 0
    second = fleet(raw_ec2, "lt-r")
    assert second.get("Instances", []) == []
    assert [e["ErrorCode"] for e in second["Errors"]] == ["ReservationCapacityExceeded"]
    assert second["Errors"][0]["LaunchTemplateAndOverrides"]["Overrides"]["AvailabilityZone"] == ZONE_A


def test_instant_fleet_client_token(world, clock, raw_ec2):
    r = create(raw_ec2, count=3)["CapacityReservationId"]
    targeted_template(raw_ec2, "lt-r", r)
    first = fleet(raw_ec2, "lt-r", token="nodeclaim-1")
    again = fleet(raw_ec2, "lt-r", token="nodeclaim-1")
    assert again["FleetId"] == first["FleetId"]
    assert again["Instances"][0]["InstanceIds"] == first["Instances"][0]["InstanceIds"]
    assert available(raw_ec2, r) == 2
    with pytest.raises(ClientError) as exc:
        fleet(raw_ec2, "lt-r", token="nodeclaim-1", overrides=[{"InstanceType": "m5.large", "AvailabilityZone": ZONE_B}])
    assert code(exc) == "IdempotentParameterMismatch"


def test_instant_fleet_capacity_block(world, clock, raw_ec2):
    block = world.add_capacity_block("p5.48xlarge", ZONE_B, 1, start=T0, end=T0 + timedelta(days=1))
    targeted_template(raw_ec2, "lt-cb", block, market="capacity-block")
    answer = fleet(
        raw_ec2, "lt-cb", overrides=[{"InstanceType": "p5.48xlarge", "AvailabilityZone": ZONE_B}], default_type="capacity-block"
    )
    assert answer["Errors"] == []
    instance_id = answer["Instances"][0]["InstanceIds"][0]
    described = raw_ec2.describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"][0]
    assert described["InstanceLifecycle"] == "capacity-block"
    assert described["CapacityReservationId"] == block


def test_insufficient_capacity_pools(world, clock, raw_ec2):
    raw_ec2.create_launch_template(
        LaunchTemplateName="lt-od",
        LaunchTemplateData={"ImageId": AMI, "CapacityReservationSpecification": {"CapacityReservationPreference": "none"}},
    )
    world.set_insufficient_capacity("m5.large", ZONE_A)
    answer = fleet(
        raw_ec2,
        "lt-od",
        overrides=[
            {"InstanceType": "m5.large", "AvailabilityZone": ZONE_A, "Priority": 1.0},
            {"InstanceType": "m5.large", "AvailabilityZone": ZONE_B, "Priority": 2.0},
        ],
    )
    assert [e["ErrorCode"] for e in answer["Errors"]] == ["InsufficientInstanceCapacity"]
    assert answer["Instances"][0]["LaunchTemplateAndOverrides"]["Overrides"]["AvailabilityZone"] == ZONE_B


def test_fault_injector(world, clock, raw_ec2):
    world.faults.inject("DescribeCapacityReservations", "RequestLimitExceeded", count=2)
    for _ in range(2):
        with pytest.raises(ClientError) as exc:
            raw_ec2.describe_capacity_reservations()
        assert code(exc) == "RequestLimitExceeded"
        assert exc.value.response["ResponseMetadata"]["HTTPStatusCode"] == 503
    raw_ec2.describe_capacity_reservations()
    world.faults.inject("DescribeInstances", "InternalError")
    with pytest.raises(ClientError) as exc:
        raw_ec2.describe_instances()
    assert exc.value.response["ResponseMetadata"]["HTTPStatusCode"] == 500
    assert world.faults.pending() == 0
    assert [c.action for c in world.calls_of("DescribeCapacityReservations")] == ["DescribeCapacityReservations"] * 3


def test_spot_price_history(world, clock, raw_ec2):
    world.set_spot_price("m5.large", ZONE_A, 0.05, T0 - timedelta(hours=2))
    world.set_spot_price("m5.large", ZONE_A, 0.04, T0 - timedelta(hours=1))
    world.set_spot_price("c5.large", ZONE_B, 0.03, T0)
    rows = raw_ec2.describe_spot_price_history(InstanceTypes=["m5.large"])["SpotPriceHistory"]
    assert [r["SpotPrice"] for r in rows] == ["0.040000", "0.050000"]
