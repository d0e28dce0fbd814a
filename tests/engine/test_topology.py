"""Topology spread, pod affinity and pod anti-affinity, through `simulate`."""

from collections import Counter

import pytest

from scheduling.engine import WorldError, parse_world, simulate

from .builders import instance_type, node, node_class, node_pool, placement, pod, world

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
ZONES = ("z-a", "z-b", "z-c")
TYPES = [instance_type("m5.large", "2", "8Gi", od=0.1, zones=ZONES),
         instance_type("m5.xlarge", "4", "16Gi", od=0.2, zones=ZONES)]


def run(pods, *, nodes=(), types=TYPES, pools=None, namespaces=None, **kwargs):
    doc = world(instance_types=types, node_classes=[node_class()], node_pools=pools or [node_pool()],
                nodes=nodes, pods=pods, **kwargs)
    if namespaces is not None:
        doc["namespaces"] = namespaces
    return simulate(doc)


def spread(key=ZONE, skew=1, when="DoNotSchedule", selector=None, **extra):
    return {"maxSkew": skew, "topologyKey": key, "whenUnsatisfiable": when,
            "labelSelector": {"matchLabels": selector or {"app": "web"}}, **extra}


def term(selector, key=ZONE, **extra):
    return {"labelSelector": {"matchLabels": selector}, "topologyKey": key, **extra}


def web(name, cpu="500m", *, labels=None, constraints=None, affinity=None, anti=None, preferred=None, **kwargs):
    """A pod labelled app=web (unless `labels`), with optional spread constraints and terms."""
    item = pod(name, cpu, "512Mi", labels=labels or {"app": "web"}, **kwargs)
    if constraints:
        item["spec"]["topologySpreadConstraints"] = constraints
    spec_affinity = item["spec"].setdefault("affinity", {})
    if affinity:
        spec_affinity["podAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": affinity}
    if anti:
        spec_affinity["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": anti}
    if preferred:
        spec_affinity.update(preferred)
    if not spec_affinity:
        del item["spec"]["affinity"]
    return item


def zone_node(name, zone, cpu="4", **kwargs):
    return node(name, cpu=cpu, labels={ZONE: zone, HOST: name}, **kwargs)


def zones_of(decisions, prefix="default/"):
    """pod key -> zone (claims) or node name (bindings)."""
    where = {}
    for claim in decisions["nodeClaims"]:
        for key in claim["pods"]:
            where[key] = claim["launch"]["zone"]
    for binding in decisions["bindings"]:
        where[binding["pod"]] = binding["node"]
    return where


def zone_counts(decisions, keys):
    where = zones_of(decisions)
    return Counter(where[k] for k in keys if k in where)


# topology spread ----------------------------------------------------------------------------------


def test_zonal_spread_balances_pods_across_zones():
    decisions = run([web(f"w{i}", constraints=[spread()]) for i in range(7)])
    counts = zone_counts(decisions, [f"default/w{i}" for i in range(7)])
    assert sorted(counts.values()) == [2, 2, 3] and set(counts) == set(ZONES)


def test_zonal_spread_counts_pods_on_existing_nodes():
    nodes = [zone_node("n1", "z-a", cpu="8")]
    bound = [web("b0", node="n1"), web("b1", node="n1")]
    decisions = run(bound + [web(f"w{i}", constraints=[spread()]) for i in range(4)], nodes=nodes)
    counts = zone_counts(decisions, [f"default/w{i}" for i in range(4)])
    assert counts == {"z-b": 2, "z-c": 2}  # n1 has room, but z-a already has two
    assert decisions["bindings"] == []


