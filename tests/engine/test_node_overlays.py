"""NodeOverlays (issue #49), in karpweb's own worlds after kubernetes-sigs/karpenter
pkg/controllers/nodeoverlay/suite_test.go and pkg/cloudprovider's AdjustedPrice: a price or a price
adjustment changes which instance type a NodePool launches, extended capacity lets a type hold pods
that ask for it, the heaviest overlay wins, two of one weight that both set a price conflict and the
second is not applied, and an overlay only reaches the NodePools and offerings its requirements match."""

import pytest

from scheduling.engine import simulate
from scheduling.engine.overlays import adjusted_price
from scheduling.engine.world import WorldError, parse_world
from tests.engine.builders import instance_type, node_class, node_pool, placement, pod, world


def overlay(name, *, requirements=(), price=None, adjustment=None, capacity=None, weight=None):
    spec = {"requirements": list(requirements)}
    if price is not None:
        spec["price"] = price
    if adjustment is not None:
        spec["priceAdjustment"] = adjustment
    if capacity is not None:
        spec["capacity"] = capacity
    if weight is not None:
        spec["weight"] = weight
    return {"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay", "metadata": {"name": name}, "spec": spec}


def of_type(name):
    return {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": [name]}


def plan(overlays, pods=None, pools=None):
    doc = world(instance_types=[instance_type("m5.large", "2", "8Gi", od=0.096, spot=0.04),
                                instance_type("c5.large", "2", "4Gi", od=0.085, spot=0.035)],
                node_classes=[node_class("default")], node_pools=pools or [node_pool(capacity_types=["on-demand"])],
                pods=pods or [pod("web-0", cpu="1", memory="1Gi")])
    doc["nodeOverlays"] = overlays
    return simulate(doc)


def launched(decisions, pod_key="default/web-0"):
    kind, claim = placement(decisions)[pod_key]
    assert kind == "claim", claim
    return claim["launch"]["instanceType"], claim["launch"]["price"]


@pytest.mark.parametrize("price, change, expected", [
    (0.1, "0.42", 0.42), (0.1, "+10%", 0.11), (0.1, "-15%", 0.085), (0.1, "+0.05", 0.15), (0.1, "-0.5", 0.0),
    (0.1, "-100%", 0.0), (0.1, None, 0.1)])
def test_adjusted_price_as_upstream_computes_it(price, change, expected):
    assert adjusted_price(price, change) == pytest.approx(expected)


def test_without_overlays_the_cheaper_type_launches_and_no_status_is_reported():
    decisions = plan([])
    assert launched(decisions)[0] == "c5.large" and "nodeOverlays" not in decisions


def test_a_price_adjustment_changes_which_type_is_cheapest():
    """A commitment discount on m5 (as a team would write one for a Savings Plan)."""
    decisions = plan([overlay("m5-discount", requirements=[of_type("m5.large")], adjustment="-20%")])
    assert launched(decisions) == ("m5.large", pytest.approx(0.0768))
    assert decisions["nodeOverlays"] == [{"name": "m5-discount", "ready": True, "reason": "Applied", "message": ""}]


def test_the_heaviest_overlay_wins_and_a_lighter_one_does_not_move_the_price_again():
    decisions = plan([overlay("light", requirements=[of_type("c5.large")], price="0.50", weight=1),
                      overlay("heavy", requirements=[of_type("c5.large")], price="0.20", weight=50)])
    assert launched(decisions)[0] == "m5.large"  # c5 at 0.20 (heavy), not 0.50 after it
    decisions = plan([overlay("heavy", requirements=[of_type("m5.large")], price="0.01", weight=50),
                      overlay("light", requirements=[of_type("m5.large")], price="9", weight=1)])
    assert launched(decisions) == ("m5.large", 0.01)


def test_two_overlays_of_one_weight_setting_one_price_conflict_and_the_second_is_not_applied():
    decisions = plan([overlay("alpha", requirements=[of_type("m5.large")], price="0.01", weight=10),
                      overlay("beta", requirements=[of_type("m5.large")], price="0.02", weight=10)])
    statuses = {s["name"]: s for s in decisions["nodeOverlays"]}
    # Equal weights: the name later in the alphabet goes first, so beta applies and alpha conflicts.
    assert statuses["beta"]["ready"] and not statuses["alpha"]["ready"]
    assert statuses["alpha"]["reason"] == "Conflict" and "m5.large" in statuses["alpha"]["message"]
    assert launched(decisions) == ("m5.large", 0.02)


def test_an_overlay_reaches_only_the_offerings_and_node_pools_its_requirements_match():
    spot_only = overlay("spot-m5", requirements=[of_type("m5.large"),
                                                 {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}],
                        price="0.001")
    assert launched(plan([spot_only]))[0] == "c5.large", "the on-demand pool never sees the spot price"
    batch = overlay("batch-m5", requirements=[of_type("m5.large"), {"key": "team", "operator": "In", "values": ["batch"]}],
                    price="0.001")
    pools = [node_pool("web", capacity_types=["on-demand"], labels={"team": "web"}),
             node_pool("batch", capacity_types=["on-demand"], labels={"team": "batch"})]
    web = pod("web-0", cpu="1", memory="1Gi", selector={"team": "web"})
    jobs = pod("job-0", cpu="1", memory="1Gi", selector={"team": "batch"})
    decisions = plan([batch], pods=[web, jobs], pools=pools)
    assert launched(decisions, "default/web-0")[0] == "c5.large"
    assert launched(decisions, "default/job-0") == ("m5.large", 0.001)


def test_extended_capacity_lets_a_type_hold_pods_that_ask_for_it():
    fpga = pod("sim-0", cpu="1", memory="1Gi", extra={"example.com/fpga": "1"})
    without = plan([], pods=[fpga])
    assert placement(without)["default/sim-0"][0] == "unschedulable"
    decisions = plan([overlay("fpga-on-m5", requirements=[of_type("m5.large")], capacity={"example.com/fpga": "2"})],
                     pods=[fpga])
    assert launched(decisions, "default/sim-0")[0] == "m5.large"


@pytest.mark.parametrize("spec, path, words", [
    ({"price": "cheap"}, "spec.price", "is not a price"),
    ({"priceAdjustment": "10%"}, "spec.priceAdjustment", "is not a price adjustment"),
    ({"priceAdjustment": "-150%"}, "spec.priceAdjustment", "is not a price adjustment"),
    ({"price": "1", "priceAdjustment": "+1"}, "spec", "cannot set both price and priceAdjustment"),
    ({"capacity": {"cpu": "4"}}, "spec.capacity.cpu", "extended resources only"),
    ({"weight": 0}, "spec.weight", "must be between 1 and 10000"),
])
def test_an_overlay_the_crd_would_refuse_is_bad_input_naming_the_field(spec, path, words):
    doc = world(instance_types=[instance_type("m5.large", "2", "8Gi")])
    doc["nodeOverlays"] = [{"metadata": {"name": "bad"}, "spec": {"requirements": [], **spec}}]
    with pytest.raises(WorldError) as raised:
        parse_world(doc)
    assert any(line.startswith(f"nodeOverlays[0].{path}") and words in line for line in raised.value.lines()), \
        raised.value.lines()
