"""Prices that know zonal Reserved Instances and Savings Plans (engine/commitments.py): planning and
consolidation at the effective price, each figure with its basis."""

from scheduling.engine import simulate

from .builders import instance_type, node_class, pod, world
from .lifecycle_builders import bound, dpool, knode

ZONES = ("us-east-1a", "us-east-1b")
M5L = instance_type("m5.large", "2", "8Gi", od=0.096, zones=ZONES)
M5XL = instance_type("m5.xlarge", "4", "16Gi", od=0.192, zones=ZONES)
CLASSES = [node_class("default")]


def zonal_ri(itype, zone, count, *, scope="Availability Zone", rid="ri-1"):
    return {"ReservedInstancesId": rid, "InstanceType": itype, "AvailabilityZone": zone, "InstanceCount": count,
            "Scope": scope, "State": "active", "OfferingClass": "standard"}


def plan_for(pods, *, commitments=None, nodes=(), pools=None):
    doc = world(instance_types=[M5L, M5XL], node_classes=CLASSES, nodes=list(nodes), pods=list(pods),
                node_pools=pools or [dpool(capacity_types=["on-demand"], budgets=[{"nodes": "100%"}])])
    if commitments is not None:
        doc["commitments"] = commitments
    return simulate(doc)


def launches(decisions):
    return [(c["launch"]["instanceType"], c["launch"]["zone"], c["launch"].get("priceBasis", "list"))
            for c in decisions["nodeClaims"]]


def test_without_commitments_the_cheapest_type_at_list_price_is_launched():
    decisions = plan_for([pod("web-0", "1")])
    assert launches(decisions) == [("m5.large", "us-east-1a", "list")]
    assert "priceBasis" not in decisions["nodeClaims"][0]["launch"]


def test_a_zonal_reserved_instance_wins_the_placement_at_no_marginal_cost():
    decisions = plan_for([pod("web-0", "1")], commitments={"reservedInstances": [zonal_ri("m5.xlarge", "us-east-1b", 1)]})
    assert launches(decisions) == [("m5.xlarge", "us-east-1b", "reserved-instance")]
    assert decisions["nodeClaims"][0]["launch"]["price"] < 1e-6  # $0 at the margin, ordered like list prices


def test_a_regional_reserved_instance_changes_nothing():
    ri = zonal_ri("m5.xlarge", "us-east-1b", 1, scope="Region")
    decisions = plan_for([pod("web-0", "1")], commitments={"reservedInstances": [ri]})
    assert launches(decisions) == [("m5.large", "us-east-1a", "list")]


def test_a_reserved_instance_already_covering_a_running_node_has_no_unit_left():
    running = knode("n1", "m5.xlarge", cpu="4", memory="16Gi", zone="us-east-1b")
    filler = bound("busy-0", "n1", "3900m")  # the node is full: the new pod needs a launch
    decisions = plan_for([filler, pod("web-0", "1")], nodes=[running],
                         commitments={"reservedInstances": [zonal_ri("m5.xlarge", "us-east-1b", 1)]})
    assert launches(decisions) == [("m5.large", "us-east-1a", "list")]


def test_a_savings_plan_rate_changes_the_placement_and_says_so():
    plan = {"savingsPlanId": "sp-1", "savingsPlanType": "Compute", "commitment": 10.0,
            "rates": [{"instanceType": "m5.xlarge", "rate": 0.05}]}
    decisions = plan_for([pod("web-0", "1")], commitments={"savingsPlans": [plan]})
    assert launches(decisions) == [("m5.xlarge", "us-east-1a", "savings-plan")]
    assert decisions["nodeClaims"][0]["launch"]["price"] == 0.05


def test_a_spent_savings_plan_gives_list_prices_again():
    plan = {"savingsPlanId": "sp-1", "savingsPlanType": "Compute", "commitment": 0.05,
            "rates": [{"instanceType": "m5.xlarge", "rate": 0.05}]}
    running = knode("n1", "m5.xlarge", cpu="4", memory="16Gi")
    decisions = plan_for([bound("busy-0", "n1", "3900m"), pod("web-0", "1")], nodes=[running],
                         commitments={"savingsPlans": [plan]})
    assert launches(decisions) == [("m5.large", "us-east-1a", "list")]


