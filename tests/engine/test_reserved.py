"""Reserved capacity: the seeds' scenarios, upstream's behaviour, and where karpweb does better."""

import time

import pytest

from scheduling.engine import ReservedMode, parse_world, plan, simulate
from scheduling.engine.world import WorldError
from scheduling.engine.decisions import decisions as to_decisions

from .builders import capacity_types, instance_type, node_class, node_pool, placement, pod, reservation, world

SMALL = instance_type("m5.large", "2", "8Gi", od=0.096, spot=0.035, zones=("us-east-1a", "us-east-1b"))
MEDIUM = instance_type("m5.xlarge", "4", "16Gi", od=0.192, spot=0.07, zones=("us-east-1a", "us-east-1b"))
TYPES = [SMALL, MEDIUM]
ML = [node_class("default", [{"tags": {"team": "ml"}}])]


def run(pods, *, reservations=(), pools=None, types=TYPES, classes=ML, gate=True, now=None):
    doc = world(instance_types=types, reservations=reservations, node_classes=classes,
                node_pools=pools or [node_pool(capacity_types=["reserved", "on-demand"])], pods=pods, gate=gate,
                **({"now": now} if now else {}))
    return simulate(doc)


def ml(rid, itype, **kwargs):
    return reservation(rid, itype, tags={"team": "ml"}, **kwargs)


# Seed 002's three NodePool shapes -------------------------------------------------------------


def test_reserved_only_nodepool():
    decisions = run([pod(f"p{i}", "1500m", "1Gi") for i in range(3)], reservations=[ml("cr-1", "m5.large", available=2)],
                    pools=[node_pool(capacity_types=["reserved"])])
    assert capacity_types(decisions) == ["reserved", "reserved"]
    assert [d["pod"] for d in decisions["deferred"]] == ["default/p2"]
    assert decisions["deferred"][0]["reason"] == (
        "compatible reserved capacity is held by other node claims in this run (cr-1 2/2 planned)")


def test_prefer_reserved_then_on_demand():
    decisions = run([pod(f"p{i}", "1500m", "1Gi") for i in range(3)], reservations=[ml("cr-1", "m5.large", available=2)])
    assert capacity_types(decisions) == ["on-demand", "reserved", "reserved"]
    assert decisions["deferred"] == [] and decisions["unschedulable"] == []


def test_all_capacity_types_reserved_then_spot():
    decisions = run([pod(f"p{i}", "1500m", "1Gi") for i in range(3)], reservations=[ml("cr-1", "m5.large", available=1)],
                    pools=[node_pool(capacity_types=None)])
    # The second pod cannot join the reserved claim without taking its reservation away (strict
    # mode), so it opens a spot claim, which the third pod then joins (on a larger spot type).
    assert capacity_types(decisions) == ["reserved", "spot"]
    spot = [c for c in decisions["nodeClaims"] if c["launch"]["capacityType"] == "spot"][0]
    assert spot["launch"] == {"instanceType": "m5.xlarge", "zone": "us-east-1a", "capacityType": "spot", "price": 0.07}
    assert len(spot["pods"]) == 2


# Where karpweb does better than upstream ------------------------------------------------------


def test_upstream_one_pod_per_loop_scenario_is_placed_in_one_run():
    """Upstream suite_test.go:4715: reservations of 1 small and 1 medium, three pods that each need
    their own node. Upstream places one pod per provisioning loop; karpweb places all three now."""
    # Pods too large to share even the medium type: 2 x 1.6 > 3 cpu.
    small, medium = instance_type("c5.small", "2", "8Gi", od=0.05), instance_type("c5.medium", "3", "12Gi", od=0.08)
    reservations = [ml("cr-small", "c5.small"), ml("cr-medium", "c5.medium")]
    decisions = run([pod(f"p{i}", "1600m", "1Gi") for i in range(3)], reservations=reservations, types=[small, medium])
    launches = sorted((c["launch"]["capacityType"], c["launch"].get("reservationID", "")) for c in decisions["nodeClaims"])
    assert launches == [("on-demand", ""), ("reserved", "cr-medium"), ("reserved", "cr-small")]
    assert decisions["deferred"] == [] and decisions["unschedulable"] == []


