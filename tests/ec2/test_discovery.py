"""Reservation discovery: selector terms -> DescribeCapacityReservations, as upstream does it."""

from __future__ import annotations

from datetime import timedelta

import pytest

from scheduling.adapters.ec2 import SelectorTermsError
from tests.ec2.conftest import T0

ZONE_A, ZONE_B = "us-east-1a", "us-east-1b"
OTHER_ACCOUNT = "210987654321"


def found(reservations) -> set[str]:
    return {r["CapacityReservationId"] for r in reservations}


def describe_calls(world):
    return [c.params for c in world.calls_of("DescribeCapacityReservations")]


def test_id_term_queries_by_id_with_state_active_and_no_max_results(world, clock, provider):
    r = world.add_reservation("m5.large", ZONE_A, 2)
    assert found(provider.describe_reservations([{"id": r}])) == {r}
    [params] = describe_calls(world)
    assert params["CapacityReservationIds"] == [r]
    assert params["Filters"] == [{"Name": "state", "Values": ["active"]}]
    assert "MaxResults" not in params


def test_unknown_id_is_an_empty_answer_after_one_call(world, clock, provider):
    assert provider.describe_reservations([{"id": "cr-0123456789abcdef0"}]) == []
    assert len(describe_calls(world)) == 1


def test_id_term_of_an_inactive_reservation_finds_nothing(world, clock, provider):
    r = world.add_reservation("m5.large", ZONE_A, 2)
    world.set_state(r, "cancelled")
    assert provider.describe_reservations([{"id": r}]) == []


def test_tag_term_filters_and_pages(world, clock, provider):
    ml = world.add_reservation("m5.large", ZONE_A, 1, tags={"team": "ml", "env": "prod"})
    world.add_reservation("m5.large", ZONE_A, 1, tags={"team": "web"})
    assert found(provider.describe_reservations([{"tags": {"team": "ml", "env": "prod"}}])) == {ml}
    [params] = describe_calls(world)
    assert params["MaxResults"] == 1000
    assert params["Filters"] == [
        {"Name": "state", "Values": ["active"]},
        {"Name": "tag:env", "Values": ["prod"]},
        {"Name": "tag:team", "Values": ["ml"]},
    ]


def test_wildcard_tag_value_becomes_a_tag_key_filter(world, clock, provider):
    a = world.add_reservation("m5.large", ZONE_A, 1, tags={"karpweb": "a"})
    b = world.add_reservation("m5.large", ZONE_B, 1, tags={"karpweb": "b"})
    world.add_reservation("m5.large", ZONE_B, 1, tags={"other": "x"})
    assert found(provider.describe_reservations([{"tags": {"karpweb": "*"}}])) == {a, b}
    assert {"Name": "tag-key", "Values": ["karpweb"]} in describe_calls(world)[0]["Filters"]


def test_owner_and_instance_match_criteria(world, clock, provider):
    mine_open = world.add_reservation("m5.large", ZONE_A, 1, match="open")
    shared_open = world.add_reservation("m5.large", ZONE_A, 1, match="open", owner_id=OTHER_ACCOUNT)
    world.add_reservation("m5.large", ZONE_A, 1, match="targeted", owner_id=OTHER_ACCOUNT)
    # Without ownerID EC2 answers with owned and shared reservations alike.
    assert found(provider.describe_reservations([{"instanceMatchCriteria": "open"}])) == {mine_open, shared_open}
    assert found(
        provider.describe_reservations([{"instanceMatchCriteria": "open", "ownerID": OTHER_ACCOUNT}])
    ) == {shared_open}
    assert {"Name": "owner-id", "Values": [OTHER_ACCOUNT]} in describe_calls(world)[-1]["Filters"]
    assert {"Name": "instance-match-criteria", "Values": ["open"]} in describe_calls(world)[-1]["Filters"]


def test_all_pages_are_read(world, clock, provider):
    made = {world.add_reservation("c5.large", ZONE_A, 1, tags={"bulk": "yes"}) for _ in range(1001)}
    assert found(provider.describe_reservations([{"tags": {"bulk": "yes"}}])) == made
    calls = describe_calls(world)
    assert len(calls) == 2 and "NextToken" in calls[1]


def test_terms_are_ored_and_results_deduplicated(world, clock, provider):
    a = world.add_reservation("m5.large", ZONE_A, 1, tags={"team": "ml"})
    b = world.add_reservation("m5.large", ZONE_B, 1, match="open")
    answer = provider.describe_reservations([{"id": a}, {"tags": {"team": "ml"}}, {"instanceMatchCriteria": "open"}])
    assert sorted(r["CapacityReservationId"] for r in answer) == sorted([a, b])


