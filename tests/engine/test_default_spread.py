"""kube-scheduler's default topology spread constraints (issue #49), in karpweb's own worlds after
kubernetes-sigs/karpenter pkg/controllers/provisioning/scheduling/defaultconstraints_test.go and the
default-constraint cases of topology_test.go: a pending pod without constraints of its own gets the
defaults with the selector its Services and controller give it, and is spread by them."""

import pytest

from scheduling.engine import parse_world, simulate
from scheduling.engine.defaultspread import inject_default_spread
from scheduling.engine.world import WorldError
from tests.engine.builders import instance_type, node_class, node_pool, placement, pod, world

ZONES = ("us-east-1a", "us-east-1b", "us-east-1c")
ZONE_DEFAULT = {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule"}


def owned(name, labels, kind="ReplicaSet", owner="web-5d8f", api="apps/v1", namespace="default"):
    item = pod(name, cpu="500m", memory="1Gi", labels=labels, namespace=namespace)
    item["metadata"]["ownerReferences"] = [{"apiVersion": api, "kind": kind, "name": owner, "uid": "u-1", "controller": True}]
    return item


def service(selector, namespace="default", name="web"):
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": namespace},
            "spec": {"selector": selector}}


def replica_set(name="web-5d8f", match_labels=None, expressions=None, namespace="default"):
    selector = {"matchLabels": match_labels or {}}
    if expressions:
        selector["matchExpressions"] = expressions
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": name, "namespace": namespace},
            "spec": {"selector": selector}}


def selector_of(doc, name="web-0"):
    problems = []
    injected = inject_default_spread(doc, lambda path, message: problems.append((path, message)))
    assert problems == []
    (found,) = [p for p in injected["pods"] if p["metadata"]["name"] == name]
    constraints = found["spec"].get("topologySpreadConstraints")
    return constraints[0]["labelSelector"] if constraints else None


def base(pods, **lists):
    doc = world(instance_types=[instance_type("m5.large", "2", "8Gi", zones=ZONES)], node_classes=[node_class("default")],
                node_pools=[node_pool()], pods=pods)
    doc["defaultTopologySpreadConstraints"] = [ZONE_DEFAULT]
    doc.update(lists)
    return doc


def test_a_replica_sets_selector_not_the_pods_labels():
    doc = base([owned("web-0", {"app": "web", "pod-template-hash": "5d8f", "version": "7"})],
               replicaSets=[replica_set(match_labels={"app": "web", "pod-template-hash": "5d8f"})])
    assert selector_of(doc) == {"matchExpressions": [{"key": "app", "operator": "In", "values": ["web"]},
                                                     {"key": "pod-template-hash", "operator": "In", "values": ["5d8f"]}]}


def test_a_replication_controllers_labels_win_over_a_services_on_the_same_key():
    doc = base([owned("web-0", {"app": "web"}, kind="ReplicationController", owner="legacy", api="v1")],
               services=[service({"app": "web"})],
               replicationControllers=[{"metadata": {"name": "legacy", "namespace": "default"}, "spec": {"selector": {"app": "legacy"}}}])
    assert selector_of(doc) == {"matchLabels": {"app": "legacy"}}


def test_services_that_select_the_pod_merge_and_others_do_not_count():
    doc = base([pod("web-0", labels={"app": "web", "tier": "frontend"})],
               services=[service({"app": "web"}), service({"tier": "frontend"}, name="fe"), service({"app": "other"}, name="o"),
                         service({"app": "web"}, namespace="elsewhere"), service({}, name="empty")])
    assert selector_of(doc) == {"matchLabels": {"app": "web", "tier": "frontend"}}


@pytest.mark.parametrize("pods, lists", [
    ([pod("web-0", labels={"app": "web"})], {}),  # no Service, no controller
    ([owned("web-0", {"app": "web"}, kind="Job", owner="batch", api="batch/v1")], {}),  # an unsupported controller
    ([owned("web-0", {"app": "web"})], {}),  # its ReplicaSet no longer exists
])
def test_no_selector_no_default_constraint(pods, lists):
    assert selector_of(base(pods, **lists)) is None


def test_a_pod_with_constraints_of_its_own_or_already_bound_keeps_them():
    own = pod("web-0", labels={"app": "web"})
    own["spec"]["topologySpreadConstraints"] = [{"maxSkew": 2, "topologyKey": "kubernetes.io/hostname",
                                                 "whenUnsatisfiable": "ScheduleAnyway",
                                                 "labelSelector": {"matchLabels": {"app": "web"}}}]
    doc = base([own, pod("web-1", labels={"app": "web"}, node="n1")], services=[service({"app": "web"})])
    injected = inject_default_spread(doc, lambda *a: None)
    assert injected["pods"][0]["spec"]["topologySpreadConstraints"] == own["spec"]["topologySpreadConstraints"]
    assert "topologySpreadConstraints" not in injected["pods"][1]["spec"]
    assert "topologySpreadConstraints" not in doc["pods"][1]["spec"], "the caller's document is not changed"


def test_three_replicas_spread_over_three_zones_by_the_default():
    pods = [owned(f"web-{i}", {"app": "web", "pod-template-hash": "5d8f"}) for i in range(3)]
    decisions = simulate(base(pods, replicaSets=[replica_set(match_labels={"app": "web", "pod-template-hash": "5d8f"})]))
    zones = {placement(decisions)[f"default/web-{i}"][1]["launch"]["zone"] for i in range(3)}
    assert zones == set(ZONES)
    without = base(pods, replicaSets=[replica_set(match_labels={"app": "web", "pod-template-hash": "5d8f"})])
    del without["defaultTopologySpreadConstraints"]
    assert len(simulate(without)["nodeClaims"]) == 1, "no default: they pack onto one node"


@pytest.mark.parametrize("constraint, path", [
    ({**ZONE_DEFAULT, "labelSelector": {"matchLabels": {"a": "b"}}}, "defaultTopologySpreadConstraints[0].labelSelector"),
    ({**ZONE_DEFAULT, "maxSkew": 0}, "defaultTopologySpreadConstraints[0].maxSkew"),
    ({**ZONE_DEFAULT, "whenUnsatisfiable": "Sometimes"}, "defaultTopologySpreadConstraints[0].whenUnsatisfiable"),
    ({"maxSkew": 1, "whenUnsatisfiable": "DoNotSchedule"}, "defaultTopologySpreadConstraints[0].topologyKey"),
])
def test_a_bad_default_is_bad_input_naming_the_field(constraint, path):
    doc = base([pod("web-0")])
    doc["defaultTopologySpreadConstraints"] = [constraint]
    with pytest.raises(WorldError) as raised:
        parse_world(doc)
    assert any(line.startswith(path) for line in raised.value.lines()), raised.value.lines()
