"""First-fit-decreasing behaviour, through `simulate` (the engine's public face)."""

from scheduling.engine import simulate

from .builders import instance_type, node, node_class, node_pool, placement, pod, world

M5 = [instance_type("m5.large", "2", "8Gi", od=0.096), instance_type("m5.xlarge", "4", "16Gi", od=0.192)]


def run(**kwargs):
    kwargs.setdefault("instance_types", M5)
    kwargs.setdefault("node_classes", [node_class()])
    return simulate(world(**kwargs))


def test_existing_nodes_first_then_claims():
    decisions = run(nodes=[node("n1", cpu="2", memory="4Gi")],
                    pods=[pod("bound", "1", "1Gi", node="n1"), pod("a", "1", "1Gi"), pod("b", "1", "1Gi")])
    where = placement(decisions)
    assert where["default/a"] == ("node", "n1") or where["default/b"] == ("node", "n1")
    assert len(decisions["nodeClaims"]) == 1
    assert "default/bound" not in where  # bound pods are not pending


def test_nodes_that_cannot_take_pods_are_skipped():
    nodes = [node("cordoned", unschedulable=True), node("deleting", deleting=True),
             node("tainted", taints=[{"key": "dedicated", "value": "db", "effect": "NoSchedule"}]),
             node("soft", taints=[{"key": "x", "effect": "PreferNoSchedule"}])]
    decisions = run(nodes=nodes, pods=[pod("a", "1", "1Gi"), pod("db", "1", "1Gi", tolerations=[{"key": "dedicated", "operator": "Exists"}])])
    where = placement(decisions)
    assert where["default/db"] == ("node", "soft") or where["default/db"] == ("node", "tainted")
    assert where["default/a"] == ("node", "soft")


def test_first_fit_decreasing_packs_largest_first():
    # 3+1 and 3+1 on two 4-cpu nodes; largest first, then the claim with fewest pods.
    pods = [pod("s1", "1", "1Gi"), pod("big1", "3", "1Gi"), pod("s2", "1", "1Gi"), pod("big2", "3", "1Gi")]
    decisions = run(instance_types=[instance_type("m5.xlarge", "4", "16Gi")], pods=pods)
    claims = sorted(sorted(c["pods"]) for c in decisions["nodeClaims"])
    assert claims == [["default/big1", "default/s1"], ["default/big2", "default/s2"]]


def test_claims_are_filled_fewest_pods_first():
    # Plain first-fit would put all four small pods on the first claim (5 + 1 pods).
    pods = [pod(f"p{i}", "250m", "128Mi") for i in range(4)] + [pod("big1", "3", "1Gi"), pod("big2", "3", "1Gi")]
    decisions = run(instance_types=[instance_type("m5.xlarge", "4", "16Gi")], pods=pods)
    assert sorted(len(c["pods"]) for c in decisions["nodeClaims"]) == [3, 3]


def test_same_signature_pods_share_claims_until_full():
    decisions = run(instance_types=[instance_type("m5.xlarge", "4", "16Gi")], pods=[pod(f"p{i}", "1", "1Gi") for i in range(10)])
    assert sorted(len(c["pods"]) for c in decisions["nodeClaims"]) == [2, 4, 4]


def test_cheapest_instance_type_that_fits_is_launched():
    decisions = run(pods=[pod("a", "3", "1Gi")])
    assert decisions["nodeClaims"][0]["launch"]["instanceType"] == "m5.xlarge"
    decisions = run(pods=[pod("a", "1", "1Gi")])
    claim = decisions["nodeClaims"][0]
    assert claim["launch"] == {"instanceType": "m5.large", "zone": "us-east-1a", "capacityType": "on-demand", "price": 0.096}
    assert claim["instanceTypeOptions"] == ["m5.large", "m5.xlarge"]


def test_nodepools_by_weight_then_name_descending():
    pools = [node_pool("alpha"), node_pool("beta"), node_pool("heavy", weight=50)]
    assert run(node_pools=pools, pods=[pod("a")])["nodeClaims"][0]["nodePool"] == "heavy"
    pools = [node_pool("alpha"), node_pool("beta")]
    assert run(node_pools=pools, pods=[pod("a")])["nodeClaims"][0]["nodePool"] == "beta"


