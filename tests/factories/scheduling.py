import factory
from django.utils import timezone

from scheduling.models import CapacityType, Decision, InstanceType, Mode, Node, NodeClaim, NodePool, Offering, Pod
from tests.factories.reservations import EC2NodeClassFactory


class InstanceTypeFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = InstanceType
        django_get_or_create = ("name",)

    name = factory.Sequence(lambda n: f"m5.{n}xlarge")
    cpu_millicores = 4000
    memory_bytes = 16 * 2**30
    max_pods = 58
    family = "m5"


class OfferingFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Offering

    instance_type = factory.SubFactory(InstanceTypeFactory)
    capacity_type = CapacityType.ON_DEMAND
    zone = "us-east-1a"
    price = 0.192


class NodePoolFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = NodePool
        django_get_or_create = ("name",)

    name = factory.Sequence(lambda n: f"pool-{n}")
    weight = 10
    node_class = factory.SubFactory(EC2NodeClassFactory)
    requirements = factory.LazyFunction(
        lambda: [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["reserved", "on-demand"]}]
    )
    limits = factory.LazyFunction(lambda: {"cpu": "100"})


class NodeClaimFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = NodeClaim

    name = factory.Sequence(lambda n: f"claim-{n}")
    node_pool = factory.SubFactory(NodePoolFactory)
    instance_type = "m5.large"
    zone = "us-east-1a"
    capacity_type = CapacityType.ON_DEMAND
    created_at = factory.LazyFunction(timezone.now)


class NodeFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Node

    name = factory.Sequence(lambda n: f"node-{n}.test.internal")
    node_pool = factory.SubFactory(NodePoolFactory)
    instance_type = "m5.large"
    zone = "us-east-1a"
    capacity_type = CapacityType.ON_DEMAND
    allocatable_cpu_millicores = 1920
    allocatable_memory_bytes = 7 * 2**30
    provider_id = factory.Sequence(lambda n: f"aws:///us-east-1a/i-{n:017x}")
    ready = True


class PodFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Pod

    namespace = "default"
    name = factory.Sequence(lambda n: f"web-{n}")
    cpu_request_millicores = 500
    memory_request_bytes = 512 * 2**20
    spec = factory.LazyFunction(
        lambda: {"containers": [{"name": "app", "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}}}]}
    )


class DecisionFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Decision

    kind = Decision.Kind.LAUNCH
    mode = Mode.OBSERVE
    subject = "pod default/web-1"
    reason = "pod web-1 went to reserved: reservation cr-0abc has room (2/4 free)"