def test_past_end_reservations_are_dropped(world, clock, provider):
    ending = world.add_reservation("m5.large", ZONE_A, 1, tags={"t": "x"}, end=T0 + timedelta(minutes=5))
    lasting = world.add_reservation("m5.large", ZONE_A, 1, tags={"t": "x"})
    assert found(provider.describe_reservations([{"tags": {"t": "x"}}])) == {ending, lasting}
    # EC2 may still call it active for a moment after its end; the adapter drops it anyway.
    world.clock.advance(timedelta(seconds=-10))
    clock.now += timedelta(minutes=5)
    provider.discovery.invalidate()
    assert found(provider.describe_reservations([{"tags": {"t": "x"}}])) == {lasting}


def test_answers_are_cached_per_query_for_a_minute(world, clock, provider):
    r = world.add_reservation("m5.large", ZONE_A, 1, tags={"team": "ml"})
    provider.describe_reservations([{"tags": {"team": "ml"}}])
    provider.describe_reservations([{"tags": {"team": "ml"}}])
    provider.describe_reservations([{"tags": {"team": "ml"}}, {"id": r}])
    assert len(describe_calls(world)) == 2  # the tag query once, the id query once
    clock.advance(seconds=59)
    provider.describe_reservations([{"tags": {"team": "ml"}}])
    assert len(describe_calls(world)) == 2
    clock.advance(seconds=2)
    provider.describe_reservations([{"tags": {"team": "ml"}}])
    assert len(describe_calls(world)) == 3


def test_each_answer_syncs_the_available_counts(world, clock, provider):
    r = world.add_reservation("m5.large", ZONE_A, 3)
    assert provider.available_instance_count(r) == 0  # unknown until discovered
    provider.describe_reservations([{"id": r}])
    assert provider.available_instance_count(r) == 3
    provider.availability.mark_unavailable(r)
    assert provider.available_instance_count(r) == 0
    world.set_available(r, 2)
    clock.advance(minutes=1, seconds=1)
    provider.describe_reservations([{"id": r}])
    assert provider.available_instance_count(r) == 2


def test_invalid_terms_make_no_call(world, clock, provider):
    with pytest.raises(SelectorTermsError) as exc:
        provider.describe_reservations([{"ownerID": "123456789012"}, {"id": "cr-1", "tags": {"a": "b"}}])
    assert len(exc.value.problems) >= 2
    assert describe_calls(world) == []


def test_ultraserver_type_comes_from_describe_capacity_blocks(world, clock, provider):
    ultra = world.add_capacity_block(
        "p5.48xlarge", ZONE_A, 1, start=T0, end=T0 + timedelta(days=1), ultraserver_type="u-p6e-gb200x72"
    )
    plain = world.add_capacity_block("p5.48xlarge", ZONE_B, 1, start=T0, end=T0 + timedelta(days=1))
    answer = {r["CapacityReservationId"]: r for r in provider.describe_reservations([{"instanceMatchCriteria": "targeted"}])}
    assert answer[ultra]["UltraserverType"] == "u-p6e-gb200x72"
    assert "UltraserverType" not in answer[plain]


def test_without_describe_capacity_blocks_ultraservers_are_known_by_type(world, clock, provider):
    ultra = world.add_capacity_block("trn2u.48xlarge", ZONE_A, 1, start=T0, end=T0 + timedelta(days=1))
    world.faults.inject("DescribeCapacityBlocks", "UnauthorizedOperation")
    [r] = provider.describe_reservations([{"id": ultra}])
    assert r["UltraserverType"] == "trn2u.48xlarge"


def test_resource_group_term(world, clock, provider):
    a = world.add_reservation("m5.large", ZONE_A, 1)
    b = world.add_reservation("m5.large", ZONE_B, 1)
    world.add_reservation("m5.large", ZONE_B, 1)
    arn = world.add_reservation_group("pool", [a, b])
    assert found(provider.describe_reservations([{"resourceGroupARN": arn}])) == {a, b}
    world.set_state(b, "cancelled")
    provider.discovery.invalidate()
    assert found(provider.describe_reservations([{"resourceGroupARN": arn}])) == {a}
    missing = arn.replace("group/pool", "group/none")
    assert provider.describe_reservations([{"resourceGroupARN": missing}]) == []


def test_throttled_discovery_is_retried(world, clock, provider, sleeps):
    r = world.add_reservation("m5.large", ZONE_A, 1)
    world.faults.throttle("DescribeCapacityReservations", count=3)
    assert found(provider.describe_reservations([{"id": r}])) == {r}
    assert len(sleeps) == 1  # botocore retried once itself, we retried once