def test_upstream_scenario_with_hostname_anti_affinity():
    reservations = [ml("cr-small", "m5.large"), ml("cr-medium", "m5.xlarge")]
    decisions = run([pod(f"web-{i}", "100m", "128Mi", anti_affinity=True) for i in range(3)], reservations=reservations)
    assert capacity_types(decisions) == ["on-demand", "reserved", "reserved"]
    assert all(len(c["pods"]) == 1 for c in decisions["nodeClaims"])
    small_first = sorted(decisions["nodeClaims"], key=lambda c: c["launch"]["price"])
    assert small_first[0]["launch"]["reservationID"] == "cr-small"  # the cheapest reservation first


def test_ten_thousand_pods_with_hostname_anti_affinity_against_one_reserved_instance():
    """Seed 002: a 1-instance reservation and 10,000 pods with hostname anti-affinity. The ledger
    plans exactly one node into the reservation."""
    pods = [pod(f"web-{i:05d}", "100m", "128Mi", anti_affinity=True) for i in range(10_000)]
    started = time.perf_counter()
    decisions = run(pods, reservations=[ml("cr-1", "m5.large", available=1)])
    elapsed = time.perf_counter() - started
    reserved = [c for c in decisions["nodeClaims"] if c["launch"]["capacityType"] == "reserved"]
    assert len(reserved) == 1 and len(decisions["nodeClaims"]) == 10_000
    assert elapsed < 30, elapsed

    only_reserved = run(pods, reservations=[ml("cr-1", "m5.large", available=1)], pools=[node_pool(capacity_types=["reserved"])])
    assert len(only_reserved["nodeClaims"]) == 1
    assert len(only_reserved["deferred"]) == 9_999


def test_a_claim_swaps_its_unit_when_a_pod_needs_another_zone_and_the_unit_is_reused():
    reservations = [ml("cr-a", "m5.large", zone="us-east-1a"), ml("cr-b", "m5.xlarge", zone="us-east-1b")]
    pods = [pod("p1", "1500m", "1Gi"), pod("p2", "1500m", "1Gi", selector={"topology.kubernetes.io/zone": "us-east-1b"}),
            pod("p3", "1500m", "1Gi")]
    decisions = run(pods, reservations=reservations)
    where = placement(decisions)
    assert where["default/p1"][1] is where["default/p2"][1]
    assert where["default/p1"][1]["launch"]["reservationID"] == "cr-b"
    assert where["default/p3"][1]["launch"]["reservationID"] == "cr-a"  # freed by the swap, used again


def test_units_freed_by_a_swap_go_to_claims_that_went_on_demand():
    reservations = [ml("cr-a", "m5.large", zone="us-east-1a"), ml("cr-b", "m5.xlarge", zone="us-east-1b"),
                    ml("cr-c", "m5.xlarge", zone="us-east-1b")]
    pods = [pod("web-1", "1500m", "1Gi", labels={"app": "web"}),
            pod("web-2", "1500m", "1Gi", anti_affinity=True, selector={"topology.kubernetes.io/zone": "us-east-1a"}),
            pod("x-3", "1500m", "1Gi", selector={"topology.kubernetes.io/zone": "us-east-1b"})]
    decisions = run(pods, reservations=reservations)
    where = placement(decisions)
    assert where["default/web-1"][1] is where["default/x-3"][1]
    assert where["default/web-1"][1]["launch"]["reservationID"] == "cr-b"
    assert where["default/web-2"][1]["launch"]["reservationID"] == "cr-a"
    assert capacity_types(decisions) == ["reserved", "reserved"]


# Upstream rules kept ----------------------------------------------------------------------------


