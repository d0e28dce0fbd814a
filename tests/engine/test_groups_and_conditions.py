"""Issue 12 in the engine: Capacity Reservation group terms (in spec or in karpweb's annotation),
launches that target a group, the NodePool `ReservedCapacityAvailable` condition across runs, and
on-demand instances that EC2 placed in an open reservation (counted, never relabelled)."""

import json

import pytest

from scheduling.engine import simulate
from scheduling.engine.groups import (
    GROUPS_ANNOTATION, annotation_value, group_arns, merge_terms, parse_annotation, split_terms,
)
from scheduling.engine.selectors import parse_terms
from scheduling.engine.world import WorldError

from .builders import instance_type, node, node_class, node_pool, placement, pod, reservation, world

ARN = "arn:aws:resource-groups:us-east-1:123456789012:group/ml-pool"
OTHER_ARN = "arn:aws:resource-groups:us-east-1:123456789012:group/other"
P = "capacityReservationSelectorTerms"
LARGE = instance_type("m5.large", "2", "8Gi", od=0.096, zones=("us-east-1a", "us-east-1b"))


def condition(decisions, pool="default"):
    entry = next(p for p in decisions["nodePools"] if p["name"] == pool)
    return next(c for c in entry["conditions"] if c["type"] == "ReservedCapacityAvailable")


# --- selector terms with groups -----------------------------------------------------------------

def test_group_terms_valid_invalid_and_mixed_have_per_term_messages():
    terms = [
        {"resourceGroupARN": ARN},
        {"resourceGroupARN": "arn:aws:resource-groups:us-east-1:123:group/short-account"},
        {"resourceGroupARN": ARN, "tags": {"team": "ml"}},
        {"tags": {"team": "ml"}},
        {"resourceGroupARN": "arn:aws:ec2:us-east-1:123456789012:capacity-reservation/cr-0abc"},
    ]
    parsed, problems = parse_terms(terms, P)
    assert parsed[0].resource_group_arn == ARN
    assert problems == [
        f'{P}[1].resourceGroupARN: "arn:aws:resource-groups:us-east-1:123:group/short-account" does not match '
        r"^arn:aws[a-z-]*:resource-groups:[a-z0-9-]+:[0-9]{12}:group/[A-Za-z0-9._-]+$",
        f"{P}[2].resourceGroupARN: must be alone in its term, but the term also sets tags",
        f'{P}[4].resourceGroupARN: "arn:aws:ec2:us-east-1:123456789012:capacity-reservation/cr-0abc" does not match '
        r"^arn:aws[a-z-]*:resource-groups:[a-z0-9-]+:[0-9]{12}:group/[A-Za-z0-9._-]+$",
    ]
    assert parse_terms([{"resourceGroupARN": "arn:aws-us-gov:resource-groups:us-gov-west-1:123456789012:group/g.1"}], P)[1] == []


def test_invalid_group_term_makes_the_class_invalid_in_simulate():
    doc = world(instance_types=[LARGE], reservations=[reservation("cr-1", "m5.large")],
                node_classes=[node_class("default", [{"resourceGroupARN": ARN, "tags": {"team": "ml"}}])],
                pods=[pod("p", "1", "1Gi")])
    decisions = simulate(doc)
    cond = decisions["nodeClasses"][0]["conditions"][0]
    assert (cond["status"], cond["reason"]) == ("False", "InvalidSelectorTerms")
    assert "spec.capacityReservationSelectorTerms[0].resourceGroupARN: must be alone in its term" in cond["message"]
    assert decisions["nodeClaims"] == []


def group_world(members, *, terms=None, annotations=None, pods=1, groups=None):
    nc = node_class("default", terms if terms is not None else [{"resourceGroupARN": ARN}])
    if annotations:
        nc["metadata"]["annotations"] = annotations
    doc = world(instance_types=[LARGE], reservations=members, node_classes=[nc],
                node_pools=[node_pool(capacity_types=["reserved"])],
                pods=[pod(f"p{i}", "1500m", "1Gi") for i in range(pods)])
    doc["capacityReservationGroups"] = groups if groups is not None else [
        {"GroupArn": ARN, "CapacityReservationIds": [m["CapacityReservationId"] for m in members]}]
    return doc


