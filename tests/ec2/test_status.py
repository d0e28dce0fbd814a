"""EC2NodeClass status.capacityReservations and CapacityReservationsReady, from the test server."""

from __future__ import annotations

from datetime import timedelta

from tests.ec2.conftest import T0

ZONE_A, ZONE_B = "us-east-1a", "us-east-1b"


def test_entries_sorted_by_id_with_upstream_fields(world, clock, provider):
    ids = [world.add_reservation("m5.large", ZONE_A, 2, tags={"team": "ml"}) for _ in range(3)]
    status = provider.nodeclass_status("default", [{"tags": {"team": "ml"}}])
    assert [e["id"] for e in status.capacity_reservations] == sorted(ids)
    entry = status.capacity_reservations[0]
    assert entry == {
        "availabilityZone": ZONE_A,
        "id": entry["id"],
        "instanceMatchCriteria": "targeted",
        "instanceType": "m5.large",
        "ownerID": world.account_id,
        "reservationType": "default",
        "interruptible": False,
        "state": "active",
    }
    assert status.condition["type"] == "CapacityReservationsReady"
    assert (status.condition["status"], status.condition["reason"]) == ("True", "CapacityReservationsReady")
    assert status.selected_ids == sorted(ids)


def test_capacity_block_expiring_40_minutes_before_its_end(world, clock, provider):
    end = T0 + timedelta(minutes=41)
    block = world.add_capacity_block("p5.48xlarge", ZONE_A, 1, start=T0 - timedelta(hours=1), end=end)
    terms = [{"id": block}]
    [entry] = provider.nodeclass_status("gpu", terms).capacity_reservations
    assert entry["state"] == "active" and entry["reservationType"] == "capacity-block"
    assert entry["endTime"] == "2026-11-21T12:41:00Z"
    clock.advance(minutes=1)
    status = provider.nodeclass_status("gpu", terms)  # from the cache: the state is computed, not fetched
    assert status.capacity_reservations[0]["state"] == "expiring"
    assert "1 expiring" in status.condition["message"]


def test_ultraserver_block_expiring_70_minutes_before_its_end(world, clock, provider):
    block = world.add_capacity_block(
        "p5.48xlarge", ZONE_A, 1, start=T0, end=T0 + timedelta(minutes=71), ultraserver_type="u-p6e-gb200x72"
    )
    assert provider.nodeclass_status("gpu", [{"id": block}]).capacity_reservations[0]["state"] == "active"
    clock.advance(minutes=1)
    assert provider.nodeclass_status("gpu", [{"id": block}]).capacity_reservations[0]["state"] == "expiring"


def test_no_terms_is_ready(world, clock, provider):
    status = provider.nodeclass_status("plain", [])
    assert (status.condition["status"], status.condition["reason"]) == ("True", "NoSelectorTerms")
    assert world.calls_of("DescribeCapacityReservations") == []


def test_invalid_terms(world, clock, provider):
    status = provider.nodeclass_status("bad", [{"ownerID": "123456789012"}, {"id": "cr-abc", "tags": {"a": "b"}}])
    assert (status.condition["status"], status.condition["reason"]) == ("False", "InvalidSelectorTerms")
    assert "[0].ownerID" in status.condition["message"] and "[1].id" in status.condition["message"]
    assert status.capacity_reservations == []
    assert world.calls_of("DescribeCapacityReservations") == []


def test_no_reservations_found(world, clock, provider):
    status = provider.nodeclass_status("empty", [{"tags": {"team": "nobody"}}])
    assert (status.condition["status"], status.condition["reason"]) == ("False", "NoReservationsFound")


def test_unauthorized(world, clock, provider):
    world.faults.inject("DescribeCapacityReservations", "UnauthorizedOperation", count=5)
    status = provider.nodeclass_status("locked", [{"tags": {"team": "ml"}}])
    assert (status.condition["status"], status.condition["reason"]) == ("False", "Unauthorized")
    assert "UnauthorizedOperation" in status.condition["message"]
    assert len(world.calls_of("DescribeCapacityReservations")) == 1  # never retried


def test_api_error_after_retries(world, clock, provider, sleeps):
    world.faults.inject("DescribeCapacityReservations", "InternalError", count=20)
    status = provider.nodeclass_status("broken", [{"tags": {"team": "ml"}}])
    assert (status.condition["status"], status.condition["reason"]) == ("False", "APIError")
    assert "InternalError" in status.condition["message"]
    assert len(sleeps) == 3  # our bounded retries, after botocore's own


def test_skipped_reservations_are_named(world, clock, provider):
    good = world.add_reservation("m5.large", ZONE_A, 1, tags={"t": "x"})
    odd = world.add_reservation("m5.large", ZONE_B, 1, tags={"t": "x"})
    world.reservation(odd)["InstanceMatchCriteria"] = "some-future-value"
    status = provider.nodeclass_status("x", [{"tags": {"t": "x"}}])
    assert [e["id"] for e in status.capacity_reservations] == [good]
    assert odd in status.condition["message"]


def test_requeue_sooner_when_a_drain_starts_within_the_minute(world, clock, provider):
    world.add_capacity_block("p5.48xlarge", ZONE_A, 1, start=T0, end=T0 + timedelta(minutes=40, seconds=20))
    world.add_reservation("m5.large", ZONE_A, 1)
    status = provider.nodeclass_status("x", [{"instanceMatchCriteria": "targeted"}])
    assert status.requeue_after == timedelta(seconds=20)


def test_feature_gate_off_means_no_condition(world, clock, make_provider):
    provider = make_provider(config={"reserved_capacity": False})
    status = provider.nodeclass_status("x", [{"tags": {"t": "x"}}])
    assert status.condition is None and status.capacity_reservations == []
