"""The example worlds under examples/ produce the decisions docs/simulate.md explains."""

import json
from pathlib import Path

from scheduling.engine import simulate

from .builders import placement

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def run(name):
    return simulate(json.loads((EXAMPLES / name).read_text()))


def launch(where, key):
    kind, claim = where[key]
    assert kind == "claim", where[key]
    return claim["launch"]


def test_reserved_first():
    decisions = run("reserved-first.json")
    where = placement(decisions)
    assert where["web/api-1"] == ("node", "ip-10-0-1-10.ec2.internal")
    assert launch(where, "web/worker-0")["reservationID"] == "cr-0a1b2c3d4e5f60001"
    assert launch(where, "web/worker-1") == {"instanceType": "m5.xlarge", "zone": "us-east-1a",
                                            "capacityType": "on-demand", "price": 0.192}
    caches = [launch(where, f"web/cache-{i}") for i in range(3)]
    assert {c["reservationID"] for c in caches} == {"cr-0a1b2c3d4e5f60002"}
    assert len({where[f"web/cache-{i}"][1]["name"] for i in range(3)}) == 3  # anti-affinity: one per node
    assert decisions["unschedulable"] == [] and decisions["deferred"] == []
    assert decisions["nodePools"][0]["conditions"][0]["reason"] == "LimitExceeded"


def test_capacity_block():
    decisions = run("capacity-block.json")
    where = placement(decisions)
    for key in ("ml/trainer-0", "ml/trainer-1"):
        assert launch(where, key)["reservationID"] == "cr-0b10c0000000000a1"
        assert where[key][1]["instanceTypeOptions"] == ["p5.48xlarge"]
    assert where["ml/trainer-2"] == ("deferred", "nodepool gpu-blocks: compatible reserved capacity is held by other "
                                                 "node claims in this run (cr-0b10c0000000000a1 2/2 planned)")
    assert where["ml/gb200-eval"][0] == "unschedulable"
    assert "capacity block cr-0b10c0000000000b2 is expiring: draining since 2026-11-21T11:55:00Z" in where["ml/gb200-eval"][1]
    assert launch(where, "ml/tensorboard")["instanceType"] == "m5.xlarge"
    gpu = next(nc for nc in decisions["nodeClasses"] if nc["name"] == "gpu")
    assert [(r["id"], r["state"]) for r in gpu["capacityReservations"]] == [
        ("cr-0b10c0000000000a1", "active"), ("cr-0b10c0000000000b2", "expiring")]


def test_two_nodepools():
    decisions = run("two-nodepools.json")
    where = placement(decisions)
    assert launch(where, "jobs/batch-0")["reservationID"] == "cr-0c6a000000000000b"
    assert where["web/reporting"][1]["nodePool"] == "spot-and-od"
    assert launch(where, "web/reporting")["capacityType"] == "on-demand"
    assert [launch(where, f"web/api-{i}")["capacityType"] for i in range(3)] == ["reserved", "reserved", "spot"]
    assert where["web/api-2"][1]["nodePool"] == "spot-and-od"
    assert where["web/zonal"] == ("unschedulable", "nodepool reserved: no reservation selected by EC2NodeClass reserved "
                                                   "matches zone us-east-1c; nodepool spot-and-od: no instance type offers zone us-east-1c")
    assert where["web/huge"][0] == "unschedulable"
    legacy = next(nc for nc in decisions["nodeClasses"] if nc["name"] == "legacy")
    assert legacy["conditions"][0]["reason"] == "InvalidSelectorTerms"
    assert decisions["deferred"] == []


def test_topology():
    decisions = run("topology.json")
    where = placement(decisions)
    zones = {key: (value[1]["launch"]["zone"] if value[0] == "claim" else value[1]) for key, value in where.items()}
    # web: two already run in us-east-1a, so the four new ones go to 1b and 1c (2/2/2).
    assert sorted(zones[f"shop/web-{i}"] for i in range(4)) == ["us-east-1b", "us-east-1b", "us-east-1c", "us-east-1c"]
    # cache: placed before the new web pods (larger), so only 1a runs web pods; one per node.
    assert where["shop/cache-0"] == ("node", "ip-10-0-1-20.ec2.internal")
    assert [zones[f"shop/cache-{i}"] for i in (1, 2)] == ["us-east-1a", "us-east-1a"]
    assert where["shop/cache-1"][1]["name"] != where["shop/cache-2"][1]["name"]
    # report prefers 1a, where the running guard's anti-affinity keeps it out: the preference gives way.
    assert zones["jobs/report"] == "us-east-1b"
    assert where["shop/api-0"] == ("node", "ip-10-0-1-20.ec2.internal") and where["shop/api-1"][0] == "claim"
    assert where["shop/orphan"] == ("unschedulable", "pod affinity on topology.kubernetes.io/zone: no pod it selects "
                                                     "runs in any domain")
    assert where["shop/huge"] == ("unschedulable", "minValues: node.kubernetes.io/instance-type needs at least 2 "
                                                   "distinct values among the instance types left, only 1 remain")
    assert all(len(c["instanceTypeOptions"]) >= 2 for c in decisions["nodeClaims"])


def test_the_plan_alone_is_the_plan_of_the_full_run():
    """A provisioning run asks for the plan only (simulate(disruptions=False)): the same plan and
    conditions as the full run, with no disruptions and no demotions."""
    for path in sorted(EXAMPLES.glob("*.json")):
        world = json.loads(path.read_text())
        full = simulate(world)
        assert full.get("disruptions") is not None, path.name
        assert simulate(world, disruptions=False) == {**full, "disruptions": [], "demotions": []}, path.name
