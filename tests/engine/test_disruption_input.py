"""WORLD.json inputs of consolidation and the lifecycle: NodePool disruption specs, durations, cron
schedules, `instances`, node and pod metadata; bad values are problems with their JSON path."""

from datetime import datetime, timedelta, timezone

import pytest

from scheduling.engine import WorldError, parse_world
from scheduling.engine.budgets import (
    Budget, CronSchedule, SpecError, format_duration, parse_duration,
)

from .builders import node_pool, world
from .lifecycle_builders import bound, dpool, instance, knode


def problems(doc):
    with pytest.raises(WorldError) as caught:
        parse_world(doc)
    return caught.value.problems


@pytest.mark.parametrize("text, seconds", [("0", 0), ("0s", 0), ("30s", 30), ("5m", 300), ("1h30m", 5400),
                                           ("1.5h", 5400), ("720h", 720 * 3600), ("100ms", 0.1), ("2h0m5s", 7205)])
def test_go_durations(text, seconds):
    assert parse_duration(text).total_seconds() == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "5", "m", "1d", "1h x", "abc", "-"])
def test_bad_durations(text):
    with pytest.raises(SpecError):
        parse_duration(text)


def test_format_duration():
    assert [format_duration(timedelta(seconds=s)) for s in (0, 45, 5400, 7205)] == ["0s", "45s", "1h30m", "2h5s"]


UTC = timezone.utc


@pytest.mark.parametrize("schedule, after, expected", [
    ("0 9 * * mon-fri", datetime(2026, 11, 21, 12, 0, tzinfo=UTC), datetime(2026, 11, 23, 9, 0, tzinfo=UTC)),
    ("@daily", datetime(2026, 11, 21, 12, 0, tzinfo=UTC), datetime(2026, 11, 22, 0, 0, tzinfo=UTC)),
    ("@hourly", datetime(2026, 11, 21, 12, 0, tzinfo=UTC), datetime(2026, 11, 21, 13, 0, tzinfo=UTC)),
    ("*/15 * * * *", datetime(2026, 11, 21, 12, 7, 30, tzinfo=UTC), datetime(2026, 11, 21, 12, 15, tzinfo=UTC)),
    ("0 0 1 jan *", datetime(2026, 11, 21, 12, 0, tzinfo=UTC), datetime(2027, 1, 1, 0, 0, tzinfo=UTC)),
    # both day fields restricted: either one fires (the 1st, or any Monday)
    ("0 0 1 * 1", datetime(2026, 11, 21, 12, 0, tzinfo=UTC), datetime(2026, 11, 23, 0, 0, tzinfo=UTC)),
    ("30 2 29 2 ?", datetime(2026, 11, 21, 12, 0, tzinfo=UTC), datetime(2028, 2, 29, 2, 30, tzinfo=UTC)),
])
def test_cron_next(schedule, after, expected):
    assert CronSchedule.parse(schedule).next_after(after, after + timedelta(days=800)) == expected


@pytest.mark.parametrize("schedule", ["* * * *", "60 * * * *", "* 24 * * *", "* * 0 * *", "* * * 13 *",
                                      "* * * * 7", "5-1 * * * *", "*/0 * * * *", "x * * * *", "@often"])
def test_bad_cron(schedule):
    with pytest.raises(SpecError):
        CronSchedule.parse(schedule)


def test_budget_rounds_percentages_up():
    assert [Budget("10%").allowed(n) for n in (0, 1, 10, 11, 25)] == [0, 1, 1, 2, 3]
    assert Budget("3").allowed(1) == 3


def test_a_nodepool_disruption_spec_is_read():
    budgets = [{"nodes": "20%", "reasons": ["Empty", "Drifted"]},
               {"nodes": 0, "schedule": "@daily", "duration": "10m"}]
    pool = dpool(policy="WhenEmpty", after="1h30m", budgets=budgets, keep_idle="true", expire_after="Never")
    parsed = parse_world(world(node_pools=[pool])).node_pools[0].disruption
    assert parsed.consolidation_policy == "WhenEmpty"
    assert parsed.consolidate_after == timedelta(minutes=90)
    assert parsed.expire_after is None and parsed.keep_idle_reserved
    assert [b.nodes for b in parsed.budgets] == ["20%", "0"]
    assert parsed.budgets[0].reasons == {"Empty", "Drifted"} and parsed.budgets[1].duration == timedelta(minutes=10)


def test_nodepool_disruption_defaults():
    parsed = parse_world(world(node_pools=[node_pool()])).node_pools[0].disruption
    assert parsed.consolidation_policy == "WhenEmptyOrUnderutilized"
    assert parsed.consolidate_after == timedelta(0)
    assert [b.nodes for b in parsed.budgets] == ["10%"]
    assert parsed.expire_after == timedelta(hours=720) and not parsed.keep_idle_reserved


