"""Consolidation: upstream's reserved-capacity outcomes, budgets, do-not-disrupt, consolidateAfter,
the consolidation policies, spot-to-spot, multi-node, and the keep-idle-reserved opt-in."""

import pytest

from scheduling.engine import parse_world, plan, simulate
from scheduling.engine.disruption import lifecycle

from .builders import instance_type, node_class, pod, reservation, world
from .lifecycle_builders import bound, dpool, instance, knode

M5L = instance_type("m5.large", "2", "8Gi", od=0.096, spot=0.035)
M5XL = instance_type("m5.xlarge", "4", "16Gi", od=0.192, spot=0.07)
C6A_L = instance_type("c6a.large", "2", "4Gi", od=0.0765)
C6A_48XL = instance_type("c6a.48xlarge", "192", "384Gi", od=7.344)
ALL_IN = [{"nodes": "100%"}]
CLASSES = [node_class("default", [{"tags": {"team": "ml"}}])]


def ml(rid, itype, **kwargs):
    return reservation(rid, itype, tags={"team": "ml"}, **kwargs)


def run(nodes, pods, *, types=(M5L, M5XL), reservations=(), pools=None, gates=None, classes=CLASSES, now=None):
    doc = world(instance_types=list(types), reservations=list(reservations), node_classes=classes,
                node_pools=pools or [dpool(capacity_types=["reserved", "on-demand", "spot"], budgets=ALL_IN)],
                nodes=nodes, pods=pods, **({"now": now} if now else {}))
    if gates:
        doc["featureGates"].update(gates)
    return simulate(doc)


def consolidations(decisions):
    return [d for d in decisions["disruptions"] if d["reason"] == "consolidation"]


def summary(decisions):
    """(action, nodes, replacement capacity type, reservation, instance type) per consolidation."""
    rows = []
    for d in consolidations(decisions):
        launch = d.get("replacement", {}).get("launch", {})
        rows.append((d["action"], d["nodes"], launch.get("capacityType"), launch.get("reservationID"),
                     launch.get("instanceType")))
    return rows


# upstream's reserved outcomes (consolidation_test.go "can consolidate into reserved capacity") ---


@pytest.mark.parametrize("capacity", ["on-demand", "spot"])
def test_moves_into_free_reserved_capacity_of_the_same_type(capacity):
    decisions = run([knode("n1", "m5.large", capacity=capacity)], [bound("web-0", "n1", "1")],
                    reservations=[ml("cr-1", "m5.large")])
    assert summary(decisions) == [("replace", ["n1"], "reserved", "cr-1", "m5.large")]
    replacement = consolidations(decisions)[0]["replacement"]
    assert replacement["pods"] == ["default/web-0"]
    assert replacement["nodePool"] == "default"
    assert replacement["labels"]["karpenter.k8s.aws/capacity-reservation-id"] == "cr-1"
    price = 0.096 if capacity == "on-demand" else 0.035
    # At the margin: the node's price, all of it (the free unit is paid for already).
    assert consolidations(decisions)[0]["savingsPerHour"] == pytest.approx(price)
    assert consolidations(decisions)[0]["evictedPods"] == ["default/web-0"]


def test_reserved_node_is_not_moved_to_a_smaller_reservation_for_nothing():
    """Upstream's "can consolidate from one reserved offering to another": a c6a.48xlarge in one
    reservation runs a single small pod after a scale-down, and upstream moves it to a free
    c6a.large unit of another reservation (od_small/1e7 < od_large/1e7). Both reservations are
    paid whether used or not, so the move saves nothing at the margin and only evicts the pod:
    karpweb leaves it (a deliberate difference, docs/simulate.md)."""
    node = knode("big", "c6a.48xlarge", cpu="192", memory="384Gi", capacity="reserved", reservation="cr-big")
    decisions = run([node], [bound("api-0", "big", "500m", "1Gi")], types=[C6A_L, C6A_48XL],
                    reservations=[ml("cr-big", "c6a.48xlarge", available=0, total=1), ml("cr-small", "c6a.large")])
    assert summary(decisions) == []