def test_strict_mode_opens_a_new_claim_rather_than_drop_the_last_reserved_option():
    reservations = [ml("cr-a", "m5.xlarge", zone="us-east-1a")]
    pods = [pod("p1", "1", "1Gi"), pod("p2", "500m", "1Gi", selector={"topology.kubernetes.io/zone": "us-east-1b"})]
    doc = world(instance_types=TYPES, reservations=reservations, node_classes=ML,
                node_pools=[node_pool(capacity_types=["reserved", "on-demand"])], pods=pods)
    strict = to_decisions(plan(parse_world(doc), ReservedMode.STRICT))
    where = placement(strict)
    assert where["default/p1"][1]["launch"]["reservationID"] == "cr-a"
    assert where["default/p2"][1]["launch"] == {"instanceType": "m5.large", "zone": "us-east-1b",
                                                "capacityType": "on-demand", "price": 0.096}
    fallback = to_decisions(plan(parse_world(doc), ReservedMode.FALLBACK))
    assert len(fallback["nodeClaims"]) == 1  # the claim gives its unit up and goes on-demand
    assert fallback["nodeClaims"][0]["launch"]["capacityType"] == "on-demand"
    assert fallback["nodeClaims"][0]["launch"]["zone"] == "us-east-1b"


def test_higher_weight_nodepool_with_reserved_capacity_is_used_first():
    pools = [node_pool("reserved", weight=100, capacity_types=["reserved"]),
             node_pool("od", weight=10, capacity_types=["on-demand"])]
    decisions = run([pod(f"p{i}", "1500m", "1Gi") for i in range(4)], reservations=[ml("cr-1", "m5.large", available=2)], pools=pools)
    by_pool = sorted((c["nodePool"], c["launch"]["capacityType"], len(c["pods"])) for c in decisions["nodeClaims"])
    # Both units first; only then the lower-weight NodePool (whose claim takes the last two pods).
    assert by_pool == [("od", "on-demand", 2), ("reserved", "reserved", 1), ("reserved", "reserved", 1)]
    assert decisions["deferred"] == []


def test_reservation_shared_by_two_nodepools_is_never_overcommitted():
    classes = [node_class("a", [{"id": "cr-1"}]), node_class("b", [{"tags": {"team": "ml"}}])]
    pools = [node_pool("a", node_class="a", weight=10, capacity_types=["reserved"]),
             node_pool("b", node_class="b", capacity_types=["reserved", "on-demand"])]
    decisions = run([pod(f"p{i}", "1500m", "1Gi") for i in range(4)], reservations=[ml("cr-1", "m5.large", available=3)],
                    pools=pools, classes=classes)
    reserved = [c for c in decisions["nodeClaims"] if c["launch"]["capacityType"] == "reserved"]
    assert len(reserved) == 3 and capacity_types(decisions).count("on-demand") == 1


def test_launch_takes_the_reservation_with_the_most_capacity_per_type_and_zone():
    reservations = [ml("cr-few", "m5.large", available=1), ml("cr-many", "m5.large", available=3)]
    decisions = run([pod("p", "1", "1Gi")], reservations=reservations)
    assert decisions["nodeClaims"][0]["launch"]["reservationID"] == "cr-many"


def test_capacity_block_launches_exactly_one_instance_type_and_offering():
    gpu = instance_type("p5.48xlarge", "192", "2048Gi", od=98.32, resources={"nvidia.com/gpu": 8})
    block = ml("cr-block", "p5.48xlarge", available=2, kind="capacity-block", end="2026-11-21T18:00:00Z")
    decisions = run([pod(f"train-{i}", "100", "1000Gi", extra={"nvidia.com/gpu": "8"}) for i in range(3)],
                    reservations=[block], types=TYPES + [gpu])
    blocks = [c for c in decisions["nodeClaims"] if c["launch"]["capacityType"] == "reserved"]
    assert len(blocks) == 2
    for claim in blocks:
        assert claim["instanceTypeOptions"] == ["p5.48xlarge"]
        assert claim["launch"] == {"instanceType": "p5.48xlarge", "zone": "us-east-1a", "capacityType": "reserved",
                                   "reservationID": "cr-block", "reservationType": "capacity-block",
                                   "price": 98.32 / 10_000_000}
        assert claim["labels"]["karpenter.k8s.aws/capacity-reservation-type"] == "capacity-block"
    assert capacity_types(decisions).count("on-demand") == 1


