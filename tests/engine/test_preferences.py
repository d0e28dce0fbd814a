"""Preferences (preferred node and pod (anti-)affinity, ScheduleAnyway spread) and their relaxation."""

from scheduling.engine import parse_world

from .builders import node_pool, placement, reservation, world
from .test_topology import HOST, TYPES, ZONE, run, spread, term, web, zones_of


def prefer_zone(*weighted):
    return {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": weight, "preference": {"matchExpressions": [{"key": ZONE, "operator": "In", "values": [zone]}]}}
        for weight, zone in weighted]}}


def prefer_pods(kind, *weighted):
    return {kind: {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": weight, "podAffinityTerm": t} for weight, t in weighted]}}


def test_preferred_node_affinity_is_honoured_when_possible():
    decisions = run([web(f"w{i}", preferred=prefer_zone((10, "z-c"))) for i in range(2)])
    assert set(zones_of(decisions).values()) == {"z-c"}


def test_preferred_node_affinity_gives_way_when_impossible():
    decisions = run([web("w0", preferred=prefer_zone((10, "z-q")))])
    assert decisions["unschedulable"] == [] and len(decisions["nodeClaims"]) == 1


def test_the_lightest_preference_is_dropped_first():
    # Both cannot hold; the lighter (z-b, weight 10) goes, the heavier (z-c, weight 50) stays,
    # whatever the order they are listed in.
    for weighted in (((10, "z-b"), (50, "z-c")), ((50, "z-c"), (10, "z-b"))):
        decisions = run([web("w0", preferred=prefer_zone(*weighted))])
        assert zones_of(decisions)["default/w0"] == "z-c"


def test_compatible_preferences_all_hold():
    pref = prefer_zone((10, "z-b"))
    pref["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"].append(
        {"weight": 1, "preference": {"matchExpressions": [{"key": "karpenter.sh/capacity-type", "operator": "In",
                                                           "values": ["on-demand"]}]}})
    decisions = run([web("w0", preferred=pref)])
    assert decisions["nodeClaims"][0]["launch"]["zone"] == "z-b"
    assert decisions["nodeClaims"][0]["launch"]["capacityType"] == "on-demand"


def test_relaxation_order():
    item = web("w0", constraints=[spread(when="ScheduleAnyway"), spread(HOST)],
               preferred={**prefer_zone((5, "z-a"), (7, "z-b")),
                          **prefer_pods("podAffinity", (3, term({"app": "db"})), (1, term({"app": "cache"}))),
                          **prefer_pods("podAntiAffinity", (2, term({"app": "web"}, HOST)))})
    pod = parse_world(world(instance_types=TYPES, pods=[item])).pods[0]
    words = []
    while pod.can_relax():
        pod = pod.relax()
        words = pod.describe_relaxed()
    assert words == [
        f"preferred pod affinity on {ZONE} (weight 1)", f"preferred pod affinity on {ZONE} (weight 3)",
        f"preferred pod anti-affinity on {HOST} (weight 2)",
        f"preferred node affinity ({ZONE} In [z-a], weight 5)", f"preferred node affinity ({ZONE} In [z-b], weight 7)",
        f"ScheduleAnyway topology spread on {ZONE} (maxSkew 1)",
    ]
    assert len(pod.active_spread) == 1 and pod.active_spread[0].required  # DoNotSchedule is never relaxed


def test_preferred_pod_anti_affinity_spreads_until_it_cannot():
    anti = prefer_pods("podAntiAffinity", (10, term({"app": "web"}, HOST)))
    decisions = run([web(f"w{i}", preferred=anti) for i in range(3)])
    assert sorted(len(c["pods"]) for c in decisions["nodeClaims"]) == [1, 1, 1]
    # A one-node limit: the preference gives way and the pods share the node.
    limited = [node_pool(limits={"cpu": "4"})]
    decisions = run([web(f"w{i}", preferred=anti) for i in range(3)], pools=limited)
    assert decisions["unschedulable"] == [] and [len(c["pods"]) for c in decisions["nodeClaims"]] == [3]


def test_preferred_pod_affinity_follows_running_pods_or_gives_way():
    from .test_topology import zone_node
    nodes = [zone_node("n1", "z-b", cpu="600m")]
    pods = [web("db", labels={"app": "db"}, node="n1"),
            web("w0", preferred=prefer_pods("podAffinity", (10, term({"app": "db"}))))]
    assert zones_of(run(pods, nodes=nodes))["default/w0"] == "z-b"
    lonely = run([web("w0", preferred=prefer_pods("podAffinity", (10, term({"app": "db"}))))])
    assert lonely["unschedulable"] == [] and len(lonely["nodeClaims"]) == 1


def test_preferences_are_not_relaxed_for_reserved_capacity_held_by_this_run():
    # A reserved-only NodePool and one unit: the second pod would have to share the first pod's
    # node against its preferred anti-affinity. It is deferred, not relaxed onto that node.
    from .builders import instance_type, node_class
    from scheduling.engine import simulate
    anti = prefer_pods("podAntiAffinity", (10, term({"app": "web"}, HOST)))
    doc = world(instance_types=[instance_type("m5.xlarge", "4", "16Gi", zones=("z-a",))],
                reservations=[reservation("cr-1", "m5.xlarge", zone="z-a", tags={"team": "ml"})],
                node_classes=[node_class("default", [{"tags": {"team": "ml"}}])],
                node_pools=[node_pool(capacity_types=["reserved"])],
                pods=[web(f"w{i}", preferred=anti) for i in range(2)])
    decisions = simulate(doc)
    where = placement(decisions)
    assert [len(c["pods"]) for c in decisions["nodeClaims"]] == [1]
    assert where["default/w1"][0] == "deferred"
    assert "held by other node claims" in where["default/w1"][1]