def test_reserved_node_with_pods_is_not_deleted_for_nothing():
    """Two m5.large in one reservation, each with a small pod: either node's pod fits on the other,
    and upstream deletes one to save od/1e7 an hour. The unit stays paid for: nothing is saved,
    a pod is evicted and prepaid capacity sits idle, so karpweb keeps both."""
    nodes = [knode(name, "m5.large", capacity="reserved", reservation="cr-1") for name in ("r1", "r2")]
    decisions = run(nodes, [bound("web-0", "r1", "250m"), bound("web-1", "r2", "250m")],
                    reservations=[ml("cr-1", "m5.large", available=0, total=2)])
    assert consolidations(decisions) == []


def test_paid_node_still_moves_into_reserved_room():
    """The saving at the margin is the paid node's whole price when its pod moves onto a reserved
    node with room (and the reserved node's own pods stay)."""
    nodes = [knode("r1", "m5.large", capacity="reserved", reservation="cr-1"), knode("od", "m5.large")]
    decisions = run(nodes, [bound("web-0", "r1", "250m"), bound("web-1", "od", "250m")],
                    reservations=[ml("cr-1", "m5.large", available=0, total=1)])
    assert summary(decisions) == [("delete", ["od"], None, None, None)]
    assert consolidations(decisions)[0]["savingsPerHour"] == pytest.approx(0.096)
    assert consolidations(decisions)[0]["evictedPods"] == ["default/web-1"]


def test_reserved_is_never_replaced_by_paid_capacity_even_when_cheaper_on_paper():
    """A reserved m5.xlarge whose pod would fit an m5.large: no reservation of that size is free,
    and a paid replacement is refused, even at a spot price below the reserved price."""
    dirt_cheap = instance_type("m5.large", "2", "8Gi", od=0.096, spot=0.000000001)
    node = knode("n1", "m5.xlarge", cpu="4", memory="16Gi", capacity="reserved", reservation="cr-xl")
    decisions = run([node], [bound("web-0", "n1", "1")], types=[dirt_cheap, M5XL],
                    reservations=[ml("cr-xl", "m5.xlarge", available=0, total=1)])
    assert consolidations(decisions) == []


def test_on_demand_node_is_replaced_by_a_cheaper_type():
    decisions = run([knode("n1", "m5.xlarge", cpu="4", memory="16Gi")], [bound("web-0", "n1", "1")],
                    pools=[dpool(capacity_types=["on-demand"], budgets=ALL_IN)])
    assert summary(decisions) == [("replace", ["n1"], "on-demand", None, "m5.large")]
    assert consolidations(decisions)[0]["replacement"]["instanceTypeOptions"] == ["m5.large"]
    assert consolidations(decisions)[0]["savingsPerHour"] == pytest.approx(0.096)


def test_on_demand_to_spot_replacement_is_pinned_to_spot():
    decisions = run([knode("n1", "m5.xlarge", cpu="4", memory="16Gi")], [bound("web-0", "n1", "1")],
                    pools=[dpool(capacity_types=["on-demand", "spot"], budgets=ALL_IN)])
    replacement = consolidations(decisions)[0]["replacement"]
    assert replacement["launch"]["capacityType"] == "spot"
    assert replacement["labels"]["karpenter.sh/capacity-type"] == "spot"


def test_a_node_whose_pods_fit_elsewhere_is_deleted_the_dearest_first():
    """Both nodes could go (their pods fit on the other); single-node takes the one that saves
    most per pod moved: the m5.xlarge. Then the m5.large has no room left elsewhere."""
    nodes = [knode("n1", "m5.xlarge", cpu="4", memory="16Gi"), knode("n2", "m5.large")]
    decisions = run(nodes, [bound("a", "n1", "1"), bound("b", "n2", "1")],
                    pools=[dpool(capacity_types=["on-demand"], budgets=ALL_IN)])
    assert summary(decisions) == [("delete", ["n1"], None, None, None)]
    assert consolidations(decisions)[0]["consolidationType"] == "single"
    assert consolidations(decisions)[0]["savingsPerHour"] == pytest.approx(0.192)


