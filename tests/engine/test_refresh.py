"""engine/refresh.py: the NodePool and EC2NodeClass hashes, drift reasons in upstream's order,
expiry, node repair policies; and the engine acting on Drifted NodeClaims within budgets, with
never-initialized nodes counted as upstream counts them."""

from datetime import datetime, timedelta, timezone

import pytest

from scheduling.engine import refresh
from scheduling.engine.requirements import Requirement, Requirements
from scheduling.engine.simulate import simulate

from .builders import instance_type, node_class, world
from .lifecycle_builders import bound, dpool, knode

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=timezone.utc)
M5L = instance_type("m5.large", "2", "8Gi", od=0.096, spot=0.035)
TAINT = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
REF = {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}


def pool_hash(**changes):
    fields = {"labels": {"team": "a"}, "annotations": {}, "taints": [TAINT], "startup_taints": [],
              "node_class_ref": REF, "expire_after": "720h"} | changes
    return refresh.nodepool_hash(**fields)


# hashes (nodepool_test "Static Drift" / ec2nodeclass hash_test) ----------------------------------


@pytest.mark.parametrize("field, value", [
    ("labels", {"team": "b"}), ("annotations", {"note": "x"}), ("taints", []),
    ("startup_taints", [TAINT]), ("node_class_ref", {**REF, "name": "other"}), ("expire_after", "24h"),
    ("termination_grace_period", "1h"),
])
def test_nodepool_hash_changes_with_each_hashed_template_field(field, value):
    assert pool_hash(**{field: value}) != pool_hash()


def test_nodepool_hash_ignores_list_order_and_empty_values():
    other = {"key": "b", "effect": "NoExecute"}
    assert pool_hash(taints=[TAINT, other]) == pool_hash(taints=[other, TAINT])
    assert pool_hash(termination_grace_period="") == pool_hash() == pool_hash(annotations={})


def test_nodeclass_hash_ignores_selector_terms_and_dynamic_fields():
    spec = {"role": "R", "amiSelectorTerms": [{"alias": "al2023@latest"}], "tags": {"a": "1"}}
    same = refresh.nodeclass_hash(spec)
    assert refresh.nodeclass_hash({**spec, "amiSelectorTerms": [{"id": "ami-1"}], "kubelet": {"maxPods": 5},
                                   "subnetSelectorTerms": [{"id": "subnet-1"}]}) == same
    assert refresh.nodeclass_hash({**spec, "tags": {"a": "2"}}) != same
    assert refresh.nodeclass_hash({**spec, "userData": "echo hi"}) != same


# drift reasons ------------------------------------------------------------------------------------

LABELS = {"karpenter.sh/nodepool": "default", "node.kubernetes.io/instance-type": "m5.large",
          "karpenter.sh/capacity-type": "on-demand", "topology.kubernetes.io/zone": "us-east-1a",
          "kubernetes.io/arch": "amd64"}
OFFERINGS = {"m5.large": [{"topology.kubernetes.io/zone": "us-east-1a", "karpenter.sh/capacity-type": "on-demand"}]}
AMIS = [{"id": "ami-new", "requirements": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
                                           {"key": "karpenter.k8s.aws/instance-gpu-count", "operator": "DoesNotExist"}]},
        {"id": "ami-arm", "requirements": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]}]}]
STATUS = refresh.ClassStatus(amis=AMIS, subnet_ids=frozenset({"subnet-a"}), security_group_ids=frozenset({"sg-1", "sg-2"}))
INSTANCE = refresh.InstanceFacts("ami-new", "subnet-a", ("sg-2", "sg-1"))


def drift(*, annotations=None, labels=LABELS, pool_hash_now="h1", class_hash_now="c1", requirements=None,
          offerings=OFFERINGS, image="ami-new", instance=INSTANCE, status=STATUS, age=timedelta(hours=2)):
    claim = refresh.ClaimFacts("c", labels, annotations if annotations is not None else {
        **refresh.hash_annotations("h1", "c1")}, NOW - age, image)
    found = refresh.node_drift(
        claim, pool_hash=pool_hash_now, pool_requirements=requirements or Requirements(), offerings_by_type=offerings,
        type_labels={"kubernetes.io/arch": "amd64"}, class_hash=class_hash_now, status=status, instance=instance, now=NOW)
    return found.reason if found else None


def test_should_not_detect_drift_when_nothing_changed():
    assert drift() is None


def test_should_detect_static_drift_nodepool_drifted():
    assert drift(pool_hash_now="h2") == "NodePoolDrifted"


def test_should_not_detect_static_drift_if_the_hash_versions_differ():
    annotations = {**refresh.hash_annotations("h1", "c1"), refresh.NODEPOOL_HASH_VERSION: "v2"}
    assert drift(annotations=annotations, pool_hash_now="h2") is None


def test_should_return_drifted_if_the_nodeclaim_labels_dont_match_the_nodepool_requirements():
    requirements = Requirements([Requirement.of("topology.kubernetes.io/zone", "In", ["us-east-1b"])])
    assert drift(requirements=requirements) == "RequirementsDrifted"


