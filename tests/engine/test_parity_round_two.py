"""Issue #49, the eight causes: each case in karpweb's own worlds after an `It` of
kubernetes-sigs/karpenter (pkg/controllers/provisioning/scheduling/{suite,topology}_test.go and
pkg/controllers/disruption/{suite,emptiness,consolidation,drift}_test.go), run through `simulate`."""

from scheduling.engine import simulate
from tests.engine.builders import NOW, instance_type, node, node_class, node_pool, placement, pod, world

ZONES = ("us-east-1a", "us-east-1b")


def catalogue():
    return [instance_type("small-type", "1", "2Gi", zones=ZONES, od=0.05),
            instance_type("large-type", "4", "16Gi", zones=ZONES, od=0.2)]


def plan(pods, **kwargs):
    kwargs.setdefault("instance_types", catalogue())
    return simulate(world(node_classes=[node_class("default")], pods=pods, **kwargs))


# 1. deprecated labels (upstream NormalizedLabels; suite_test "should launch pods with different
#    instance type node selectors on different instances") ------------------------------------------


def test_deprecated_instance_type_label_selects_like_the_current_one():
    decisions = plan([pod("old", selector={"beta.kubernetes.io/instance-type": "small-type"}),
                      pod("new", selector={"node.kubernetes.io/instance-type": "large-type"})])
    where = placement(decisions)
    assert where["default/old"][0] == "claim" and where["default/new"][0] == "claim"
    assert where["default/old"][1]["name"] != where["default/new"][1]["name"]
    assert where["default/old"][1]["launch"]["instanceType"] == "small-type"
    assert where["default/new"][1]["launch"]["instanceType"] == "large-type"


def test_deprecated_zone_region_arch_os_labels_are_read_as_their_current_names():
    terms = [{"matchExpressions": [
        {"key": "failure-domain.beta.kubernetes.io/zone", "operator": "In", "values": ["us-east-1b"]},
        {"key": "failure-domain.beta.kubernetes.io/region", "operator": "Exists"},
        {"key": "beta.kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
        {"key": "beta.kubernetes.io/os", "operator": "In", "values": ["linux"]},
    ]}]
    its = [instance_type(t["name"], t["cpu"], t["memory"], zones=ZONES, labels={"topology.kubernetes.io/region": "us-east-1"})
           for t in catalogue()]
    where = placement(plan([pod("zonal", terms=terms)], instance_types=its))
    assert where["default/zonal"][0] == "claim", where["default/zonal"]
    assert where["default/zonal"][1]["launch"]["zone"] == "us-east-1b"


def test_deprecated_label_selects_an_existing_node_by_its_current_label():
    existing = node("n1", labels={"node.kubernetes.io/instance-type": "large-type", "karpenter.sh/nodepool": "default",
                                  "topology.kubernetes.io/zone": "us-east-1a"})
    where = placement(plan([pod("p", selector={"beta.kubernetes.io/instance-type": "large-type"})], nodes=[existing]))
    assert where["default/p"] == ("node", "n1")


# 2. DaemonSets selecting karpenter.sh/initialized or karpenter.sh/registered (suite_test "Should
#    properly handle DaemonSet resources with Node Affinity for `karpenter.sh/initialized` and
#    `karpenter.sh/registered`") ----------------------------------------------------------------------


def daemon_set(name, cpu, key):
    template = pod(name, cpu=cpu, terms=[{"matchExpressions": [{"key": key, "operator": "In", "values": ["true"]}]}])
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name, "namespace": "kube-system"},
            "spec": {"template": {"metadata": {"labels": {"app": name}}, "spec": template["spec"]}}}


def test_daemon_sets_selecting_lifecycle_labels_count_on_new_nodes():
    its = [instance_type("two-cpu", "2", "8Gi", zones=ZONES, od=0.1),
           instance_type("four-cpu", "4", "16Gi", zones=ZONES, od=0.2)]
    daemons = [daemon_set("agent", "1", "karpenter.sh/initialized"),
               daemon_set("logger", "1", "karpenter.sh/registered")]
    decisions = plan([pod("app", cpu="2")], instance_types=its, daemon_sets=daemons)
    claim = placement(decisions)["default/app"][1]
    # 2 CPU for the pod and 1 for each DaemonSet: only the 4-CPU type holds all three.
    assert claim["launch"]["instanceType"] == "four-cpu"
    # The lifecycle labels are for this check only: they never reach the claim.
    assert not {"karpenter.sh/initialized", "karpenter.sh/registered"} & set(claim["labels"])
    assert claim["resources"]["cpu"] == "4"  # the DaemonSets' 2 CPU are in the claim's requests