def test_daemonset_pods_stay_behind_and_do_not_keep_a_node():
    nodes = [knode("n1", "m5.xlarge", cpu="4", memory="16Gi"), knode("n2", "m5.large")]
    pods = [bound("a", "n1", "1"), bound("ds-n1", "n1", "100m", daemon=True), bound("ds-n2", "n2", "100m", daemon=True)]
    decisions = run(nodes, pods, pools=[dpool(capacity_types=["on-demand"], budgets=ALL_IN)])
    # n2 only runs a DaemonSet pod: empty. n1's one real pod then fits a cheaper m5.large.
    assert summary(decisions) == [("delete", ["n2"], None, None, None), ("replace", ["n1"], "on-demand", None, "m5.large")]
    assert [d["consolidationType"] for d in consolidations(decisions)] == ["empty", "single"]
    assert consolidations(decisions)[1]["replacement"]["pods"] == ["default/a"]


def test_nothing_happens_when_a_pod_has_nowhere_to_go():
    """The pod needs 3 CPU: no other node has room and no type is cheaper than the m5.xlarge."""
    nodes = [knode("n1", "m5.xlarge", cpu="4", memory="16Gi"), knode("n2", "m5.xlarge", cpu="4", memory="16Gi")]
    decisions = run(nodes, [bound("a", "n1", "3"), bound("b", "n2", "3")],
                    pools=[dpool(capacity_types=["on-demand"], budgets=ALL_IN)])
    assert consolidations(decisions) == []


# multi-node -----------------------------------------------------------------------------------


def test_multi_node_replaces_several_nodes_with_one_cheaper_node():
    """Three m5.large nodes at 1.2 CPU each fit one c5.xlarge (0.17 < 3 x 0.096); no single node
    can go on its own."""
    c5xl = instance_type("c5.xlarge", "4", "8Gi", od=0.17)
    nodes = [knode(f"n{i}", "m5.large") for i in range(3)]
    pods = [bound(f"p{i}", f"n{i}", "1200m") for i in range(3)]
    decisions = run(nodes, pods, types=[M5L, M5XL, c5xl], pools=[dpool(capacity_types=["on-demand"], budgets=ALL_IN)])
    assert summary(decisions) == [("replace", ["n0", "n1", "n2"], "on-demand", None, "c5.xlarge")]
    assert consolidations(decisions)[0]["consolidationType"] == "multi"
    assert consolidations(decisions)[0]["savingsPerHour"] == pytest.approx(3 * 0.096 - 0.17)
    assert sorted(consolidations(decisions)[0]["replacement"]["pods"]) == ["default/p0", "default/p1", "default/p2"]


def test_multi_node_binary_search_deletes_the_longest_prefix_that_fits():
    """Four m5.large at 0.9 CPU: the first two fit in the room of the other two; three do not."""
    nodes = [knode(f"n{i}", "m5.large") for i in range(4)]
    pods = [bound(f"p{i}", f"n{i}", "900m") for i in range(4)]
    decisions = run(nodes, pods, pools=[dpool(capacity_types=["on-demand"], budgets=ALL_IN)])
    assert summary(decisions)[0] == ("delete", ["n0", "n1"], None, None, None)
    assert consolidations(decisions)[0]["consolidationType"] == "multi"


def test_multi_node_never_replaces_with_a_candidate_type_no_cheaper_than_that_candidate():
    """An m5.xlarge and an m5.large whose pods fit one m5.xlarge: replacing both with an m5.xlarge
    is just deleting the m5.large (upstream filterOutSameType), which single-node then does."""
    nodes = [knode("big", "m5.xlarge", cpu="4", memory="16Gi"), knode("small", "m5.large")]
    pods = [bound("a", "big", "2500m"), bound("b", "small", "1")]
    decisions = run(nodes, pods, pools=[dpool(capacity_types=["on-demand"], budgets=ALL_IN)])
    assert summary(decisions) == [("delete", ["small"], None, None, None)]