def test_should_return_drifted_if_the_instance_type_or_its_offering_is_gone():
    assert drift(offerings={}) == "InstanceTypeNotFound"
    spot_only = {"m5.large": [{"topology.kubernetes.io/zone": "us-east-1a", "karpenter.sh/capacity-type": "spot"}]}
    assert drift(offerings=spot_only) == "InstanceTypeNotFound"
    assert drift(offerings={}, age=timedelta(minutes=30)) is None  # upstream checks from an hour after creation


def test_a_reserved_nodeclaim_is_not_drifted_while_an_on_demand_offering_remains():
    reserved = {**LABELS, "karpenter.sh/capacity-type": "reserved",
                "karpenter.k8s.aws/capacity-reservation-id": "cr-gone"}
    assert drift(labels=reserved) is None


def test_should_detect_nodeclass_static_drift():
    assert drift(class_hash_now="c2") == "NodeClassDrift"


def test_should_return_drifted_if_the_ami_is_not_valid():
    assert drift(image="ami-old") == "AMIDrift"
    assert drift(image="ami-arm") == "AMIDrift"  # resolved, but not for this instance type's architecture


def test_should_not_drift_when_the_class_resolved_no_amis():
    assert drift(image="ami-old", status=refresh.ClassStatus(amis=())) is None


def test_should_return_drifted_if_the_security_groups_or_subnet_are_drifted():
    assert drift(instance=refresh.InstanceFacts("ami-new", "subnet-a", ("sg-1",))) == "SecurityGroupDrift"
    assert drift(instance=refresh.InstanceFacts("ami-new", "subnet-b", ("sg-1", "sg-2"))) == "SubnetDrift"


def test_drift_reasons_come_in_upstreams_order():
    """Static and requirement drift first, then the instance type, then the class (hash, AMI, groups, subnet)."""
    requirements = Requirements([Requirement.of("topology.kubernetes.io/zone", "In", ["us-east-1b"])])
    assert drift(pool_hash_now="h2", requirements=requirements, image="ami-old") == "NodePoolDrifted"
    assert drift(requirements=requirements, image="ami-old") == "RequirementsDrifted"
    assert drift(class_hash_now="c2", image="ami-old") == "NodeClassDrift"
    assert drift(image="ami-old", instance=refresh.InstanceFacts("", "subnet-b", ())) == "AMIDrift"


# expiry and repair ---------------------------------------------------------------------------------


def test_expired_at_exactly_expire_after_and_never_with_never():
    created = NOW - timedelta(hours=720)
    assert refresh.expired(created, timedelta(hours=720), NOW)
    assert not refresh.expired(created + timedelta(seconds=1), timedelta(hours=720), NOW)
    assert not refresh.expired(created - timedelta(days=900), None, NOW)


@pytest.mark.parametrize("condition, minutes, due", [
    (("Ready", "False"), 29, False), (("Ready", "False"), 30, True), (("Ready", "Unknown"), 31, True),
    (("AcceleratedHardwareReady", "False"), 10, True), (("KernelReady", "False"), 29, False),
    (("Ready", "True"), 600, False), (("MemoryPressure", "True"), 600, False),
])
def test_repair_policies_and_their_tolerations(condition, minutes, due):
    since = NOW - timedelta(minutes=minutes)
    assert (refresh.due_repair([(*condition, since)], None, NOW) is not None) == due


@pytest.mark.parametrize("unhealthy, nodes, allowed", [(1, 3, True), (1, 5, True), (2, 5, False), (2, 6, True), (1, 1, True)])
def test_repair_allows_up_to_20_percent_rounded_up(unhealthy, nodes, allowed):
    assert refresh.repair_allowed(unhealthy, nodes) == allowed


# the engine acts on Drifted claims within the Drifted budget ---------------------------------------


def drifted_world(budget, *, initialized_nodes=3, stuck=0):
    nodes = [knode(f"n{i}", "m5.large", extra_labels={"karpenter.sh/initialized": "true"})
             for i in range(initialized_nodes)]
    nodes += [knode(f"stuck{i}", "m5.large", ready=False) for i in range(stuck)]
    claims = [{"metadata": {"name": f"claim-n{i}"}, "status": {"nodeName": f"n{i}", "conditions": [
        {"type": "Drifted", "status": "True", "reason": "AMIDrift", "message": "new image"}]}}
        for i in range(initialized_nodes)]
    doc = world(instance_types=[M5L], node_classes=[node_class("default", [])],
                node_pools=[dpool(capacity_types=["on-demand"], budgets=[{"nodes": budget}], after="Never")],
                nodes=nodes, pods=[bound(f"p{i}", f"n{i}", "1500m") for i in range(initialized_nodes)])
    doc["nodeClaims"] = claims
    return [d for d in simulate(doc)["disruptions"] if d["reason"] == "drift"]


def test_drifted_nodes_are_replaced_within_the_drifted_budget():
    one = drifted_world("1")
    assert len(one) == 1 and one[0]["action"] == "replace" and one[0]["driftReason"] == "AMIDrift"
    assert drifted_world("0") == []
    # A larger budget still replaces one non-empty drifted node per pass (upstream drift.go; issue #49).
    assert len(drifted_world("2")) == 1


def test_a_never_initialized_node_does_not_use_up_the_budget():
    """disruption helpers BuildDisruptionBudgetMapping: uninitialized nodes are skipped."""
    assert len(drifted_world("1", stuck=2)) == 1
