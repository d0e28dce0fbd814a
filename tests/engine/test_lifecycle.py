"""The reservation lifecycle: capacity-block expiry (40 and 70 minutes), demotion to on-demand for
every cause, reservation drift, and how they combine with provisioning and consolidation."""

from datetime import datetime, timedelta, timezone

import pytest
import time_machine

from scheduling.engine import simulate

from .builders import instance_type, node_class, pod, reservation, world
from .lifecycle_builders import RESERVATION_LABELS, bound, dpool, instance, knode

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=timezone.utc)
P5 = instance_type("p5.48xlarge", "192", "2048Gi", od=98.32, resources={"nvidia.com/gpu": "8"})
GB200 = instance_type("p6e-gb200.36xlarge", "144", "1024Gi", od=120.0, resources={"nvidia.com/gpu": "4"})
M5L = instance_type("m5.large", "2", "8Gi", od=0.096)
M5XL = instance_type("m5.xlarge", "4", "16Gi", od=0.192)
ALL_IN = [{"nodes": "100%"}]


def iso(moment):
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def block(rid, itype, end, *, ultraserver=None, available=0, total=2):
    return reservation(rid, itype, kind="capacity-block", end=iso(end), ultraserver=ultraserver, available=available,
                       total=total, tags={"team": "ml"})


def run(nodes, pods=(), *, reservations=(), types=(P5, GB200, M5L, M5XL), pools=None, instances=None, now=None,
        classes=None):
    doc = world(instance_types=list(types), reservations=list(reservations), nodes=list(nodes), pods=list(pods),
                node_pools=pools or [dpool(capacity_types=["reserved", "on-demand"], budgets=ALL_IN)],
                node_classes=classes or [node_class("default", [{"tags": {"team": "ml"}}])])
    if now is not None:
        doc["now"] = now
    if instances is not None:
        doc["instances"] = instances
    return simulate(doc)


def expiring(decisions):
    return [d for d in decisions["disruptions"] if d["reason"] == "capacity-block-expiring"]


def gpu_node(name, rid, itype="p5.48xlarge", **kwargs):
    return knode(name, itype, cpu="192", memory="2048Gi", capacity="reserved", reservation=rid,
                 reservation_type="capacity-block", **kwargs)


# capacity-block expiry ---------------------------------------------------------------------------


@pytest.mark.parametrize("itype, ultraserver, lead", [("p5.48xlarge", None, 40), ("p6e-gb200.36xlarge", "u-p6e-gb200x36", 70)])
def test_drain_is_due_exactly_at_drain_at(itype, ultraserver, lead):
    end = NOW + timedelta(minutes=lead)
    decisions = run([gpu_node("gpu-1", "cr-0b1", itype)], reservations=[block("cr-0b1", itype, end, ultraserver=ultraserver)])
    assert expiring(decisions) == [{
        "action": "delete", "reason": "capacity-block-expiring", "nodes": ["gpu-1"], "drainAt": iso(NOW),
        "reservationID": "cr-0b1", "terminationAt": iso(end - timedelta(minutes=lead - 10)), "endsAt": iso(end),
        "ultraServer": ultraserver is not None, "evictedPods": []}]


def test_a_drain_lists_the_pods_it_evicts():
    """The pod page names the decision that evicted a pod: a Capacity Block's drain too (#47, finding 15)."""
    end = NOW + timedelta(minutes=40)
    pods = [bound("trainer-0", "gpu-1", "8"), bound("agent-gpu-1", "gpu-1", daemon=True)]
    decisions = run([gpu_node("gpu-1", "cr-0b1")], pods=pods, reservations=[block("cr-0b1", "p5.48xlarge", end)])
    assert [d["evictedPods"] for d in expiring(decisions)] == [["default/trainer-0"]]


@pytest.mark.parametrize("itype, ultraserver, lead", [("p5.48xlarge", None, 40), ("p6e-gb200.36xlarge", "u-p6e-gb200x36", 70)])
def test_one_second_before_drain_at_the_drain_is_listed_but_not_due(itype, ultraserver, lead):
    """The control loop acts once now >= drainAt; one second early it only records the countdown."""
    end = NOW + timedelta(minutes=lead, seconds=1)
    decisions = run([gpu_node("gpu-1", "cr-0b1", itype)], reservations=[block("cr-0b1", itype, end, ultraserver=ultraserver)])
    [decision] = expiring(decisions)
    assert decision["drainAt"] == iso(NOW + timedelta(seconds=1))
    assert datetime.fromisoformat(decision["drainAt"].replace("Z", "+00:00")) > NOW


