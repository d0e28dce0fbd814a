"""#48: CSV downloads of the reservations, their hourly use, the recommendations and the Karpenter
audit: the rows the list's filters keep, in the requester's scope, streamed, and every text cell a
spreadsheet would run as a formula neutralised (OWASP CSV injection)."""

import csv
import datetime
import io

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.urls import reverse
from django.utils import timezone

from fleet import scope
from fleet.models import AwsAccount, Cluster
from karpweb.csvexport import CHUNK_ROWS, safe_cell
from reservations.models import Recommendation, UtilizationHour
from scheduling.models import KarpenterLaunch
from tests.factories.reservations import CapacityReservationFactory

pytestmark = pytest.mark.django_db
HOUR = datetime.timedelta(hours=1)


def download(client, url, **params):
    response = client.get(url, params)
    assert response.status_code == 200, response.content
    assert response.streaming and response["Content-Type"] == "text/csv; charset=utf-8"
    assert response["Content-Disposition"].startswith('attachment; filename="')
    return list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))


@pytest.mark.parametrize("first", ["=", "+", "-", "@", "\t", "\r"])
def test_a_cell_that_starts_a_formula_is_neutralised(first):
    assert safe_cell(f"{first}HYPERLINK(\"http://evil\")") == f"'{first}HYPERLINK(\"http://evil\")"
    assert safe_cell(f"a{first}b") == f"a{first}b"
    assert safe_cell(-3) == -3 and safe_cell(None) == ""


def test_the_reservations_as_filtered_with_their_hourly_use(viewer_client):
    tagged = CapacityReservationFactory(reservation_id="cr-0csv1", instance_type="p5.48xlarge",
                                        tags={"team": "=cmd|' /C calc'!A0"})
    CapacityReservationFactory(reservation_id="cr-0csv2", instance_type="m5.large")
    page = viewer_client.get(reverse("reservations:list"), {"instance_type": "p5.48xlarge"}).content.decode()
    assert 'href="?instance_type=p5.48xlarge&amp;export=csv"' in page

    rows = download(viewer_client, reverse("reservations:list"), instance_type="p5.48xlarge", export="csv")
    assert [row["reservation_id"] for row in rows] == ["cr-0csv1"]
    assert rows[0]["tags"] == "{\"team\": \"=cmd|' /C calc'!A0\"}"  # JSON text: starts with {
    assert (rows[0]["total"], rows[0]["available"], rows[0]["used"]) == ("4", "2", "2")

    start = timezone.now().replace(minute=0, second=0, microsecond=0) - (CHUNK_ROWS + 10) * HOUR
    UtilizationHour.objects.bulk_create(
        UtilizationHour(reservation=reservation, hour=start + i * HOUR, samples=120, first_sampled_at=start + i * HOUR,
                        used=1.5, available=2.5, total=4, share_sum=45.0, share_samples=120)
        for reservation in (tagged, CapacityReservationFactory(reservation_id="cr-0csv2")) for i in range(CHUNK_ROWS + 10))
    hours = download(viewer_client, reverse("reservations:list"), instance_type="p5.48xlarge", export="hours")
    assert len(hours) == CHUNK_ROWS + 10 and {row["reservation_id"] for row in hours} == {"cr-0csv1"}
    assert hours[0]["hour"] == f"{start:%Y-%m-%dT%H:00:00Z}" and hours[0]["utilization"] == "0.375"
    since = start + 10 * HOUR
    windowed = download(viewer_client, reverse("reservations:list"), instance_type="p5.48xlarge", export="hours",
                        since=f"{since:%Y-%m-%dT%H:%M:%SZ}")
    assert len(windowed) == CHUNK_ROWS


