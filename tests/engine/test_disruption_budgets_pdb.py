"""PodDisruptionBudgets in disruption decisions (issue #49), in karpweb's own worlds after
kubernetes-sigs/karpenter pkg/controllers/disruption/suite_test.go and consolidation_test.go ("should
not consider candidates that have ... PDBs", "should not consolidate if ... blocking PDB") and
pkg/utils/pdb: a node whose evictable pod a budget allows no disruption for now, or that more than one
budget selects, is no candidate for consolidation or drift; a budget that allows one, one in another
namespace, or one that selects only DaemonSet pods, does not hold it back."""

import pytest

from scheduling.engine import simulate
from scheduling.engine.world import WorldError, parse_world

from .builders import instance_type, node_class, reservation, world
from .lifecycle_builders import bound, dpool, knode

M5L = instance_type("m5.large", "2", "8Gi", od=0.096, spot=0.035)


def budget(name, labels, allowed, namespace="default"):
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": name, "namespace": namespace},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": labels}},
            "status": {"disruptionsAllowed": allowed, "currentHealthy": 1, "desiredHealthy": 1, "expectedPods": 1}}


def consolidating_world(budgets, pods=None):
    """An on-demand m5.large whose pod would move into a free reservation of the same type."""
    doc = world(instance_types=[M5L], reservations=[reservation("cr-1", "m5.large", tags={"team": "ml"})],
                node_classes=[node_class("default", [{"tags": {"team": "ml"}}])],
                node_pools=[dpool(capacity_types=["reserved", "on-demand"], budgets=[{"nodes": "100%"}])],
                nodes=[knode("n1", "m5.large")],
                pods=pods or [bound("web-0", "n1", "1", labels={"app": "web"})])
    doc["podDisruptionBudgets"] = budgets
    return [d for d in simulate(doc)["disruptions"] if d["reason"] == "consolidation"]


def test_without_a_budget_the_node_moves_into_the_free_reservation():
    assert [d["nodes"] for d in consolidating_world([])] == [["n1"]]


def test_a_budget_that_allows_no_disruption_now_keeps_the_node():
    assert consolidating_world([budget("web", {"app": "web"}, 0)]) == []


@pytest.mark.parametrize("budgets", [
    [budget("web", {"app": "web"}, 1)],  # it allows one
    [budget("web", {"app": "web"}, 0, namespace="other")],  # another namespace's pods
    [budget("api", {"app": "api"}, 0)],  # other pods
])
def test_a_budget_that_allows_it_or_does_not_select_the_pod_does_not_hold_the_node(budgets):
    assert [d["nodes"] for d in consolidating_world(budgets)] == [["n1"]]


def test_a_pod_two_budgets_select_cannot_be_evicted_so_its_node_stays():
    assert consolidating_world([budget("web-a", {"app": "web"}, 1), budget("web-b", {"app": "web"}, 1)]) == []


def test_a_daemonset_pod_under_a_blocking_budget_does_not_hold_its_node():
    pods = [bound("web-0", "n1", "1", labels={"app": "web"}), bound("agent-n1", "n1", labels={"app": "agent"}, daemon=True)]
    assert [d["nodes"] for d in consolidating_world([budget("agent", {"app": "agent"}, 0)], pods)] == [["n1"]]


def test_a_blocking_budget_keeps_a_drifted_node_too():
    def drift(budgets):
        doc = world(instance_types=[M5L], node_classes=[node_class("default", [])],
                    node_pools=[dpool(capacity_types=["on-demand"], budgets=[{"nodes": "100%"}], after="Never")],
                    nodes=[knode("n1", "m5.large", extra_labels={"karpenter.sh/initialized": "true"})],
                    pods=[bound("db-0", "n1", "1500m", labels={"app": "db"})])
        doc["nodeClaims"] = [{"metadata": {"name": "claim-n1"}, "status": {"nodeName": "n1", "conditions": [
            {"type": "Drifted", "status": "True", "reason": "AMIDrift", "message": "new image"}]}}]
        doc["podDisruptionBudgets"] = budgets
        return [d for d in simulate(doc)["disruptions"] if d["reason"] == "drift"]

    assert len(drift([])) == 1
    assert drift([budget("db", {"app": "db"}, 0)]) == []


