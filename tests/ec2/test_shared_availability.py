"""Issue #46: what a launch is decided from is not one process's memory. Two providers stand for two
workers (each its own process in production): they share only the store the loop gives them (Redis
here, as KARPWEB_CACHE_URL makes it; each test under its own key prefix) and the database."""

import os
import uuid
from datetime import timedelta

import pytest
from django.core.cache.backends.locmem import LocMemCache
from django.core.cache.backends.redis import RedisCache

from fleet.scope import default_cluster
from reservations import ledger
from reservations.models import CapacityReservation, ReservationHold
from scheduling.adapters.ec2.interface import ON_DEMAND, RESERVED
from scheduling.adapters.ec2.reservations import ReservationAvailability
from scheduling.adapters.ec2.sync import sync_reservations
from tests.ec2.test_launch import ZONE_A, on_demand, request, reserved


@pytest.fixture
def store():
    """The shared store two workers meet in: the test run's Redis, else (no REDIS_URL) one in-memory cache."""
    prefix = f"test-{uuid.uuid4().hex[:12]}"
    url = os.environ.get("REDIS_URL")
    yield RedisCache(url, {"KEY_PREFIX": prefix}) if url else LocMemCache(prefix, {})
    if url:  # this test's keys only: the Redis is the run's
        import redis

        client = redis.Redis.from_url(url)
        for key in client.scan_iter(f"{prefix}:*"):
            client.delete(key)


def worker(make_provider, store, **kw):
    return make_provider(shared_store=store, reservation_fallback=ledger.launchable_units, account_id="123456789012", **kw)


def test_a_worker_that_never_synced_the_account_launches_into_its_reservation(world, make_provider, store, db):
    syncing, launching = worker(make_provider, store), worker(make_provider, store)
    r = world.add_reservation("m5.large", ZONE_A, 2)
    syncing.inventory()  # the EC2 step ran on the other worker
    result = launching.launch(request("nc-1", reserved(r), on_demand()))
    assert result.ok and (result.capacity_type, result.reservation_id) == (RESERVED, r)
    # The launch is seen by both: one unit left, whichever worker asks.
    assert syncing.available_instance_count(r) == launching.available_instance_count(r) == 1
    # A full reservation found by one worker is skipped by the other until the next sync.
    world.set_available(r, 0)
    refused = syncing.launch(request("nc-2", reserved(r)))
    assert refused.reservations_marked_unavailable == [r]
    fallback = launching.launch(request("nc-3", reserved(r), on_demand()))
    assert fallback.ok and fallback.capacity_type == ON_DEMAND


def test_a_cold_worker_starts_from_the_mirror_and_the_ledger(world, clock, make_provider, store, db):
    """Nothing in the store (a new worker after a restart, Redis emptied): the count is the mirror's,
    less the launches the ledger knows EC2 has not counted yet; and it is kept for the next worker."""
    r = world.add_reservation("m5.large", ZONE_A, 2)
    assert sync_reservations(make_provider(), now=clock()).errors == []  # the mirror: 2 free
    cold = worker(make_provider, store)
    assert cold.available_instance_count(r) == 2
    store.delete(ReservationAvailability._key(r))  # forgotten (never clear(): the run's Redis is shared)
    row = CapacityReservation.objects.get(reservation_id=r)
    ReservationHold.objects.create(reservation=row, cluster=default_cluster(), state=ReservationHold.State.LAUNCHED,
                                   launched_at=row.counted_at + timedelta(seconds=1), expires_at=clock())
    assert worker(make_provider, store).available_instance_count(r) == 1  # one launched since the mirror's read
    assert worker(make_provider, store).available_instance_count("cr-unknown") == 0  # no row: EC2 decides, none here
    result = worker(make_provider, store).launch(request("nc-1", reserved(r)))
    assert result.ok and result.reservation_id == r and world.reservation(r)["AvailableInstanceCount"] == 1


def test_an_empty_pool_one_worker_met_is_skipped_by_the_other(world, make_provider, store):
    first, second = worker(make_provider, store), worker(make_provider, store)
    world.faults.fleet_error("InsufficientInstanceCapacity")
    failed = first.launch(request("nc-1", on_demand()))
    assert failed.offerings_marked_unavailable == [("m5.large", ZONE_A, ON_DEMAND)]
    assert second.unavailable.is_unavailable("m5.large", ZONE_A, ON_DEMAND)
    assert not second.launch(request("nc-2", on_demand())).ok  # not asked of EC2: the pool is known empty
    assert [p for p in second.catalogue().offerings if (p.instance_type, p.zone, p.capacity_type)
            == ("m5.large", ZONE_A, ON_DEMAND)][0].available is False
    other_account = make_provider(shared_store=store, account_id="222222222222")
    assert not other_account.unavailable.is_unavailable("m5.large", ZONE_A, ON_DEMAND)  # zones differ per account
