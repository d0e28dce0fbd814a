"""An interruption on the simulated world (the loop's own cloud and cluster): the node of an
interruptible reservation being reclaimed is drained at once, the reservation shows no free unit,
and the next provisioning run plans the node's pods into another reservation's free units first."""

import pytest
from django.utils import timezone

from reservations.models import CapacityReservation
from reservations.status import refresh_node_class_status
from scheduling.engine.interruptions import RESERVATION_INTERRUPTED, SPOT_INTERRUPTED, Interruption
from scheduling.loop import nodes
from scheduling.loop.engine_run import simulate_readable
from scheduling.loop.simulated import SimulatedCloud, SimulatedCluster
from scheduling.models import Decision, Node, Offering, Pod
from scheduling.world import current_world


@pytest.fixture
def control(settings):
    settings.KARPWEB_MODE = "control"


def reserved_node_with_pods():
    for node in Node.objects.filter(capacity_type="reserved", reservation__isnull=False).select_related("reservation", "node_pool__node_class"):
        pods = list(Pod.objects.filter(node=node).exclude(owner_kind="DaemonSet"))
        if pods and node.node_pool and node.node_pool.node_class and node.reservation.reservation_type == "default":
            return node, pods
    raise AssertionError("the demo world has a reserved node with pods")


def test_a_reclaimed_reservation_drains_its_node_and_the_pods_go_to_another_reservation(demo, control):
    now = timezone.now()
    node, pods = reserved_node_with_pods()
    reclaimed = node.reservation
    spare = CapacityReservation.objects.create(
        reservation_id="cr-0spare0000000001", instance_type=reclaimed.instance_type,
        availability_zone=reclaimed.availability_zone, total_instance_count=4, available_instance_count=4,
        state="active", reservation_type="default", instance_match_criteria="targeted", owner_id=reclaimed.owner_id)
    node_class = node.node_pool.node_class
    node_class.capacity_reservation_selector_terms = [*node_class.capacity_reservation_selector_terms, {"id": spare.reservation_id}]
    node_class.save()
    refresh_node_class_status(now)

    event = Interruption(RESERVATION_INTERRUPTED, (node.instance_id,), reclaimed.reservation_id,
                         detail=f"interruptible Capacity Reservation {reclaimed.reservation_id} reclaims its capacity")
    assert nodes.act_on(event, SimulatedCloud(), SimulatedCluster(), now) == 1
    assert not Node.objects.filter(pk=node.pk).exists()
    assert all(p.node_name == "" for p in Pod.objects.filter(pk__in=[p.pk for p in pods]))
    reclaimed.refresh_from_db()
    assert reclaimed.available_instance_count == 0
    decision = Decision.objects.get(kind="interruption", subject=f"node {node.name}")
    assert decision.outcome == "acted" and "reclaims its capacity: cordoning and draining it now" in decision.reason

    # The next provisioning run's plan, with no room left on other nodes (all cordoned): the pods
    # go to new nodes in other reservations' free units (the spare one, or any other the class
    # selects), never to the reclaimed one.
    Node.objects.update(unschedulable=True)
    plan = simulate_readable(current_world(now), now)
    keys = {f"{p.namespace}/{p.name}" for p in pods}
    bound = {b["pod"]: b["node"] for b in plan["bindings"] if b["pod"] in keys}
    launched = {key: claim["launch"] for claim in plan["nodeClaims"] for key in claim["pods"] if key in keys}
    assert set(launched) == keys and not bound
    assert {launch["capacityType"] for launch in launched.values()} == {"reserved"}
    assert reclaimed.reservation_id not in {launch["reservationID"] for launch in launched.values()}