def test_pods_that_only_count_pin_their_node_claim_so_counts_are_exact():
    # The big web pods have no constraint of their own but the spread selects them; they land
    # in one zone, and the spread pods then fill the other zones first. Upstream would not count
    # them (their claim was not pinned when they joined) and put a third pod in z-a.
    big = [web(f"big{i}", "1500m") for i in range(2)]
    spreaders = [web(f"s{i}", constraints=[spread()]) for i in range(4)]
    decisions = run(big + spreaders)
    claims = decisions["nodeClaims"]
    big_zone = zones_of(decisions)["default/big0"]
    assert zones_of(decisions)["default/big1"] == big_zone
    everyone = Counter(c["launch"]["zone"] for c in claims for _ in c["pods"])
    assert sorted(everyone.values()) == [2, 2, 2]


def test_hostname_spread_puts_one_matching_pod_per_node():
    decisions = run([web(f"w{i}", constraints=[spread(HOST)]) for i in range(4)])
    assert sorted(len(c["pods"]) for c in decisions["nodeClaims"]) == [1, 1, 1, 1]
    decisions = run([web(f"w{i}", constraints=[spread(HOST, skew=2)]) for i in range(4)])
    assert sorted(len(c["pods"]) for c in decisions["nodeClaims"]) == [2, 2]


def test_hostname_spread_only_counts_selected_pods():
    others = [web(f"db{i}", labels={"app": "db"}) for i in range(3)]
    decisions = run(others + [web(f"w{i}", constraints=[spread(HOST)]) for i in range(2)])
    # db0-2 and w0 share the first claim; w1 may not join a node that has a web pod.
    assert sorted(sorted(c["pods"]) for c in decisions["nodeClaims"]) == [
        ["default/db0", "default/db1", "default/db2", "default/w0"], ["default/w1"]]


def test_min_domains_keeps_the_minimum_at_zero():
    decisions = run([web(f"w{i}", constraints=[spread(minDomains=5)]) for i in range(5)])
    placed = zone_counts(decisions, [f"default/w{i}" for i in range(5)])
    assert placed == {"z-a": 1, "z-b": 1, "z-c": 1}
    reasons = {u["reason"] for u in decisions["unschedulable"]}
    assert reasons == {f"topology spread on {ZONE} (maxSkew 1): no domain allowed now "
                       "(pods per domain: z-a=1, z-b=1, z-c=1)"}


