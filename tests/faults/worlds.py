"""A small world for the loop against the EC2 test server: one reservation, a class selecting it,
a NodePool allowing reserved and on-demand m5.large in one zone, and pending pods that each need a
node of their own."""

from reservations.models import EC2NodeClass
from scheduling.adapters.ec2.sync import sync_catalogue, sync_reservations
from scheduling.models import Mode, NodePool, Pod

ZONE = "us-east-1a"
AMI = "ami-12c6146b"  # an image moto knows


def pending_pod(name: str, cpu: str = "1500m") -> Pod:
    spec = {"containers": [{"name": "app", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]}
    return Pod.objects.create(namespace="default", name=name, uid=f"uid-{name}", spec=spec, phase="Pending",
                              cpu_request_millicores=1500, memory_request_bytes=2**30,
                              owner_kind="ReplicaSet", owner_name="app-1")


def launchable_spec(provider) -> dict:
    """An EC2NodeClass spec as Karpenter users write it, on moto's default VPC: the image by id, the
    zone's default subnet and the default security group by id, an existing instance profile."""
    subnet = provider.ec2.describe_subnets(Filters=[{"Name": "availability-zone", "Values": [ZONE]}])["Subnets"][0]
    group = provider.ec2.describe_security_groups(GroupNames=["default"])["SecurityGroups"][0]
    return {"amiSelectorTerms": [{"id": AMI}], "subnetSelectorTerms": [{"id": subnet["SubnetId"]}],
            "securityGroupSelectorTerms": [{"id": group["GroupId"]}], "instanceProfile": "KarpenterNodeInstanceProfile"}


def build(world, provider, now, *, units: int = 2, pods: int = 1, pool: str = "general", node_class: str = "default") -> str:
    """The world on the server and in the database, synced once; returns the reservation id."""
    sync_catalogue(provider, now=now)
    reservation = world.add_reservation("m5.large", ZONE, units, tags={"team": "ml"})
    nc = EC2NodeClass.objects.create(
        name=node_class, capacity_reservation_selector_terms=[{"id": reservation}], spec=launchable_spec(provider),
    )
    NodePool.objects.create(
        name=pool, node_class=nc, mode=Mode.CONTROL, requirements=[
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["reserved", "on-demand"]},
            {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large"]},
            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [ZONE]},
        ],
    )
    for index in range(pods):
        pending_pod(f"app-{index}")
    stats = sync_reservations(provider, now=now)
    assert stats.errors == [], stats.errors
    return reservation