def test_drain_time_against_the_wall_clock():
    """Without `now` in the world the engine reads the clock: time-machine pins it at drainAt."""
    end = NOW + timedelta(minutes=40)
    doc = world(instance_types=[P5], reservations=[block("cr-0b1", "p5.48xlarge", end)],
                nodes=[gpu_node("gpu-1", "cr-0b1")], node_pools=[dpool(capacity_types=["reserved"])])
    del doc["now"]
    with time_machine.travel(NOW - timedelta(seconds=1), tick=False):
        early = simulate(doc)
        early_state = [r["state"] for nc in early["nodeClasses"] for r in nc["capacityReservations"]]
    with time_machine.travel(NOW, tick=False):
        due = simulate(doc)
        due_state = [r["state"] for nc in due["nodeClasses"] for r in nc["capacityReservations"]]
    assert [d["drainAt"] for d in expiring(early)] == [d["drainAt"] for d in expiring(due)] == [iso(NOW)]
    assert early_state == ["active"] and due_state == ["expiring"]


def test_expiry_is_listed_only_within_the_hour_before_the_drain():
    soon = block("cr-0b1", "p5.48xlarge", NOW + timedelta(minutes=40 + 60))
    later = block("cr-0b2", "p5.48xlarge", NOW + timedelta(minutes=40 + 61))
    decisions = run([gpu_node("gpu-1", "cr-0b1"), gpu_node("gpu-2", "cr-0b2")], reservations=[soon, later])
    assert [d["nodes"] for d in expiring(decisions)] == [["gpu-1"]]


def test_every_node_of_a_block_is_drained_in_drain_order():
    a = block("cr-0b1", "p5.48xlarge", NOW + timedelta(minutes=50))
    b = block("cr-0b2", "p5.48xlarge", NOW + timedelta(minutes=20))
    nodes = [gpu_node("gpu-a1", "cr-0b1"), gpu_node("gpu-b1", "cr-0b2"), gpu_node("gpu-a2", "cr-0b1")]
    decisions = run(nodes, reservations=[a, b])
    assert [d["nodes"][0] for d in expiring(decisions)] == ["gpu-b1", "gpu-a1", "gpu-a2"]


def test_a_block_is_recognised_by_its_reservation_even_without_the_type_label():
    node = knode("gpu-1", "p5.48xlarge", cpu="192", memory="2048Gi", capacity="reserved", reservation="cr-0b1")
    del node["metadata"]["labels"]["karpenter.k8s.aws/capacity-reservation-type"]
    decisions = run([node], reservations=[block("cr-0b1", "p5.48xlarge", NOW + timedelta(minutes=30))])
    assert [d["nodes"] for d in expiring(decisions)] == [["gpu-1"]]


def test_default_reservations_never_expire_nodes():
    odcr = reservation("cr-0d1", "m5.large", end=iso(NOW + timedelta(minutes=10)), tags={"team": "ml"}, available=0, total=1)
    decisions = run([knode("n1", "m5.large", capacity="reserved", reservation="cr-0d1")], reservations=[odcr])
    assert expiring(decisions) == []


def test_do_not_disrupt_and_budgets_do_not_hold_an_expiry_back():
    end = NOW + timedelta(minutes=30)
    node = gpu_node("gpu-1", "cr-0b1", annotations={"karpenter.sh/do-not-disrupt": "true"})
    pods = [bound("train", "gpu-1", "8", annotations={"karpenter.sh/do-not-disrupt": "true"})]
    decisions = run([node], pods, reservations=[block("cr-0b1", "p5.48xlarge", end)],
                    pools=[dpool(capacity_types=["reserved"], budgets=[{"nodes": "0"}])])
    assert [d["nodes"] for d in expiring(decisions)] == [["gpu-1"]]


