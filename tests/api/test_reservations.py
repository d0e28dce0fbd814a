"""/api/v1/capacity-reservations/: counts, utilization, idle cost, capacity-block timing, filters,
ordering, pagination and the utilization samples sub-route."""

import datetime
from decimal import Decimal

import pytest
from django.utils import timezone
from rest_framework.request import Request
from rest_framework.test import APIRequestFactory

from reservations.models import CapacityBlockFee, CapacityReservation
from reservations.utilization import roll_up
from scheduling.api.pagination import BoundedLimitOffsetPagination
from scheduling.models import CapacityType
from tests.factories.reservations import CapacityReservationFactory, EC2NodeClassFactory, UtilizationSampleFactory
from tests.factories.scheduling import InstanceTypeFactory, OfferingFactory

pytestmark = pytest.mark.django_db

URL = "/api/v1/capacity-reservations/"


def results(response):
    assert response.status_code == 200, response.content
    return response.json()["results"]


def ids(response):
    return [row["reservationID"] for row in results(response)]


def test_list_shows_counts_utilization_and_idle_cost(as_viewer):
    m5 = InstanceTypeFactory(name="m5.large")
    OfferingFactory(instance_type=m5, zone="us-east-1a", price=0.096)
    CapacityReservationFactory(reservation_id="cr-0aaa", total_instance_count=4, available_instance_count=1)
    CapacityReservationFactory(reservation_id="cr-0bbb", instance_type="x9.huge", total_instance_count=2,
                               available_instance_count=2)
    rows = {row["reservationID"]: row for row in results(as_viewer.get(URL))}
    first = rows["cr-0aaa"]
    assert (first["totalInstanceCount"], first["availableInstanceCount"], first["usedInstanceCount"]) == (4, 1, 3)
    assert first["utilization"] == 0.75
    assert first["idleCostPerHour"] == pytest.approx(0.096)
    assert first["usable"] is True and first["timing"] is None
    assert first["url"] == "http://testserver/api/v1/capacity-reservations/cr-0aaa/"
    assert first["tags"] == {"team": "web"}
    assert rows["cr-0bbb"]["idleCostPerHour"] is None, "no list price known for x9.huge"
    assert rows["cr-0bbb"]["utilization"] == 0.0


def test_idle_cost_falls_back_to_the_cheapest_zone_of_the_type(as_viewer):
    m5 = InstanceTypeFactory(name="m5.large")
    OfferingFactory(instance_type=m5, zone="us-east-1b", price=0.1)
    OfferingFactory(instance_type=m5, zone="us-east-1c", price=0.09)
    CapacityReservationFactory(reservation_id="cr-0aaa", total_instance_count=4, available_instance_count=3)
    assert results(as_viewer.get(URL))[0]["idleCostPerHour"] == pytest.approx(0.27)


def test_an_idle_block_unit_is_worth_the_blocks_own_price_with_its_source(as_viewer):
    """#47 (13): a Capacity Block's idle units at its entered fee over its unit-hours, not the on-demand price."""
    trn2 = InstanceTypeFactory(name="trn2.48xlarge")
    OfferingFactory(instance_type=trn2, zone="us-east-1a", price=44.70)
    now = timezone.now()
    CapacityReservationFactory(reservation_id="cr-0blk", instance_type="trn2.48xlarge", reservation_type="capacity-block",
                               total_instance_count=4, available_instance_count=2, start_date=now - datetime.timedelta(hours=48),
                               end_date=now + datetime.timedelta(hours=24))
    CapacityBlockFee.objects.create(reservation_id="cr-0blk", block_fee=Decimal("5760"))
    row = results(as_viewer.get(URL))[0]
    assert row["idleCostPerHour"] == pytest.approx(2 * 5760 / (4 * 72))  # $20 a unit-hour, not $44.70
    assert (row["idleCostSource"], row["idleCostBasis"]) == ("block fee entered", "$5,760.00 / (4 units x 72 h)")
    CapacityBlockFee.objects.all().delete()  # no fee known: the list price, said as such
    row = results(as_viewer.get(URL))[0]
    assert (row["idleCostPerHour"], row["idleCostSource"]) == (pytest.approx(89.40), "on-demand list price")