# 3. host ports (suite_test Describe "Host Ports" / "should not schedule pods with conflicting host
#    ports on the same node"; consolidation_test: a pod is not moved onto a node whose pod holds
#    its host port) -----------------------------------------------------------------------------------


def with_port(item, port=8080, protocol=None, ip=None):
    entry = {"containerPort": port, "hostPort": port}
    if protocol:
        entry["protocol"] = protocol
    if ip:
        entry["hostIP"] = ip
    item["spec"]["containers"][0].setdefault("ports", []).append(entry)
    return item


def claim_of(decisions, key):
    kind, where = placement(decisions)[key]
    assert kind == "claim", (key, kind, where)
    return where["name"]


def test_pods_with_the_same_host_port_get_separate_claims():
    decisions = plan([with_port(pod("a")), with_port(pod("b"))])
    assert claim_of(decisions, "default/a") != claim_of(decisions, "default/b")


def test_host_ports_share_a_claim_when_protocol_or_address_differ():
    decisions = plan([with_port(pod("tcp")), with_port(pod("udp"), protocol="UDP"),
                      with_port(pod("one"), port=9090, ip="10.0.0.1"), with_port(pod("two"), port=9090, ip="10.0.0.2")])
    assert len(decisions["nodeClaims"]) == 1


def test_host_port_on_every_address_conflicts_with_one_address():
    decisions = plan([with_port(pod("any"), ip="0.0.0.0"), with_port(pod("one"), ip="10.0.0.1")])
    assert len(decisions["nodeClaims"]) == 2


def test_host_port_taken_on_an_existing_node_sends_the_pod_elsewhere():
    labels = {"karpenter.sh/nodepool": "default", "node.kubernetes.io/instance-type": "large-type",
              "topology.kubernetes.io/zone": "us-east-1a", "karpenter.sh/capacity-type": "on-demand"}
    existing = node("n1", labels=labels)
    decisions = plan([with_port(pod("running", node="n1")), with_port(pod("new")), pod("plain")], nodes=[existing])
    where = placement(decisions)
    assert where["default/plain"] == ("node", "n1")
    assert where["default/new"][0] == "claim"


def test_bad_host_port_is_named():
    import pytest
    from scheduling.engine import WorldError
    with pytest.raises(WorldError) as raised:
        plan([with_port(pod("bad"), port=70000)])
    assert "pods[0].spec.containers[0].ports[0].hostPort" in str(raised.value)


def test_consolidation_does_not_move_a_pod_onto_a_node_holding_its_host_port():
    labels = {"karpenter.sh/nodepool": "default", "node.kubernetes.io/instance-type": "large-type",
              "topology.kubernetes.io/zone": "us-east-1a", "karpenter.sh/capacity-type": "on-demand",
              "karpenter.sh/initialized": "true"}
    nodes = [node(name, labels={**labels, "kubernetes.io/hostname": name}) for name in ("n1", "n2")]
    created = "2026-11-21T10:00:00Z"
    pods = [with_port(pod("a", node="n1", created=created)), with_port(pod("b", node="n2", created=created))]
    # One size only: replacing a node is never cheaper, so each node either goes or stays.
    doc = world(instance_types=catalogue()[1:], node_classes=[node_class("default")], nodes=nodes, pods=pods)
    assert simulate(doc)["disruptions"] == []
    # Without the host ports one node takes both pods and the other goes.
    for item in pods:
        item["spec"]["containers"][0].pop("ports")
    assert [d["nodes"] for d in simulate(doc)["disruptions"]] in ([["n1"]], [["n2"]])


# 4. nodeTaintsPolicy for domains a NodePool brings (topology_test "should balance pods across a
#    label when discovered from the nodepool (NodeTaintsPolicy=ignore)" and "(...=honor)") ---------