def test_bad_disruption_specs_name_their_paths():
    pool = dpool(policy="WhenIdle", after="soon", keep_idle="yes", expire_after=5,
                 budgets=[{"nodes": "110%"}, {"nodes": "1", "reasons": ["Expired"]}, {"nodes": "1", "schedule": "@daily"},
                          {"nodes": "1", "schedule": "61 * * * *", "duration": "1h"}, "x"])
    assert problems(world(node_pools=[pool])) == [
        ("nodePools[0].spec.disruption.consolidationPolicy", '"WhenIdle" is not one of WhenEmpty, WhenEmptyOrUnderutilized'),
        ("nodePools[0].spec.disruption.consolidateAfter", '"soon" is not a duration (e.g. 30s, 5m, 1h30m)'),
        ("nodePools[0].spec.disruption.budgets[0].nodes", "'110%' is not a node count (\"5\") or a percentage (\"10%\")"),
        ("nodePools[0].spec.disruption.budgets[1].reasons", "'Expired' is not one of Underutilized, Empty, Drifted"),
        ("nodePools[0].spec.disruption.budgets[2]", "schedule and duration must be set together"),
        ("nodePools[0].spec.disruption.budgets[3].schedule", "cron minute: 61 is outside 0-59"),
        ("nodePools[0].spec.disruption.budgets[4]", "expected an object"),
        ("nodePools[0].spec.template.spec.expireAfter", 'expected a duration such as "30s" or "Never", got 5'),
        ("nodePools[0].metadata.annotations.karpweb.io/keep-idle-reserved-nodes", "'yes' must be \"true\" or \"false\""),
    ]


def test_nodes_and_pods_carry_what_consolidation_reads():
    node = knode("n1", "m5.large", annotations={"karpenter.sh/do-not-disrupt": "true"}, instance="i-0abc")
    pods = [bound("a", "n1", annotations={"controller.kubernetes.io/pod-deletion-cost": "5"}, daemon=True),
            bound("mirror", "n1", annotations={"kubernetes.io/config.mirror": "x"})]
    pods[0]["spec"]["priority"] = 1000
    parsed = parse_world(world(nodes=[node], pods=pods))
    [n] = parsed.nodes
    assert n.provider_id == "aws:///us-east-1a/i-0abc"
    assert n.created == datetime(2026, 11, 21, 11, 0, tzinfo=UTC)
    assert n.annotations == {"karpenter.sh/do-not-disrupt": "true"}
    a, mirror = parsed.pods
    assert a.daemon and a.priority == 1000 and a.annotations["controller.kubernetes.io/pod-deletion-cost"] == "5"
    assert mirror.daemon and mirror.priority == 0


def test_bad_node_and_pod_metadata():
    node = knode("n1", "m5.large", created="yesterday")
    node["metadata"]["annotations"] = {"a": 1}
    node["spec"]["providerID"] = 7
    item = bound("a", "n1")
    item["spec"]["priority"] = "high"
    item["metadata"]["ownerReferences"] = {"kind": "DaemonSet"}
    assert problems(world(nodes=[node], pods=[item])) == [
        ("nodes[0].metadata.creationTimestamp", '"yesterday" is not a timestamp'),
        ("nodes[0].metadata.annotations.a", "expected a string, got 1"),
        ("nodes[0].spec.providerID", "expected a string, got 7"),
        ("pods[0].spec.priority", 'expected an integer, got "high"'),
        ("pods[0].metadata.ownerReferences", "expected a list"),
    ]


def test_instances_are_read_as_a_list_or_as_describe_instances_output():
    items = [instance("i-1", "m5.large", reservation="cr-0abc"), instance("i-2", "m5.large", lifecycle="spot")]
    listed = parse_world({**world(), "instances": items}).instances
    nested = parse_world({**world(), "instances": {"Reservations": [{"Instances": items}]}}).instances
    assert listed == nested
    assert [(i.id, i.reserved, i.lifecycle) for i in listed] == [("i-1", True, ""), ("i-2", False, "spot")]
    assert parse_world(world()).instances is None


def test_bad_instances_name_their_paths():
    bad = [{"InstanceType": "m5.large"}, {"InstanceId": "i-1", "State": "running"}, "x",
           {"InstanceId": "i-2", "CapacityReservationSpecification": {"CapacityReservationPreference": 3}},
           instance("i-3", "m5.large"), instance("i-3", "m5.large")]
    assert problems({**world(), "instances": bad}) == [
        ("instances[0].InstanceId", "is required"),
        ("instances[1].State", "expected an object"),
        ("instances[2]", "expected an object"),
        ("instances[3].CapacityReservationSpecification.CapacityReservationPreference", "expected a string, got 3"),
        ("instances[5].InstanceId", "duplicate instance i-3"),
    ]
    assert problems({**world(), "instances": 5}) == [("instances", "expected a list of DescribeInstances items")]


def test_the_spot_to_spot_gate():
    assert not parse_world(world()).spot_to_spot
    doc = world()
    doc["featureGates"]["SpotToSpotConsolidation"] = True
    assert parse_world(doc).spot_to_spot
    doc["featureGates"]["SpotToSpotConsolidation"] = "yes"
    assert problems(doc) == [("featureGates.SpotToSpotConsolidation", 'expected true or false, got "yes"')]
