"""examples/consolidation.json and examples/expiry-and-demotion.json produce the decisions
docs/simulate.md explains."""

import json
from pathlib import Path

from scheduling.engine import parse_world, plan, simulate
from scheduling.engine.disruption import lifecycle

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
ALL_RESERVATION_LABELS = ["karpenter.k8s.aws/capacity-reservation-id", "karpenter.k8s.aws/capacity-reservation-type",
                          "karpenter.k8s.aws/capacity-reservation-interruptible"]


def load(name):
    return json.loads((EXAMPLES / name).read_text())


def test_consolidation_example():
    decisions = simulate(load("consolidation.json"))
    assert decisions["nodeClaims"] == [] and decisions["demotions"] == []
    empty, multi = decisions["disruptions"]
    assert empty == {"action": "delete", "reason": "consolidation", "nodes": ["web-empty"], "evictedPods": [],
                     "consolidationType": "empty", "savingsPerHour": 0.096}
    assert (multi["action"], multi["nodes"], multi["consolidationType"]) == (
        "replace", ["web-busy", "web-od-1", "web-od-2"], "multi")
    assert multi["replacement"]["launch"] == {"instanceType": "m5.large", "zone": "us-east-1b", "capacityType": "reserved",
                                              "reservationID": "cr-0c0a50000000000a2", "reservationType": "default",
                                              "price": 9.6e-09}
    assert multi["replacement"]["pods"] == ["web/api-zonal-0"]
    assert multi["evictedPods"] == ["web/api-0", "web/api-1", "web/api-zonal-0"]
    # At the margin: the free reserved unit the replacement takes is paid for already.
    assert multi["savingsPerHour"] == round(0.192 + 0.096 + 0.096, 12)
    # ml-idle (keep-idle-reserved), web-pinned (do-not-disrupt), web-new (consolidateAfter) and
    # steady-1 (WhenEmpty) stay; the kept reserved node takes api-1.
    touched = {n for d in decisions["disruptions"] for n in d["nodes"]}
    assert touched.isdisjoint({"ml-idle", "web-pinned", "web-new", "steady-1"})
    [_, command] = lifecycle(plan(parse_world(load("consolidation.json")))).commands
    assert command.moves["web/api-1"] == "ml-idle" and command.moves["web/api-0"] == "steady-1"


def test_expiry_and_demotion_example():
    decisions = simulate(load("expiry-and-demotion.json"))
    expiry = [(d["nodes"], d["drainAt"], d["ultraServer"]) for d in decisions["disruptions"]
              if d["reason"] == "capacity-block-expiring"]
    assert expiry == [(["gpu-a"], "2026-11-21T12:00:00Z", False), (["gpu-b"], "2026-11-21T12:20:00Z", True)]
    [drift] = [d for d in decisions["disruptions"] if d["reason"] == "drift"]
    assert (drift["action"], drift["nodes"], drift["reservationID"]) == ("delete", ["web-6"], "cr-0d0d0000000000005")
    assert [(d["node"], d["reservationID"], d["reason"]) for d in decisions["demotions"]] == [
        ("web-1", "cr-0d0d0000000000001", "reservation cr-0d0d0000000000001 is cancelled"),
        ("web-2", "cr-0d0d0000000000002", "reservation cr-0d0d0000000000002 is gone from DescribeCapacityReservations"),
        ("web-3", "cr-0d0d0000000000003", "reservation cr-0d0d0000000000003 ended at 2026-11-21T11:00:00Z"),
        ("web-4", "cr-0d0d0000000000004",
         "instance i-0000000000000004 is no longer in reservation cr-0d0d0000000000004 (it has no CapacityReservationId)"),
    ]
    assert all(d["removeLabels"] == ALL_RESERVATION_LABELS for d in decisions["demotions"])
    [_, _, drift_command] = [None, None] + lifecycle(plan(parse_world(load("expiry-and-demotion.json")))).commands
    assert drift_command.moves == {"web/api-6": "web-1"}  # onto a demoted node