def test_a_spot_warning_marks_the_pool_unavailable_and_observe_mode_only_recommends(demo, settings):
    settings.KARPWEB_MODE = "observe"
    node = Node.objects.exclude(provider_id="").first()
    event = Interruption(SPOT_INTERRUPTED, (node.instance_id,), detail="spot interruption warning (terminate)")
    assert nodes.act_on(event, SimulatedCloud(), SimulatedCluster(), timezone.now()) == 0
    assert Node.objects.filter(pk=node.pk, unschedulable=False).exists()  # observe: nothing touched
    assert Decision.objects.get(kind="interruption", subject=f"node {node.name}").outcome == "recommended"
    assert not Offering.objects.filter(instance_type__name=node.instance_type, zone=node.zone, capacity_type="spot",
                                       reservation__isnull=True, available=True).exists()


def test_a_rebalance_recommendation_is_shown_on_the_node_and_drains_nothing(demo, control, viewer_client):
    from django.urls import reverse

    from scheduling.engine.interruptions import REBALANCE

    node = Node.objects.exclude(provider_id="").first()
    event = Interruption(REBALANCE, (node.instance_id,), detail="rebalance recommendation")
    assert nodes.act_on(event, SimulatedCloud(), SimulatedCluster(), timezone.now()) == 0
    assert Node.objects.filter(pk=node.pk, unschedulable=False).exists()
    page = viewer_client.get(reverse("scheduling:node", args=[node.name])).content.decode()
    assert "rebalance recommendation; recorded only" in page


def test_ec2s_warning_names_only_the_instance_and_its_reservation_is_marked_full(demo, control):
    """EC2's "EC2 Capacity Reservation Instance Interruption Warning" carries instance-id and instance-action
    only (upstream's capacityreservationinterruption message): the reservation is the one the node runs in."""
    import json

    from scheduling.engine.interruptions import parse

    node, _ = reserved_node_with_pods()
    body = json.dumps({"version": "0", "source": "aws.ec2", "detail-type": "EC2 Capacity Reservation Instance Interruption Warning",
                       "detail": {"instance-id": node.instance_id, "instance-action": "terminate"}})
    event = parse(body)
    assert (event.kind, event.instance_ids, event.reservation_id) == (RESERVATION_INTERRUPTED, (node.instance_id,), "")
    assert nodes.act_on(event, SimulatedCloud(), SimulatedCluster(), timezone.now()) == 1
    assert not Node.objects.filter(pk=node.pk).exists()
    node.reservation.refresh_from_db()
    assert node.reservation.available_instance_count == 0
    assert not Offering.objects.filter(reservation=node.reservation, available=True).exists()


def test_the_simulated_world_lends_and_reclaims_for_a_waiting_pod_in_the_same_run(demo, control):
    """A waiting pod that needs the demo's m5.large ODCR, whose free units are all lent: the provisioning
    run reclaims one (the simulated EC2 has no borrower: it is back at once) and launches into it."""
    from scheduling.loop import provisioning

    rid = "cr-0a1b2c3d4e5f60001"  # m5.large, no end date, selected by the default EC2NodeClass
    Pod.objects.create(namespace="default", name="needs-the-odcr", uid="uid-needs-the-odcr", phase="Pending",
                       owner_kind="ReplicaSet", owner_name="app-1", cpu_request_millicores=500, memory_request_bytes=2**29,
                       spec={"nodeSelector": {"karpenter.k8s.aws/capacity-reservation-id": rid},
                             "containers": [{"name": "app", "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}}}]})
    Node.objects.update(unschedulable=True)  # no room on the nodes there: it needs a new one in the ODCR
    reservation = CapacityReservation.objects.get(reservation_id=rid)
    free = reservation.available_instance_count
    SimulatedCloud().lend_reservation_units(rid, free, client_token="lend-demo")
    reservation.refresh_from_db()
    assert (reservation.lent_count, reservation.available_instance_count, reservation.used_instance_count) == (free, 0, 6)

    counts = provisioning.provision(SimulatedCloud(), SimulatedCluster(), timezone.now())
    reservation.refresh_from_db()
    assert counts["units_reclaimed"] == 1 and (reservation.lent_target, reservation.lent_count) == (free - 1, free - 1)
    assert Decision.objects.filter(kind="launch", outcome="acted", reservation=reservation).count() == 1
