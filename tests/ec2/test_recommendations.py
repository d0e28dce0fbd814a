"""Recommendations on a seeded 14-day history, through the EC2 test server: exactly the expected
shrink, cancel, select and extend with the right money; applying a shrink changes the reservation
once however often it is clicked; a stale page is refused; observe mode applies nothing and shows
the CLI command; bad input gets field errors; a Capacity Block extension is bought from EC2's
offerings; the page, the API and the metric show it all."""

from datetime import timedelta
from decimal import Decimal

import pytest
import time_machine
from django.urls import reverse
from rest_framework.test import APIClient

from reservations.models import CapacityBlockFee, CapacityReservation, EC2NodeClass, Recommendation, UtilizationHour
from reservations.recommendations import recompute
from scheduling.adapters.ec2.sync import sync_catalogue, sync_reservations
from scheduling.models import Node, NodePool, Pod
from tests.support.ec2_fixtures import *  # noqa: F403 - the EC2 test server and providers

pytestmark = pytest.mark.django_db
ZONE = "us-east-1a"
M5 = 0.096  # the bundled on-demand list price of m5.large in us-east-1a
P5 = 98.32  # p5.48xlarge


@pytest.fixture(autouse=True)
def _at_the_servers_time(clock):
    """Applying recomputes the evidence at the moment of the apply: the process's clock reads the server's."""
    with time_machine.travel(clock(), tick=False):
        yield


@pytest.fixture(autouse=True)
def _aws(aws_test_credentials, settings, provider, monkeypatch):
    settings.KARPWEB_PROVIDER = "aws"
    settings.KARPWEB_MODE = "control"
    from scheduling.loop import backends

    monkeypatch.setattr(backends, "cloud", lambda: provider)  # the loop's EC2 provider, on the test server


def history(reservation_id, now, used, peak, total):
    row = CapacityReservation.objects.get(reservation_id=reservation_id)
    UtilizationHour.objects.bulk_create([
        UtilizationHour(reservation=row, hour=now - timedelta(hours=h + 1), samples=60, first_sampled_at=now - timedelta(hours=h + 1),
                        used=used, available=total - used, total=total, share_sum=60 * used / total, share_samples=60,
                        peak_used=peak)
        for h in range(14 * 24)])


@pytest.fixture
def seeded(world, clock, provider):
    now = clock()
    sync_catalogue(provider, now=now)
    shrink = world.add_reservation("m5.large", ZONE, 10, tags={"team": "web"})
    world.set_available(shrink, 7)
    unused = world.add_reservation("m5.large", ZONE, 4, tags={"team": "old"})
    world.set_available(unused, 4)
    block = world.add_capacity_block("p5.48xlarge", ZONE, 2, start=now - timedelta(days=2), end=now + timedelta(hours=3))
    world.set_available(block, 0)
    web = EC2NodeClass.objects.create(name="web", capacity_reservation_selector_terms=[{"tags": {"team": "web"}}])
    ml = EC2NodeClass.objects.create(name="ml", capacity_reservation_selector_terms=[{"id": block}])
    pool = NodePool.objects.create(name="web", node_class=web)
    NodePool.objects.create(name="ml", node_class=ml)
    assert sync_reservations(provider, now=now).errors == []
    history(shrink, now, used=3, peak=4, total=10)
    history(unused, now, used=0, peak=0, total=4)
    # Busy pools: a pod runs on a node of the web pool; two on-demand m5.large nodes run beside the unused reservation.
    busy = Node.objects.create(name="web-1", node_pool=pool, instance_type="m5.large", zone=ZONE, capacity_type="reserved",
                               reservation=CapacityReservation.objects.get(reservation_id=shrink))
    Pod.objects.create(namespace="web", name="api-1", node=busy, node_name="web-1", phase="Running", owner_kind="ReplicaSet")
    for name in ("od-1", "od-2"):
        Node.objects.create(name=name, node_pool=pool, instance_type="m5.large", zone=ZONE, capacity_type="on-demand")
    block_row = CapacityReservation.objects.get(reservation_id=block)
    for index in range(2):
        node = Node.objects.create(name=f"gpu-{index}", node_pool=NodePool.objects.get(name="ml"), instance_type="p5.48xlarge",
                                   zone=ZONE, capacity_type="reserved", reservation=block_row)
        Pod.objects.create(namespace="ml", name=f"train-{index}", node=node, node_name=node.name, phase="Running",
                           owner_kind="Job", created_at=now - timedelta(hours=30))
    return {"now": now, "shrink": shrink, "unused": unused, "block": block}


