"""#48: the usage page: reserved units over 24 hours, 7 days, 30 days or a custom range, used per
cluster of the fleet (the ledger's reads rolled up by the hour), and the reserved units held now by
namespace and by the team label (KARPWEB_TEAM_LABEL)."""

import datetime
import json
import re

import pytest
from django.urls import reverse
from django.utils import timezone

from reservations.holders import reserved_units_held
from reservations.models import ReservationUse, UtilizationHour, UtilizationSample, hour_of
from reservations.utilization import roll_up
from tests.factories.reservations import CapacityReservationFactory
from tests.factories.scheduling import NodeFactory, PodFactory

pytestmark = pytest.mark.django_db
HOUR = datetime.timedelta(hours=1)


def chart_data(page: str, element_id: str) -> dict:
    return json.loads(re.search(rf'<script id="{element_id}" type="application/json">(.*?)</script>', page, re.S)[1])


def test_the_ledger_s_reads_are_rolled_up_per_cluster_by_the_hour():
    reservation = CapacityReservationFactory(reservation_id="cr-0usage1", total_instance_count=6)
    start = hour_of(timezone.now()) - HOUR
    for minute, clusters in ((5, {"alpha": 2, "beta": 1}), (35, {"alpha": 4})):
        at = start + datetime.timedelta(minutes=minute)
        UtilizationSample.objects.create(reservation=reservation, sampled_at=at, used=3, available=3, total=6)
        ReservationUse.objects.create(reservation=reservation, sampled_at=at, total=6, used=3, clusters=clusters)
    roll_up(since=start)
    hour = UtilizationHour.objects.get(reservation=reservation, hour=start)
    assert hour.clusters == {"alpha": 3.0, "beta": 0.5}


def hours_ago(reservation, hours: int, used: float, clusters: dict):
    at = hour_of(timezone.now()) - hours * HOUR
    UtilizationHour.objects.create(reservation=reservation, hour=at, samples=120, first_sampled_at=at, used=used,
                                   available=4 - used, total=4, share_sum=used / 4 * 120, share_samples=120,
                                   clusters=clusters)


def test_the_range_picks_the_hours_and_each_cluster_is_a_series(viewer_client):
    reservation = CapacityReservationFactory(reservation_id="cr-0usage2", total_instance_count=4)
    hours_ago(reservation, 2, 3, {"alpha": 2, "beta": 1})
    hours_ago(reservation, 3 * 24, 2, {"alpha": 1})
    hours_ago(reservation, 20 * 24, 1, {})
    url = reverse("reservations:usage")

    day = viewer_client.get(url).content.decode()
    assert chart_data(day, "usage-data")["used"] == [3.0] and chart_data(day, "usage-data")["idle"] == [1.0]
    by_cluster = chart_data(day, "cluster-data")
    assert (by_cluster["c0"], by_cluster["c1"], by_cluster["other"]) == ([2.0], [1.0], [0.0])
    assert '[["c0", "alpha", "#2f6fde"], ["c1", "beta", "#12b76a"], ["other", "no cluster of the fleet", "#98a2b3"]]' \
        in day.replace("&quot;", '"')
    week = chart_data(viewer_client.get(url, {"range": "7d"}).content.decode(), "usage-data")
    assert week["used"] == [2.0, 3.0]
    month = viewer_client.get(url, {"range": "30d"}).content.decode()
    assert chart_data(month, "usage-data")["used"] == [1.0, 2.0, 3.0]
    assert chart_data(month, "cluster-data")["other"] == [1.0, 1.0, 0.0]  # used beyond the clusters' units
    since = hour_of(timezone.now()) - 4 * 24 * HOUR
    custom = viewer_client.get(url, {"range": "custom", "since": f"{since:%Y-%m-%dT%H:%M}",
                                     "until": f"{since + 2 * 24 * HOUR:%Y-%m-%dT%H:%M}"}).content.decode()
    assert chart_data(custom, "usage-data")["used"] == [2.0]


@pytest.mark.parametrize(("params", "said"), [
    ({"range": "custom"}, "since: a custom range needs its start"),
    ({"range": "custom", "since": "2026-11-20T10:00", "until": "2026-11-19T10:00"}, "until: must be after the start"),
    ({"range": "custom", "since": "yesterday"}, "since: Enter a valid date/time."),
    ({"range": "1y"}, "range: Select a valid choice. 1y is not one of the available choices."),
])
def test_a_bad_range_is_named(viewer_client, params, said):
    answer = viewer_client.get(reverse("reservations:usage"), params)
    assert answer.status_code == 400 and said in answer.content.decode()


def test_reserved_units_are_held_by_namespace_and_team(viewer_client):
    shared = NodeFactory(name="reserved-a", capacity_type="reserved")
    NodeFactory(name="reserved-idle", capacity_type="reserved")
    paid = NodeFactory(name="paid", capacity_type="on-demand")
    PodFactory(name="api", namespace="web", node=shared, cpu_request_millicores=1500, labels={"team": "storefront"})
    PodFactory(name="job", namespace="batch", node=shared, cpu_request_millicores=500, labels={"team": "data"})
    PodFactory(name="agent", namespace="kube-system", node=shared, cpu_request_millicores=500, owner_kind="DaemonSet")
    PodFactory(name="elsewhere", namespace="web", node=paid, cpu_request_millicores=1000)
    held = reserved_units_held("team")
    assert held["namespace"] == [("(idle)", 1.0), ("web", 0.75), ("batch", 0.25)]
    assert held["team"] == [("(idle)", 1.0), ("storefront", 0.75), ("data", 0.25)]
    assert reserved_units_held("example.com/owner")["team"] == [("(idle)", 1.0), ("(no example.com/owner label)", 1.0)]
    page = viewer_client.get(reverse("reservations:usage")).content.decode()
    assert "<tr><td>web</td><td>0.75</td></tr>" in page and "by the team label" in page