def test_a_group_term_selects_its_members_and_launches_target_the_group():
    members = [reservation("cr-a", "m5.large", available=1), reservation("cr-b", "m5.large", available=1),
               reservation("cr-c", "m5.large", zone="us-east-1b", available=1)]
    outsider = reservation("cr-x", "m5.large", available=5)
    doc = group_world(members, pods=3)
    doc["capacityReservations"].append(outsider)
    decisions = simulate(doc)
    selected = [r["id"] for r in decisions["nodeClasses"][0]["capacityReservations"]]
    assert selected == ["cr-a", "cr-b", "cr-c"]
    launches = sorted((c["launch"]["reservationID"], c["launch"].get("reservationGroupARN")) for c in decisions["nodeClaims"])
    # cr-a and cr-b are two reservations of one type and zone: EC2 may pick either, so the launch
    # names the group. cr-c is alone in us-east-1b: it is targeted by id.
    assert launches == [("cr-a", ARN), ("cr-b", ARN), ("cr-c", None)]


def test_no_group_target_without_a_group_term_or_a_sibling():
    members = [reservation("cr-a", "m5.large"), reservation("cr-b", "m5.large")]
    by_tags = group_world([dict(m, Tags=[{"Key": "team", "Value": "ml"}]) for m in members], terms=[{"tags": {"team": "ml"}}])
    assert all("reservationGroupARN" not in c["launch"] for c in simulate(by_tags)["nodeClaims"])
    expired_sibling = group_world([reservation("cr-a", "m5.large"), reservation("cr-b", "m5.large", state="expired")])
    claims = simulate(expired_sibling)["nodeClaims"]
    assert [c["launch"]["reservationID"] for c in claims] == ["cr-a"] and "reservationGroupARN" not in claims[0]["launch"]


def test_group_terms_from_the_karpweb_annotation():
    """On a cluster the group terms live in an annotation (Karpenter's CRD would prune the field);
    a `kubectl get ec2nodeclass -o json` world is read the same way."""
    members = [reservation("cr-a", "m5.large"), reservation("cr-b", "m5.large")]
    doc = group_world(members, terms=[], annotations={GROUPS_ANNOTATION: json.dumps([ARN])}, pods=2)
    decisions = simulate(doc)
    assert [r["id"] for r in decisions["nodeClasses"][0]["capacityReservations"]] == ["cr-a", "cr-b"]
    assert {c["launch"]["reservationGroupARN"] for c in decisions["nodeClaims"]} == {ARN}
    bad = group_world(members, terms=[], annotations={GROUPS_ANNOTATION: "not json"})
    with pytest.raises(WorldError) as exc:
        simulate(bad)
    assert f"ec2NodeClasses[0].metadata.annotations.{GROUPS_ANNOTATION}: expected a JSON list of resource group ARNs" in str(exc.value)


def test_split_and_merge_terms_round_trip():
    terms = [{"tags": {"team": "ml"}}, {"resourceGroupARN": ARN}, {"id": "cr-0abc"}, {"resourceGroupARN": OTHER_ARN}]
    spec, arns = split_terms(terms)
    assert spec == [{"tags": {"team": "ml"}}, {"id": "cr-0abc"}] and arns == [ARN, OTHER_ARN]
    value = annotation_value(arns)
    assert parse_annotation(value) == ([ARN, OTHER_ARN], None)
    merged = merge_terms(spec, {GROUPS_ANNOTATION: value})
    assert merged == [{"tags": {"team": "ml"}}, {"id": "cr-0abc"}, {"resourceGroupARN": ARN}, {"resourceGroupARN": OTHER_ARN}]
    assert group_arns(merged) == [ARN, OTHER_ARN]
    assert annotation_value([]) is None and merge_terms(spec, {}) is spec
    assert merge_terms([{"resourceGroupARN": ARN}], {GROUPS_ANNOTATION: json.dumps([ARN])}) == [{"resourceGroupARN": ARN}]


# --- ReservedCapacityAvailable on NodePools -----------------------------------------------------

def pool_world(available, total, pods, capacity_types=("reserved",)):
    return world(instance_types=[LARGE],
                 reservations=[reservation("cr-1", "m5.large", available=available, total=total, tags={"team": "ml"})],
                 node_pools=[node_pool(capacity_types=list(capacity_types))],
                 pods=[pod(f"p{i}", "1500m", "1Gi") for i in range(pods)])


def test_condition_goes_false_while_pods_wait_and_back_to_true_when_capacity_frees():
    first = simulate(pool_world(available=0, total=2, pods=1))
    assert placement(first)["default/p0"] == ("unschedulable", "reservation cr-1 is full (2/2)")
    cond = condition(first)
    assert (cond["status"], cond["reason"]) == ("False", "LimitExceeded")
    assert cond["message"] == "1 pod(s) could use reserved capacity but every compatible reservation is used: cr-1 0 of 0 usable unit(s) free"
    # A node went away: EC2 reports a free unit on the next run, the pod gets it, nobody waits.
    second = simulate(pool_world(available=1, total=2, pods=1))
    assert placement(second)["default/p0"][1]["launch"]["reservationID"] == "cr-1"
    cond = condition(second)
    assert (cond["status"], cond["reason"]) == ("True", "Available")
    assert "no pending pod waits" in cond["message"]
    third = simulate(pool_world(available=2, total=2, pods=1))
    assert condition(third) == {"type": "ReservedCapacityAvailable", "status": "True", "reason": "Available",
                                "message": "after this plan: cr-1 1 of 2 usable unit(s) free"}


