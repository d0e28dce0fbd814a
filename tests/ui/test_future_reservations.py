"""Future-dated reservations on the pages and the API (issue #37), on the demo world's scheduled one
(cr-0a1b2c3d4e5f60011: m6i.xlarge in us-east-1b, starting in four days with a two-week commitment, selected
by the batch class's tags once active): its state, start and commitment with their countdowns, the
overview's "Upcoming reservations" panel (the NodePools and pods that will use it) and a pod's reason."""

import datetime

import pytest
from django.urls import reverse
from django.utils import timezone

from fleet.scope import cluster_scope
from reservations.models import CapacityReservation
from scheduling.models import NodePool, Pod
from scheduling.whatif_edits import before_and_after

pytestmark = pytest.mark.django_db

FUTURE = "cr-0a1b2c3d4e5f60011"


@pytest.fixture
def demo_world(demo_world_for_module, db):
    """Seeded once for the module; each test's own writes are rolled back after it."""


def test_the_api_gives_state_start_commitment_and_their_countdowns(demo_world, viewer_client):
    row = CapacityReservation.objects.get(reservation_id=FUTURE)
    before = timezone.now()
    body = viewer_client.get(f"/api/v1/capacity-reservations/{FUTURE}/").json()
    after = timezone.now()
    assert (body["state"], body["upcoming"], body["usable"], body["deliveryPreference"]) == ("scheduled", True, False, "fixed")
    assert body["committedInstanceCount"] == 3
    assert (row.start_date - after).total_seconds() - 1 <= body["secondsUntilStart"] <= (row.start_date - before).total_seconds()
    assert ((row.commitment_end_date - after).total_seconds() - 1 <= body["secondsUntilCommitmentEnd"]
            <= (row.commitment_end_date - before).total_seconds())
    active = viewer_client.get("/api/v1/capacity-reservations/cr-0a1b2c3d4e5f60001/").json()
    assert (active["upcoming"], active["secondsUntilStart"], active["secondsUntilCommitmentEnd"]) == (False, None, None)


def test_list_and_detail_show_the_countdowns(demo_world, viewer_client):
    page = viewer_client.get(reverse("reservations:list")).content.decode()
    row = page.split(f">{FUTURE}</a>")[1].split("</tr>")[0]
    assert "scheduled" in row and "starts in 3d 23h" in row and "committed 3, ends in 17d 23h" in row
    assert "not started" in row
    detail = viewer_client.get(reverse("reservations:detail", args=[FUTURE])).content.decode()
    starts = detail.split('id="starts">')[1].split("</dd>")[0]
    assert "(in 3d 23h" in starts and "karpweb plans with it only from its start" in starts
    commitment = detail.split('id="commitment">')[1].split("</dd>")[0]
    assert commitment.startswith("committed until ") and ", 3 units (in 17d 23h" in commitment
    assert 'id="delivery">fixed' in detail
    general = NodePool.objects.fleet().get(name="general").get_absolute_url()  # the first cluster's
    assert f'NodePools that will use it: <a href="{general}">general</a>' in detail.replace("\n", "")


def test_overview_lists_upcoming_reservations_with_their_pools_and_pods(demo_world, viewer_client):
    overview = viewer_client.get(reverse("scheduling:overview")).content.decode()
    url = reverse("scheduling:upcoming_reservations")
    assert f'hx-get="{url}" hx-trigger="load"' in overview  # loaded after the page: it reasons about every pod
    page = viewer_client.get(url).content.decode()
    panel = page.split('id="upcoming-reservations"')[1].split("</section>")[0]
    row = panel.split(f'data-reservation="{FUTURE}"')[1].split("</tr>")[0]
    assert "scheduled" in row and "(in 3d 23h" in row and ">general</a>" in row and ">web</a>" not in row
    paid = Pod.objects.filter(node__capacity_type__in=("on-demand", "spot"), node__instance_type="m6i.xlarge",
                              node__zone="us-east-1b", node__node_pool__name="general").exclude(owner_kind="DaemonSet").count()
    shown = int(row.split('class="pods">')[1].split(" on paid nodes")[0])
    assert paid > 0 and shown >= paid  # its own type's spot pods, and the pool's other paid pods that fit one

    # A pool whose requirements leave the zone out does not use it; once it started, it is no longer upcoming.
    NodePool.objects.filter(name="general").update(requirements=[
        {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-east-1a"]}])
    row = viewer_client.get(url).content.decode().split(f'data-reservation="{FUTURE}"')[1].split("</tr>")[0]
    assert "none: no EC2NodeClass will select it" in row and "none now" in row
    CapacityReservation.objects.filter(reservation_id=FUTURE).update(start_date=timezone.now() - datetime.timedelta(minutes=1))
    assert 'id="upcoming-reservations"' not in viewer_client.get(url).content.decode()


def test_a_pod_that_only_the_future_reservation_could_hold_says_when_it_starts(demo_world, viewer_client):
    # The batch class's active reservations full: the general pool's pods have only the scheduled one ahead.
    CapacityReservation.objects.exclude(reservation_id=FUTURE).update(available_instance_count=0)
    pod = Pod.objects.filter(node__capacity_type="spot", node__instance_type="m6i.xlarge").exclude(owner_kind="DaemonSet").first()
    page = viewer_client.get(reverse("scheduling:pod", args=[pod.namespace, pod.name])).content.decode()
    reason = page.split('id="why-not-reserved"')[1].split("</p>")[0]
    assert 'data-blocker="not-started"' in reason
    assert f"{FUTURE} (m6i.xlarge in us-east-1b) could hold it once it starts (reservation {FUTURE} is scheduled: it starts at" in reason


def test_what_if_plans_at_the_start_of_the_reservation(demo_world, viewer_client, first_cluster_shown):
    """The world at its start has it active with its three m6i.xlarge units free (the demo's nodes have room for
    every pod, so its units stay idle: tests/engine/test_future_reservations.py shows pods going into it)."""
    url = reverse("scheduling:whatif")
    form = viewer_client.get(url).content.decode()
    assert f'<option value="{FUTURE}">' in form and "At the start of reservation" in form
    page = viewer_client.post(url, {"start_id": FUTURE})
    assert page.status_code == 200
    result = page.context["result"]
    assert result["problems"] == []
    assert result["after"] is not None and 'id="side-by-side"' in page.content.decode()
    # At its start it is usable: its three free m6i.xlarge count as idle prepaid capacity at list price.
    at_start = [{"kind": "at-reservation-start", "id": FUTURE}]
    with cluster_scope(first_cluster_shown):
        with_it = before_and_after(at_start)["after"]["idleDollarsPerHour"]
        without_it = before_and_after(at_start + [{"kind": "remove-reservation", "id": FUTURE}])["after"]["idleDollarsPerHour"]
    assert with_it - without_it == pytest.approx(3 * 0.192)
    refused = viewer_client.post(url, {"start_id": "cr-0a1b2c3d4e5f60001"})  # active: not offered
    assert refused.status_code == 400 and "start_id" in refused.context["form"].errors
