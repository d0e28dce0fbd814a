"""Every pod page says where the pod runs (or would) and in what capacity: which reservation, or why not one,
naming the blocker (the NodePool's requirement, the EC2NodeClass's selector terms, no free unit, the pod's own
constraints), pending or running; and the decisions that name the pod among others."""

import pytest
from django.urls import reverse

from reservations.models import CapacityReservation, EC2NodeClass
from scheduling.models import Decision, NodePool, Pod

pytestmark = pytest.mark.django_db


@pytest.fixture
def demo_world(demo_world_for_module, db):
    """Every test here builds on the demo world: it is seeded once for the module (tests/conftest.py),
    and each test's own writes are rolled back after it."""


ON_DEMAND_WEB_POD = "web-0160"  # runs on an on-demand m5.xlarge of the web pool


def why(client, name):
    page = client.get(reverse("scheduling:pod", args=["default", name])).content.decode()
    placement = page.split('id="placement">')[1].split("</p>")[0]
    reason = page.split('id="why-not-reserved"')[1].split("</p>")[0] if 'id="why-not-reserved"' in page else ""
    return placement, reason.replace("&#x27;", "'"), page


def test_a_pod_in_a_reservation_names_it(demo_world, viewer_client):
    placement, reason, _ = why(viewer_client, "web-0000")
    assert "Runs on node" in placement and "in reserved capacity: reservation cr-0a1b2c3d4e5f60001" in placement
    assert reason == ""


def test_an_on_demand_pod_names_the_reservation_that_could_hold_it(demo_world, viewer_client):
    placement, reason, _ = why(viewer_client, ON_DEMAND_WEB_POD)
    assert "(m5.xlarge in us-east-1c), in on-demand capacity, not in a reservation" in placement
    assert 'data-blocker="could-use"' in reason and "cr-0a1b2c3d4e5f60001 (m5.large in us-east-1a)" in reason


def test_the_blocker_is_the_nodepool_requirement(demo_world, viewer_client):
    NodePool.objects.filter(name="web").update(requirements=[
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}])
    _, reason, _ = why(viewer_client, ON_DEMAND_WEB_POD)
    assert "NodePool web's requirement capacity-type In [on-demand] leaves out reserved capacity" in reason


def test_the_blocker_is_the_class_selector(demo_world, viewer_client):
    default = EC2NodeClass.objects.get(name="default")
    default.selected_reservations.clear()
    _, reason, _ = why(viewer_client, ON_DEMAND_WEB_POD)
    assert 'data-blocker="class-selector"' in reason
    assert "EC2NodeClass default of NodePool web selects no usable reservation" in reason


def test_the_blocker_is_no_free_unit(demo_world, viewer_client):
    CapacityReservation.objects.update(available_instance_count=0)
    _, reason, _ = why(viewer_client, ON_DEMAND_WEB_POD)
    assert 'data-blocker="no-free-unit"' in reason and "cr-0a1b2c3d4e5f60001 (m5.large in us-east-1a) has all 10 in use" in reason


def test_a_pending_pod_names_its_own_constraint(demo_world, viewer_client):
    placement, reason, page = why(viewer_client, "worker-pending-1")
    assert placement.startswith("Pending: it would go to a new m7g.large") and "not in a reservation" in placement
    assert 'data-blocker="pod-constraints"' in reason and "the pod's own constraints (arch In [arm64]) rule out" in reason
    assert 'id="engine-answer"' in page


def test_a_pending_pod_bound_to_a_reserved_node_names_the_reservation(demo_world, viewer_client):
    placement, _, _ = why(viewer_client, "web-pending-2")
    assert placement.startswith("Would be bound to the existing node") and "in reserved capacity: reservation cr-" in placement


def test_decisions_naming_the_pod_among_others_are_found(demo_world, viewer_client):
    Decision.objects.create(kind="launch", mode="observe", subject="nodeclaim general-abc", reason="spot for two pods",
                            objects_involved={"pods": ["default/worker-0190", "default/worker-0191"]})
    Decision.objects.create(kind="launch", mode="observe", subject="nodeclaim general-xyz", reason="not this one",
                            objects_involved={"pods": ["default/worker-01900"]})
    _, _, page = why(viewer_client, "worker-0190")
    decisions = page.split("Decisions about this pod")[1]
    assert "spot for two pods" in decisions and "not this one" not in decisions
    assert Pod.objects.filter(name="worker-0190").exists()