def test_deferred_pods_and_fallbacks_count_as_waiting():
    deferred = simulate(pool_world(available=1, total=1, pods=2))
    assert [d["pod"] for d in deferred["deferred"]] == ["default/p1"]
    assert condition(deferred)["reason"] == "LimitExceeded"
    fallback = simulate(pool_world(available=1, total=1, pods=2, capacity_types=("reserved", "on-demand")))
    assert sorted(c["launch"]["capacityType"] for c in fallback["nodeClaims"]) == ["on-demand", "reserved"]
    cond = condition(fallback)
    assert (cond["status"], cond["reason"]) == ("False", "LimitExceeded") and cond["message"].startswith("1 pod(s)")


def test_a_full_reservation_with_nothing_pending_is_not_an_alarm():
    cond = condition(simulate(pool_world(available=0, total=2, pods=0)))
    assert (cond["status"], cond["reason"]) == ("True", "Available")
    too_big = world(instance_types=[LARGE], reservations=[reservation("cr-1", "m5.large", available=0, total=2, tags={"team": "ml"})],
                    node_pools=[node_pool(capacity_types=["reserved", "on-demand"])], pods=[pod("huge", "64", "1Gi")])
    decisions = simulate(too_big)
    assert decisions["unschedulable"][0]["pod"] == "default/huge"
    assert condition(decisions)["status"] == "True"  # no reserved type could hold it anyway


# --- open matching: counted by EC2, never relabelled --------------------------------------------

def test_an_on_demand_instance_inside_an_open_reservation_is_not_demoted_or_drifted():
    """Open mode: EC2 put an on-demand instance into open reservation cr-open. The node keeps its
    on-demand labels, the reservation's count already includes it, and nothing relabels it."""
    labels = {"karpenter.sh/capacity-type": "on-demand", "karpenter.sh/nodepool": "default",
              "node.kubernetes.io/instance-type": "m5.large", "topology.kubernetes.io/zone": "us-east-1a"}
    od = node("od-1", cpu="2", memory="8Gi", labels=labels)
    od["spec"]["providerID"] = "aws:///us-east-1a/i-0open"
    od["metadata"]["creationTimestamp"] = "2026-11-21T10:00:00Z"
    doc = world(instance_types=[LARGE], nodes=[od], pods=[pod("busy", "1", "1Gi", node="od-1")],
                reservations=[reservation("cr-open", "m5.large", available=2, total=3, criteria="open")],
                node_classes=[node_class("default", [{"instanceMatchCriteria": "open"}])],
                node_pools=[node_pool(capacity_types=["reserved", "on-demand"])])
    doc["instances"] = [{"InstanceId": "i-0open", "InstanceType": "m5.large", "State": {"Name": "running"},
                         "Placement": {"AvailabilityZone": "us-east-1a"}, "CapacityReservationId": "cr-open",
                         "CapacityReservationSpecification": {"CapacityReservationPreference": "open"}}]
    decisions = simulate(doc)
    assert decisions["demotions"] == []
    assert [d for d in decisions["disruptions"] if d["reason"] == "drift"] == []
    assert decisions["nodeClasses"][0]["capacityReservations"][0]["id"] == "cr-open"


def test_two_simulate_command_runs_false_then_true(tmp_path):
    """`python manage.py simulate` on the world before and after a unit frees up."""
    import io

    from django.core.management import call_command

    def run(doc):
        path = tmp_path / "world.json"
        path.write_text(json.dumps(doc))
        out = io.StringIO()
        call_command("simulate", str(path), stdout=out)
        return json.loads(out.getvalue())

    full = run(pool_world(available=0, total=2, pods=2))
    assert [c["type"] for c in full["nodePools"][0]["conditions"]] == ["ReservedCapacityAvailable"]
    assert (condition(full)["status"], condition(full)["reason"]) == ("False", "LimitExceeded")
    freed = run(pool_world(available=2, total=2, pods=2))
    assert (condition(freed)["status"], condition(freed)["reason"]) == ("True", "Available")
    assert sorted(c["launch"]["reservationID"] for c in freed["nodeClaims"]) == ["cr-1", "cr-1"]
