"""Static NodePools (`spec.replicas`, alpha upstream), as kubernetes-sigs/karpenter's
pkg/controllers/static/{provisioning,deprovisioning}/suite_test.go and the disruption suite's
static cases assert them, through `simulate`."""

import pytest

from scheduling.engine import simulate
from scheduling.engine.world import WorldError

from .builders import instance_type, node_class, pod, reservation, world
from .lifecycle_builders import bound, dpool, knode

M5L = instance_type("m5.large", "2", "8Gi", od=0.096, spot=0.035)
M5XL = instance_type("m5.xlarge", "4", "16Gi", od=0.192)
CLASSES = [node_class("default", [{"tags": {"team": "ml"}}])]


def static_pool(name="static", replicas=3, **kwargs):
    item = dpool(name, **kwargs)
    item["spec"]["replicas"] = replicas
    return item


def run(pools, *, nodes=(), pods=(), reservations=()):
    return simulate(world(instance_types=[M5L, M5XL], node_classes=CLASSES, node_pools=pools, nodes=list(nodes),
                          pods=list(pods), reservations=list(reservations)))


def static_claims(decisions, pool="static"):
    return [c for c in decisions["nodeClaims"] if c["nodePool"] == pool]


def static_deletions(decisions):
    return [d for d in decisions["disruptions"] if d["reason"] == "static"]


def test_an_empty_static_pool_gets_claims_without_pods_up_to_its_replicas():
    decisions = run([static_pool(replicas=3)])
    claims = static_claims(decisions)
    assert len(claims) == 3
    assert len({c["name"] for c in claims}) == 3
    assert all(c["pods"] == [] and c["static"] is True for c in claims)
    # No pod asks for a size: the cheapest offering of the pool's types launches (spot before on-demand).
    assert {(c["launch"]["instanceType"], c["launch"]["capacityType"]) for c in claims} == {("m5.large", "spot")}


def test_nodes_already_running_and_coming_up_count_towards_the_replicas():
    nodes = [knode("s1", "m5.large", pool="static"), knode("s2", "m5.large", pool="static", ready=False),
             knode("s3", "m5.large", pool="static", deleting=True)]  # a deleting node does not count
    decisions = run([static_pool(replicas=3)], nodes=nodes)
    assert len(static_claims(decisions)) == 1
    assert static_deletions(decisions) == []


def test_limits_nodes_caps_the_claims():
    decisions = run([static_pool(replicas=5, limits={"nodes": "3"})], nodes=[knode("s1", "m5.large", pool="static")])
    assert len(static_claims(decisions)) == 2


def test_a_free_reserved_unit_is_taken_once():
    classes_select = reservation("cr-1", "m5.large", tags={"team": "ml"}, available=1)
    decisions = run([static_pool(replicas=2, capacity_types=["reserved", "on-demand"])], reservations=[classes_select])
    launches = sorted((c["launch"]["capacityType"], c["launch"].get("reservationID")) for c in static_claims(decisions))
    assert launches == [("on-demand", None), ("reserved", "cr-1")]


def test_pending_pods_get_no_claim_from_a_static_pool_but_bind_to_its_nodes_with_room():
    nodes = [knode("s1", "m5.large", pool="static")]
    pods = [pod("fits", "1"), pod("too-big", "3")]
    decisions = run([static_pool(replicas=1), dpool("dynamic")], nodes=nodes, pods=pods)
    assert {"pod": "default/fits", "node": "s1"} in decisions["bindings"]
    [claim] = decisions["nodeClaims"]
    assert claim["nodePool"] == "dynamic" and claim["pods"] == ["default/too-big"] and "static" not in claim


def test_a_pod_that_only_a_static_pool_would_take_stays_unschedulable():
    decisions = run([static_pool(replicas=0)], pods=[pod("web", "1")])
    assert decisions["nodeClaims"] == []
    [why] = decisions["unschedulable"]
    assert why["pod"] == "default/web"
    assert "static NodePool(s) static launch only for their spec.replicas" in why["reason"]