def test_recent_and_low_utilization_come_from_the_last_24_hours_of_samples(as_viewer):
    now = timezone.now()
    idle = CapacityReservationFactory(reservation_id="cr-0idle", total_instance_count=10, available_instance_count=9)
    for hours in range(0, 25):
        UtilizationSampleFactory(reservation=idle, sampled_at=now - datetime.timedelta(hours=hours) + datetime.timedelta(minutes=1),
                                 used=1, available=9, total=10)
    UtilizationSampleFactory(reservation=idle, sampled_at=now - datetime.timedelta(days=3), used=10, available=0, total=10)
    busy = CapacityReservationFactory(reservation_id="cr-0busy")
    UtilizationSampleFactory(reservation=busy, used=3, available=1, total=4)
    roll_up(since=now - datetime.timedelta(days=4))
    fresh = CapacityReservationFactory(reservation_id="cr-0new")
    rows = {row["reservationID"]: row for row in results(as_viewer.get(URL))}
    assert rows["cr-0idle"]["recentUtilization"] == pytest.approx(0.1)
    assert rows["cr-0idle"]["lowUtilization"] is True
    assert rows["cr-0busy"]["recentUtilization"] == pytest.approx(0.75)
    assert rows["cr-0busy"]["lowUtilization"] is False
    assert rows[fresh.reservation_id]["recentUtilization"] is None
    assert rows[fresh.reservation_id]["lowUtilization"] is False


def test_capacity_block_timing(as_viewer):
    end = timezone.now().replace(microsecond=0) + datetime.timedelta(hours=2)
    CapacityReservationFactory(reservation_id="cr-0blk", capacity_block=True, end_date=end)
    CapacityReservationFactory(reservation_id="cr-0ult", capacity_block=True, end_date=end, ultraserver_type="u-p6e-gb200x72")
    rows = {row["reservationID"]: row for row in results(as_viewer.get(URL))}
    block = rows["cr-0blk"]["timing"]
    assert block["end"] == end.isoformat().replace("+00:00", "Z")
    assert block["drainAt"] == (end - datetime.timedelta(minutes=40)).isoformat().replace("+00:00", "Z")
    assert block["terminationAt"] == (end - datetime.timedelta(minutes=30)).isoformat().replace("+00:00", "Z")
    assert block["ultraserver"] is False and block["expiring"] is False
    assert 4700 < block["secondsUntilDrain"] <= 80 * 60
    ultra = rows["cr-0ult"]["timing"]
    assert ultra["drainAt"] == (end - datetime.timedelta(minutes=70)).isoformat().replace("+00:00", "Z")
    assert ultra["terminationAt"] == (end - datetime.timedelta(minutes=60)).isoformat().replace("+00:00", "Z")
    assert ultra["ultraserver"] is True


def test_an_expiring_block_says_so(as_viewer):
    CapacityReservationFactory(reservation_id="cr-0blk", capacity_block=True,
                               end_date=timezone.now() + datetime.timedelta(minutes=35))
    timing = results(as_viewer.get(URL))[0]["timing"]
    assert timing["expiring"] is True and timing["secondsUntilDrain"] < 0


def test_detail_and_404(as_viewer):
    reservation = CapacityReservationFactory(reservation_id="cr-0aaa")
    EC2NodeClassFactory(name="default").selected_reservations.add(reservation)
    response = as_viewer.get(f"{URL}cr-0aaa/")
    assert response.status_code == 200
    assert response.json()["reservationID"] == "cr-0aaa" and response.json()["nodeClasses"] == ["default"]
    missing = as_viewer.get(f"{URL}cr-0nope/")
    assert missing.status_code == 404 and "detail" in missing.json()


