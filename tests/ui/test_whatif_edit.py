"""What-if by editing, on the demo world: a change in the form gives the plans before and after side
by side; bad input is answered by field; a recommendation opens with its change applied."""

import pytest
from django.urls import reverse
from django.utils import timezone

from reservations.models import CapacityReservation, Recommendation
from scheduling.models import Pod

URL = reverse("scheduling:whatif_edit")


@pytest.fixture
def demo_world(demo_world_for_module, db):
    """Every test here builds on the demo world: it is seeded once for the module (tests/conftest.py),
    and each test's own writes are rolled back after it."""


def test_scaling_a_workload_shows_before_and_after(demo_world, viewer_client):
    pod = Pod.objects.exclude(owner_kind="DaemonSet").exclude(node__isnull=True).first()
    page = viewer_client.post(URL, {"scale_like": f"{pod.namespace}/{pod.name}", "scale_times": 40})
    assert page.status_code == 200
    text = page.content.decode()
    assert 'id="side-by-side"' in text and "Pods left pending" in text
    before, after = page.context["result"]["before"], page.context["result"]["after"]
    assert after["newNodes"] > before["newNodes"] or after["bound"] > before["bound"]


def test_bad_input_is_answered_by_field(demo_world, viewer_client):
    page = viewer_client.post(URL, {"count_id": "cr-nope", "count": "-3", "scale_like": "web/x"})
    assert page.status_code == 400
    errors = page.context["form"].errors
    assert "count" in errors and "scale_times" in errors
    nothing = viewer_client.post(URL, {})
    assert nothing.status_code == 400 and "fill in at least one change" in nothing.content.decode()
    unknown = viewer_client.post(URL, {"remove_id": "cr-nope"})
    assert unknown.status_code == 400 and "no reservation &#x27;cr-nope&#x27; in this world" in unknown.content.decode()


def test_a_recommendation_opens_with_its_change(demo_world, viewer_client):
    reservation = CapacityReservation.objects.filter(reservation_type="default").first()
    rec = Recommendation.objects.create(kind="cancel", reservation=reservation, reason="test", savings_per_month=1.0,
                                        seen_total=reservation.total_instance_count, computed_at=timezone.now())
    page = viewer_client.get(URL, {"recommendation": rec.pk})
    assert page.status_code == 200 and page.context["form"]["remove_id"].value() == reservation.reservation_id
    assert page.context["result"]["after"] is not None
    detail = viewer_client.get(reverse("reservations:recommendation", args=[rec.pk])).content.decode()
    assert f"?recommendation={rec.pk}" in detail
