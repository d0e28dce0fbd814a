"""EC2 throttling and 5xx answers in the middle of a sync, against the EC2 test server over HTTP:
retried, no reservation marked unavailable, nothing lost (rows, samples, offerings, class status)."""

from datetime import timedelta

import pytest

from reservations.models import CapacityReservation, EC2NodeClass, UtilizationSample
from scheduling.adapters.ec2 import LaunchOffering, LaunchRequest
from scheduling.adapters.ec2.interface import RESERVED
from scheduling.adapters.ec2.sync import sync_catalogue, sync_reservations
from scheduling.models import Offering
from tests.support.ec2_fixtures import T0

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("aws")]

ZONE_A, ZONE_B = "us-east-1a", "us-east-1b"
AMI = "ami-12c6146b"

# What EC2 answers when it wants the caller to slow down or try again (code, HTTP status).
TRANSIENT = [("RequestLimitExceeded", 503), ("Throttling", 400), ("InternalError", 500),
             ("ServiceUnavailable", 503), ("Unavailable", 503)]


@pytest.fixture
def synced(world, clock, provider):
    """Three reservations and two classes, synced once; one instance in the first reservation."""
    sync_catalogue(provider, now=clock())
    ml = world.add_reservation("m5.large", ZONE_A, 4, tags={"team": "ml"})
    web = world.add_reservation("m5.xlarge", ZONE_B, 2, tags={"team": "web"}, match="open")
    block = world.add_capacity_block("p5.48xlarge", ZONE_A, 2, start=T0 - timedelta(hours=1), end=T0 + timedelta(days=1))
    EC2NodeClass.objects.create(name="ml", capacity_reservation_selector_terms=[{"tags": {"team": "ml"}}, {"id": block}])
    EC2NodeClass.objects.create(name="web", capacity_reservation_selector_terms=[{"tags": {"team": "web"}}])
    assert sync_reservations(provider, now=clock()).errors == []
    launched = provider.launch(LaunchRequest("nc-1", "ml", AMI, [LaunchOffering("m5.large", ZONE_A, RESERVED, 1e-8, reservation_id=ml)]))
    assert launched.ok, launched.error_message
    return {"ml": ml, "web": web, "block": block}


def snapshot():
    """Everything a sync writes, as comparable data."""
    return {
        "reservations": {r.reservation_id: (r.state, r.available_instance_count, r.total_instance_count)
                         for r in CapacityReservation.objects.all()},
        "offerings": {o.reservation.reservation_id: o.available for o in Offering.objects.filter(reservation__isnull=False)},
        "classes": {nc.name: ([e["id"] for e in nc.status_capacity_reservations], nc.condition_status("CapacityReservationsReady"))
                    for nc in EC2NodeClass.objects.all()},
    }


def server_counts(world, ids):
    return {rid: world.reservation(rid)["AvailableInstanceCount"] for rid in ids}


@pytest.mark.parametrize(("code", "status"), TRANSIENT)
def test_transient_errors_mid_sync_are_retried_and_change_nothing_but_the_counts(world, clock, provider, sleeps, synced, code, status):
    ids = list(synced.values())
    samples_before = UtilizationSample.objects.count()
    clock.advance(minutes=2)  # past the one-minute discovery cache: the classes' terms are queried again
    # The inventory's call goes through; the classes' queries, the ids look-up of the capacity
    # block's type and the catalogue's calls then fail twice each before answering.
    world.faults.inject("DescribeCapacityReservations", code, count=2, status=status, after=1)
    world.faults.inject("DescribeCapacityBlocks", code, count=2, status=status)

    stats = sync_reservations(provider, now=clock())

    assert stats.errors == []
    assert world.faults.pending() == 0, "every injected fault was met"
    assert provider.call.retries_done > 0 and sleeps, "karpweb's own retries backed off"
    # Nothing marked unavailable: the in-memory counts are EC2's, and so are the rows.
    assert {rid: provider.available_instance_count(rid) for rid in ids} == server_counts(world, ids) == {
        synced["ml"]: 3, synced["web"]: 2, synced["block"]: 2}
    after = snapshot()
    assert after["reservations"][synced["ml"]] == ("active", 3, 4)
    assert all(state == "active" for state, _, _ in after["reservations"].values())
    assert after["offerings"] == {synced["ml"]: True, synced["web"]: True, synced["block"]: True}
    assert after["classes"] == {"ml": (sorted([synced["ml"], synced["block"]]), "True"), "web": ([synced["web"]], "True")}
    # Nothing lost: one more sample per reservation, none of the earlier ones gone.
    assert UtilizationSample.objects.count() == samples_before + len(ids)
    assert stats.samples == len(ids)


def test_throttled_pages_of_a_long_inventory_are_retried(world, clock, make_provider, sleeps, monkeypatch):
    """A fault on the second page of the inventory: the pages before it are not lost or doubled."""
    from scheduling.adapters.ec2 import reservations as discovery

    provider = make_provider()
    ids = [world.add_reservation("m5.large", ZONE_A, 1 + i % 3, tags={"n": str(i)}) for i in range(7)]
    real_pages = discovery.ReservationDiscovery._pages

    def small_pages(self, params, not_found_is_empty=True):
        if "MaxResults" in params:
            params = {**params, "MaxResults": 3}  # seven reservations, three pages
        return real_pages(self, params, not_found_is_empty)

    monkeypatch.setattr(discovery.ReservationDiscovery, "_pages", small_pages)
    world.faults.inject("DescribeCapacityReservations", "RequestLimitExceeded", count=3, after=1)

    stats = sync_reservations(provider, now=clock())

    assert stats.errors == [] and world.faults.pending() == 0
    assert sorted(CapacityReservation.objects.values_list("reservation_id", flat=True)) == sorted(ids)
    assert UtilizationSample.objects.count() == 7
    assert all(provider.available_instance_count(rid) == world.reservation(rid)["AvailableInstanceCount"] for rid in ids)


@pytest.mark.parametrize(("code", "status"), [("RequestLimitExceeded", 503), ("InternalError", 500)])
def test_errors_that_outlast_the_retries_leave_every_row_as_it_was(world, clock, provider, synced, code, status):
    before = snapshot()
    samples_before = UtilizationSample.objects.count()
    counts_before = {rid: provider.available_instance_count(rid) for rid in synced.values()}
    clock.advance(minutes=2)
    world.faults.inject("DescribeCapacityReservations", code, count=1000, status=status)

    stats = sync_reservations(provider, now=clock())

    assert stats.errors and code in stats.errors[0]
    # Not one reservation marked unavailable or gone because EC2 did not answer.
    assert {rid: provider.available_instance_count(rid) for rid in synced.values()} == counts_before
    after = snapshot()
    assert after["reservations"] == before["reservations"]
    assert after["offerings"] == before["offerings"]
    assert UtilizationSample.objects.count() == samples_before
    # The classes say why (an API error), and keep the reservations they had.
    for name, (ids, _ready) in before["classes"].items():
        node_class = EC2NodeClass.objects.get(name=name)
        assert [e["id"] for e in node_class.status_capacity_reservations] == ids
        assert node_class.condition("CapacityReservationsReady")["reason"] == "APIError"

    world.faults.clear()
    clock.advance(minutes=2)
    assert sync_reservations(provider, now=clock()).errors == []
    assert snapshot() == before | {"reservations": snapshot()["reservations"]}
    assert UtilizationSample.objects.count() == samples_before + len(synced)