def spread_over_pools(policy):
    pools = [node_pool("default", requirements=[{"key": "example.com/rack", "operator": "In", "values": ["foo"]}]),
             node_pool("tainted", requirements=[{"key": "example.com/rack", "operator": "In", "values": ["bar"]}],
                       taints=[{"key": "dedicated", "value": "x", "effect": "NoSchedule"}])]
    pods = []
    for index in range(2):
        item = pod(f"web-{index}", labels={"app": "web"})
        item["spec"]["topologySpreadConstraints"] = [{
            "maxSkew": 1, "topologyKey": "example.com/rack", "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "web"}}, "nodeTaintsPolicy": policy}]
        pods.append(item)
    return placement(plan(pods, node_pools=pools))


def test_node_taints_policy_ignore_counts_a_tainted_node_pools_domain():
    where = spread_over_pools("Ignore")
    kinds = sorted(kind for kind, _ in where.values())
    # One pod in rack foo; the other would make the skew 2 against the empty rack bar it cannot use.
    assert kinds == ["claim", "unschedulable"], where


def test_node_taints_policy_honor_leaves_a_tainted_node_pools_domain_out():
    where = spread_over_pools("Honor")
    assert [kind for kind, _ in where.values()] == ["claim", "claim"], where


# 5. terminating pods (emptiness_test "should ignore ... pods that are terminating" / suite_test: a
#    terminating do-not-disrupt pod does not block its node) ------------------------------------------

LONG_AGO = "2026-11-21T08:00:00Z"
NODE_LABELS = {"karpenter.sh/nodepool": "default", "node.kubernetes.io/instance-type": "large-type",
               "topology.kubernetes.io/zone": "us-east-1a", "karpenter.sh/capacity-type": "on-demand",
               "karpenter.sh/initialized": "true"}


def cluster_node(name):
    item = node(name, labels={**NODE_LABELS, "kubernetes.io/hostname": name})
    item["metadata"]["creationTimestamp"] = LONG_AGO
    return item


def bound(name, node_name, *, annotations=None, terminating=False, started=None, owner=None, cpu="100m"):
    item = pod(name, cpu=cpu, node=node_name, created=LONG_AGO)
    if annotations:
        item["metadata"]["annotations"] = annotations
    if terminating:
        item["metadata"]["deletionTimestamp"] = NOW
    if started:
        item["status"] = {"phase": "Running", "startTime": started}
    if owner:
        item["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": owner, "name": "web", "controller": True}]
    return item


def disrupt(nodes, pods, now=NOW, **kwargs):
    doc = world(instance_types=catalogue()[1:], node_classes=[node_class("default")], nodes=nodes, pods=pods, now=now,
                **kwargs)
    return simulate(doc)["disruptions"]


def test_a_node_whose_only_pod_is_terminating_is_empty():
    found = disrupt([cluster_node("n1")], [bound("leaving", "n1", terminating=True)])
    assert [(d["nodes"], d["consolidationType"]) for d in found] == [(["n1"], "empty")]


def test_a_terminating_stateful_set_pod_keeps_its_node_from_being_empty():
    found = disrupt([cluster_node("n1")], [bound("db-0", "n1", terminating=True, owner="StatefulSet")])
    assert all(d.get("consolidationType") != "empty" for d in found)


def test_a_terminating_do_not_disrupt_pod_does_not_block_its_node():
    blocker = {"karpenter.sh/do-not-disrupt": "true"}
    nodes = [cluster_node("n1"), cluster_node("n2")]
    held = disrupt(nodes, [bound("a", "n1", annotations=blocker), bound("b", "n2", annotations=blocker)])
    assert held == []
    going = disrupt(nodes, [bound("a", "n1", annotations=blocker, terminating=True), bound("b", "n2", annotations=blocker)])
    assert [d["nodes"] for d in going] == [["n1"]]


# 6. do-not-disrupt durations (suite_test "should allow disruption of nodes with pods that have
#    do-not-disrupt set to a duration that has elapsed" and the one that has not) ---------------------


def blocked_for(value, started):
    nodes = [cluster_node("n1"), cluster_node("n2")]
    pods = [bound("a", "n1", annotations={"karpenter.sh/do-not-disrupt": value}, started=started),
            bound("b", "n2", annotations={"karpenter.sh/do-not-disrupt": "true"})]
    return [d["nodes"] for d in disrupt(nodes, pods)]


def test_do_not_disrupt_duration_blocks_until_it_elapses():
    assert blocked_for("2m", "2026-11-21T11:59:00Z") == []  # started a minute ago
    assert blocked_for("1h", "2026-11-21T11:30:00Z") == []


def test_do_not_disrupt_duration_that_has_elapsed_no_longer_blocks():
    assert blocked_for("2m", "2026-11-21T11:50:00Z") == [["n1"]]
    assert blocked_for("1h30m", "2026-11-21T10:00:00Z") == [["n1"]]


def test_do_not_disrupt_duration_without_a_start_time_blocks():
    assert blocked_for("2m", None) == []


def test_do_not_disrupt_value_that_is_no_duration_counts_as_absent():
    assert blocked_for("soon", None) == [["n1"]]
    assert blocked_for("-5m", None) == [["n1"]]


# 7. pods of a deleting node (suite_test "should schedule pods on a node that is being deleted" /
#    "... including StatefulSet pods that are terminating"; disruption suite_test: replacement
#    capacity is planned for the pods of a node marked for deletion) -----------------------------------


def deleting_node(name):
    item = cluster_node(name)
    item["metadata"]["deletionTimestamp"] = NOW
    return item


def test_pods_of_a_deleting_node_get_capacity_planned_at_once():
    decisions = plan([bound("web", "gone", cpu="2"), bound("db-0", "gone", cpu="2", terminating=True, owner="StatefulSet"),
                      bound("done", "gone", terminating=True), bound("agent", "gone", owner="DaemonSet")],
                     nodes=[deleting_node("gone")])
    where = placement(decisions)
    assert where["default/web"][0] == "claim" and where["default/db-0"][0] == "claim"
    assert "default/done" not in where and "default/agent" not in where  # terminating, DaemonSet: nothing to place
    # Planned once: consolidation's pass does not plan them a second time.
    planned = [key for claim in decisions["nodeClaims"] for key in claim["pods"]]
    assert sorted(planned) == ["default/db-0", "default/web"]
    assert all(d.get("replacement") is None for d in decisions["disruptions"])


def test_pods_of_a_deleting_node_move_to_an_existing_node_with_room():
    decisions = plan([bound("web", "gone")], nodes=[deleting_node("gone"), cluster_node("stays")])
    assert placement(decisions)["default/web"] == ("node", "stays")
    assert decisions["nodeClaims"] == []


# 8. drift per pass (drift_test "should disrupt all empty drifted nodes in parallel" and "should
#    disrupt one non-empty drifted node at a time") ------------------------------------------------------


def drifted(nodes, pods):
    doc = world(instance_types=catalogue()[1:], node_classes=[node_class("default")], nodes=nodes, pods=pods,
                node_pools=[{**node_pool(), "spec": {**node_pool()["spec"], "disruption": {
                    "consolidateAfter": "Never", "budgets": [{"nodes": "100%"}]}}}])
    doc["nodeClaims"] = [{"metadata": {"name": f"claim-{n['metadata']['name']}"}, "status": {
        "nodeName": n["metadata"]["name"], "conditions": [
            {"type": "Drifted", "status": "True", "reason": "NodePoolDrifted", "message": "template changed"}]}}
        for n in nodes]
    return [d for d in simulate(doc)["disruptions"] if d["reason"] == "drift"]


def test_all_empty_drifted_nodes_go_in_one_pass_and_no_non_empty_one_with_them():
    nodes = [cluster_node(f"n{i}") for i in range(4)]
    found = drifted(nodes, [bound("a", "n2"), bound("b", "n3")])
    assert sorted(n for d in found for n in d["nodes"]) == ["n0", "n1"]
    assert all(d["action"] == "delete" for d in found)


def test_one_non_empty_drifted_node_per_pass():
    nodes = [cluster_node(f"n{i}") for i in range(3)]
    found = drifted(nodes, [bound(f"p{i}", f"n{i}") for i in range(3)])
    assert len(found) == 1 and len(found[0]["nodes"]) == 1