def test_nothing_new_launches_into_an_expiring_block():
    """A pending pod that only a block can take is unschedulable once the block drains; a
    consolidation replacement never goes there either."""
    end = NOW + timedelta(minutes=65)  # a plain block still has 25 minutes; an UltraServer one is draining
    blocks = [block("cr-0b1", "p6e-gb200.36xlarge", end, ultraserver="u-p6e-gb200x36", available=1)]
    gpu_pool = dpool("gpu", capacity_types=["reserved"], budgets=ALL_IN,
                     requirements=[{"key": "karpenter.k8s.aws/capacity-reservation-type", "operator": "In",
                                    "values": ["capacity-block"]}])
    pending = pod("eval", "8", "8Gi", extra={"nvidia.com/gpu": "1"})
    decisions = run([], [pending], reservations=blocks, pools=[gpu_pool])
    assert decisions["nodeClaims"] == []
    assert "capacity block cr-0b1 is expiring: draining since 2026-11-21T11:55:00Z" in decisions["unschedulable"][0]["reason"]
    # An on-demand GPU node that could move into that block stays where it is.
    od_node = knode("od-gpu", "p6e-gb200.36xlarge", cpu="144", memory="1024Gi", pool="gpu")
    decisions = run([od_node], [bound("eval", "od-gpu", "8")], reservations=blocks, types=[GB200, M5L],
                    pools=[dpool("gpu", capacity_types=["reserved", "on-demand"], budgets=ALL_IN)])
    assert [d for d in decisions["disruptions"] if d["reason"] == "consolidation"] == []
    # The same block with hours left: the node moves into it.
    later = [block("cr-0b1", "p6e-gb200.36xlarge", NOW + timedelta(hours=5), ultraserver="u-p6e-gb200x36", available=1)]
    decisions = run([od_node], [bound("eval", "od-gpu", "8")], reservations=later, types=[GB200, M5L],
                    pools=[dpool("gpu", capacity_types=["reserved", "on-demand"], budgets=ALL_IN)])
    [move] = [d for d in decisions["disruptions"] if d["reason"] == "consolidation"]
    assert move["replacement"]["launch"]["reservationID"] == "cr-0b1"


def test_pods_of_a_draining_node_are_placed_before_consolidation_uses_the_room():
    """gpu-1 drains now and its pod takes the empty n-spare, which is therefore not deleted, and
    n-light cannot move into that room either."""
    end = NOW + timedelta(minutes=30)
    nodes = [gpu_node("gpu-1", "cr-0b1"), knode("n-spare", "m5.large"), knode("n-light", "m5.large")]
    pods = [bound("evicted", "gpu-1", "1500m"), bound("light", "n-light", "1500m")]
    pools = [dpool(capacity_types=["reserved", "on-demand"], budgets=ALL_IN)]
    decisions = run(nodes, pods, reservations=[block("cr-0b1", "p5.48xlarge", end)], pools=pools)
    assert [d["nodes"] for d in expiring(decisions)] == [["gpu-1"]]
    assert [d for d in decisions["disruptions"] if d["reason"] == "consolidation"] == []


# demotion ----------------------------------------------------------------------------------------


def demotion_world(reservations, *, instances=None, labels=RESERVATION_LABELS, provider="i-0abc"):
    node = knode("n1", "m5.large", capacity="reserved", reservation="cr-0d1", instance=provider)
    for label in RESERVATION_LABELS:
        if label not in labels:
            del node["metadata"]["labels"][label]
    return run([node], reservations=reservations, instances=instances)


def odcr(**kwargs):
    return reservation("cr-0d1", "m5.large", tags={"team": "ml"}, available=0, total=1, **kwargs)


@pytest.mark.parametrize("reservations, instances, cause", [
    ([], None, "reservation cr-0d1 is gone from DescribeCapacityReservations"),
    ([odcr(state="cancelled")], None, "reservation cr-0d1 is cancelled"),
    ([odcr(state="expired")], None, "reservation cr-0d1 is expired"),
    ([odcr(end="2026-11-21T11:59:59Z")], None, "reservation cr-0d1 ended at 2026-11-21T11:59:59Z"),
    ([odcr()], [instance("i-0abc", "m5.large")], "instance i-0abc is no longer in reservation cr-0d1 (it has no CapacityReservationId)"),
    ([odcr()], [instance("i-0abc", "m5.large", reservation="cr-0d1", preference="open")],
     "instance i-0abc is no longer in reservation cr-0d1 (it has preference open)"),
])
def test_demotion_causes_strip_every_reservation_label(reservations, instances, cause):
    decisions = demotion_world(reservations, instances=instances)
    assert decisions["demotions"] == [{"node": "n1", "reservationID": "cr-0d1", "from": "reserved", "to": "on-demand",
                                       "removeLabels": RESERVATION_LABELS, "reason": cause}]


def test_demotion_lists_only_the_reservation_labels_the_node_has():
    decisions = demotion_world([], labels=RESERVATION_LABELS[:2])
    assert decisions["demotions"][0]["removeLabels"] == RESERVATION_LABELS[:2]


@pytest.mark.parametrize("instances", [
    None,  # decided from the reservations alone
    [instance("i-0abc", "m5.large", reservation="cr-0d1")],
    [instance("i-other", "m5.large")],  # the node's own instance is not listed
    [instance("i-0abc", "m5.large", state="shutting-down")],  # on its way out: tells nothing
    [instance("i-0abc", "m5.large", lifecycle="spot")],  # not on-demand either
])
def test_no_demotion_while_the_reservation_holds_the_instance(instances):
    assert demotion_world([odcr()], instances=instances)["demotions"] == []


