"""Which reservations a cluster scope reads: those its account sees (owned or shared), in its region."""

import pytest

from fleet import scope
from reservations.models import CapacityReservation, ReservationVisibility, record_visibility
from tests.factories.reservations import CapacityReservationFactory

pytestmark = pytest.mark.django_db


def ids(queryset):
    return sorted(queryset.filter(reservation_id__startswith="cr-f").values_list("reservation_id", flat=True))


@pytest.fixture
def reservations(two_clusters):
    _home, east, west = two_clusters
    with scope.cluster_scope(east):  # what the EC2 sync of east's account records
        CapacityReservationFactory(reservation_id="cr-f1", owner_id="111111111111")
        CapacityReservationFactory(reservation_id="cr-f2", owner_id="333333333333")  # shared with east's account
        CapacityReservationFactory(reservation_id="cr-f4", owner_id="111111111111", region="eu-west-1")
    with scope.cluster_scope(west):
        CapacityReservationFactory(reservation_id="cr-f3", owner_id="222222222222", region="us-west-2")
    return east, west


def test_a_scope_reads_the_reservations_its_account_sees_in_its_region(reservations):
    east, west = reservations
    with scope.cluster_scope(east):
        assert ids(CapacityReservation.objects.all()) == ["cr-f1", "cr-f2"]  # cr-f4 is in another region
        assert ids(CapacityReservation.objects.usable()) == ["cr-f1", "cr-f2"]  # the QuerySet's methods stay
        assert ids(CapacityReservation.objects.fleet()) == ["cr-f1", "cr-f2", "cr-f3", "cr-f4"]
    with scope.cluster_scope(west):
        assert ids(CapacityReservation.objects.with_recent_utilization()) == ["cr-f3"]
    assert ids(CapacityReservation.objects.all()) == ["cr-f1", "cr-f2", "cr-f3", "cr-f4"]  # unscoped: the fleet


def test_visibility_says_owned_or_shared_and_links_the_owner(reservations):
    east, west = reservations
    seen = {(v.reservation.reservation_id, v.account.account_id, v.shared)
            for v in ReservationVisibility.objects.filter(reservation__reservation_id__startswith="cr-f")}
    assert seen == {("cr-f1", "111111111111", False), ("cr-f2", "111111111111", True),
                    ("cr-f4", "111111111111", False), ("cr-f3", "222222222222", False)}
    assert CapacityReservation.objects.get(reservation_id="cr-f1").owner_account == east.account
    assert CapacityReservation.objects.get(reservation_id="cr-f2").owner_account is None  # not one of ours


def test_recording_again_is_idempotent_and_a_second_account_adds_its_share(reservations):
    east, west = reservations
    shared = CapacityReservation.objects.get(reservation_id="cr-f1")
    assert record_visibility([shared.pk], east.account) == 0
    with scope.cluster_scope(west):
        assert record_visibility([shared.pk]) == 1
    with scope.cluster_scope(west):
        west.region = ""  # no region: every region of the account's
        assert ids(CapacityReservation.objects.all()) == ["cr-f1", "cr-f3"]
    assert ReservationVisibility.objects.get(reservation=shared, account=west.account).shared
