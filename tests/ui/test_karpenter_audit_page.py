"""The Karpenter audit page and its metric: totals in list-price dollars by day, reservation and
NodePool, filters shared with the API, a query count that does not grow with rows."""

import datetime

import pytest
from django.urls import reverse
from django.utils import timezone

from scheduling.models import KarpenterLaunch
from tests.factories.reservations import CapacityReservationFactory
from tests.ui.test_views import query_count

pytestmark = pytest.mark.django_db
DAY = datetime.timedelta(days=1)


def launch(name, outcome="missed-reservation", dollars=0.0, reservation=None, pool="web", at=None, ended=False):
    at = at or timezone.now()
    return KarpenterLaunch.objects.create(
        claim_name=name, node_pool_name=pool, instance_type="m5.large", zone="us-east-1a", capacity_type="on-demand",
        launched_at=at, outcome=outcome, reason=f"NodeClaim {name} was launched while ...", missed_dollars=dollars,
        price_per_hour=0.096, reservation=reservation, reservation_label=reservation.reservation_id if reservation else "",
        ended_at=at + DAY if ended else None)


def test_totals_by_day_reservation_and_pool(viewer_client):
    reservation = CapacityReservationFactory(reservation_id="cr-0audit1")
    today = timezone.now()
    launch("a", dollars=1.5, reservation=reservation, at=today)
    launch("b", dollars=2.25, reservation=reservation, at=today, ended=True)
    launch("c", dollars=4.0, reservation=reservation, at=today - DAY, pool="batch")
    launch("d", outcome="used-reservation", reservation=reservation)
    launch("e", outcome="no-compatible-reservation")
    page = viewer_client.get(reverse("scheduling:karpenter_audit")).content.decode()
    assert "<strong>3</strong> launches missed a free reservation, costing <strong>$7.75</strong>" in page
    assert "(2 still running and accruing)" in page
    assert "missed a free reservation: 3" in page and "used a reservation: 1" in page
    assert f"<td>{today:%Y-%m-%d}</td><td>cr-0audit1</td><td>web</td><td>2</td><td>$3.75</td>" in page
    # Filters narrow the totals too (htmx swaps summary and table together).
    filtered = viewer_client.get(reverse("scheduling:karpenter_audit"), {"node_pool": "batch"},
                                 HTTP_HX_REQUEST="true").content.decode()
    assert "costing <strong>$4.00</strong>" in filtered and 'id="audit-summary"' in filtered
    bad = viewer_client.get(reverse("scheduling:karpenter_audit"), {"day": "someday"}).content.decode()
    assert "day: Enter a valid date." in bad


def test_query_count_does_not_grow(viewer_client):
    reservation = CapacityReservationFactory(reservation_id="cr-0audit2")
    launch("first", dollars=1, reservation=reservation)
    before = query_count(viewer_client, reverse("scheduling:karpenter_audit"))
    for index in range(30):
        launch(f"more-{index}", dollars=1, reservation=reservation, at=timezone.now() - index * DAY)
    # 13: with the viewer's role bindings (fleet/access.py).
    assert query_count(viewer_client, reverse("scheduling:karpenter_audit")) == before <= 13


def test_missed_dollars_metric(client, settings):
    reservation = CapacityReservationFactory(reservation_id="cr-0audit3")
    launch("x", dollars=1.25, reservation=reservation)
    launch("y", dollars=0.5, reservation=reservation)
    launch("z", outcome="used-reservation", dollars=9, reservation=reservation)
    text = client.get("/metrics").content.decode()
    assert 'karpweb_missed_reservation_dollars_total{cluster="karpweb-test",nodepool="web",reservation_id="cr-0audit3"} 1.75' in text


def test_plans_beside_karpenters_launches(viewer_client):
    from scheduling.models import Decision
    from tests.factories.scheduling import NodeClaimFactory, NodeFactory, PodFactory

    def planned(pods, capacity_type, reservation="", price=0.096):
        Decision.objects.create(kind="launch", outcome="recommended", mode="observe", subject=f"pods {pods}",
                                reason="...", objects_involved={"pods": [f"default/{p}" for p in pods]},
                                details={"launch": {"instanceType": "m5.large", "capacityType": capacity_type,
                                                    "zone": "us-east-1a", "reservationID": reservation or None,
                                                    "price": price}})

    def karpenter_placed(pod_names, claim_name, capacity_type, reservation=""):
        claim = NodeClaimFactory(name=claim_name)
        node = NodeFactory(node_claim=claim)
        for name in pod_names:
            PodFactory(name=name, node=node, node_name=node.name)
        row = launch(claim_name, outcome="used-reservation" if reservation else "missed-reservation")
        row.node_claim, row.capacity_type, row.reservation_label = claim, capacity_type, reservation
        row.save()

    planned(["a-1", "a-2"], "reserved", "cr-0plan", price=1e-8)
    karpenter_placed(["a-1", "a-2"], "karp-a", "on-demand")
    planned(["b-1"], "reserved", "cr-0plan", price=1e-8)
    karpenter_placed(["b-1"], "karp-b", "reserved", reservation="cr-0plan")
    planned(["c-1"], "on-demand")
    before = query_count(viewer_client, reverse("scheduling:karpenter_audit"))
    page = viewer_client.get(reverse("scheduling:karpenter_audit")).content.decode()
    section = page.split('id="side-by-side"')[1].split("</section>")[0]
    assert "karpweb would have used reservation cr-0plan; Karpenter paid $0.0960/h more" in section
    assert "karp-b: m5.large reserved in cr-0plan" in section and "Karpenter did the same" in section
    assert "Karpenter has not launched for these pods (yet)" in section
    for index in range(10):
        planned([f"d-{index}"], "on-demand")
        karpenter_placed([f"d-{index}"], f"karp-d-{index}", "on-demand")
    assert query_count(viewer_client, reverse("scheduling:karpenter_audit")) == before