# spot to spot -----------------------------------------------------------------------------------


def spot_types(count):
    """`count` spot types cheaper than s-big, plus s-big itself."""
    types = [instance_type(f"s{i:02d}", "2", "8Gi", od=0.1, spot=0.01 + i / 1000) for i in range(count)]
    return types + [instance_type("s-big", "8", "32Gi", od=0.4, spot=0.2)]


@pytest.mark.parametrize("gate, cheaper, expected", [
    (False, 20, []),
    (True, 14, []),
    (True, 15, [("replace", ["n1"], "spot", None, "s00")]),
])
def test_spot_to_spot_needs_the_gate_and_15_cheaper_types(gate, cheaper, expected):
    decisions = run([knode("n1", "s-big", cpu="8", memory="32Gi", capacity="spot")], [bound("a", "n1", "1")],
                    types=spot_types(cheaper), gates={"SpotToSpotConsolidation": gate},
                    pools=[dpool(capacity_types=["spot"], budgets=ALL_IN)])
    assert summary(decisions) == expected
    if expected:
        assert len(consolidations(decisions)[0]["replacement"]["instanceTypeOptions"]) == 15


# budgets, do-not-disrupt, consolidateAfter, policies ------------------------------------------


def empties(count, **kwargs):
    return [knode(f"e{i}", "m5.large", **kwargs) for i in range(count)]


@pytest.mark.parametrize("budgets, deleted", [
    (None, 1),  # the default 10% of 3 rounds up to 1
    ([{"nodes": "0"}], 0),
    ([{"nodes": "2"}], 2),
    ([{"nodes": "50%"}], 2),
    ([{"nodes": "100%"}], 3),
    ([{"nodes": "100%"}, {"nodes": "1"}], 1),  # the smallest active budget wins
    ([{"nodes": "0", "reasons": ["Drifted"]}], 3),  # a budget for another reason does not apply
    ([{"nodes": "0", "reasons": ["Empty"]}], 0),
    ([], 3),  # an explicit empty list: no limit
])
def test_budgets_bound_emptiness(budgets, deleted):
    pools = [dpool(capacity_types=["on-demand"], budgets=budgets)]
    decisions = run(empties(3), [], pools=pools)
    assert len(consolidations(decisions)) == deleted


def test_budget_counts_nodes_already_disrupting():
    """A 2-node budget with one node already deleting and one initialized node gone NotReady leaves none."""
    nodes = empties(3) + [knode("gone", "m5.large", deleting=True),
                          knode("sick", "m5.large", ready=False, extra_labels={"karpenter.sh/initialized": "true"})]
    decisions = run(nodes, [], pools=[dpool(capacity_types=["on-demand"], budgets=[{"nodes": "2"}])])
    assert consolidations(decisions) == []


@pytest.mark.parametrize("now, blocked", [
    ("2026-11-23T10:00:00Z", True),   # Monday 10:00, inside 09:00 + 8h
    ("2026-11-23T17:00:00Z", False),  # Monday 17:00, the window ended at 17:00
    ("2026-11-23T08:59:00Z", False),  # before it opens
    ("2026-11-21T12:00:00Z", False),  # Saturday
])
def test_scheduled_budget_windows(now, blocked):
    budgets = [{"nodes": "100%"}, {"nodes": "0", "schedule": "0 9 * * mon-fri", "duration": "8h"}]
    decisions = run(empties(1, created="2026-11-01T00:00:00Z"), [], now=now,
                    pools=[dpool(capacity_types=["on-demand"], budgets=budgets)])
    assert (consolidations(decisions) == []) == blocked


