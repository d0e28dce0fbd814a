"""The pages' tests that build their own rows rather than the demo world's: tests/ui/test_views.py
seeds the demo world once for its module, so the tests that must not see it live here."""

import datetime

import pytest
from django.urls import reverse
from django.utils import timezone

from reservations.models import CapacityReservation
from reservations.utilization import roll_up
from scheduling.models import Decision
from tests.factories.reservations import CapacityReservationFactory, UtilizationSampleFactory
from tests.factories.scheduling import DecisionFactory, NodeFactory
from tests.ui.test_views import LIST_PAGES

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("page", LIST_PAGES)
def test_login_required(client, page):
    response = client.get(reverse(page))
    assert response.status_code == 302 and response.url.startswith("/login/")


@pytest.mark.parametrize("page", LIST_PAGES)
def test_user_without_a_role_is_refused(client, nobody, page):
    client.force_login(nobody)
    assert client.get(reverse(page)).status_code == 403


def test_low_utilization_needs_a_full_day_of_samples(viewer_client, db):
    now = timezone.now()
    young = CapacityReservationFactory(reservation_id="cr-0young", total_instance_count=10, available_instance_count=10)
    for hours in range(0, 6):
        UtilizationSampleFactory(reservation=young, sampled_at=now - datetime.timedelta(hours=hours), used=0, available=10, total=10)
    roll_up(since=now - datetime.timedelta(days=2))
    assert not CapacityReservation.objects.with_recent_utilization(now).get(pk=young.pk).is_low_utilization(now)
    for hours in range(6, 25):
        UtilizationSampleFactory(reservation=young, sampled_at=now - datetime.timedelta(hours=hours) + datetime.timedelta(minutes=1),
                                 used=1, available=9, total=10)
    roll_up(since=now - datetime.timedelta(days=2))
    assert CapacityReservation.objects.with_recent_utilization(now).get(pk=young.pk).is_low_utilization(now)


def test_capacity_block_countdowns(viewer_client, db):
    now = timezone.now()
    CapacityReservationFactory(reservation_id="cr-0block", capacity_block=True, end_date=now + datetime.timedelta(minutes=100))
    CapacityReservationFactory(reservation_id="cr-0ultra", capacity_block=True, ultraserver_type="trn2u.48xlarge",
                               end_date=now + datetime.timedelta(minutes=100))
    page = viewer_client.get(reverse("reservations:capacity_blocks"), HTTP_HX_REQUEST="true").content.decode()
    block_row = page.split('data-block="cr-0block"')[1].split("</tr>")[0]
    ultra_row = page.split('data-block="cr-0ultra"')[1].split("</tr>")[0]
    assert "in 59m" in block_row  # drain at end - 40 min
    assert "in 29m" in ultra_row  # drain at end - 70 min for an UltraServer block
    assert "<html" not in page
    assert 'data-countdown-at="' in block_row  # the browser ticks it between refreshes


def test_capacity_block_page_lists_the_first_nodes_of_a_block(viewer_client, db):
    now = timezone.now()
    block = CapacityReservationFactory(reservation_id="cr-0big", capacity_block=True, end_date=now + datetime.timedelta(hours=5))
    for i in range(7):
        NodeFactory(name=f"gpu-{i}", reservation=block, capacity_type="reserved")
    row = viewer_client.get(reverse("reservations:capacity_blocks")).content.decode().split('data-block="cr-0big"')[1].split("</tr>")[0]
    assert [f"gpu-{i}" in row for i in range(7)] == [True] * 5 + [False] * 2
    assert '<a href="/reservations/cr-0big/">and 2 more</a>' in row


def test_decisions_filter(viewer_client, db):
    DecisionFactory(kind=Decision.Kind.DRAIN, subject="node gpu-3", reason="node gpu-3 drains at 13:20")
    DecisionFactory(kind=Decision.Kind.LAUNCH, subject="pod default/web-7", reason="pod web-7 went to on-demand")
    page = viewer_client.get(reverse("scheduling:decisions"), {"kind": "drain"}).content.decode()
    assert "gpu-3" in page and "web-7" not in page
    page = viewer_client.get(reverse("scheduling:decisions"), {"q": "on-demand"}).content.decode()
    assert "web-7" in page and "gpu-3" not in page


def test_overview_alarms_a_block_still_running_45_minutes_before_its_end(viewer_client, db):
    import time_machine

    now = timezone.now()
    block = CapacityReservationFactory(reservation_id="cr-0late", capacity_block=True, end_date=now + datetime.timedelta(minutes=50))
    NodeFactory(reservation=block, reservation_label=block.reservation_id)
    assert "block-alarms" not in viewer_client.get(reverse("scheduling:overview")).content.decode()
    with time_machine.travel(now + datetime.timedelta(minutes=5, seconds=1)):
        page = viewer_client.get(reverse("scheduling:overview")).content.decode()
    assert "block-alarms" in page and "cr-0late" in page
