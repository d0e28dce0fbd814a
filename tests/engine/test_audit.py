"""The audit's comparison on its own: a launch karpweb did not make, against the reservations its
EC2NodeClass selects as the last EC2 sync before it saw them."""

import datetime

from hypothesis import given, strategies as st

from scheduling.engine.audit import Candidate, Launch, PodNeeds, hours_overlapping, judge
from scheduling.engine.world import WorldError, parse_pod

UTC = datetime.timezone.utc
SYNC = datetime.datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
LAUNCH = Launch(claim="web-abcde", node_pool="web", node_class="default", instance_type="m5.large", zone="us-east-1a",
                capacity_type="on-demand", created_at=SYNC + datetime.timedelta(minutes=5),
                pool_requirements=({"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["reserved", "on-demand"]},))


def candidate(free=1, taken=0, rid="cr-0a1", sync_at=SYNC, **changes):
    return Candidate(**{"reservation_id": rid, "instance_type": "m5.large", "zone": "us-east-1a",
                        "reservation_type": "default", "free_at_sync": free, "sync_at": sync_at,
                        "taken_since_sync": taken, **changes})


def test_a_paid_launch_beside_a_free_unit_is_missed():
    verdict = judge(LAUNCH, [candidate(free=0, rid="cr-0a0"), candidate(free=3, taken=1, rid="cr-0a1")])
    assert (verdict.outcome, verdict.reservation_id, verdict.free_units, verdict.sync_at) == ("missed-reservation", "cr-0a1", 2, SYNC)
    assert "had 3 free units at the EC2 sync of 2026-11-25 12:00:00 UTC (1 taken by reserved launches since)" in verdict.reason


def test_units_taken_since_the_sync_or_unknown_are_not_missed():
    assert judge(LAUNCH, [candidate(free=1, taken=1)]).outcome == "no-free-unit"
    no_sync = judge(LAUNCH, [candidate(free=5, sync_at=None)])
    assert no_sync.outcome == "no-free-unit" and "no EC2 sync before it appeared" in no_sync.reason


def test_compatibility_type_zone_and_the_pools_requirements():
    assert judge(LAUNCH, [candidate(instance_type="m5.xlarge")]).outcome == "no-compatible-reservation"
    assert judge(LAUNCH, [candidate(zone="us-east-1b")]).outcome == "no-compatible-reservation"
    for requirement in ({"key": "karpenter.sh/capacity-type", "operator": "NotIn", "values": ["reserved"]},
                        {"key": "karpenter.k8s.aws/capacity-reservation-type", "operator": "In", "values": ["capacity-block"]},
                        {"key": "karpenter.k8s.aws/capacity-reservation-id", "operator": "In", "values": ["cr-other"]}):
        launch = Launch(**{**LAUNCH.__dict__, "pool_requirements": (requirement,)})
        verdict = judge(launch, [candidate()])
        assert verdict.outcome == "no-compatible-reservation" and requirement["key"] in verdict.reason
    # A requirement on a label the reserved offering does not decide (category) does not rule it out.
    launch = Launch(**{**LAUNCH.__dict__, "pool_requirements": (
        {"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": ["c"]},)})
    assert judge(launch, [candidate()]).outcome == "missed-reservation"


NODE_LABELS = (("karpenter.sh/capacity-type", "on-demand"), ("node.kubernetes.io/instance-type", "m5.large"),
               ("topology.kubernetes.io/zone", "us-east-1a"), ("kubernetes.io/hostname", "ip-10-0-1-7"))


def needs(name, node_selector=None, terms=None):
    """A pod as Kubernetes writes it, read by the engine's own parser."""
    spec = {"containers": [{"name": "app", "resources": {"requests": {"cpu": "1"}}}]}
    if node_selector:
        spec["nodeSelector"] = node_selector
    if terms is not None:
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}
    pod = parse_pod({"metadata": {"name": name, "namespace": "team"}, "spec": spec})
    return PodNeeds(f"team/{name}", pod.strict_alternatives)


def with_pods(*pods):
    return Launch(**{**LAUNCH.__dict__, "node_labels": NODE_LABELS, "pods": pods})


def test_the_pods_own_requirements_can_rule_a_reservation_out():
    plain = with_pods(needs("web"), needs("zonal", {"topology.kubernetes.io/zone": "us-east-1a"}))
    verdict = judge(plain, [candidate()])
    assert verdict.outcome == "missed-reservation" and verdict.reason.endswith(", and its 2 pods would have run there")

    pinned = with_pods(needs("web"), needs("batch", {"karpenter.sh/capacity-type": "on-demand"}))
    verdict = judge(pinned, [candidate()])
    assert verdict.outcome == "no-compatible-reservation"
    assert verdict.reason.endswith("reservation cr-0a1 matches, but its pod team/batch requires "
                                   "karpenter.sh/capacity-type In [on-demand]")

    # Required node affinity: one term that admits reserved capacity is enough; none, and it is ruled out.
    paid_only = [{"matchExpressions": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand", "spot"]}]}]
    either = paid_only + [{"matchExpressions": [{"key": "karpenter.k8s.aws/capacity-reservation-id", "operator": "Exists"}]}]
    assert judge(with_pods(needs("a", terms=paid_only)), [candidate()]).outcome == "no-compatible-reservation"
    assert judge(with_pods(needs("b", terms=either)), [candidate()]).outcome == "missed-reservation"
    # A pod that keeps off default ODCRs (it ran on on-demand, where the label is absent) would not
    # have taken this one; a Capacity Block would have been fine for it.
    no_odcr = [{"matchExpressions": [{"key": "karpenter.k8s.aws/capacity-reservation-type", "operator": "NotIn",
                                      "values": ["default"]}]}]
    assert judge(with_pods(needs("c", terms=no_odcr)), [candidate()]).outcome == "no-compatible-reservation"
    assert judge(with_pods(needs("c", terms=no_odcr)), [candidate(reservation_type="capacity-block")]).outcome \
        == "missed-reservation"
    # A pod none of whose terms match the node it runs on (labels changed since) tells nothing.
    blocks_only = [{"matchExpressions": [{"key": "karpenter.k8s.aws/capacity-reservation-type", "operator": "In",
                                          "values": ["capacity-block"]}]}]
    assert judge(with_pods(needs("d", terms=blocks_only)), [candidate()]).outcome == "missed-reservation"


def test_one_reservation_a_pod_refuses_and_another_it_accepts():
    pod = needs("gpu", terms=[{"matchExpressions": [{"key": "karpenter.k8s.aws/capacity-reservation-id",
                                                     "operator": "NotIn", "values": ["cr-0a1"]}]}])
    verdict = judge(with_pods(pod), [candidate(rid="cr-0a1", free=4), candidate(rid="cr-0a2", free=1)])
    assert (verdict.outcome, verdict.reservation_id, verdict.free_units) == ("missed-reservation", "cr-0a2", 1)


def test_a_launch_judged_without_its_pods_says_so():
    note = "its node did not register within 15 minutes, so its pods' own requirements were not checked"
    verdict = judge(Launch(**{**LAUNCH.__dict__, "pods_note": note}), [candidate()])
    assert verdict.outcome == "missed-reservation" and verdict.reason.endswith(f"admits reserved capacity; {note}")


def test_a_pod_the_engine_cannot_read_is_named():
    try:
        parse_pod({"metadata": {"name": "x"}, "spec": {"containers": [], "nodeSelector": {"a": 1}}})
    except WorldError as error:
        assert "pod.spec.nodeSelector" in str(error)
    else:
        raise AssertionError("a nodeSelector value that is not a string must be refused")


def test_reserved_launches_used_their_reservation():
    launch = Launch(**{**LAUNCH.__dict__, "capacity_type": "reserved", "reservation_id": "cr-0a1"})
    assert judge(launch, [candidate()]).outcome == "used-reservation"


@given(st.lists(st.tuples(st.integers(0, 48), st.floats(0, 4)), max_size=60), st.integers(0, 3600 * 48),
       st.integers(0, 3600 * 48))
def test_idle_hours_never_exceed_the_running_time(hours, start_s, length_s):
    start = SYNC + datetime.timedelta(seconds=start_s)
    end = start + datetime.timedelta(seconds=length_s)
    idle = [(SYNC + datetime.timedelta(hours=h), free) for h, free in dict(hours).items()]
    total = hours_overlapping(start, end, idle)
    assert 0 <= total <= length_s / 3600 + 1e-9
    covered = {h for h, _ in hours} >= set(range(49)) and end <= SYNC + datetime.timedelta(hours=49)
    if covered and all(free >= 1 for _, free in idle):
        assert abs(total - length_s / 3600) < 1e-9


def test_a_reserved_node_disrupted_beside_paid_nodes():
    from scheduling.engine.audit import judge_disruption

    at = SYNC + datetime.timedelta(hours=1)
    verdict = judge_disruption("r-1", "cr-0a1", "m5.large", "us-east-1a", True, [("od-1", 0.096), ("spot-1", 0.04)], at)
    assert verdict.outcome == "reserved-node-disrupted" and "paid nodes od-1, spot-1" in verdict.reason
    assert verdict.reason.endswith("the cheapest costs $0.0400/h at list price")
    assert judge_disruption("r-1", "cr-0a1", "m5.large", "us-east-1a", False, [("od-1", 0.096)], at) is None  # expired
    assert judge_disruption("r-1", "cr-0a1", "m5.large", "us-east-1a", True, [], at) is None  # nothing could move in


def test_a_plan_beside_karpenters_claims():
    from scheduling.engine.audit import Placement, compare_plan

    reserved_plan = {"instanceType": "m5.large", "capacityType": "reserved", "reservationID": "cr-0a1", "price": 1e-8}
    paid = [Placement("k-1", "m5.large", "on-demand", "", 0.096), Placement("k-2", "m5.large", "spot", "", 0.04)]
    compared = compare_plan(reserved_plan, paid)
    assert compared["same"] is False and abs(compared["extra_per_hour"] - 0.136) < 1e-9
    assert compared["words"] == "karpweb would have used reservation cr-0a1; Karpenter paid $0.1360/h more"
    assert compare_plan(reserved_plan, [Placement("k-3", "m5.large", "reserved", "cr-0a1", None)])["same"] is True
    cheaper = compare_plan({"instanceType": "m5.xlarge", "capacityType": "on-demand", "price": 0.192}, paid[:1])
    assert cheaper["words"] == "Karpenter chose differently (-$0.0960/h at list price)"
    assert compare_plan(reserved_plan, [])["same"] is None