def test_scale_down_deletes_unlaunched_claims_then_empty_nodes_then_the_cheapest_to_disrupt():
    unlaunched = knode("s-new", "m5.large", pool="static", ready=False)
    unlaunched["spec"]["providerID"] = ""
    nodes = [knode(name, "m5.large", pool="static") for name in ("busy", "light", "empty", "blocked")] + [unlaunched]
    pods = [bound("a", "busy"), bound("b", "busy"), bound("c", "light"),
            bound("ds", "empty", daemon=True),
            bound("keep", "blocked", annotations={"karpenter.sh/do-not-disrupt": "true"})]
    decisions = run([static_pool(replicas=2)], nodes=nodes, pods=pods)
    assert [(d["action"], d["nodes"], d["nodePool"]) for d in static_deletions(decisions)] == [
        ("delete", ["s-new", "empty", "light"], "static")]
    assert static_deletions(decisions)[0]["evictedPods"] == ["default/c"]
    assert static_claims(decisions) == []


def test_static_nodes_are_never_consolidated_but_drift_still_replaces_them():
    nodes = [knode("s1", "m5.xlarge", pool="static", cpu="4", memory="16Gi"), knode("s2", "m5.large", pool="static")]
    pools = [static_pool(replicas=2, budgets=[{"nodes": "100%"}], policy="WhenEmptyOrUnderutilized")]
    decisions = run(pools, nodes=nodes)  # both empty, one oversized: a dynamic pool would lose both
    assert decisions["disruptions"] == []
    [drift] = simulate(drifted_world(pools, nodes, pods=[bound("web", "s1", "1")]))["disruptions"]
    assert (drift["reason"], drift["action"], drift["nodes"], drift["evictedPods"]) == (
        "drift", "replace", ["s1"], ["default/web"])
    # Upstream's StaticDrift: a new claim of the static pool, whatever the pods (they fit on s2 here).
    replacement = drift["replacement"]
    assert (replacement["nodePool"], replacement["pods"], replacement["static"]) == ("static", [], True)


def drifted_world(pools, nodes, pods=(), drifted="s1"):
    doc = world(instance_types=[M5L, M5XL], node_classes=CLASSES, node_pools=pools, nodes=nodes, pods=list(pods))
    doc["nodeClaims"] = [{"metadata": {"name": drifted}, "status": {"nodeName": drifted, "conditions": [
        {"type": "Drifted", "status": "True", "reason": "AMIDrift", "message": "AMI changed"}]}}]
    return doc


@pytest.mark.parametrize("replicas, limits, why", [
    (1, None, "the pool is above its replicas: the scale-down comes first"),
    (2, {"nodes": "2"}, "limits.nodes leaves no room for the replacement"),
])
def test_a_drifted_static_node_waits(replicas, limits, why):
    nodes = [knode("s1", "m5.large", pool="static"), knode("s2", "m5.large", pool="static")]
    pools = [static_pool(replicas=replicas, limits=limits, budgets=[{"nodes": "100%"}])]
    decisions = simulate(drifted_world(pools, nodes, drifted="s2"))  # s1 goes first if one must
    assert [d["reason"] for d in decisions["disruptions"] if d["reason"] == "drift"] == [], why


@pytest.mark.parametrize("spec, path, message", [
    ({"replicas": -1}, "nodePools[0].spec.replicas", "must be at least 0"),
    ({"replicas": "3"}, "nodePools[0].spec.replicas", "expected an integer"),
    ({"replicas": 2, "weight": 10}, "nodePools[0].spec.weight", "'weight' is not supported on static NodePools"),
    ({"replicas": 2, "limits": {"cpu": "10", "nodes": "3"}}, "nodePools[0].spec.limits.cpu",
     "only 'limits.nodes' is supported on static NodePools"),
])
def test_bad_static_pools_are_refused_naming_the_field(spec, path, message):
    pool = dpool("static")
    pool["spec"].update(spec)
    with pytest.raises(WorldError) as caught:
        run([pool])
    problems = caught.value.problems
    assert any(where == path and message in text for where, text in problems), problems


def test_limits_nodes_alone_is_accepted_on_a_static_pool():
    assert len(static_claims(run([static_pool(replicas=1, limits={"nodes": "1"})]))) == 1