def test_a_formula_in_any_text_cell_is_written_as_text(viewer_client):
    reservation = CapacityReservationFactory(reservation_id="cr-0csv3", tags={"=team": "x"})
    Recommendation.objects.create(kind="shrink", reservation=reservation, reason="-2+3+cmd|' /C calc'!A0",
                                  savings_per_month=-12.5, seen_total=4, computed_at=timezone.now())
    KarpenterLaunch.objects.create(
        claim_name="@SUM(1+9)*cmd", node_pool_name="+web", instance_type="m5.large", zone="us-east-1a",
        capacity_type="on-demand", launched_at=timezone.now(), outcome="missed-reservation", reason="\tlooks blank",
        missed_dollars=1.25, price_per_hour=0.096, reservation=reservation, reservation_label="cr-0csv3")

    recommendation = download(viewer_client, reverse("reservations:recommendations"), export="csv")[0]
    assert recommendation["reason"] == "'-2+3+cmd|' /C calc'!A0"
    assert recommendation["savings_per_month"] == "-12.5"  # a number stays a number
    launch = download(viewer_client, reverse("scheduling:karpenter_audit"), export="csv")[0]
    assert (launch["nodeclaim"], launch["nodepool"], launch["reason"]) == ("'@SUM(1+9)*cmd", "'+web", "'\tlooks blank")
    assert launch["missed_dollars"] == "1.25" and launch["outcome"] == "missed-reservation"
    reservations = download(viewer_client, reverse("reservations:list"), export="csv")
    assert [row["tags"] for row in reservations if row["reservation_id"] == "cr-0csv3"] == ['{"=team": "x"}']


def test_bad_input_is_named(viewer_client):
    wrong = viewer_client.get(reverse("reservations:list"), {"export": "xlsx"})
    assert wrong.status_code == 400 and wrong.content.decode() == "export: one of csv, hours, not 'xlsx'"
    bad_filter = viewer_client.get(reverse("scheduling:karpenter_audit"), {"export": "csv", "day": "someday"})
    assert bad_filter.status_code == 400 and bad_filter.content.decode() == "day: Enter a valid date."
    bad_since = viewer_client.get(reverse("reservations:list"), {"export": "hours", "since": "yesterday"})
    assert bad_since.status_code == 400 and bad_since.content.decode().startswith("since: ")


def test_a_scoped_user_downloads_its_scope_alone(client):
    scope.forget_default()
    east = Cluster.objects.create(name="east", account=AwsAccount.objects.create(account_id="111111111111", name="ml-prod"),
                                  region="us-east-1")
    west = Cluster.objects.create(name="west", account=AwsAccount.objects.create(account_id="222222222222", name="ml-dev"),
                                  region="us-west-2")
    for cluster in (east, west):
        with scope.cluster_scope(cluster):
            reservation = CapacityReservationFactory(reservation_id=f"cr-0{cluster.name}", region=cluster.region,
                                                     owner_id=cluster.account.account_id)
            KarpenterLaunch.objects.create(
                claim_name=f"{cluster.name}-claim", instance_type="m5.large", zone="us-east-1a", capacity_type="on-demand",
                launched_at=timezone.now(), outcome="missed-reservation", reason="r", reservation=reservation)
            Recommendation.objects.create(kind="cancel", reservation=reservation, reason="idle", savings_per_month=10,
                                          seen_total=4, computed_at=timezone.now())
    sam = get_user_model().objects.create_user("sam", "sam@example.com", "pw-for-tests-only")
    call_command("grant", "sam", "viewer", "--cluster", "east", stdout=io.StringIO())
    client.force_login(sam)

    assert [r["reservation_id"] for r in download(client, reverse("reservations:list"), export="csv")] == ["cr-0east"]
    assert [r["reservation_id"] for r in download(client, reverse("reservations:recommendations"), export="csv")] == [
        "cr-0east"]
    assert [r["nodeclaim"] for r in download(client, reverse("scheduling:karpenter_audit"), export="csv")] == ["east-claim"]
    assert [r["cluster"] for r in download(client, reverse("scheduling:karpenter_audit"), export="csv")] == ["east"]
    scope.forget_default()