@pytest.fixture
def mixed(db):
    now = timezone.now()
    CapacityReservationFactory(reservation_id="cr-0a", instance_type="m5.large", availability_zone="us-east-1a",
                               tags={"team": "ml"}, total_instance_count=10, available_instance_count=1)
    CapacityReservationFactory(reservation_id="cr-0b", instance_type="p5.48xlarge", availability_zone="us-east-1b",
                               capacity_block=True, end_date=now + datetime.timedelta(hours=5), tags={"team": "web"},
                               total_instance_count=2, available_instance_count=2)
    CapacityReservationFactory(reservation_id="cr-0c", instance_type="m5.large", availability_zone="us-east-1b",
                               state=CapacityReservation.State.EXPIRED, tags={"team": "ml", "env": "prod"},
                               end_date=now - datetime.timedelta(days=1), total_instance_count=4, available_instance_count=2,
                               owner_id="210987654321")


@pytest.mark.parametrize("query,expected", [
    ("reservation_type=capacity-block", ["cr-0b"]),
    ("reservation_type=default", ["cr-0a", "cr-0c"]),
    ("state=active", ["cr-0a", "cr-0b"]),
    ("state=active&state=expired", ["cr-0a", "cr-0b", "cr-0c"]),
    ("availability_zone=US-EAST-1B", ["cr-0b", "cr-0c"]),
    ("instance_type=m5.large", ["cr-0a", "cr-0c"]),
    ("owner_id=210987654321", ["cr-0c"]),
    ("instance_match_criteria=targeted", ["cr-0a", "cr-0b", "cr-0c"]),
    ("tag=team=ml", ["cr-0a", "cr-0c"]),
    ("tag=env", ["cr-0c"]),
    ("tag=team=*", ["cr-0a", "cr-0b", "cr-0c"]),
    ("q=p5", ["cr-0b"]),
    ("q=cr-0c", ["cr-0c"]),
])
def test_filters_are_the_pages_filters(as_viewer, mixed, query, expected):
    assert ids(as_viewer.get(f"{URL}?{query}")) == expected


def test_an_invalid_filter_value_is_a_field_error(as_viewer, mixed):
    response = as_viewer.get(f"{URL}?state=sleeping")
    assert response.status_code == 400
    assert response.json() == {"state": ["Select a valid choice. sleeping is not one of the available choices."]}


@pytest.mark.parametrize("ordering,expected", [
    ("-reservation_id", ["cr-0c", "cr-0b", "cr-0a"]),
    ("current_utilization", ["cr-0b", "cr-0c", "cr-0a"]),
    ("-total_instance_count", ["cr-0a", "cr-0c", "cr-0b"]),
    ("end_date", ["cr-0c", "cr-0b", "cr-0a"]),
])
def test_ordering(as_viewer, mixed, ordering, expected):
    rows = ids(as_viewer.get(f"{URL}?ordering={ordering}"))
    if ordering == "end_date":  # NULLs sort last on PostgreSQL, first on SQLite
        rows = [row for row in rows if row != "cr-0a"] + ["cr-0a"]
    assert rows == expected


def test_ordering_by_an_unlisted_field_is_ignored(as_viewer, mixed):
    assert ids(as_viewer.get(f"{URL}?ordering=arn")) == ["cr-0a", "cr-0b", "cr-0c"]


def test_pagination_is_bounded(as_viewer, mixed):
    body = as_viewer.get(f"{URL}?limit=2").json()
    assert body["count"] == 3 and len(body["results"]) == 2
    assert body["next"] == "http://testserver/api/v1/capacity-reservations/?limit=2&offset=2"
    assert [row["reservationID"] for row in as_viewer.get(body["next"]).json()["results"]] == ["cr-0c"]
    paginator = BoundedLimitOffsetPagination()
    ask = Request(APIRequestFactory().get(URL, {"limit": 100000}))
    assert paginator.get_limit(ask) == 1000
    assert paginator.get_limit(Request(APIRequestFactory().get(URL))) == 50


# --- utilization samples ----------------------------------------------------------------------

