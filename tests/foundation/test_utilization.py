"""The hourly roll-up of utilization samples: what the charts and the low-utilization alarm read."""

import datetime
import json

import pytest
import time_machine
from django.test import override_settings
from django.urls import reverse

from reservations.models import CapacityReservation, UtilizationHour, UtilizationSample
from reservations.utilization import prune, roll_up, roll_up_recent
from scheduling.views import utilization_chart
from tests.factories.reservations import CapacityReservationFactory, UtilizationSampleFactory

T0 = datetime.datetime(2026, 11, 2, 10, 0, tzinfo=datetime.timezone.utc)
SYNC = datetime.timedelta(seconds=30)


def sync_samples(reservation, start, count, used, total):
    UtilizationSample.objects.bulk_create([
        UtilizationSample(reservation=reservation, sampled_at=start + i * SYNC, used=used, available=total - used, total=total)
        for i in range(count)
    ])


@pytest.fixture
def two_reservations(db):
    return (CapacityReservationFactory(reservation_id="cr-0one", total_instance_count=4, available_instance_count=1),
            CapacityReservationFactory(reservation_id="cr-0two", total_instance_count=10, available_instance_count=8))


def test_an_hour_of_syncs_is_one_row_of_means(two_reservations):
    one, two = two_reservations
    sync_samples(one, T0, 60, used=2, total=4)
    sync_samples(one, T0 + 60 * SYNC, 60, used=4, total=4)
    sync_samples(two, T0, 120, used=2, total=10)
    assert roll_up(since=T0) == 2
    row = UtilizationHour.objects.get(reservation=one, hour=T0)
    assert (row.samples, row.used, row.available, row.total) == (120, 3.0, 1.0, 4.0)
    assert row.share_sum == pytest.approx(60 * 0.5 + 60 * 1.0) and row.share_samples == 120
    assert row.first_sampled_at == T0
    assert row.peak_used == 4  # the most used at one sync: what a shrink recommendation must keep room for


def test_the_chart_sums_hourly_means_not_every_sample(two_reservations):
    # Summing raw samples per hour counted each instance once per sync (120 times at 30 s).
    one, two = two_reservations
    sync_samples(one, T0, 120, used=3, total=4)
    sync_samples(two, T0, 120, used=2, total=10)
    sync_samples(one, T0 + datetime.timedelta(hours=1), 10, used=4, total=4)
    roll_up(since=T0)
    chart = utilization_chart(T0 + datetime.timedelta(hours=1, minutes=5))
    assert chart["x"] == [T0.isoformat(), (T0 + datetime.timedelta(hours=1)).isoformat()]
    assert chart["used"] == [5.0, 4.0]
    assert chart["idle"] == [9.0, 0.0]


def test_rolling_up_again_recomputes_the_hour_in_place(two_reservations):
    one, _ = two_reservations
    sync_samples(one, T0, 10, used=0, total=4)
    roll_up(since=T0)
    roll_up(since=T0)
    sync_samples(one, T0 + 10 * SYNC, 10, used=4, total=4)
    roll_up(since=T0)
    [row] = UtilizationHour.objects.filter(reservation=one)
    assert (row.samples, row.used) == (20, 2.0)


def test_samples_without_capacity_do_not_count_towards_the_share(two_reservations):
    one, _ = two_reservations
    sync_samples(one, T0, 5, used=0, total=0)
    sync_samples(one, T0 + 5 * SYNC, 5, used=1, total=4)
    roll_up(since=T0)
    row = UtilizationHour.objects.get(reservation=one)
    assert (row.samples, row.share_samples) == (10, 5) and row.share_sum == pytest.approx(1.25)
    annotated = CapacityReservation.objects.with_recent_utilization(T0 + SYNC * 10).get(pk=one.pk)
    assert annotated.recent_utilization == pytest.approx(0.25)


def test_the_loop_step_closes_the_previous_hour_early_in_the_next(two_reservations):
    one, _ = two_reservations
    sync_samples(one, T0 + datetime.timedelta(minutes=59), 2, used=1, total=4)  # 10:59:00 and 10:59:30
    assert roll_up_recent(T0 + datetime.timedelta(minutes=59)) == 1
    sync_samples(one, T0 + datetime.timedelta(minutes=59, seconds=50), 1, used=3, total=4)  # after that roll-up
    sync_samples(one, T0 + datetime.timedelta(hours=1), 1, used=4, total=4)
    roll_up_recent(T0 + datetime.timedelta(hours=1, minutes=1))
    hours = {row.hour: row.samples for row in UtilizationHour.objects.filter(reservation=one)}
    assert hours == {T0: 3, T0 + datetime.timedelta(hours=1): 1}
    # Late in an hour, only that hour is recomputed.
    UtilizationHour.objects.filter(hour=T0).update(samples=0)
    roll_up_recent(T0 + datetime.timedelta(hours=1, minutes=30))
    assert UtilizationHour.objects.get(hour=T0).samples == 0


@override_settings(KARPWEB_SAMPLE_RETENTION_DAYS=2, KARPWEB_HOURLY_RETENTION_DAYS=30)
def test_prune_keeps_hours_longer_than_raw_samples(two_reservations):
    one, _ = two_reservations
    for days_ago in (1, 3, 31):
        sync_samples(one, T0 - datetime.timedelta(days=days_ago), 2, used=1, total=4)
    roll_up(since=T0 - datetime.timedelta(days=40))
    assert prune(T0) == {"samples_pruned": 4, "hours_pruned": 1, "uses_pruned": 0}
    assert UtilizationSample.objects.count() == 2
    assert sorted(UtilizationHour.objects.values_list("hour", flat=True)) == [
        T0 - datetime.timedelta(days=3), T0 - datetime.timedelta(days=1)]


def test_reservation_page_charts_a_week_of_hourly_means(viewer_client, two_reservations):
    one, _ = two_reservations
    for hours_ago in range(0, 24 * 9, 12):
        UtilizationSampleFactory(reservation=one, sampled_at=T0 - datetime.timedelta(hours=hours_ago), used=1, available=3, total=4)
    roll_up(since=T0 - datetime.timedelta(days=10))
    with time_machine.travel(T0 + datetime.timedelta(minutes=1), tick=False):
        page = viewer_client.get(reverse("reservations:detail", args=["cr-0one"])).content.decode()
    chart = json.loads(page.split('<script id="reservation-data" type="application/json">')[1].split("</script>")[0])
    assert len(chart["x"]) == 15  # 7 days at two samples a day, and the hour of T0
    assert chart["x"][-1] == T0.isoformat() and set(chart["used"]) == {1.0} and set(chart["total"]) == {4.0}
