"""The console's money rule on the pages: monthly savings apart from one-off extensions (never in the
monthly total or the overview's top three), every figure saying what it is; a reservation with too little
history says so instead of "its use calls for no change"; the evidence chart is drawn unstacked."""

import datetime
import json

import pytest
from django.urls import reverse
from django.utils import timezone

from reservations.models import CapacityReservation, Recommendation, UtilizationHour

pytestmark = pytest.mark.django_db


def reservation(rid, kind="default", total=4, available=4):
    return CapacityReservation.objects.create(
        reservation_id=rid, instance_type="m5.large", availability_zone="us-east-1a", reservation_type=kind,
        state="active", total_instance_count=total, available_instance_count=available)


def hours_of_history(row, now, hours, used=0.0):
    UtilizationHour.objects.bulk_create([
        UtilizationHour(reservation=row, hour=now.replace(minute=0, second=0, microsecond=0) - datetime.timedelta(hours=h + 1),
                        samples=60, first_sampled_at=now, used=used, available=row.total_instance_count - used,
                        total=row.total_instance_count, share_sum=0, share_samples=60, peak_used=used)
        for h in range(hours)])


def recommendation(row, kind, savings, **details):
    return Recommendation.objects.create(kind=kind, reservation=row, reason=f"{kind} it", savings_per_month=savings,
                                         details=details, seen_total=row.total_instance_count, computed_at=timezone.now())


@pytest.fixture
def mixed():
    odcr, block = reservation("cr-0aaa"), reservation("cr-0bbb", kind="capacity-block", available=0)
    shrink = recommendation(odcr, "shrink", 140.16, money="monthly", moneyBasis="2 idle m5.large x $0.0960/h")
    cancel = recommendation(odcr, "cancel", 280.32, money="monthly", moneyBasis="4 idle m5.large x $0.0960/h")
    extend = recommendation(block, "extend", 0.0, money="one-off", lostWork=330.37, oneOffCost=120.0,
                            offerings=[{"offering_id": "cbeo-1", "hours": 24, "upfront_fee": 120.0}])
    return {"shrink": shrink, "cancel": cancel, "extend": extend}


def test_the_list_keeps_monthly_and_one_off_money_apart(mixed, viewer_client):
    page = viewer_client.get(reverse("reservations:recommendations")).content.decode()
    # One reservation counted once, at its largest saving; the extension's $330.37 is in no monthly figure.
    assert '<strong id="total-per-month">$280.32</strong> a month (recurring' in page
    assert "one-off: an extension costs $120.00 once, against a one-off loss of about $330.37 of work" in page
    assert "costs <strong>$120.00</strong> once, against a one-off loss of about <strong>$330.37</strong>" in page
    assert "$330.37 a month" not in page and "saves $330.37" not in page


def test_the_overview_ranks_monthly_savings_only(mixed, viewer_client):
    page = viewer_client.get(reverse("scheduling:overview")).content.decode()
    top = page.split('id="top-recommendations"')[1].split("</section>")[0]
    assert top.count("a month (recurring, at list price)</li>") == 2 and "cr-0bbb</a>" not in top
    assert "And 1 Capacity Block extension: one-off purchases" in top


def test_an_extension_page_says_one_off_and_where_the_figures_come_from(mixed, operator_client, settings):
    settings.KARPWEB_MODE = "control"
    page = operator_client.get(reverse("reservations:recommendation", args=[mixed["extend"].pk])).content.decode()
    assert "One-off: an extension costs $120.00 once" in page and "a month" not in page.split('id="money"')[1].split("</p>")[0]
    assert "Apply (a one-off purchase)" in page
    shrink = operator_client.get(reverse("reservations:recommendation", args=[mixed["shrink"].pk])).content.decode()
    assert "Saves $140.16 a month (recurring, at list price)" in shrink and "From: 2 idle m5.large x $0.0960/h." in shrink


def test_the_evidence_chart_is_not_stacked(mixed, viewer_client):
    response = viewer_client.get(reverse("reservations:recommendation", args=[mixed["shrink"].pk]))
    assert response.context["chart"]["stacked"] is False
    data = response.content.decode().split('id="recommendation-data" type="application/json">')[1].split("</script>")[0]
    assert json.loads(data)["stacked"] is False


def test_an_extension_without_offerings_has_no_apply_button(operator_client, settings):
    settings.KARPWEB_MODE = "control"
    block = reservation("cr-0ccc", kind="capacity-block", available=0)
    rec = recommendation(block, "extend", 0.0, money="one-off", lostWork=10.0, oneOffCost=None, offerings=[])
    page = operator_client.get(reverse("reservations:recommendation", args=[rec.pk])).content.decode()
    assert 'id="apply-button"' not in page and "Cannot be applied: EC2 offers no extension of this Capacity Block now" in page


def test_short_history_says_not_enough_history_yet(viewer_client):
    now = timezone.now()
    row = reservation("cr-0ddd", total=4, available=4)
    hours_of_history(row, now, 48)
    page = viewer_client.get(reverse("reservations:detail", args=["cr-0ddd"])).content.decode()
    assert "Not enough history yet (2 of 14 days)" in page and "calls for no change" not in page
    hours_of_history(reservation("cr-0eee", total=4, available=4), now, 15 * 24)
    full = viewer_client.get(reverse("reservations:detail", args=["cr-0eee"])).content.decode()
    assert "None: its use over the last 14 days calls for no change." in full and "Not enough history" not in full