def test_taints_and_tolerations():
    gpu = node_pool("gpu", weight=100, taints=[{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}])
    decisions = run(node_pools=[gpu, node_pool("general")],
                    pods=[pod("plain"), pod("tolerant", "1", tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists"}])])
    where = placement(decisions)
    assert where["default/plain"][1]["nodePool"] == "general"  # cannot join the gpu claim either
    assert where["default/tolerant"][1]["nodePool"] == "gpu"  # larger, so placed first
    only_gpu = run(node_pools=[gpu], pods=[pod("plain")])
    assert only_gpu["unschedulable"] == [{"pod": "default/plain", "reason": "taint nvidia.com/gpu=true:NoSchedule is not tolerated"}]


def test_node_selector_and_required_affinity_terms_are_ored():
    types = [instance_type("m5.large", "2", "8Gi", zones=("us-east-1a", "us-east-1b")),
             instance_type("m6g.large", "2", "8Gi", labels={"kubernetes.io/arch": "arm64"}, od=0.077)]
    terms = [{"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-east-1c"]}]},
             {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-east-1b"]},
                                   {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]}]
    decisions = run(instance_types=types, pods=[pod("zonal", terms=terms), pod("arm", selector={"kubernetes.io/arch": "arm64"})])
    where = placement(decisions)
    assert where["default/zonal"][1]["launch"]["zone"] == "us-east-1b"
    assert where["default/zonal"][1]["launch"]["instanceType"] == "m5.large"
    assert where["default/arm"][1]["launch"]["instanceType"] == "m6g.large"
    assert where["default/arm"][1]["labels"]["kubernetes.io/arch"] == "arm64"


def test_empty_affinity_term_matches_nothing():
    decisions = run(pods=[pod("a", terms=[{"matchExpressions": []}])])
    assert decisions["unschedulable"] == [{"pod": "default/a", "reason": "its required node affinity has no term that can match a node"}]