def test_the_instance_decides_which_reservation_a_node_is_in():
    """The label says cr-0d1 (cancelled), but EC2 says the instance sits in cr-0d2: still reserved."""
    other = reservation("cr-0d2", "m5.large", tags={"team": "ml"}, available=0, total=1)
    decisions = demotion_world([odcr(state="cancelled"), other],
                               instances=[instance("i-0abc", "m5.large", reservation="cr-0d2")])
    assert decisions["demotions"] == []


def test_demotion_is_off_with_the_reserved_capacity_gate():
    doc = world(instance_types=[M5L], nodes=[knode("n1", "m5.large", capacity="reserved", reservation="cr-0d1")], gate=False)
    assert simulate(doc)["demotions"] == []


def test_a_demoted_node_is_priced_and_consolidated_as_on_demand():
    """Once demoted, an idle node in a cancelled reservation is an on-demand node: deleted even with
    keep-idle-reserved, and a busy one moves into a free reservation."""
    nodes = [knode("n1", "m5.large", capacity="reserved", reservation="cr-0d1"),
             knode("n2", "m5.large", capacity="reserved", reservation="cr-0d1")]
    free = reservation("cr-0d2", "m5.large", tags={"team": "ml"}, available=1, total=1)
    pools = [dpool(capacity_types=["reserved", "on-demand"], budgets=ALL_IN, keep_idle="true")]
    decisions = run(nodes, [bound("a", "n2", "1500m")], reservations=[odcr(state="cancelled"), free], pools=pools)
    assert [d["node"] for d in decisions["demotions"]] == ["n1", "n2"]
    moves = [(d["action"], d["nodes"], d.get("replacement", {}).get("launch", {}).get("reservationID"))
             for d in decisions["disruptions"]]
    assert moves == [("delete", ["n1"], None), ("replace", ["n2"], "cr-0d2")]


# drift -------------------------------------------------------------------------------------------


def drift_world(pods, *, budgets=ALL_IN, terms=None, extra_nodes=(), free=0):
    kept = reservation("cr-0d1", "m5.large", tags={"team": "old"}, available=0, total=1)
    spare = reservation("cr-0d2", "m5.large", tags={"team": "ml"}, available=free, total=1)
    nodes = [knode("n1", "m5.large", capacity="reserved", reservation="cr-0d1")] + list(extra_nodes)
    classes = [node_class("default", terms if terms is not None else [{"tags": {"team": "ml"}}])]
    return run(nodes, pods, reservations=[kept, spare], classes=classes,
               pools=[dpool(capacity_types=["reserved", "on-demand"], budgets=budgets)])


def drifts(decisions):
    return [d for d in decisions["disruptions"] if d["reason"] == "drift"]


def test_a_node_in_a_reservation_its_class_no_longer_selects_is_drifted_and_replaced():
    [decision] = drifts(drift_world([bound("a", "n1", "1")], free=1))
    assert decision["action"] == "replace" and decision["nodes"] == ["n1"]
    assert decision["driftReason"] == "CapacityReservationDrift" and decision["reservationID"] == "cr-0d1"
    assert decision["message"] == "reservation cr-0d1 is no longer selected by EC2NodeClass default"
    assert decision["replacement"]["launch"]["reservationID"] == "cr-0d2"
    assert decision["replacement"]["pods"] == ["default/a"]


def test_a_drifted_node_whose_pods_fit_elsewhere_is_deleted():
    other = knode("n2", "m5.xlarge", cpu="4", memory="16Gi")
    [decision] = drifts(drift_world([bound("a", "n1", "1"), bound("b", "n2", "1")], extra_nodes=[other]))
    assert decision["action"] == "delete" and "replacement" not in decision


def test_drift_respects_the_drifted_budget_and_do_not_disrupt():
    assert drifts(drift_world([bound("a", "n1", "1")], budgets=[{"nodes": "0", "reasons": ["Drifted"]}])) == []
    assert drifts(drift_world([bound("a", "n1", "1", annotations={"karpenter.sh/do-not-disrupt": "true"})])) == []


def test_an_invalid_class_drifts_nothing():
    assert drifts(drift_world([bound("a", "n1", "1")], terms=[{"ownerID": "123456789012"}])) == []


def test_a_selected_reservation_is_not_drift():
    decisions = drift_world([bound("a", "n1", "1")], terms=[{"tags": {"team": "old"}}])
    assert drifts(decisions) == []
