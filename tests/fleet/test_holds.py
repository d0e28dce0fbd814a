"""The fleet ledger's holds on PostgreSQL (reservations/ledger.py): what counts against a
reservation's free units, for which cluster, and until when; and what each cluster's world sees."""

import datetime

import pytest

from fleet.scope import cluster_scope, forget_default
from reservations import ledger
from reservations.models import CapacityReservation, ReservationHold
from scheduling.adapters.ec2.interface import LaunchResult
from scheduling.world import current_world

NOW = datetime.datetime(2026, 11, 25, 12, 0, tzinfo=datetime.timezone.utc)
LAUNCHED = LaunchResult(instance_id="i-0abc")
REFUSED = LaunchResult(error_code="ReservationCapacityExceeded", error_message="full")


@pytest.fixture
def fleet(make_account, make_cluster):
    forget_default()
    account = make_account("111111111111", "ml-prod")
    alpha, beta = make_cluster("alpha", account), make_cluster("beta", account)
    reservation = CapacityReservation.objects.create(
        reservation_id="cr-1", owner_id="111111111111", instance_type="m5.large", availability_zone="us-east-1a",
        total_instance_count=4, available_instance_count=2, region="us-east-1", last_seen=NOW)
    from reservations.models import ReservationVisibility

    ReservationVisibility.objects.get_or_create(reservation=reservation, account=account)
    yield alpha, beta, reservation
    forget_default()


def free(cluster, reservation, now=NOW):
    return ledger.ledger_free(CapacityReservation.objects.fleet().get(pk=reservation.pk), cluster.pk, now)


def hold(cluster, now=NOW):
    with cluster_scope(cluster):
        return ledger.hold_units("cr-1", 1, claim_name="c", now=now)


def world_available(cluster, now=NOW):
    with cluster_scope(cluster):
        [item] = current_world(now, include_pods=False, include_nodes=False)["capacityReservations"]
    return item["AvailableInstanceCount"]


def test_a_hold_counts_for_the_other_clusters_until_its_launch_is_counted(fleet):
    alpha, beta, reservation = fleet
    first, ok = hold(alpha)
    assert ok and first.state == ReservationHold.State.HELD
    assert (free(alpha, reservation), free(beta, reservation)) == (2, 1)  # its own held unit is its to launch
    assert (world_available(alpha), world_available(beta)) == (2, 1)  # beta's engine plans around it
    ledger.settle_hold(first, LAUNCHED, claim_name="alpha-x1", now=NOW + datetime.timedelta(seconds=1))
    later = NOW + datetime.timedelta(seconds=2)
    assert (free(alpha, reservation, later), free(beta, reservation, later)) == (1, 1)  # launched since the sync
    second, ok = hold(beta, later)
    assert ok
    assert hold(alpha, later) == (None, False)  # the last unit is beta's: alpha plans around it
    assert world_available(alpha, later) == 0
    # The next sync (or the refresh after the launches) read EC2's count: the launched unit is in it.
    CapacityReservation.objects.fleet().filter(pk=reservation.pk).update(available_instance_count=1, last_seen=later)
    assert free(beta, reservation, later) == 1 and free(alpha, reservation, later) == 0
    ledger.settle_hold(second, REFUSED, now=later)  # EC2 said full: released, and contention
    assert ReservationHold.objects.get(pk=second.pk).state == ReservationHold.State.RELEASED
    assert free(alpha, reservation, later) == 1
    [contention] = reservation.contentions.all()
    assert (contention.cluster, contention.ledger_free, contention.error_code) == (beta, 1, "ReservationCapacityExceeded")


def test_a_hold_lapses_after_the_launch_timeout_and_a_counted_launch_holds_nothing(fleet):
    alpha, beta, reservation = fleet
    held, _ = hold(alpha)
    assert free(beta, reservation, NOW + ledger.HOLD_TTL - datetime.timedelta(seconds=1)) == 1
    assert free(beta, reservation, NOW + ledger.HOLD_TTL) == 2  # its launch never came
    assert ledger.settle_counted_holds(NOW + ledger.HOLD_TTL) == 1
    assert ReservationHold.objects.get(pk=held.pk).state == ReservationHold.State.RELEASED
    # A cloud that takes the unit from the reservation's row itself (the simulated world): not counted twice.
    counted, _ = hold(alpha)
    ledger.settle_hold(counted, LAUNCHED, counted=True, now=NOW)
    CapacityReservation.objects.fleet().filter(pk=reservation.pk).update(available_instance_count=1)
    assert ReservationHold.objects.get(pk=counted.pk).state == ReservationHold.State.RELEASED
    assert free(alpha, reservation) == free(beta, reservation) == 1
