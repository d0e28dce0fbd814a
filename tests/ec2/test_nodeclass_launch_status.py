"""The loop with the EC2 provider on the EC2 test server: after the EC2 sync each launch-configured
EC2NodeClass carries what its launches resolve to and Karpenter's conditions; a class that is not
Ready stops its NodePool (the engine's plan, the pool's Ready condition and the page say why); a
Ready one takes a pending pod to an instance launched from the resolved image, subnet and groups."""

import pytest
from django.urls import reverse

from reservations.models import EC2NodeClass
from scheduling.loop import provisioning
from scheduling.loop.engine_run import simulate_readable
from scheduling.loop.nodeclass_launch import refresh_launch_status
from scheduling.loop.simulated import SimulatedCluster
from scheduling.loop.steps import ready_condition
from scheduling.models import NodePool
from scheduling.world import current_world
from tests.faults import worlds
from tests.support.ec2_fixtures import *  # noqa: F403 - the EC2 test server and providers

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _aws(aws_test_credentials, settings):
    settings.KARPWEB_PROVIDER = "aws"
    settings.KARPWEB_MODE = "control"


def conditions(node_class):
    node_class.refresh_from_db()
    return {c["type"]: (c["status"], c["reason"]) for c in node_class.conditions}


def test_a_class_that_is_not_ready_stops_its_pool_and_says_why(world, clock, provider, raw_ec2, operator_client):
    worlds.build(world, provider, clock(), units=1, pods=1)
    node_class = EC2NodeClass.objects.get(name="default")
    node_class.spec = {**node_class.spec, "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "nowhere"}}]}
    node_class.save()

    assert refresh_launch_status(provider, SimulatedCluster(), clock()) == {"node_classes_launch_changed": 1}
    assert conditions(node_class)["SubnetsReady"] == ("False", "SubnetsNotFound")
    assert conditions(node_class)["Ready"] == ("False", "UnhealthyDependents")
    assert conditions(node_class)["AMIsReady"] == ("True", "AMIsReady")

    plan = simulate_readable(current_world(clock()), clock())
    assert plan["nodeClaims"] == []
    [pool] = [p for p in plan["nodePools"] if p["name"] == "general"]
    [not_ready] = [c for c in pool["conditions"] if c["type"] == "NodeClassReady"]
    assert not_ready["status"] == "False" and "EC2NodeClass default is not ready" in not_ready["message"]
    assert "spec.subnetSelectorTerms selects no subnet" in not_ready["message"]
    ready = ready_condition(NodePool.objects.get(name="general"))  # as upstream: the root over its dependents
    assert (ready.status, ready.reason, ready.message) == ("False", "UnhealthyDependents", "NodeClassReady=False")
    from scheduling.nodepool_health import health

    assert "SubnetsNotFound" in health(NodePool.objects.get(name="general")).why_not_ready

    page = operator_client.get(reverse("reservations:nodeclass", args=["default"])).content.decode()
    assert "SubnetsNotFound" in page and "spec.subnetSelectorTerms selects no subnet" in page
    fleets = len(world.calls_of("CreateFleet"))
    counts = provisioning.provision(provider, SimulatedCluster(), now=clock())
    assert counts["launched"] == 0 and len(world.calls_of("CreateFleet")) == fleets
    assert refresh_launch_status(provider, SimulatedCluster(), clock()) == {"node_classes_launch_changed": 0}


def test_a_ready_class_takes_a_pending_pod_to_a_resolved_instance(world, clock, provider, raw_ec2, operator_client):
    worlds.build(world, provider, clock(), units=1, pods=1)
    node_class = EC2NodeClass.objects.get(name="default")
    refresh_launch_status(provider, SimulatedCluster(), clock())
    assert conditions(node_class)["Ready"] == ("True", "Ready")
    node_class.refresh_from_db()
    status = node_class.status_launch
    assert [a["id"] for a in status["amis"]] == [worlds.AMI]
    assert status["subnets"][0]["zone"] == worlds.ZONE and status["instanceProfile"] == "KarpenterNodeInstanceProfile"
    page = operator_client.get(reverse("reservations:nodeclass", args=["default"])).content.decode()
    assert worlds.AMI in page and status["subnets"][0]["id"] in page and status["securityGroups"][0]["id"] in page

    counts = provisioning.provision(provider, SimulatedCluster(), now=clock())
    assert counts["launched"] == 1
    [instance] = [i for r in raw_ec2.describe_instances(Filters=[
        {"Name": "tag:karpenter.k8s.aws/ec2nodeclass", "Values": ["default"]}])["Reservations"] for i in r["Instances"]]
    assert instance["ImageId"] == worlds.AMI and instance["SubnetId"] == status["subnets"][0]["id"]
    assert {g["GroupId"] for g in instance["SecurityGroups"]} == {status["securityGroups"][0]["id"]}
    tags = {t["Key"]: t["Value"] for t in instance["Tags"]}
    assert tags["eks:eks-cluster-name"] == "karpweb-test" and tags["karpenter.sh/nodepool"] == "general"