def test_the_expected_recommendations_with_their_money(seeded, provider):
    assert recompute(seeded["now"], extension_offerings=provider.capacity_block_extension_offerings) == 5
    found = {(r.kind, r.reservation.reservation_id): r for r in Recommendation.objects.select_related("reservation")}
    # #50: idle units with no end date may be lent (the peak and a spare kept back; nothing karpweb can count is
    # saved), unless the fleet's own on-demand nodes could use them (the unused one: select it instead).
    assert set(found) == {("shrink", seeded["shrink"]), ("cancel", seeded["unused"]), ("select", seeded["unused"]),
                          ("extend", seeded["block"]), ("lend", seeded["shrink"])}
    assert found[("lend", seeded["shrink"])].details["count"] == 10 - 4 - 1
    assert found[("lend", seeded["shrink"])].savings_per_month == 0 and found[("lend", seeded["shrink"])].money == "warning"
    assert found[("shrink", seeded["shrink"])].target_count == 5
    assert found[("shrink", seeded["shrink"])].savings_per_month == round(5 * M5 * 730, 2)
    assert found[("cancel", seeded["unused"])].savings_per_month == round(4 * M5 * 730, 2)
    assert found[("select", seeded["unused"])].savings_per_month == round(2 * M5 * 730, 2)
    extend = found[("extend", seeded["block"])]
    assert extend.details["lostWork"] == round(2 * 30 * P5, 2)
    assert [o["hours"] for o in extend.details["offerings"]] == [24, 48, 168]


def test_a_shrink_applies_once_however_often_it_is_clicked(seeded, provider, world, operator_client):
    recompute(seeded["now"])
    rec = Recommendation.objects.get(kind="shrink")
    page = operator_client.get(reverse("reservations:recommendation", args=[rec.pk])).content.decode()
    assert "Changes" in page and "to <strong>5</strong> instances" in page
    form = {"computed_at": rec.computed_at.isoformat()}
    for _ in range(2):
        response = operator_client.post(reverse("reservations:recommendation_apply", args=[rec.pk]), form)
        assert response.status_code == 302
    assert len(world.calls_of("ModifyCapacityReservation")) == 1
    assert world.reservation(seeded["shrink"])["TotalInstanceCount"] == 5
    rec.refresh_from_db()
    assert rec.state == "applied" and rec.applied_by == "otto"
    assert CapacityReservation.objects.get(reservation_id=seeded["shrink"]).total_instance_count == 5


def test_a_stale_page_and_a_changed_reservation_are_refused(seeded, provider, world, operator_client, clock):
    recompute(seeded["now"])
    old = Recommendation.objects.get(kind="shrink")
    read_at = old.computed_at.isoformat()
    recompute(seeded["now"] + timedelta(minutes=5))  # recomputed since: the same claim keeps its row and computedAt
    assert Recommendation.objects.get(kind="shrink").computed_at.isoformat() == read_at
    UtilizationHour.objects.filter(reservation__reservation_id=seeded["shrink"]).update(peak_used=5)
    recompute(seeded["now"] + timedelta(minutes=6))  # the use changed: a new claim (a shrink to 6)
    fresh = Recommendation.objects.get(kind="shrink")
    assert fresh.target_count == 6
    stale = operator_client.post(reverse("reservations:recommendation_apply", args=[fresh.pk]), {"computed_at": read_at})
    assert stale.status_code == 409 and "changed since the page was read" in stale.content.decode()
    # Someone resized it in the console meanwhile (EC2 knows, karpweb has not synced yet):
    provider.modify_reservation(seeded["shrink"], instance_count=12)
    changed = operator_client.post(reverse("reservations:recommendation_apply", args=[fresh.pk]),
                                   {"computed_at": fresh.computed_at.isoformat()})
    assert changed.status_code == 409 and "changed since this was computed (from 10 to 12 instances)" in changed.content.decode()
    assert len(world.calls_of("ModifyCapacityReservation")) == 1  # only the console's


def test_observe_mode_applies_nothing_and_shows_the_cli_command(seeded, settings, operator_client, world):
    settings.KARPWEB_MODE = "observe"
    recompute(seeded["now"])
    rec = Recommendation.objects.get(kind="cancel")
    page = operator_client.get(reverse("reservations:recommendation", args=[rec.pk])).content.decode()
    assert f"aws ec2 cancel-capacity-reservation --capacity-reservation-id {seeded['unused']}" in page
    refused = operator_client.post(reverse("reservations:recommendation_apply", args=[rec.pk]),
                                   {"computed_at": rec.computed_at.isoformat()})
    assert refused.status_code == 409 and "karpweb is in observe mode" in refused.content.decode()
    assert world.calls_of("CancelCapacityReservation") == []