def test_expiring_capacity_block_takes_no_new_nodes():
    gpu = instance_type("p5.48xlarge", "192", "2048Gi", od=98.32)
    plain = ml("cr-block", "p5.48xlarge", available=2, kind="capacity-block", end="2026-11-21T12:39:00Z")
    ultra = ml("cr-ultra", "p5.48xlarge", available=2, kind="capacity-block", end="2026-11-21T13:09:00Z",
               ultraserver="u-p6e-gb200x72")
    for block in (plain, ultra):
        decisions = run([pod("train", "100", "1000Gi")], reservations=[block], types=[gpu],
                        pools=[node_pool(capacity_types=["reserved"])])
        assert decisions["nodeClaims"] == []
        assert decisions["unschedulable"][0]["reason"].startswith(f"capacity block {block['CapacityReservationId']} is expiring")
        assert decisions["nodeClasses"][0]["capacityReservations"][0]["state"] == "expiring"
    later = dict(ultra, EndDate="2026-11-21T13:11:00Z")
    decisions = run([pod("train", "100", "1000Gi")], reservations=[later], types=[gpu], pools=[node_pool(capacity_types=["reserved"])])
    assert len(decisions["nodeClaims"]) == 1


def test_default_odcr_before_capacity_block_on_equal_price():
    reservations = [ml("cr-block", "m5.large", kind="capacity-block", end="2026-11-22T00:00:00Z"), ml("cr-odcr", "m5.large")]
    decisions = run([pod("p", "1", "1Gi")], reservations=reservations)
    assert decisions["nodeClaims"][0]["launch"]["reservationID"] == "cr-odcr"


def test_reserved_labels_are_pinned_only_on_reserved_claims():
    decisions = run([pod(f"p{i}", "1500m", "1Gi") for i in range(2)],
                    reservations=[ml("cr-1", "m5.large", interruptible=True)])
    reserved, on_demand = sorted(decisions["nodeClaims"], key=lambda c: c["launch"]["price"])
    assert reserved["labels"]["karpenter.sh/capacity-type"] == "reserved"
    assert reserved["labels"]["karpenter.k8s.aws/capacity-reservation-id"] == "cr-1"
    assert reserved["labels"]["karpenter.k8s.aws/capacity-reservation-type"] == "default"
    assert reserved["labels"]["karpenter.k8s.aws/capacity-reservation-interruptible"] == "true"
    assert on_demand["labels"]["karpenter.sh/capacity-type"] == "on-demand"
    assert not any(k.startswith("karpenter.k8s.aws/capacity-reservation") for k in on_demand["labels"])


def test_pods_can_select_a_reservation_or_avoid_reserved_capacity():
    reservations = [ml("cr-1", "m5.large", available=1, total=4), ml("cr-2", "m5.large", available=0, total=4)]
    decisions = run([pod("pinned", "1500m", "1Gi", selector={"karpenter.k8s.aws/capacity-reservation-id": "cr-1"}),
                     pod("full", "1500m", "1Gi", selector={"karpenter.k8s.aws/capacity-reservation-id": "cr-2"}),
                     pod("paid", "1", "1Gi", selector={"karpenter.sh/capacity-type": "on-demand"})],
                    reservations=reservations)
    where = placement(decisions)
    assert where["default/pinned"][1]["launch"]["reservationID"] == "cr-1"
    assert where["default/full"] == ("unschedulable", "reservation cr-2 is full (4/4)")
    assert where["default/paid"][1]["launch"]["capacityType"] == "on-demand"