def test_do_not_disrupt_on_the_node_or_a_pod_keeps_it():
    nodes = [knode("big", "m5.xlarge", cpu="4", memory="16Gi"),
             knode("kept-node", "m5.large", annotations={"karpenter.sh/do-not-disrupt": "true"}),
             knode("kept-pod", "m5.large"), knode("free", "m5.large")]
    pods = [bound("a", "big", "500m"), bound("b", "kept-node", "500m"),
            bound("c", "kept-pod", "500m", annotations={"karpenter.sh/do-not-disrupt": "true"}),
            bound("d", "free", "500m")]
    decisions = run(nodes, pods, pools=[dpool(capacity_types=["on-demand"], budgets=ALL_IN)])
    touched = {n for d in consolidations(decisions) for n in d["nodes"]}
    assert "kept-node" not in touched and "kept-pod" not in touched
    assert "free" in touched


@pytest.mark.parametrize("after, pod_created, consolidated", [
    ("10m", "2026-11-21T11:55:00Z", False),  # the newest pod arrived 5 minutes ago
    ("10m", "2026-11-21T11:45:00Z", True),
    ("0s", "2026-11-21T11:59:59Z", True),
    ("Never", "2026-11-01T00:00:00Z", False),
])
def test_consolidate_after(after, pod_created, consolidated):
    nodes = [knode("big", "m5.xlarge", cpu="4", memory="16Gi"), knode("n1", "m5.large", created="2026-11-01T00:00:00Z")]
    pods = [bound("a", "big", "500m"), bound("b", "n1", "500m", created=pod_created)]
    decisions = run(nodes, pods, pools=[dpool(capacity_types=["on-demand"], after=after, budgets=ALL_IN)])
    assert ("n1" in {n for d in consolidations(decisions) for n in d["nodes"]}) == consolidated


def test_consolidate_after_uses_the_node_age_when_it_has_no_pods():
    young = knode("young", "m5.large", created="2026-11-21T11:58:00Z")
    old = knode("old", "m5.large", created="2026-11-21T11:00:00Z")
    decisions = run([young, old], [], pools=[dpool(capacity_types=["on-demand"], after="5m", budgets=ALL_IN)])
    assert [d["nodes"] for d in consolidations(decisions)] == [["old"]]


@pytest.mark.parametrize("policy, expected", [
    ("WhenEmpty", [("delete", ["empty"], None, None, None)]),
    ("WhenEmptyOrUnderutilized", [("delete", ["empty"], None, None, None), ("delete", ["big"], None, None, None)]),
])
def test_consolidation_policy(policy, expected):
    nodes = [knode("big", "m5.xlarge", cpu="4", memory="16Gi"), knode("light", "m5.large"), knode("empty", "m5.large")]
    pods = [bound("a", "big", "500m"), bound("b", "light", "500m")]
    decisions = run(nodes, pods, pools=[dpool(capacity_types=["on-demand"], policy=policy, budgets=ALL_IN)])
    assert summary(decisions) == expected


def test_nodes_nominated_for_pending_pods_are_not_candidates():
    nodes = [knode("empty", "m5.large")]
    decisions = run(nodes, [pod("pending", "500m")])
    assert decisions["bindings"] == [{"pod": "default/pending", "node": "empty"}]
    assert consolidations(decisions) == []


def test_nodes_outside_nodepools_are_never_candidates():
    unmanaged = knode("manual", "m5.large")
    unmanaged["metadata"]["labels"].pop("karpenter.sh/nodepool")
    assert consolidations(run([unmanaged], [])) == []


@pytest.mark.parametrize("expensive_node, deleted", [(None, ["n0", "n1"]), ("n0", ["n1", "n2"])])
def test_disruption_cost_orders_multi_node_candidates(expensive_node, deleted):
    """A pod with a high pod-deletion-cost makes its node the last one multi-node considers."""
    expensive = {"controller.kubernetes.io/pod-deletion-cost": "2147483647"}
    nodes = [knode(f"n{i}", "m5.large") for i in range(3)] + [knode("big", "m5.xlarge", cpu="4", memory="16Gi")]
    pods = [bound(f"p{i}", f"n{i}", "500m", annotations=expensive if f"n{i}" == expensive_node else None)
            for i in range(3)] + [bound("d", "big", "3", annotations=expensive)]
    decisions = run(nodes, pods, pools=[dpool(capacity_types=["on-demand"], budgets=[{"nodes": "2"}])])
    assert summary(decisions) == [("delete", deleted, None, None, None)]


