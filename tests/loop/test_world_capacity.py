"""The world the loop plans from sizes nodes as they report themselves: types from EC2's answers
(the demo's), in-flight NodeClaims at what their EC2NodeClass makes of the type, nodes with the
extended resources they advertise."""

import pytest

from scheduling.adapters.ec2.catalogue import instance_type_info
from scheduling.adapters.ec2.sync import instance_type_row
from scheduling.demo import described_types
from scheduling.models import InstanceType
from scheduling.world import current_world
from tests.factories.reservations import EC2NodeClassFactory
from tests.factories.scheduling import NodeClaimFactory, NodeFactory

pytestmark = pytest.mark.django_db
MIB = 2**20


def synced(name: str) -> InstanceType:
    row = instance_type_row(instance_type_info(described_types()[name]), None)
    return InstanceType.objects.create(**row)


def by_name(world, kind):
    return {obj["metadata"]["name"]: obj for obj in world[kind]}


def test_in_flight_claims_count_what_their_node_will_report():
    synced("m5.large")
    plain = EC2NodeClassFactory(name="plain", spec={})
    capped = EC2NodeClassFactory(name="capped", spec={"kubelet": {"maxPods": 5}})
    NodeClaimFactory(name="claim-plain", node_class=plain, instance_type="m5.large")
    NodeClaimFactory(name="claim-capped", node_class=capped, instance_type="m5.large")
    world = current_world()
    types = {t["name"]: t for t in world["instanceTypes"]}
    assert types["m5.large"]["memory"] == str(7577 * MIB)  # 8192Mi less the 7.5 % VM overhead
    assert types["m5.large"]["resources"] == {"vpc.amazonaws.com/pod-eni": "9"}
    nodes = by_name(world, "nodes")
    plain_room = nodes["claim-plain"]["status"]["allocatable"]
    assert (plain_room["cpu"], plain_room["memory"], plain_room["pods"]) == ("1930m", str(6903 * MIB), "29")
    assert nodes["claim-capped"]["status"]["allocatable"]["pods"] == "5"


def test_nodes_advertise_their_own_extended_resources_else_their_types():
    synced("p5.48xlarge")
    NodeFactory(name="reports", instance_type="p5.48xlarge", allocatable_extended={"nvidia.com/gpu": 7})
    NodeFactory(name="silent", instance_type="p5.48xlarge")
    nodes = by_name(current_world(), "nodes")
    assert nodes["reports"]["status"]["allocatable"]["nvidia.com/gpu"] == "7"
    silent = nodes["silent"]["status"]["allocatable"]
    assert (silent["nvidia.com/gpu"], silent["vpc.amazonaws.com/efa"]) == ("8", "32")