def test_reserved_only_nodepool_with_a_full_reservation_is_unschedulable_not_deferred():
    decisions = run([pod("p", "1", "1Gi")], reservations=[ml("cr-0abc", "m5.large", available=0, total=4)],
                    pools=[node_pool(capacity_types=["reserved"])])
    assert decisions["unschedulable"] == [{"pod": "default/p", "reason": "reservation cr-0abc is full (4/4)"}]
    condition = decisions["nodePools"][0]["conditions"][0]
    assert (condition["type"], condition["status"], condition["reason"]) == ("ReservedCapacityAvailable", "False", "LimitExceeded")


def test_reserved_only_nodepool_without_reservations_says_so():
    decisions = run([pod("p", "1", "1Gi")], pools=[node_pool(capacity_types=["reserved"])])
    assert decisions["unschedulable"][0]["reason"] == "no reservation selected by EC2NodeClass default matches this NodePool"
    assert decisions["nodePools"][0]["conditions"][0]["reason"] == "NoReservations"


def test_feature_gate_off_means_no_reserved_offerings_and_no_labels():
    decisions = run([pod("p", "1", "1Gi")], reservations=[ml("cr-1", "m5.large")], gate=False)
    claim = decisions["nodeClaims"][0]
    assert claim["launch"]["capacityType"] == "on-demand"
    assert not any(k.startswith("karpenter.k8s.aws/capacity-reservation") for k in claim["labels"])
    assert decisions["nodeClasses"] == [{"name": "default", "capacityReservations": [], "conditions": []}]
    assert decisions["nodePools"] == [{"name": "default", "conditions": []}]


def test_nodepool_condition_reports_free_units_after_the_plan():
    decisions = run([pod("p", "1", "1Gi")], reservations=[ml("cr-1", "m5.large", available=3)])
    condition = decisions["nodePools"][0]["conditions"][0]
    assert condition == {"type": "ReservedCapacityAvailable", "status": "True", "reason": "Available",
                         "message": "after this plan: cr-1 2 of 3 usable unit(s) free"}


def test_a_free_reserved_unit_beats_growing_a_paid_claim():
    """Upstream joins in-flight claims first, so the small pod would grow the on-demand claim to an
    m5.2xlarge while the m5.large reservation sits idle; karpweb opens a reserved claim instead."""
    types = TYPES + [instance_type("m5.2xlarge", "8", "32Gi", od=0.384)]
    pods = [pod("big", "3", "4Gi"), pod("small", "1500m", "1Gi")]
    decisions = run(pods, reservations=[ml("cr-1", "m5.large")], types=types)
    where = placement(decisions)
    assert where["default/big"][1]["launch"]["instanceType"] == "m5.xlarge"
    assert where["default/small"][1]["launch"]["reservationID"] == "cr-1"
    without = run(pods, reservations=[ml("cr-1", "m5.large")], types=types, gate=False)
    assert [c["launch"]["instanceType"] for c in without["nodeClaims"]] == ["m5.2xlarge"]  # plain FFD


def test_a_paid_claim_with_room_still_takes_pods_that_do_not_grow_it():
    pods = [pod("big", "2500m", "4Gi"), pod("small", "1", "1Gi")]
    decisions = run(pods, reservations=[ml("cr-1", "m5.large")])
    assert len(decisions["nodeClaims"]) == 1  # m5.xlarge has room for both; no new node


# Seed 002's NodePool shapes as a table: capacity types allowed, reserved units, and what three
# pods (each needing its own m5.large-sized node) get.
SEED_TABLE = [
    (["reserved"], 2, ["reserved", "reserved"], 1),
    (["reserved"], 0, [], 0),
    (["reserved", "on-demand"], 2, ["on-demand", "reserved", "reserved"], 0),
    (["reserved", "on-demand"], 0, ["on-demand", "on-demand", "on-demand"], 0),
    (None, 1, ["reserved", "spot", "spot"], 0),
    (["spot", "on-demand"], 3, ["spot", "spot", "spot"], 0),
    (["on-demand"], 3, ["on-demand", "on-demand", "on-demand"], 0),
]


