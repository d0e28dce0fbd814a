"""Standing opportunities: after each lifecycle pass, the engine's consolidations that move paid
nodes into free reserved units, with the saving per hour; the page and the metric show them."""

import pytest
from django.urls import reverse
from django.utils import timezone

from scheduling.loop import steps
from scheduling.loop.karpenter_audit import record_standing_opportunities
from scheduling.models import StandingOpportunity
from tests.factories.scheduling import NodeFactory, NodePoolFactory

pytestmark = pytest.mark.django_db


def consolidation(nodes, capacity_type="reserved", reservation="cr-0free", savings=0.192, action="replace"):
    replacement = {"launch": {"instanceType": "m5.large", "capacityType": capacity_type, "zone": "us-east-1a",
                              "reservationID": reservation if capacity_type == "reserved" else None, "price": 1e-8}}
    return {"reason": "consolidation", "action": action, "consolidationType": "single", "nodes": nodes,
            "savingsPerHour": savings, **({"replacement": replacement} if action == "replace" else {})}


def test_paid_nodes_that_fit_a_free_reserved_unit(viewer_client, client):
    pool = NodePoolFactory(name="web")
    NodeFactory(name="od-1", node_pool=pool, instance_type="m5.xlarge", capacity_type="on-demand")
    NodeFactory(name="spot-1", node_pool=pool, capacity_type="spot")
    NodeFactory(name="res-1", node_pool=pool, capacity_type="reserved")
    now = timezone.now()
    decisions = {"disruptions": [
        consolidation(["od-1"]),  # a standing opportunity
        consolidation(["spot-1"], capacity_type="on-demand", savings=0.01),  # not into a reservation
        consolidation(["res-1"], reservation="cr-0other", savings=0.0),  # reserved already: no money
        consolidation(["od-1", "spot-1"], action="delete", savings=0.3),  # deletes are not moves into reserved
        {"reason": "capacity-block-expiring", "action": "delete", "nodes": ["res-1"], "drainAt": "2026-11-25T12:00:00Z"},
    ]}
    assert record_standing_opportunities(decisions, now) == 1
    (row,) = StandingOpportunity.objects.all()
    assert (row.nodes, row.capacity_type, row.reservation_label, row.savings_per_hour, row.node_pool_name) == (
        ["od-1"], "on-demand", "cr-0free", 0.192, "web")
    assert row.reason == "consolidation: replace od-1 with one m5.large reserved in reservation cr-0free, saving $0.1920/h at the margin"
    page = viewer_client.get(reverse("scheduling:karpenter_audit")).content.decode()
    assert "1 paid node group could move into free reserved units, saving <strong>$0.19/h</strong>" in page
    metrics = client.get("/metrics").content.decode()
    assert 'karpweb_standing_savings_dollars_per_hour{cluster="karpweb-test",nodepool="web",reservation_id="cr-0free"} 0.192' in metrics
    # The next pass replaces the list: an opportunity taken (or gone) leaves it.
    assert record_standing_opportunities({"disruptions": []}, now) == 0
    assert not StandingOpportunity.objects.exists()


def test_the_lifecycle_pass_records_them(demo_world, settings):
    settings.KARPWEB_MODE = "observe"
    StandingOpportunity.objects.create(computed_at=timezone.now(), nodes=["gone"], capacity_type="on-demand",
                                       reservation_label="cr-x", replacement_instance_type="m5.large",
                                       savings_per_hour=1, reason="stale")
    counts = steps.lifecycle()
    assert counts["standing_opportunities"] == StandingOpportunity.objects.count()
    assert not StandingOpportunity.objects.filter(reason="stale").exists()
