"""WORLD.json parsing: Kubernetes- and EC2-shaped input, and every problem named by its JSON path."""

import json
from datetime import datetime, timezone

import pytest

from scheduling.engine import WorldError, load_json, parse_world, simulate

from .builders import instance_type, node, node_class, node_pool, pod, reservation, world


def problems(doc):
    with pytest.raises(WorldError) as info:
        parse_world(doc)
    return info.value.lines()


def test_bad_quantity_is_named_by_path():
    doc = world(instance_types=[instance_type("m5.large", "2", "8Gi")],
                pods=[pod("a"), pod("b"), pod("c"), pod("d", cpu="abc")])
    assert problems(doc) == ['pods[3].spec.containers[0].resources.requests.cpu: "abc" is not a quantity']


def test_all_problems_are_collected():
    bad_type = instance_type("m5.large", "two", "8Gi")
    bad_type["offerings"].append({"capacityType": "reserved", "zone": "us-east-1a", "price": 0})
    bad_type["offerings"].append({"capacityType": "spot", "price": -1})
    bad_pool = node_pool(requirements=[{"key": "zone", "operator": "Near", "values": ["x"]},
                                       {"key": "n", "operator": "Gt", "values": ["a"]}],
                         taints=[{"key": "k", "effect": "Sometimes"}])
    bad_pod = pod("p", memory="lots", tolerations=[{"key": "k", "operator": "Maybe"}])
    bad_pod["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "k", "operator": "In", "values": []}]}]}}}
    doc = world(instance_types=[bad_type], reservations=[{"CapacityReservationId": "r-1", "AvailableInstanceCount": "2"}],
                node_pools=[bad_pool], nodes=[node("n", cpu="x")], pods=[bad_pod, pod("p")])
    doc["now"] = "yesterday"
    doc["featureGates"] = {"ReservedCapacity": "yes"}
    lines = problems(doc)
    expected = [
        'world.now: "yesterday" is not a timestamp',
        'featureGates.ReservedCapacity: expected true or false, got "yes"',
        'instanceTypes[0].cpu: "two" is not a quantity',
        'instanceTypes[0].offerings[1].capacityType: "reserved": reserved offerings come from capacityReservations',
        "instanceTypes[0].offerings[2].zone: is required",
        "instanceTypes[0].offerings[2].price: expected a non-negative number",
        'capacityReservations[0].CapacityReservationId: "r-1" does not match ^cr-[0-9a-z]+$',
        "capacityReservations[0].InstanceType: is required",
        "capacityReservations[0].AvailabilityZone: is required",
        'capacityReservations[0].AvailableInstanceCount: expected an integer, got "2"',
        'nodePools[0].spec.template.spec.requirements[0].operator: unknown operator "Near" (expected one of In, NotIn, Exists, DoesNotExist, Gt, Lt, Gte, Lte)',
        "nodePools[0].spec.template.spec.requirements[1].operator: operator Gt needs exactly one integer value",
        'nodePools[0].spec.template.spec.taints[0].effect: "Sometimes" is not one of NoSchedule, PreferNoSchedule, NoExecute',
        'nodes[0].status.allocatable.cpu: "x" is not a quantity',
        'nodes[0].status.capacity.cpu: "x" is not a quantity',
        'pods[0].spec.containers[0].resources.requests.memory: "lots" is not a quantity',
        "pods[0].spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"
        ".matchExpressions[0].operator: operator In needs at least one value",
        'pods[0].spec.tolerations[0].operator: "Maybe" is not one of Equal, Exists',
        "pods[1].metadata.name: duplicate pod default/p",
    ]
    assert lines == expected


def test_structural_problems():
    assert problems([]) == ["world: expected a JSON object"]
    assert problems({"pods": {"a": 1}}) == ["pods: expected a list"]
    assert problems({"pods": [1]}) == ["pods[0]: expected an object"]
    assert problems({"pods": [{"metadata": {"name": "x"}, "spec": {}}]}) == ["pods[0].spec.containers: must list at least one container"]
    assert problems({"nodePools": [{"metadata": {}, "spec": {"template": {"spec": {}}}}]}) == [
        "nodePools[0].metadata.name: is required",
        "nodePools[0].spec.template.spec.nodeClassRef: is required",
        "nodePools[0].spec.template.spec.nodeClassRef.name: is required",
    ]
    assert problems({"instanceTypes": [{"name": "a", "cpu": 1}, {"name": "a", "cpu": 1, "memory": 1}]}) == [
        "instanceTypes[0].memory: is required (or a describeInstanceTypes entry of this name)",
        'instanceTypes[1].name: duplicate instance type "a"']


def test_invalid_json_is_a_world_error():
    with pytest.raises(WorldError) as info:
        load_json('{"pods": [}', "w.json")
    assert info.value.lines() == ["w.json: invalid JSON: Expecting value (line 1, column 11)"]


def test_kubectl_lists_and_describe_capacity_reservations_output():
    doc = world(instance_types=[instance_type("m5.large", "2", "8Gi")],
                reservations=[], pods=[])
    doc["pods"] = {"apiVersion": "v1", "kind": "List", "items": [pod("a"), pod("b")]}
    doc["nodePools"] = {"apiVersion": "v1", "kind": "List", "items": [node_pool(capacity_types=["reserved"])]}
    doc["capacityReservations"] = {"CapacityReservations": [reservation("cr-1", "m5.large", tags={"team": "ml"}, available=5)]}
    decisions = simulate(doc)
    assert len(decisions["nodeClaims"]) == 1
    assert decisions["nodeClaims"][0]["launch"]["reservationID"] == "cr-1"
    doc.pop("capacityReservations")
    doc["CapacityReservations"] = [reservation("cr-2", "m5.large", tags={"team": "ml"})]
    assert simulate(doc)["nodeClaims"][0]["launch"]["reservationID"] == "cr-2"
    with pytest.raises(WorldError) as info:
        parse_world({"pods": {"items": [{"metadata": {"name": "x"}, "spec": {"containers": [{"resources": {"requests": {"cpu": "?"}}}]}}]}})
    assert info.value.lines() == ['pods.items[0].spec.containers[0].resources.requests.cpu: "?" is not a quantity']


def test_ec2_timestamps_and_boto3_datetimes():
    item = reservation("cr-1", "m5.large", end="2026-11-21T13:00:00.000Z")
    parsed = parse_world({"now": "2026-11-21T12:00:00+00:00", "capacityReservations": [item]})
    assert parsed.reservations[0].end == datetime(2026, 11, 21, 13, tzinfo=timezone.utc)
    item["EndDate"] = datetime(2026, 11, 21, 14, tzinfo=timezone.utc)
    assert parse_world({"capacityReservations": [item]}, now=datetime(2026, 1, 1, tzinfo=timezone.utc)).reservations[0].end.hour == 14


def test_pod_requests_follow_kubernetes():
    spec = {
        "containers": [{"name": "a", "resources": {"requests": {"cpu": "200m"}, "limits": {"cpu": "1", "memory": "1Gi"}}},
                       {"name": "b", "resources": {"requests": {"cpu": "300m", "memory": "256Mi"}}}],
        "initContainers": [{"name": "sidecar", "restartPolicy": "Always", "resources": {"requests": {"cpu": "100m"}}},
                           {"name": "migrate", "resources": {"requests": {"cpu": "2", "memory": "64Mi"}}}],
        "overhead": {"cpu": "10m"},
    }
    parsed = parse_world({"pods": [{"metadata": {"name": "p"}, "spec": spec}]})
    requests = parsed.pods[0].requests
    # containers 500m + sidecar 100m = 600m, but the init step needs 2 + 100m; plus 10m overhead.
    assert requests["cpu"] == 2110
    assert requests["memory"] == 2**30 + 256 * 2**20  # a's memory request defaults to its limit
    assert requests["pods"] == 1


def test_terminal_pods_are_ignored_and_namespace_defaults():
    done = pod("done")
    done["status"] = {"phase": "Succeeded"}
    no_ns = pod("x")
    del no_ns["metadata"]["namespace"]
    parsed = parse_world({"pods": [done, no_ns]})
    assert [p.key for p in parsed.pods] == ["default/x"]


def test_invalid_selector_terms_are_a_condition_not_an_input_error():
    doc = world(instance_types=[instance_type("m5.large", "2", "8Gi")],
                node_classes=[node_class("default", [{"id": "xyz"}])], pods=[pod("a")])
    decisions = simulate(doc)
    condition = decisions["nodeClasses"][0]["conditions"][0]
    assert condition["status"] == "False" and condition["reason"] == "InvalidSelectorTerms"
    assert condition["message"] == 'spec.capacityReservationSelectorTerms[0].id: "xyz" does not match ^cr-[0-9a-z]+$'


def test_now_defaults_to_the_argument():
    parsed = parse_world({}, now=datetime(2030, 1, 1, tzinfo=timezone.utc))
    assert parsed.now.year == 2030


def test_world_error_message_joins_lines():
    error = WorldError([("a", "x"), ("b", "y")])
    assert str(error) == "a: x\nb: y"
    assert json.loads(json.dumps(error.problems)) == [["a", "x"], ["b", "y"]]