def test_bad_budgets_are_named_by_their_path():
    doc = world(instance_types=[M5L])
    doc["podDisruptionBudgets"] = [{"metadata": {"name": "x"}, "spec": {"selector": {"matchExpressions": [
        {"key": "app", "operator": "Near"}]}}, "status": {"disruptionsAllowed": -1}}, "nope"]
    with pytest.raises(WorldError) as raised:
        parse_world(doc)
    lines = "\n".join(raised.value.lines())
    assert "podDisruptionBudgets[0].spec.selector.matchExpressions[0].operator" in lines
    assert "podDisruptionBudgets[0].status.disruptionsAllowed" in lines and "podDisruptionBudgets[1]" in lines


# terminationGracePeriod: drift is eventual disruption (upstream types.go EventualDisruptionClass) ----------


def drift_with_grace(pods, budgets=(), *, grace="48h", consolidate=False):
    pool = dpool(capacity_types=["on-demand"], budgets=[{"nodes": "100%"}], after=None if consolidate else "Never")
    if grace:
        pool["spec"]["template"]["spec"]["terminationGracePeriod"] = grace
    doc = world(instance_types=[M5L], node_classes=[node_class("default", [])], node_pools=[pool],
                nodes=[knode("n1", "m5.large", extra_labels={"karpenter.sh/initialized": "true"})], pods=pods)
    doc["nodeClaims"] = [{"metadata": {"name": "claim-n1"}, "status": {"nodeName": "n1", "conditions": [
        {"type": "Drifted", "status": "True", "reason": "AMIDrift", "message": "new image"}]}}]
    doc["podDisruptionBudgets"] = list(budgets)
    return [d for d in simulate(doc)["disruptions"] if d["reason"] == "drift"]


@pytest.mark.parametrize("held", ["do-not-disrupt", "pdb"])
def test_with_a_grace_period_drift_takes_a_node_its_pods_hold_and_plans_no_replacement_for_them(held):
    """Upstream: "should consider candidates that have do-not-disrupt (PDB-blocked) pods scheduled with a
    terminationGracePeriod set for eventual disruption", and drift "should not create replacements" for them."""
    annotations = {"karpenter.sh/do-not-disrupt": "true"} if held == "do-not-disrupt" else None
    pods = [bound("db-0", "n1", "1500m", labels={"app": "db"}, annotations=annotations)]
    budgets = [budget("db", {"app": "db"}, 0)] if held == "pdb" else []
    assert drift_with_grace(pods, budgets, grace=None) == [], "without a grace period the pod holds the node"
    (taken,) = drift_with_grace(pods, budgets)
    assert taken["nodes"] == ["n1"] and taken["action"] == "delete" and "replacement" not in taken


def test_a_held_pod_beside_movable_ones_leaves_only_those_to_a_replacement():
    pods = [bound("db-0", "n1", "1", labels={"app": "db"}, annotations={"karpenter.sh/do-not-disrupt": "true"}),
            bound("web-0", "n1", "500m", labels={"app": "web"})]
    (taken,) = drift_with_grace(pods)
    assert taken["action"] == "replace" and taken["replacement"]["pods"] == ["default/web-0"]


def test_a_grace_period_never_lets_consolidation_take_a_held_node():
    """Consolidation is graceful disruption: "does not consolidate nodes with do-not-disrupt pods (blocking PDBs)
    when the NodePool's TerminationGracePeriod is not nil"."""
    assert consolidating_world([budget("web", {"app": "web"}, 0)]) == []
    doc = world(instance_types=[M5L], reservations=[reservation("cr-1", "m5.large", tags={"team": "ml"})],
                node_classes=[node_class("default", [{"tags": {"team": "ml"}}])],
                node_pools=[dpool(capacity_types=["reserved", "on-demand"], budgets=[{"nodes": "100%"}])],
                nodes=[knode("n1", "m5.large")],
                pods=[bound("web-0", "n1", "1", labels={"app": "web"}, annotations={"karpenter.sh/do-not-disrupt": "true"})])
    doc["nodePools"][0]["spec"]["template"]["spec"]["terminationGracePeriod"] = "1h"
    assert [d for d in simulate(doc)["disruptions"] if d["reason"] == "consolidation"] == []


def test_a_grace_period_of_never_is_bad_input():
    doc = world(instance_types=[M5L], node_pools=[dpool()])
    doc["nodePools"][0]["spec"]["template"]["spec"]["terminationGracePeriod"] = "Never"
    with pytest.raises(WorldError) as raised:
        parse_world(doc)
    assert any("terminationGracePeriod" in line for line in raised.value.lines())
