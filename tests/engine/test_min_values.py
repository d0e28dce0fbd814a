"""NodePool requirements with `minValues` (policy Strict): a claim keeps that many distinct values."""

import pytest

from scheduling.engine import WorldError, parse_world, simulate

from .builders import instance_type, node_class, node_pool, pod, reservation, world

TYPES = [instance_type(f"c{n}.large", str(n), f"{4 * n}Gi", od=0.05 * n, zones=("z-a", "z-b"),
                       labels={"karpenter.k8s.aws/instance-family": f"fam{n % 3}"}) for n in (2, 4, 8, 16)]
IT = "node.kubernetes.io/instance-type"


def run(pods, requirements, types=TYPES, **kwargs):
    return simulate(world(instance_types=types, node_classes=[node_class()], pods=pods,
                          node_pools=[node_pool(requirements=requirements, **kwargs)]))


def test_instance_type_min_values_keeps_enough_options():
    decisions = run([pod("a", "1", "1Gi")], [{"key": IT, "operator": "Exists", "minValues": 3}])
    assert len(decisions["nodeClaims"][0]["instanceTypeOptions"]) == 4
    # Only c8 and c16 have room for 6 CPUs: two values, three wanted.
    decisions = run([pod("big", "6", "1Gi")], [{"key": IT, "operator": "Exists", "minValues": 3}])
    assert decisions["unschedulable"] == [{"pod": "default/big", "reason": (
        f"minValues: {IT} needs at least 3 distinct values among the instance types left, only 2 remain")}]


def test_min_values_stops_a_claim_from_growing_past_it():
    # Two 3-CPU pods would need c8 or c16 together (two types); with minValues 3 they take a
    # claim each (c4, c8 and c16 remain for 3 CPUs).
    decisions = run([pod("a", "3", "1Gi"), pod("b", "3", "1Gi")], [{"key": IT, "operator": "Exists", "minValues": 3}])
    assert sorted(len(c["pods"]) for c in decisions["nodeClaims"]) == [1, 1]
    assert all(len(c["instanceTypeOptions"]) >= 3 for c in decisions["nodeClaims"])
    together = run([pod("a", "3", "1Gi"), pod("b", "3", "1Gi")], [{"key": IT, "operator": "Exists"}])
    assert [len(c["pods"]) for c in together["nodeClaims"]] == [2]


def test_min_values_on_an_instance_label_and_on_zones():
    family = "karpenter.k8s.aws/instance-family"
    decisions = run([pod("a", "5", "1Gi")], [{"key": family, "operator": "Exists", "minValues": 2}])
    assert decisions["nodeClaims"][0]["instanceTypeOptions"] == ["c8.large", "c16.large"]  # fam2, fam1
    decisions = run([pod("a", "9", "1Gi")], [{"key": family, "operator": "Exists", "minValues": 2}])
    assert decisions["unschedulable"][0]["reason"].startswith(f"minValues: {family} needs at least 2")
    zonal = [{"key": "topology.kubernetes.io/zone", "operator": "Exists", "minValues": 2}]
    assert run([pod("a", "1", "1Gi")], zonal)["unschedulable"] == []
    pinned = pod("a", "1", "1Gi", selector={"topology.kubernetes.io/zone": "z-a"})
    assert run([pinned], zonal)["unschedulable"][0]["reason"].startswith("minValues: topology.kubernetes.io/zone")


def test_a_reserved_claim_launches_its_reservation_whatever_minValues():
    doc = world(instance_types=TYPES, reservations=[reservation("cr-1", "c4.large", zone="z-a", tags={"team": "ml"})],
                node_classes=[node_class("default", [{"tags": {"team": "ml"}}])],
                node_pools=[node_pool(requirements=[{"key": IT, "operator": "Exists", "minValues": 3}])],
                pods=[pod("a", "1", "1Gi"), pod("b", "1", "1Gi")])
    claims = simulate(doc)["nodeClaims"]
    assert [(c["launch"]["capacityType"], len(c["pods"])) for c in claims] == [("reserved", 2)]


def test_min_values_validation():
    bad = node_pool(requirements=[{"key": IT, "operator": "In", "values": ["c2.large", "c4.large"], "minValues": 3},
                                  {"key": IT, "operator": "Exists", "minValues": 51}])
    with pytest.raises(WorldError) as info:
        parse_world(world(instance_types=TYPES, node_pools=[bad]))
    path = "nodePools[0].spec.template.spec.requirements"
    assert info.value.lines() == [f"{path}[0].minValues: 3 is more than the 2 value(s) listed",
                                  f"{path}[1].minValues: 51 must be between 1 and 50"]


def test_pods_that_a_zonal_spread_counts_do_not_pin_a_zone_with_min_values():
    counted = pod("a", "1", "1Gi", labels={"app": "web"})
    spreader = pod("b", "100m", "1Gi", labels={"app": "other"})
    spreader["spec"]["topologySpreadConstraints"] = [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                                                      "whenUnsatisfiable": "DoNotSchedule",
                                                      "labelSelector": {"matchLabels": {"app": "web"}}}]
    zonal = [{"key": "topology.kubernetes.io/zone", "operator": "Exists", "minValues": 2}]
    decisions = run([counted], zonal)  # no spread in the run: nothing to count
    assert decisions["unschedulable"] == []
    decisions = run([counted, spreader], zonal)
    # The counted pod keeps both zones (it is not counted); the spread owner must pin one, which
    # minValues forbids.
    assert [u["pod"] for u in decisions["unschedulable"]] == ["default/b"]
