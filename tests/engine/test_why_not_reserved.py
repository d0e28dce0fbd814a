"""why_not_reserved on its own: the first blocker in the order Karpenter meets them, each named."""

from scheduling.engine.explain import (
    CLASS_SELECTOR, COULD_USE, NO_FREE_UNIT, NO_NODEPOOL, NODEPOOL_REQUIREMENT, POD_CONSTRAINTS, ReservedUnit, why_not_reserved,
)
from scheduling.engine.quantities import ResourceList
from scheduling.engine.requirements import Requirement, Requirements

LABELS = {"node.kubernetes.io/instance-type": "m5.large", "kubernetes.io/arch": "amd64",
          "topology.kubernetes.io/zone": "us-east-1a", "karpenter.sh/capacity-type": "reserved"}
ROOM = ResourceList({"cpu": 1930, "memory": 7 * 2**30, "pods": 29})
SMALL = ResourceList({"cpu": 500, "memory": 2**30, "pods": 1})


def unit(free=2, selected_by=("web",), labels=LABELS):
    return ReservedUnit("cr-1", "m5.large", "us-east-1a", labels, ROOM, free, 4, selected_by)


def req(key, operator, *values):
    return Requirements([Requirement.of(key, operator, values)])


def answer(units, pool_reqs=Requirements(), alternatives=(Requirements(),), requests=SMALL, pool="web", node_class="web"):
    return why_not_reserved(alternatives, requests, pool, pool_reqs, node_class, units)


def test_each_blocker_in_turn():
    assert answer([unit()]).blocker == COULD_USE and "cr-1 (m5.large in us-east-1a) has a free unit" in answer([unit()]).text
    assert answer([unit()], pool=None).blocker == NO_NODEPOOL
    spot_only = answer([unit()], req("karpenter.sh/capacity-type", "In", "spot", "on-demand"))
    assert spot_only.blocker == NODEPOOL_REQUIREMENT and "capacity-type In [on-demand, spot]" in spot_only.text
    assert answer([unit(selected_by=("other",))]).blocker == CLASS_SELECTOR
    zone = answer([unit()], req("topology.kubernetes.io/zone", "In", "us-east-1b"))
    assert zone.blocker == NODEPOOL_REQUIREMENT and "zone In [us-east-1b] rules out cr-1" in zone.text
    arm = answer([unit()], alternatives=(req("kubernetes.io/arch", "In", "arm64"),))
    assert arm.blocker == POD_CONSTRAINTS and "arch In [arm64]" in arm.text
    big = answer([unit()], requests=ResourceList({"cpu": 8000, "pods": 1}))
    assert big.blocker == POD_CONSTRAINTS and "are more than a node of cr-1" in big.text
    full = answer([unit(free=0)])
    assert full.blocker == NO_FREE_UNIT and "has all 4 in use" in full.text


def test_a_pod_that_asks_for_spot_names_its_own_constraint():
    spot = answer([unit()], alternatives=(req("karpenter.sh/capacity-type", "In", "spot"),))
    assert spot.blocker == POD_CONSTRAINTS and "the pod's own capacity-type In [spot]" in spot.text


def test_keys_a_reserved_node_does_not_carry_do_not_rule_it_out():
    custom = answer([unit()], req("team", "In", "web"), alternatives=(req("team", "In", "web"),))
    assert custom.blocker == COULD_USE