# keep-idle-reserved (karpweb's opt-in) -----------------------------------------------------------


@pytest.mark.parametrize("keep, deleted", [(None, ["idle-reserved", "idle-od"]), ("true", ["idle-od"]),
                                           ("false", ["idle-reserved", "idle-od"])])
def test_keep_idle_reserved_nodes(keep, deleted):
    nodes = [knode("idle-reserved", "m5.large", capacity="reserved", reservation="cr-1"), knode("idle-od", "m5.large")]
    decisions = run(nodes, [], reservations=[ml("cr-1", "m5.large", available=0, total=1)],
                    pools=[dpool(capacity_types=["reserved", "on-demand"], keep_idle=keep, budgets=ALL_IN)])
    assert sorted(n for d in consolidations(decisions) for n in d["nodes"]) == sorted(deleted)


def test_kept_idle_reserved_node_still_takes_pods_moved_off_paid_nodes():
    nodes = [knode("reserved", "m5.large", capacity="reserved", reservation="cr-1"), knode("paid", "m5.large")]
    decisions = run(nodes, [bound("a", "paid", "1")], reservations=[ml("cr-1", "m5.large", available=0, total=1)],
                    pools=[dpool(capacity_types=["reserved", "on-demand"], keep_idle="true", budgets=ALL_IN)])
    assert summary(decisions) == [("delete", ["paid"], None, None, None)]


# decisions are consistent with each other --------------------------------------------------------


def test_successive_decisions_never_count_on_the_same_room():
    """Multi-node consolidation moves a1's and a2's pods into big's spare 1.5 CPU. Single-node then
    sees big with 0.5 CPU left, so c (1.5 CPU) stays: on the cluster as it was, c could have gone."""
    nodes = [knode("a1", "m5.large"), knode("a2", "m5.large"), knode("big", "m5.xlarge", cpu="4", memory="16Gi"),
             knode("c", "m5.large")]
    pods = [bound("p1", "a1", "500m"), bound("p2", "a2", "500m"), bound("b", "big", "2500m"), bound("q", "c", "1500m")]
    pools = [dpool(capacity_types=["on-demand"], budgets=ALL_IN)]
    decisions = run(nodes, pods, pools=pools)
    assert summary(decisions) == [("delete", ["a1", "a2"], None, None, None)]
    alone = run([n for n in nodes if n["metadata"]["name"] in ("big", "c")],
                [p for p in pods if p["spec"]["nodeName"] in ("big", "c")], pools=pools)
    assert summary(alone) == [("delete", ["c"], None, None, None)]
    result = lifecycle(plan(parse_world(world(instance_types=[M5L, M5XL], node_classes=CLASSES, node_pools=pools,
                                              nodes=nodes, pods=pods))))
    big = result.state.by_name["big"]
    assert sorted(p.name for p in big.pods) == ["b", "p1", "p2"] and big.available["cpu"] == 500


def test_multi_node_looks_at_no_more_than_100_nodes():
    nodes = [knode(f"n{i:03d}", "m5.large") for i in range(130)] + [knode("host", "m5.xlarge", cpu="400", memory="160Gi")]
    pods = [bound(f"p{i:03d}", f"n{i:03d}", "100m") for i in range(130)] + [bound("h", "host", "1")]
    decisions = run(nodes, pods, pools=[dpool(capacity_types=["on-demand"], budgets=ALL_IN)])
    multi, single = consolidations(decisions)
    assert multi["consolidationType"] == "multi" and len(multi["nodes"]) == 100
    assert single["consolidationType"] == "single" and len(single["nodes"]) == 1