def test_a_node_a_reserved_instance_pays_for_is_not_consolidated_for_savings():
    # An m5.xlarge holding a pod that fits an m5.large: at list price, replacing it saves $0.096/h;
    # a zonal RI pays for the m5.xlarge, so replacing it saves nothing and costs a launch.
    nodes = [knode("n1", "m5.xlarge", cpu="4", memory="16Gi", zone="us-east-1b")]
    pods = [bound("web-0", "n1", "1")]
    at_list = plan_for(pods, nodes=nodes)
    assert [(d["action"], d["nodes"]) for d in at_list["disruptions"]] == [("replace", ["n1"])]
    covered = plan_for(pods, nodes=nodes, commitments={"reservedInstances": [zonal_ri("m5.xlarge", "us-east-1b", 1)]})
    assert covered["disruptions"] == []


def test_consolidation_counts_the_savings_plan_rate_of_the_replacement():
    # A Savings Plan makes the m5.large cost $0.01/h: replacing the m5.xlarge saves 0.192 - 0.01.
    plan = {"savingsPlanId": "sp-1", "savingsPlanType": "EC2Instance", "commitment": 10.0,
            "rates": [{"instanceType": "m5.large", "rate": 0.01}]}
    decisions = plan_for([bound("web-0", "n1", "1")], nodes=[knode("n1", "m5.xlarge", cpu="4", memory="16Gi")],
                         commitments={"savingsPlans": [plan]})
    [command] = decisions["disruptions"]
    assert command["replacement"]["launch"]["priceBasis"] == "savings-plan"
    assert command["replacement"]["launch"]["price"] == 0.01


def test_the_audits_comparison_says_which_prices_it_compares():
    from scheduling.engine.audit import Placement, compare_plan

    plan = {"instanceType": "m5.xlarge", "capacityType": "on-demand", "price": 0.05, "priceBasis": "savings-plan"}
    compared = compare_plan(plan, [Placement("k-1", "m5.large", "on-demand", "", 0.096)])
    assert compared["words"] == ("Karpenter chose differently (+$0.0460/h karpweb's plan at its Savings Plan rate, "
                                 "Karpenter's at list price)")
    at_list = compare_plan({**plan, "price": 0.192, "priceBasis": None}, [Placement("k-1", "m5.large", "on-demand", "", 0.096)])
    assert at_list["words"] == "Karpenter chose differently (-$0.0960/h at list price)"


def test_a_paid_node_is_priced_by_its_rank_among_its_type_and_zone():
    from scheduling.engine.commitments import parse_commitments, paid_price

    commitments = parse_commitments({"reservedInstances": [zonal_ri("m5.xlarge", "us-east-1b", 2)],
                                     "savingsPlans": [{"savingsPlanId": "sp-1", "commitment": 1,
                                                       "rates": [{"instanceType": "m5.xlarge", "rate": 0.1}]}]},
                                    lambda path, message: None)
    assert paid_price(0.192, "m5.xlarge", "us-east-1b", "on-demand", commitments, 2) == (0.0, "reserved-instance")
    assert paid_price(0.192, "m5.xlarge", "us-east-1b", "on-demand", commitments, 3) == (0.1, "savings-plan")
    assert paid_price(0.192, "m5.xlarge", "us-east-1a", "spot", commitments, 1) == (0.192, "list")


def test_bad_commitments_are_named():
    import pytest

    from scheduling.engine.world import WorldError

    doc = world(instance_types=[M5L], node_classes=CLASSES)
    doc["commitments"] = {"reservedInstances": [{"InstanceType": "m5.large", "Scope": "Availability Zone"}],
                          "savingsPlans": [{"savingsPlanId": "sp-1", "rates": [{"instanceType": "m5.large"}]}]}
    with pytest.raises(WorldError) as error:
        simulate(doc)
    text = str(error.value)
    assert "commitments.reservedInstances[0]" in text and "commitments.savingsPlans[0]" in text


def test_launches_beyond_a_reserved_instances_units_pay_list_and_say_so():
    pods = [pod(f"web-{i}", "3500m") for i in range(3)]  # one m5.xlarge each
    decisions = plan_for(pods, commitments={"reservedInstances": [zonal_ri("m5.xlarge", "us-east-1b", 2)]})
    claims = sorted((c["launch"]["instanceType"], c["launch"]["zone"], c["launch"].get("priceBasis", "list"),
                     c["launch"]["price"] > 1e-6) for c in decisions["nodeClaims"])
    assert claims == [("m5.xlarge", "us-east-1b", "list", True), ("m5.xlarge", "us-east-1b", "reserved-instance", False),
                      ("m5.xlarge", "us-east-1b", "reserved-instance", False)]
    assert [c["launch"]["price"] for c in decisions["nodeClaims"] if "priceBasis" not in c["launch"]] == [0.192]