def test_spread_domains_follow_the_pods_node_affinity():
    terms = [{"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["z-a", "z-b"]}]}]
    decisions = run([web(f"w{i}", constraints=[spread()], terms=terms) for i in range(4)])
    assert zone_counts(decisions, [f"default/w{i}" for i in range(4)]) == {"z-a": 2, "z-b": 2}


def test_spread_domains_are_the_zones_the_nodepool_offers():
    pools = [node_pool(requirements=[{"key": ZONE, "operator": "In", "values": ["z-b", "z-c"]}])]
    decisions = run([web(f"w{i}", constraints=[spread()]) for i in range(4)], pools=pools)
    assert zone_counts(decisions, [f"default/w{i}" for i in range(4)]) == {"z-b": 2, "z-c": 2}


def test_schedule_anyway_is_a_preference():
    # Only z-a can launch; a full node in z-b makes z-b a domain with no pods, so a second pod in
    # z-a would exceed the skew.
    types = [instance_type("m5.large", "2", "8Gi", zones=("z-a",))]
    nodes = [zone_node("full", "z-b", cpu="100m")]
    hard = run([web(f"w{i}", constraints=[spread()]) for i in range(2)], nodes=nodes, types=types)
    assert len(hard["nodeClaims"]) == 1 and len(hard["unschedulable"]) == 1
    soft = run([web(f"w{i}", constraints=[spread(when="ScheduleAnyway")]) for i in range(2)], nodes=nodes, types=types)
    assert soft["unschedulable"] == [] and sum(len(c["pods"]) for c in soft["nodeClaims"]) == 2


def test_match_label_keys_spread_each_revision_on_its_own():
    def revision(name, rev):
        item = web(name, constraints=[spread(matchLabelKeys=["rev"])], labels={"app": "web", "rev": rev})
        return item
    decisions = run([revision(f"a{i}", "1") for i in range(3)] + [revision(f"b{i}", "2") for i in range(3)])
    assert zone_counts(decisions, [f"default/a{i}" for i in range(3)]) == {z: 1 for z in ZONES}
    assert zone_counts(decisions, [f"default/b{i}" for i in range(3)]) == {z: 1 for z in ZONES}


# pod affinity --------------------------------------------------------------------------------------


def test_affinity_to_running_pods_follows_their_zone():
    nodes = [zone_node("db-node", "z-b", cpu="600m")]
    pods = [web("db", labels={"app": "db"}, node="db-node")]
    pods += [web(f"w{i}", affinity=[term({"app": "db"})]) for i in range(3)]
    decisions = run(pods, nodes=nodes)
    assert set(zones_of(decisions).values()) == {"z-b"}


def test_affinity_to_pods_of_the_same_run():
    # The web pods come first (larger) and wait at the back of the queue until the db pod runs.
    pods = [web(f"w{i}", "1", affinity=[term({"app": "db"})]) for i in range(2)] + [web("db", "100m", labels={"app": "db"})]
    decisions = run(pods, types=TYPES[:1])
    where = zones_of(decisions)
    assert where["default/w0"] == where["default/w1"] == where["default/db"]


def test_self_affinity_seeds_one_zone():
    decisions = run([web(f"w{i}", "1500m", affinity=[term({"app": "web"})]) for i in range(5)])
    assert len(set(zones_of(decisions).values())) == 1 and len(decisions["nodeClaims"]) >= 2


def test_affinity_without_a_matching_pod_is_unschedulable():
    decisions = run([web("w0", affinity=[term({"app": "db"})])])
    assert decisions["unschedulable"] == [
        {"pod": "default/w0", "reason": f"pod affinity on {ZONE}: no pod it selects runs in any domain"}]


def test_hostname_affinity_joins_the_node_running_the_pod():
    nodes = [zone_node("n1", "z-a", cpu="2"), zone_node("n2", "z-b", cpu="2")]
    pods = [web("db", labels={"app": "db"}, node="n2"), web("w0", affinity=[term({"app": "db"}, HOST)]),
            web("w1", "2", affinity=[term({"app": "db"}, HOST)])]
    where = placement(run(pods, nodes=nodes))
    assert where["default/w0"] == ("node", "n2")
    assert where["default/w1"][0] == "unschedulable"  # n2 is full; no other node runs a db pod


# pod anti-affinity ---------------------------------------------------------------------------------


def test_zonal_anti_affinity_allows_one_pod_per_zone():
    decisions = run([web(f"w{i}", anti=[term({"app": "web"})]) for i in range(5)])
    assert zone_counts(decisions, [f"default/w{i}" for i in range(5)]) == {z: 1 for z in ZONES}
    assert len(decisions["unschedulable"]) == 2


def test_running_pods_anti_affinity_keeps_others_away():
    nodes = [zone_node("n1", "z-a", cpu="8")]
    guard = web("guard", labels={"app": "guard"}, node="n1", anti=[term({"app": "web"})])
    decisions = run([guard] + [web(f"w{i}") for i in range(3)], nodes=nodes)
    assert decisions["bindings"] == []  # n1 has room but is in z-a
    assert "z-a" not in set(zones_of(decisions).values())


def test_pending_pods_anti_affinity_is_symmetric():
    pods = [web("loner", "1500m", labels={"app": "loner"}, anti=[term({"app": "web"}, HOST)])]
    pods += [web(f"w{i}") for i in range(2)]
    decisions = run(pods)
    loner = next(c for c in decisions["nodeClaims"] if "default/loner" in c["pods"])
    assert loner["pods"] == ["default/loner"]


def test_anti_affinity_namespaces():
    other = web("other", labels={"app": "web"}, namespace="prod")
    mine = web("mine", "1500m", anti=[term({"app": "web"}, HOST)])
    assert len(run([other, mine])["nodeClaims"]) == 1  # the term looks at its own namespace only
    listed = web("mine", "1500m", anti=[term({"app": "web"}, HOST, namespaces=["prod"])])
    assert len(run([other, listed])["nodeClaims"]) == 2
    by_label = web("mine", "1500m", anti=[term({"app": "web"}, HOST, namespaceSelector={"matchLabels": {"env": "prod"}})])
    doc_namespaces = [{"metadata": {"name": "prod", "labels": {"env": "prod"}}}]
    assert len(run([other, by_label], namespaces=doc_namespaces)["nodeClaims"]) == 2
    assert len(run([other, by_label])["nodeClaims"]) == 1  # prod has no env label without a Namespace object
    by_name = web("mine", "1500m", anti=[term({"app": "web"}, HOST, namespaceSelector={
        "matchLabels": {"kubernetes.io/metadata.name": "prod"}})])
    assert len(run([other, by_name])["nodeClaims"]) == 2
    everywhere = web("mine", "1500m", anti=[term({"app": "web"}, HOST, namespaceSelector={})])
    assert len(run([other, everywhere])["nodeClaims"]) == 2


def test_a_pod_that_cannot_carry_the_topology_label_is_unschedulable():
    decisions = run([web("w0", constraints=[spread("example.com/rack")])])
    assert decisions["unschedulable"][0]["reason"].startswith("topology spread on example.com/rack")


# world parsing -------------------------------------------------------------------------------------


def problems(doc):
    with pytest.raises(WorldError) as info:
        parse_world(doc)
    return info.value.lines()


def test_bad_topology_fields_are_named_by_path():
    bad = web("w0", constraints=[{"maxSkew": 0, "topologyKey": ZONE, "whenUnsatisfiable": "Sometimes"},
                                 {"maxSkew": 1, "whenUnsatisfiable": "ScheduleAnyway", "minDomains": 2,
                                  "topologyKey": ZONE, "nodeTaintsPolicy": "Maybe"}],
              affinity=[{"labelSelector": {"matchLabels": {"app": "db"}}}],
              preferred={"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                  {"weight": 101, "podAffinityTerm": term({"app": "db"})}]}})
    doc = world(instance_types=TYPES, pods=[bad])
    base = "pods[0].spec"
    assert problems(doc) == [
        f"{base}.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey: is required",
        f"{base}.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight: "
        "101 must be between 1 and 100",
        f"{base}.topologySpreadConstraints[0].maxSkew: 0 must be at least 1",
        f'{base}.topologySpreadConstraints[0].whenUnsatisfiable: "Sometimes" is not one of DoNotSchedule, ScheduleAnyway',
        f"{base}.topologySpreadConstraints[1].minDomains: requires whenUnsatisfiable DoNotSchedule",
        f'{base}.topologySpreadConstraints[1].nodeTaintsPolicy: "Maybe" is not one of Honor, Ignore',
    ]


def test_parsed_terms():
    item = web("w0", constraints=[spread(matchLabelKeys=["rev"])], labels={"app": "web", "rev": "7"},
               affinity=[term({"app": "db"}, namespaces=["a", "b"])],
               preferred={"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                   {"weight": 5, "preference": {"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["z-a"]}]}},
                   {"weight": 9, "preference": {}}]}})
    parsed = parse_world(world(instance_types=TYPES, pods=[item])).pods[0]
    (constraint,) = parsed.spread
    assert str(constraint.selector.requirements) == "app In [web], rev In [7]"
    assert parsed.affinity[0].namespaces == frozenset({"a", "b"})
    assert [(w, str(t)) for w, t in parsed.preferred_node_terms] == [(5, f"{ZONE} In [z-a]")]  # empty term: no preference
    assert str(parsed.alternatives[0]) == f"{ZONE} In [z-a]" and str(parsed.strict_alternatives[0]) == ""