@pytest.mark.parametrize("allowed, units, launched, deferred", SEED_TABLE)
def test_seed_nodepool_shapes(allowed, units, launched, deferred):
    pods = [pod(f"web-{i}", "1500m", "1Gi", anti_affinity=True) for i in range(3)]
    decisions = run(pods, reservations=[ml("cr-1", "m5.large", available=units, total=3)],
                    pools=[node_pool(capacity_types=allowed)])
    assert capacity_types(decisions) == launched
    assert len(decisions["deferred"]) == deferred
    assert len(decisions["unschedulable"]) == 3 - len(launched) - deferred
    for claim in decisions["nodeClaims"]:
        assert claim["launch"]["instanceType"] == "m5.large"  # the cheapest that fits, reserved or not


def test_seed_c6a_reservations_each_pod_takes_the_smallest_that_fits():
    """Seed 002: with a c6a.48xlarge and a c6a.large reservation, a small pod goes to the
    c6a.large one (od/1e7 keeps the on-demand order), a large pod to the c6a.48xlarge."""
    types = [instance_type("c6a.large", "2", "4Gi", od=0.0765), instance_type("c6a.48xlarge", "192", "384Gi", od=7.344)]
    reservations = [ml("cr-huge", "c6a.48xlarge"), ml("cr-small", "c6a.large")]
    decisions = run([pod("small", "1", "1Gi")], reservations=reservations, types=types)
    assert decisions["nodeClaims"][0]["launch"]["reservationID"] == "cr-small"
    assert decisions["nodeClaims"][0]["launch"]["price"] == 0.0765 / 10_000_000
    decisions = run([pod("large", "100", "64Gi"), pod("small", "1", "1Gi")], reservations=reservations, types=types)
    where = placement(decisions)
    assert launch_of(where, "default/large")["reservationID"] == "cr-huge"
    assert where["default/small"][1] is where["default/large"][1]  # first fit: it joins the big node


def launch_of(where, key):
    return where[key][1]["launch"]


# karpweb's override: a reservation an operator keeps karpweb from planning into ---------------


def test_an_excluded_reservation_takes_no_launch_and_the_pod_says_why():
    pools = [node_pool(capacity_types=["reserved"])]
    kept_out = {**ml("cr-1", "m5.large", available=2), "karpwebExcludedFromPlanning": "by olga since then: quarter-end"}
    decisions = run([pod("p0", "1500m", "1Gi")], reservations=[kept_out], pools=pools)
    assert decisions["nodeClaims"] == []
    [entry] = decisions["unschedulable"]
    assert "reservation cr-1 is excluded from planning (by olga since then: quarter-end)" in entry["reason"]
    # Still listed in the class status (nothing is demoted for it), and without the key it is used.
    assert [r["id"] for r in decisions["nodeClasses"][0]["capacityReservations"]] == ["cr-1"]
    assert capacity_types(run([pod("p0", "1500m", "1Gi")], reservations=[ml("cr-1", "m5.large", available=2)],
                              pools=pools)) == ["reserved"]
    # Beside on-demand, the pod simply launches on-demand.
    assert capacity_types(run([pod("p0", "1500m", "1Gi")], reservations=[kept_out])) == ["on-demand"]


def test_a_malformed_exclusion_is_a_problem_naming_its_path():
    with pytest.raises(WorldError) as raised:
        parse_world(world(instance_types=TYPES, reservations=[{**ml("cr-1", "m5.large"), "karpwebExcludedFromPlanning": 1}]))
    assert "capacityReservations[0].karpwebExcludedFromPlanning: expected a string" in str(raised.value)