def test_spot_nodes_do_not_fall_back_to_cheaper_on_demand_without_the_gate():
    """Upstream: spot candidates whose replacement may be spot take the spot-to-spot path, so a
    cheaper on-demand type does not replace them either."""
    od_small = instance_type("od-small", "2", "8Gi", od=0.01)
    types = [od_small, instance_type("s-big", "8", "32Gi", od=0.4, spot=0.2)]
    decisions = run([knode("n1", "s-big", cpu="8", memory="32Gi", capacity="spot")], [bound("a", "n1", "1")],
                    types=types, pools=[dpool(capacity_types=["spot", "on-demand"], budgets=ALL_IN)])
    assert consolidations(decisions) == []


def test_output_is_deterministic():
    nodes = [knode(f"n{i}", "m5.large") for i in range(6)]
    pods = [bound(f"p{i}", f"n{i}", "600m") for i in range(6)]
    first = run(nodes, pods, pools=[dpool(capacity_types=["on-demand", "spot"], budgets=ALL_IN)])
    second = run(nodes, pods, pools=[dpool(capacity_types=["on-demand", "spot"], budgets=ALL_IN)])
    assert first["disruptions"] == second["disruptions"] and first["disruptions"]


# a reservation excluded from planning (karpweb's override): its nodes stay --------------------------


EXCLUDED = {"karpwebExcludedFromPlanning": "by olga since 2026-11-21T11:00:00Z: quarter-end"}


@pytest.mark.parametrize("excluded, deleted", [(False, ["idle-reserved", "idle-od"]), (True, ["idle-od"])])
def test_nodes_of_an_excluded_reservation_stay_even_when_empty(excluded, deleted):
    """Issue #47 finding 7: the override says "nodes already in it stay"; emptiness took them."""
    nodes = [knode("idle-reserved", "m5.large", capacity="reserved", reservation="cr-1"), knode("idle-od", "m5.large")]
    kept_out = {**ml("cr-1", "m5.large", available=0, total=1), **(EXCLUDED if excluded else {})}
    decisions = run(nodes, [], reservations=[kept_out])
    assert sorted(n for d in consolidations(decisions) for n in d["nodes"]) == sorted(deleted)


def test_nodes_of_an_excluded_reservation_do_not_drift_away():
    """A class that no longer selects the excluded reservation would drift its node: it stays too."""
    node = knode("r1", "m5.large", capacity="reserved", reservation="cr-1")
    kept_out = {**reservation("cr-1", "m5.large", available=0, total=1, tags={"team": "other"}), **EXCLUDED}
    decisions = run([node], [bound("web-0", "r1", "250m")], reservations=[kept_out])
    assert decisions["disruptions"] == []
    plain = run([node], [bound("web-0", "r1", "250m")], reservations=[{k: v for k, v in kept_out.items() if k not in EXCLUDED}])
    assert [d["reason"] for d in plain["disruptions"]] == ["drift"]


@pytest.mark.parametrize("in_the_odcr, deleted", [(False, ["od"]), (True, ["paid"])])
def test_an_on_demand_node_in_an_open_odcr_saves_nothing_either(in_the_odcr, deleted):
    """Labelled on-demand, but DescribeInstances says EC2 runs its instance in an open ODCR: the
    reservation is paid whether it runs or not, so evicting its pods saves nothing; the paid node
    beside it moves its pod there instead."""
    nodes = [knode("paid", "m5.large", instance="i-paid"), knode("od", "m5.large", instance="i-od")]
    pods = [bound("web-0", "paid", "250m"), bound("web-1", "od", "250m")]
    odcr = ml("cr-open", "m5.large", available=0, total=1, criteria="open")
    doc = world(instance_types=[M5L, M5XL], reservations=[odcr], node_classes=CLASSES, nodes=nodes, pods=pods,
                node_pools=[dpool(capacity_types=["on-demand"], budgets=ALL_IN)])
    doc["instances"] = [instance("i-paid", "m5.large"),
                        instance("i-od", "m5.large", reservation="cr-open" if in_the_odcr else None, preference="open")]
    assert [d["nodes"] for d in consolidations(simulate(doc))] == [deleted]