def test_hourly_means_newest_first_with_a_time_window(as_viewer):
    hour = timezone.now().replace(minute=0, second=0, microsecond=0) - datetime.timedelta(hours=5)
    reservation = CapacityReservationFactory(reservation_id="cr-0aaa")
    for minutes, used, total in ((0, 1, 4), (30, 3, 4), (60, 2, 4), (120, 0, 0)):
        UtilizationSampleFactory(reservation=reservation, sampled_at=hour + datetime.timedelta(minutes=minutes),
                                 used=used, available=total - used, total=total)
    roll_up(since=hour)
    url = f"{URL}cr-0aaa/hours/"
    rows = results(as_viewer.get(url))
    iso = lambda moment: moment.isoformat().replace("+00:00", "Z")  # noqa: E731
    assert rows == [
        {"hour": iso(hour + datetime.timedelta(hours=2)), "samples": 1, "used": 0.0, "available": 0.0, "total": 0.0,
         "utilization": None},
        {"hour": iso(hour + datetime.timedelta(hours=1)), "samples": 1, "used": 2.0, "available": 2.0, "total": 4.0,
         "utilization": 0.5},
        {"hour": iso(hour), "samples": 2, "used": 2.0, "available": 2.0, "total": 4.0, "utilization": 0.5},
    ]
    windowed = as_viewer.get(url, {"since": iso(hour + datetime.timedelta(hours=1)), "until": iso(hour + datetime.timedelta(hours=2))})
    assert [row["hour"] for row in results(windowed)] == [iso(hour + datetime.timedelta(hours=1))]
    assert as_viewer.get(f"{URL}cr-0nope/hours/").status_code == 404


def test_samples_newest_first_with_a_time_window(as_viewer):
    now = timezone.now().replace(microsecond=0)
    reservation = CapacityReservationFactory(reservation_id="cr-0aaa")
    other = CapacityReservationFactory(reservation_id="cr-0bbb")
    for hours, used in ((1, 1), (2, 2), (3, 3), (30, 4)):
        UtilizationSampleFactory(reservation=reservation, sampled_at=now - datetime.timedelta(hours=hours),
                                 used=used, available=4 - used, total=4)
    UtilizationSampleFactory(reservation=other, sampled_at=now, used=0, available=4, total=4)
    url = f"{URL}cr-0aaa/samples/"
    rows = results(as_viewer.get(url))
    assert [row["used"] for row in rows] == [1, 2, 3, 4]
    assert rows[0] == {"sampledAt": (now - datetime.timedelta(hours=1)).isoformat().replace("+00:00", "Z"),
                       "used": 1, "available": 3, "total": 4, "utilization": 0.25}
    since = (now - datetime.timedelta(hours=24)).isoformat()
    until = (now - datetime.timedelta(hours=1)).isoformat()
    windowed = as_viewer.get(url, {"since": since, "until": until})
    assert [row["used"] for row in results(windowed)] == [2, 3]
    assert [row["used"] for row in results(as_viewer.get(url, {"ordering": "sampled_at"}))] == [4, 3, 2, 1]


def test_samples_of_an_unknown_reservation_404(as_viewer):
    response = as_viewer.get(f"{URL}cr-0nope/samples/")
    assert response.status_code == 404


def test_samples_with_a_bad_time_are_a_field_error(as_viewer):
    CapacityReservationFactory(reservation_id="cr-0aaa")
    response = as_viewer.get(f"{URL}cr-0aaa/samples/", {"since": "yesterday"})
    assert response.status_code == 400 and list(response.json()) == ["since"]


def test_reserved_offerings_are_listed_with_their_reservation(as_viewer):
    reservation = CapacityReservationFactory(reservation_id="cr-0aaa")
    OfferingFactory(instance_type=InstanceTypeFactory(name="m5.large"), capacity_type=CapacityType.RESERVED,
                    reservation=reservation, price=0.096 / 10_000_000)
    rows = results(as_viewer.get("/api/v1/offerings/", {"reservation": "cr-0aaa"}))
    assert [(row["capacityType"], row["reservationID"]) for row in rows] == [("reserved", "cr-0aaa")]