def test_the_api_lists_applies_and_refuses_bad_input(seeded, provider, world, operator, viewer):
    recompute(seeded["now"], extension_offerings=provider.capacity_block_extension_offerings)
    api = APIClient()
    api.force_authenticate(viewer)
    listed = api.get("/api/v1/recommendations/", {"kind": "shrink"}).json()["results"]
    assert [(r["kind"], r["targetCount"]) for r in listed] == [("shrink", 5)]
    assert api.get("/api/v1/recommendations/", {"kind": "grow"}).status_code == 400
    extend = Recommendation.objects.get(kind="extend")
    assert api.post(f"/api/v1/recommendations/{extend.pk}/apply/", {}, format="json").status_code == 403  # viewers read
    api.force_authenticate(operator)
    url = f"/api/v1/recommendations/{extend.pk}/apply/"
    assert "computedAt" in api.post(url, {"computedAt": "yesterday"}, format="json").json()
    assert api.post("/api/v1/recommendations/999999/apply/", {"computedAt": extend.computed_at.isoformat()},
                    format="json").status_code == 404
    bogus = api.post(url, {"computedAt": extend.computed_at.isoformat(), "offeringID": "cbe-nope"}, format="json")
    assert bogus.status_code == 400 and "offering" in bogus.json()
    offer = extend.details["offerings"][0]
    end_before = world.reservation(seeded["block"])["EndDate"]
    bought = api.post(url, {"computedAt": extend.computed_at.isoformat(), "offeringID": offer["offering_id"]}, format="json")
    assert bought.status_code == 200 and bought.json()["state"] == "applied"
    assert world.reservation(seeded["block"])["EndDate"] == end_before + timedelta(hours=offer["hours"])
    # #47 (13): what the extension cost is added to the block's fee (its hours now include the extension).
    assert CapacityBlockFee.objects.get(reservation_id=seeded["block"]).extensions_paid == Decimal(f"{offer['upfront_fee']:.2f}")
    history = provider.ec2.describe_capacity_block_extension_history(CapacityReservationIds=[seeded["block"]])
    assert history["CapacityBlockExtensions"][0]["CapacityBlockExtensionStatus"] == "payment-pending"


def test_the_page_overview_and_metric_show_the_money(seeded, provider, viewer_client, client):
    recompute(seeded["now"], extension_offerings=provider.capacity_block_extension_offerings)
    # Monthly: the shrink plus the unused reservation once (cancelling and selecting it are alternatives);
    # the extension's one-off fee and loss are shown apart, never in the monthly total.
    total = round(5 * M5 * 730, 2) + round(4 * M5 * 730, 2)
    page = viewer_client.get(reverse("reservations:recommendations")).content.decode()
    assert f'<strong id="total-per-month">${total:,.2f}</strong> a month' in page
    extend = Recommendation.objects.get(kind="extend")
    assert f"a one-off loss of about <strong>${extend.details['lostWork']:,.2f}</strong>" in page
    assert "one-off: an extension costs $" in page and "a month (recurring, at list price)" in page
    overview = viewer_client.get(reverse("scheduling:overview")).content.decode()
    assert "Top recommendations" in overview and overview.count("a month (recurring, at list price)</li>") == 3
    assert "Extend the capacity block" not in overview.split('id="top-recommendations"')[1].split("</ul>")[0]
    assert "And 1 Capacity Block extension: one-off purchases" in overview
    scrape = client.get("/metrics").content.decode()
    assert f'karpweb_recommendation_savings_dollars_per_month{{kind="shrink"}} {round(5 * M5 * 730, 2)}' in scrape


def test_cancel_and_a_new_end_date_are_applied_through_ec2(seeded, provider, world, operator, clock):
    now = seeded["now"]
    ending = world.add_reservation("m5.large", ZONE, 10, tags={"team": "web"}, end=now + timedelta(days=5))
    world.set_available(ending, 2)
    assert sync_reservations(provider, now=now).errors == []
    history(ending, now, used=8, peak=9, total=10)
    recompute(now)
    api = APIClient()
    api.force_authenticate(operator)
    cancel = Recommendation.objects.get(kind="cancel")
    applied = api.post(f"/api/v1/recommendations/{cancel.pk}/apply/", {"computedAt": cancel.computed_at.isoformat()},
                       format="json")
    assert applied.status_code == 200 and world.reservation(seeded["unused"])["State"] == "cancelled"
    warning = Recommendation.objects.get(kind="end-date", reservation__reservation_id=ending)
    assert warning.savings_per_month == 0 and "in 5 days" in warning.reason
    url = f"/api/v1/recommendations/{warning.pk}/apply/"
    past = api.post(url, {"computedAt": warning.computed_at.isoformat(), "endDate": (now - timedelta(days=1)).isoformat()},
                    format="json")
    assert past.status_code == 400 and "end_date" in past.json()
    later = (now + timedelta(days=90)).replace(microsecond=0)
    moved = api.post(url, {"computedAt": warning.computed_at.isoformat(), "endDate": later.isoformat()}, format="json")
    assert moved.status_code == 200, moved.json()
    assert world.reservation(ending)["EndDate"] == later
