"""The reservation doctor's faces on the seeded demo fleet: the overview's panel, the doctor page per
reservation and per EC2NodeClass, the detail pages, and the read-only API with its filters."""

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from accounts.tokens import create_token
from fleet.scope import default_cluster
from scheduling.demo import reservation_id

pytestmark = pytest.mark.django_db
UNSELECTED = reservation_id("0009")


@pytest.fixture
def demo_world(demo_world_for_module, db):
    """Every test here builds on the demo world: seeded once for the module, each test's writes rolled back."""


def test_the_overview_of_the_seeded_fleet_shows_the_doctor(viewer_client, demo_world):
    page = viewer_client.get(reverse("scheduling:overview")).content.decode()  # all clusters
    panel = page.split('id="doctor-panel"')[1].split("</section>")[0]
    assert "<strong>3</strong> things stop" in panel and "3 warning" in panel and "0 critical" in panel
    assert reverse("reservations:doctor") in panel
    research = viewer_client.get(reverse("scheduling:overview"), {"cluster": "research-use1"}).content.decode()
    assert "<strong>1</strong> thing stops" in research.split('id="doctor-panel"')[1]


def test_the_doctor_page_per_reservation_and_per_class(viewer_client, demo_world):
    page = viewer_client.get(reverse("reservations:doctor")).content.decode()
    per_reservation = page.split('id="by-reservation"')[1].split("</section>")[0]
    per_class = page.split('id="by-nodeclass"')[1].split("</section>")[0]
    assert UNSELECTED in per_reservation and 'data-code="reservation-unselected"' in per_reservation
    assert "Evidence:" in per_reservation and "Fix:" in per_reservation and "{&quot;id&quot;: &quot;%s&quot;}" % UNSELECTED in per_reservation
    assert "research" in per_class and 'data-code="selector-matches-nothing"' in per_class and "research-gpu" in per_class


def test_detail_pages_show_their_findings(viewer_client, demo_world):
    reservation = viewer_client.get(reverse("reservations:detail", args=[UNSELECTED])).content.decode()
    assert 'data-code="reservation-unselected"' in reservation.split('id="doctor"')[1].split("</section>")[0]
    healthy = viewer_client.get(reverse("reservations:detail", args=[reservation_id("0001")])).content.decode()
    assert "The doctor finds nothing stopping it." in healthy.split('id="doctor"')[1].split("</section>")[0]
    node_class = viewer_client.get(reverse("reservations:nodeclass", args=["research"]),
                                   {"cluster": "research-use1"}).content.decode()
    assert 'data-code="selector-matches-nothing"' in node_class.split('id="doctor"')[1].split("</section>")[0]


def test_the_api_lists_findings_filtered_by_cluster_account_and_code(viewer, demo_world):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {create_token(viewer)[1]}")
    every = client.get("/api/v1/reservation-doctor/").json()["results"]
    first = default_cluster().name  # the install's own cluster, the demo's first
    assert sorted((f["cluster"], f["code"]) for f in every) == sorted([
        (first, "reservation-unselected"), ("research-use1", "selector-matches-nothing"),
        ("staging-use1", "reservation-unselected")])
    one = client.get("/api/v1/reservation-doctor/", {"cluster": "research-use1"}).json()["results"]
    assert [(f["nodeClass"], f["evidenceData"]["term"]) for f in one] == [("research", 1)]
    assert one[0]["fixCommand"].startswith("apiVersion: karpenter.k8s.aws/v1") and one[0]["clearedAt"] is None
    by_code = client.get("/api/v1/reservation-doctor/", {"code": "reservation-unselected", "account": "123456789012"})
    assert {f["reservationID"] for f in by_code.json()["results"]} == {UNSELECTED}
    assert client.get("/api/v1/reservation-doctor/", {"cleared": "true"}).json()["results"] == []
    bad = client.get("/api/v1/reservation-doctor/", {"code": "no-such-code"})
    assert bad.status_code == 400 and "code" in bad.json()
    assert client.post("/api/v1/reservation-doctor/", {}).status_code in (403, 405)  # read-only for everyone
