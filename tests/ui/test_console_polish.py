"""One way of writing a time on every page, the navigation in groups, a sign-in page without it, charts that
say the span of their data, and the selector editor's placeholders."""

import datetime
import re

import pytest
from django.urls import reverse
from django.utils import timezone

from reservations.models import CapacityReservation, EC2NodeClass, Recommendation
from reservations.utilization import hourly_span
from scheduling.models import Decision, KarpenterLaunch, NodeClaim, Pod
from tests.factories.scheduling import DecisionFactory
from tests.ui.test_views import LIST_PAGES

pytestmark = pytest.mark.django_db

# How a time may be written: "2026-11-26 08:49 UTC" (a day alone: "2026-11-26").
ONE_FORMAT = re.compile(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2} UTC")
OTHER_FORMATS = [
    (re.compile(r"\b(Jan|Feb|Mar|Apr|May|June?|July?|Aug|Sept?|Oct|Nov|Dec)[a-z]*\.? \d{1,2}(, \d{4})?"), "a month name"),
    (re.compile(r"\d{1,2}(:\d{2})? ?[ap]\.m\.|\bnoon\b|\bmidnight\b"), "a.m./p.m."),
    (re.compile(r"\b\d{1,2}/\d{1,2}/\d{2,4}\b"), "a month/day/year date"),
    (re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}"), "an ISO 8601 time"),
    (re.compile(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}(:\d{2})?(?! UTC)"), "a time without UTC after it"),
    (re.compile(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}"), "a time with seconds"),
]


def visible_text(html: str) -> str:
    """The page's text as a person reads it: no scripts, styles or tags (attributes hold machine times)."""
    html = re.sub(r"<(script|style)\b.*?</\1>", " ", html, flags=re.S)
    html = re.sub(r"<[^>]+>", " ", html)
    return re.sub(r"\s+", " ", html)


def other_formats(text: str) -> list[str]:
    return [f"{why}: {match.group(0)!r}" for pattern, why in OTHER_FORMATS for match in pattern.finditer(text)]


def pages():
    claim = NodeClaim.objects.order_by("name").first()
    pod = Pod.objects.exclude(node=None).order_by("name").first()
    block = CapacityReservation.objects.filter(reservation_type="capacity-block", state="active").order_by("end_date").first()
    return ([reverse(name) for name in LIST_PAGES]
            + [reverse("reservations:recommendations"), reverse("scheduling:karpenter_audit"), reverse("api_tokens"),
               block.get_absolute_url(), claim.get_absolute_url(), claim.node.get_absolute_url(), pod.get_absolute_url(),
               Recommendation.objects.order_by("pk").first().get_absolute_url(),
               EC2NodeClass.objects.get(name="default").get_absolute_url(), claim.node_pool.get_absolute_url()])


def test_the_scan_finds_each_other_format():
    for text in ("Nov. 26, 2026, 8:49 a.m.", "Sept. 27, 2026", "12/06/2026 1:27", "2026-11-26T08:49:00+00:00",
                 "as of 2026-11-26 08:49", "2026-11-26 08:49:05 UTC", "13:20 p.m."):
        assert other_formats(text), text
    assert other_formats("drains 2026-11-26 08:49 UTC, day 2026-11-26, 3 hours ago") == []


def test_every_page_writes_times_one_way(viewer_client, demo_world):
    now = timezone.now()
    DecisionFactory(created_at=now - datetime.timedelta(hours=3))  # the decisions table and the overview list one
    claim = NodeClaim.objects.order_by("name").first()
    KarpenterLaunch.objects.create(claim_name="karpenter-x1", instance_type="m5.large", zone="us-east-1a",
                                   capacity_type="on-demand", launched_at=now - datetime.timedelta(days=2),
                                   outcome="no-free-unit", reason="no free unit", price_per_hour=0.096)
    Decision.objects.create(kind=Decision.Kind.DRAIN, mode="control", subject=f"node {claim.node.name}",
                            reason="drains before its block ends")
    found, written = {}, set()
    for url in pages():
        response = viewer_client.get(url)
        assert response.status_code == 200, url
        text = visible_text(response.content.decode())
        if problems := other_formats(text):
            found[url] = problems
        if ONE_FORMAT.search(text):
            written.add(url)
    assert found == {}
    # The scan read times where the pages write them: tables, details, countdowns.
    assert {reverse("reservations:list"), reverse("scheduling:decisions"), reverse("reservations:capacity_blocks"),
            claim.get_absolute_url(), reverse("scheduling:karpenter_audit")} <= written


def test_navigation_is_grouped_and_the_sign_in_page_has_none(client, viewer_client):
    page = viewer_client.get(reverse("scheduling:overview")).content.decode()
    nav = re.search(r'<nav aria-label="Pages">(.*?)</nav>', page, re.S).group(1)
    groups = re.findall(r'class="menu-title"[^>]*>([^<]+)</button>', nav)
    assert groups == ["Capacity", "Cluster", "Activity", "Tools"]
    # Every page is in one group; the top row holds the overview and the four groups.
    top_level = re.findall(r"^\s{6}<a ", nav, re.M)
    assert len(top_level) == 1 and nav.count("<a ") >= 14
    user_menu = re.search(r'class="menu user-menu".*?</div></div>', page, re.S).group(0)
    assert f'href="{reverse("api_tokens")}"' in user_menu and f'href="{reverse("api-docs")}"' in user_menu
    assert "log out" in user_menu
    sign_in = client.get(reverse("login")).content.decode()
    assert "<nav" not in sign_in and "Reservations" not in sign_in and 'name="username"' in sign_in


def test_chart_titles_say_the_span_of_their_data(viewer_client, demo_world):
    block = CapacityReservation.objects.get(reservation_id="cr-0a1b2c3d4e5f60006")  # started two days ago
    page = viewer_client.get(block.get_absolute_url()).content.decode()
    assert 'id="chart-title">Used and available, hourly means over 2 days<' in page
    odcr = CapacityReservation.objects.get(reservation_id="cr-0a1b2c3d4e5f60001")
    assert "hourly means over 7 days<" in viewer_client.get(odcr.get_absolute_url()).content.decode()
    rec = Recommendation.objects.filter(reservation=odcr, kind="shrink").first()
    assert "Evidence: hourly means over 14 days before it was computed" in viewer_client.get(rec.get_absolute_url()).content.decode()
    hour = datetime.datetime(2026, 11, 26, tzinfo=datetime.UTC)
    assert hourly_span([]) == "no data yet" and hourly_span([hour]) == "1 hour"
    assert hourly_span([hour, hour + datetime.timedelta(hours=46)]) == "47 hours"
    assert hourly_span([hour, hour + datetime.timedelta(days=3)]) == "3 days"


def test_selector_editor_placeholders_are_no_real_values_and_terms_count_from_one(operator_client, demo_world):
    from scheduling.demo import ACCOUNT

    page = operator_client.get(reverse("reservations:nodeclass_edit", args=["default"])).content.decode()
    placeholders = re.findall(r'placeholder="([^"]*)"', page)
    assert placeholders and all(ACCOUNT not in p and not re.search(r"cr-[0-9a-f]{8,}", p) for p in placeholders), placeholders
    assert 'placeholder="owner account id"' in page
    terms = len(EC2NodeClass.objects.get(name="default").capacity_reservation_selector_terms)
    assert re.findall(r"<legend>Term (\d+)</legend>", page) == [str(n) for n in range(1, terms + 1)]