def test_match_fields_pin_a_pod_to_an_existing_node():
    terms = [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n2"]}]}]
    decisions = run(nodes=[node("n1"), node("n2")], pods=[pod("ds", terms=terms)])
    assert decisions["bindings"] == [{"pod": "default/ds", "node": "n2"}]
    decisions = run(pods=[pod("ds", terms=terms)])
    assert decisions["unschedulable"][0]["reason"] == "label metadata.name is not defined"


def test_custom_labels_on_nodepool_requirements():
    team = node_pool("team", requirements=[{"key": "team", "operator": "In", "values": ["a", "b"]}], labels={"tier": "gold"})
    decisions = run(node_pools=[team], pods=[pod("wants-b", selector={"team": "b"}), pod("wants-c", selector={"team": "c"}),
                                             pod("wants-tier", selector={"tier": "gold"}), pod("unknown", selector={"color": "red"})])
    where = placement(decisions)
    assert where["default/wants-b"][1]["labels"]["team"] == "b"
    assert where["default/wants-tier"][1]["labels"]["tier"] == "gold"
    assert where["default/wants-c"] == ("unschedulable", "team In [c] conflicts with team In [a, b]")
    assert where["default/unknown"] == ("unschedulable", "label color is not defined")


def test_nodepool_limits_count_existing_nodes_and_planned_claims():
    pool = node_pool(limits={"cpu": "10"})
    existing = node("old", cpu="4", labels={"karpenter.sh/nodepool": "default"})
    pods = [pod("bound", "4", "1Gi", node="old")] + [pod(f"p{i}", "1500m", "1Gi") for i in range(6)]
    decisions = run(node_pools=[pool], nodes=[existing], pods=pods)
    launched_cpu = sum(2 if c["launch"]["instanceType"] == "m5.large" else 4 for c in decisions["nodeClaims"])
    assert 4 + launched_cpu <= 10
    assert decisions["unschedulable"]
    assert all("NodePool limits reached" in u["reason"] for u in decisions["unschedulable"])


def test_limits_on_nodes_count():
    decisions = run(node_pools=[node_pool(limits={"nodes": "2"})], pods=[pod(f"p{i}", "3", "1Gi") for i in range(4)])
    assert len(decisions["nodeClaims"]) == 2
    assert decisions["unschedulable"][0]["reason"] == "NodePool limits reached (nodes 2 of 2 in use)"


def test_daemonset_overhead_is_added_to_new_claims():
    ds = {"metadata": {"name": "agent", "namespace": "kube-system"},
          "spec": {"template": {"spec": {"containers": [{"name": "a", "resources": {"requests": {"cpu": "600m"}}}]}}}}
    decisions = run(pods=[pod("a", "1500m", "1Gi")], daemon_sets=[ds])
    assert decisions["nodeClaims"][0]["launch"]["instanceType"] == "m5.xlarge"  # 1.5 + 0.6 > 2
    gpu_only = dict(ds, spec={"template": {"spec": {"containers": [{"name": "a", "resources": {"requests": {"cpu": "600m"}}}],
                                                       "nodeSelector": {"accelerator": "gpu"}}}})
    decisions = run(pods=[pod("a", "1500m", "1Gi")], daemon_sets=[gpu_only])
    assert decisions["nodeClaims"][0]["launch"]["instanceType"] == "m5.large"


def test_default_overhead_when_the_node_class_sets_none():
    decisions = run(node_classes=[node_class(overhead=True)], pods=[pod("a", "2", "1Gi")])
    assert decisions["nodeClaims"][0]["launch"]["instanceType"] == "m5.xlarge"  # m5.large has 1930m


def test_spot_before_on_demand_when_allowed():
    types = [instance_type("m5.large", "2", "8Gi", od=0.096, spot=0.04), instance_type("m5.xlarge", "4", "16Gi", od=0.192, spot=0.03)]
    decisions = run(instance_types=types, node_pools=[node_pool(capacity_types=["spot", "on-demand"])], pods=[pod("a", "1")])
    assert decisions["nodeClaims"][0]["launch"] == {"instanceType": "m5.xlarge", "zone": "us-east-1a", "capacityType": "spot", "price": 0.03}
    decisions = run(instance_types=types, node_pools=[node_pool(capacity_types=["on-demand"])], pods=[pod("a", "1")])
    assert decisions["nodeClaims"][0]["launch"]["capacityType"] == "on-demand"


def test_unschedulable_reasons_are_specific():
    types = [instance_type("m5.large", "2", "8Gi", zones=("us-east-1a", "us-east-1b")),
             instance_type("c5.24xlarge", "96", "192Gi", zones=("us-east-1a",))]
    decisions = run(instance_types=types, pods=[
        pod("huge", "97", "1Gi"),
        pod("zonal", "95", "1Gi", selector={"topology.kubernetes.io/zone": "us-east-1b"}),
    ])
    reasons = {u["pod"]: u["reason"] for u in decisions["unschedulable"]}
    assert reasons["default/huge"] == "no instance type has room for cpu=97, memory=1Gi (largest: c5.24xlarge with cpu=96, memory=1Gi allocatable)" \
        or reasons["default/huge"].startswith("no instance type has room for cpu=97, memory=1Gi (largest: c5.24xlarge")
    assert reasons["default/zonal"] == "no instance type satisfies cpu=95, memory=1Gi with zone us-east-1b"


def test_reasons_name_the_nodepool_when_there_are_several():
    decisions = run(node_pools=[node_pool("a"), node_pool("b", weight=5, taints=[{"key": "x", "effect": "NoSchedule"}])],
                    pods=[pod("huge", "64", "1Gi")])
    reason = decisions["unschedulable"][0]["reason"]
    assert reason.startswith("nodepool b: taint x:NoSchedule is not tolerated; nodepool a: no instance type has room for cpu=64")


def test_nodepool_with_missing_or_invalid_node_class():
    decisions = run(node_classes=[node_class("bad", [{"id": "nope"}])],
                    node_pools=[node_pool("a", node_class="missing"), node_pool("b", node_class="bad")], pods=[pod("x")])
    assert decisions["unschedulable"][0]["reason"] == (
        "nodepool b: EC2NodeClass bad has invalid capacityReservationSelectorTerms; nodepool a: EC2NodeClass missing not found")
    pools = {p["name"]: p["conditions"] for p in decisions["nodePools"]}
    assert pools["a"][0]["reason"] == "NodeClassNotReady" and pools["b"][0]["status"] == "False"


def test_claim_names_are_unique_and_output_is_deterministic():
    doc = world(instance_types=M5, node_classes=[node_class()], nodes=[node("default-x")],
                pods=[pod(f"p{i}", "3", "1Gi") for i in range(40)])
    first, second = simulate(doc), simulate(doc)
    assert first == second
    names = [c["name"] for c in first["nodeClaims"]]
    assert len(names) == len(set(names)) == 40 - 1  # one fits on the existing 4-cpu node
    assert all(name.startswith("default-") for name in names)
