"""#50: prices that know the account's zonal Reserved Instances and Savings Plans, end to end: the loop's
EC2 step reads them through boto3 from the EC2 test server (DescribeReservedInstances, savingsplans
DescribeSavingsPlans / DescribeSavingsPlanRates), the plan places pods at the effective price and says
which price each figure uses, and without permission to read them prices stay list prices, said on
the fleet overview."""

from datetime import timedelta

import pytest
from django.urls import reverse

from reservations.models import EC2NodeClass, PriceCommitments
from scheduling.adapters.ec2.sync import sync_catalogue
from scheduling.loop import provisioning, steps
from scheduling.loop.karpenter_audit import audit_new_claims
from scheduling.loop.engine_run import simulate_readable
from scheduling.loop import simulated
from scheduling.loop.simulated import SimulatedCluster
from scheduling.models import Decision, KarpenterLaunch, Mode, Node, NodeClaim, NodePool
from scheduling.world import current_world
from tests.faults.worlds import AMI, pending_pod
from tests.support.ec2_fixtures import *  # noqa: F403 - the EC2 test server and providers
from tests.support.ec2_fixtures import REGION
from tests.support.ec2_server_commitments import SAVINGS_PLANS

pytestmark = pytest.mark.django_db
ZONES = ("us-east-1a", "us-east-1b")


@pytest.fixture(autouse=True)
def _aws(aws_test_credentials, settings, provider, monkeypatch):
    settings.KARPWEB_PROVIDER = "aws"
    settings.KARPWEB_MODE = "control"
    settings.KARPWEB_AWS_REGION = REGION
    from scheduling.loop import backends

    monkeypatch.setattr(backends, "cloud", lambda: provider)  # the loop's EC2 provider, on the test server


def spec_in_both_zones(provider) -> dict:
    subnets = provider.ec2.describe_subnets(Filters=[{"Name": "availability-zone", "Values": list(ZONES)}])["Subnets"]
    group = provider.ec2.describe_security_groups(GroupNames=["default"])["SecurityGroups"][0]
    return {"amiSelectorTerms": [{"id": AMI}], "subnetSelectorTerms": [{"id": s["SubnetId"]} for s in subnets],
            "securityGroupSelectorTerms": [{"id": group["GroupId"]}], "instanceProfile": "KarpenterNodeInstanceProfile"}


@pytest.fixture
def pool(world, clock, provider, time_machine):
    """A NodePool of on-demand m5.large or m5.xlarge in two zones, and a pod that fits either (the m5.large
    is the cheaper at list price: $0.096/h against $0.192/h)."""
    time_machine.move_to(clock(), tick=False)
    sync_catalogue(provider, now=clock())
    node_class = EC2NodeClass.objects.create(name="default", spec=spec_in_both_zones(provider))
    NodePool.objects.create(name="general", node_class=node_class, mode=Mode.CONTROL, requirements=[
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large", "m5.xlarge"]},
        {"key": "topology.kubernetes.io/zone", "operator": "In", "values": list(ZONES)}])
    pending_pod("app-0")
    return node_class


def planned(clock) -> list[tuple]:
    plan = simulate_readable(current_world(clock()), clock())
    return [(c["launch"]["instanceType"], c["launch"]["zone"], c["launch"].get("priceBasis", "list"), c["launch"]["price"])
            for c in plan["nodeClaims"]]


def test_without_commitments_the_plan_is_at_list_price(pool, world, clock):
    steps.sync_ec2(clock())
    assert planned(clock) == [("m5.large", "us-east-1a", "list", 0.096)]
    assert PriceCommitments.objects.get().list_prices_because == []


def test_a_zonal_reserved_instance_takes_the_pod_to_its_type_and_zone(pool, world, clock, provider, raw_ec2):
    world.add_reserved_instances("m5.xlarge", "us-east-1b", 1)
    world.add_reserved_instances("m5.large", "us-east-1a", 3, scope="Region")  # a regional RI: no placement's
    steps.sync_ec2(clock())
    [(itype, zone, basis, price)] = planned(clock)
    assert (itype, zone, basis) == ("m5.xlarge", "us-east-1b", "reserved-instance") and price < 1e-6
    # The launch itself goes there, as plain on-demand (an RI is a billing discount, not a capacity target).
    assert provisioning.provision(provider, SimulatedCluster(), now=clock())["launched"] == 1
    [instance] = [i for r in raw_ec2.describe_instances()["Reservations"] for i in r["Instances"]]
    assert (instance["InstanceType"], instance["Placement"]["AvailabilityZone"]) == ("m5.xlarge", "us-east-1b")
    assert "CapacityReservationId" not in instance
    # The decision says which price the launch was chosen at.
    [decision] = Decision.objects.filter(kind=Decision.Kind.LAUNCH, outcome=Decision.Outcome.ACTED)
    assert "a new m5.xlarge in us-east-1b (NodePool general), at $0 (a zonal Reserved Instance pays for it)" in decision.reason


def test_a_savings_plan_rate_changes_the_placement(pool, world, clock):
    world.add_savings_plan({"m5.xlarge": 0.05, "m5.large": 0.07}, commitment=1.0)
    steps.sync_ec2(clock())
    assert planned(clock) == [("m5.xlarge", "us-east-1a", "savings-plan", 0.05)]


def test_a_savings_plan_rate_decides_a_consolidation(pool, world, clock, provider):
    """A Savings Plan makes the m5.xlarge the cheaper ($0.05/h): the pod's node is one. While the plan lasts,
    replacing it with an m5.large ($0.096/h at list) saves nothing; once the plan has retired, it saves $0.096/h."""
    NodePool.objects.filter(name="general").update(consolidation_policy="WhenEmptyOrUnderutilized", consolidate_after="0s")
    plan = world.add_savings_plan({"m5.xlarge": 0.05}, commitment=1.0)
    steps.sync_ec2(clock())
    cluster = SimulatedCluster()
    assert provisioning.provision(provider, cluster, now=clock())["launched"] == 1
    simulated.bind_pending_pods(simulate_readable(current_world(clock()), clock()))
    assert list(Node.objects.values_list("instance_type", flat=True)) == ["m5.xlarge"]
    clock.advance(minutes=61)  # the node is old enough to consolidate, and the plan read again: still active
    steps.sync_ec2(clock())
    assert consolidations(clock) == []

    SAVINGS_PLANS[world.account_id][plan]["plan"]["state"] = "retired"
    clock.advance(minutes=61)  # the Savings Plans are read again after an hour
    steps.sync_ec2(clock())
    [(action, launch, saved)] = consolidations(clock)
    assert (action, launch["instanceType"], launch.get("priceBasis", "list")) == ("replace", "m5.large", "list")
    assert saved == pytest.approx(0.192 - 0.096)


def consolidations(clock) -> list[tuple]:
    plan = simulate_readable(current_world(clock()), clock())
    return [(d["action"], d.get("replacement", {}).get("launch", {}), d.get("savingsPerHour"))
            for d in plan["disruptions"] if d["reason"] == "consolidation"]


def test_without_permission_prices_stay_list_prices_and_the_overview_says_why(pool, world, clock, viewer_client):
    world.add_reserved_instances("m5.xlarge", "us-east-1b", 1)
    world.add_savings_plan({"m5.xlarge": 0.05})
    world.refuse_commitments(ri=True, sp=True)
    steps.sync_ec2(clock())
    assert planned(clock) == [("m5.large", "us-east-1a", "list", 0.096)]
    page = viewer_client.get(reverse("fleet_overview")).content.decode()
    assert ("prices: list prices (no permission to read Reserved Instances (ec2:DescribeReservedInstances: "
            "UnauthorizedOperation); no permission to read Savings Plans (savingsplans:DescribeSavingsPlans: "
            "AccessDeniedException))") in page
    cluster_page = viewer_client.get(reverse("scheduling:overview")).content.decode()
    assert "Prices: list prices (no permission to read Reserved Instances" in cluster_page


def test_the_overview_says_which_commitments_price_the_plan(pool, world, clock, viewer_client):
    world.add_reserved_instances("m5.xlarge", "us-east-1b", 2)
    world.add_savings_plan({"m5.xlarge": 0.05})
    steps.sync_ec2(clock())
    page = viewer_client.get(reverse("fleet_overview")).content.decode()
    assert "prices: with 2 zonal Reserved Instance units and 1 Savings Plan" in page
    cluster_page = viewer_client.get(reverse("scheduling:overview")).content.decode()
    assert "Prices: with 2 zonal Reserved Instance units and 1 Savings Plan." in cluster_page


# --- the Karpenter audit: a paid node's price at its basis --------------------------------------------------


def karpenters_claim(name, node_class, clock, itype="m5.large", zone="us-east-1a"):
    """A NodeClaim Karpenter launched (no karpweb provisioner label), long enough ago to be judged without pods."""
    return NodeClaim.objects.create(name=name, node_pool=NodePool.objects.get(name="general"), node_class=node_class,
                                    instance_type=itype, zone=zone, capacity_type="on-demand",
                                    created_at=clock() - timedelta(hours=1), labels={"karpenter.sh/nodepool": "general"})


def audited(name):
    row = KarpenterLaunch.objects.get(claim_name=name)
    return row.price_per_hour, row.price_basis


def test_the_audit_prices_karpenters_paid_nodes_at_their_basis_and_says_so(pool, world, clock, viewer_client):
    world.add_savings_plan({"m5.large": 0.06}, commitment=5.0)
    world.add_reserved_instances("m5.xlarge", "us-east-1b", 1)
    steps.sync_ec2(clock())
    karpenters_claim("k-listed", pool, clock, itype="m5.2xlarge")  # no commitment: list price
    karpenters_claim("k-sp", pool, clock)  # the Savings Plan's rate
    karpenters_claim("k-ri", pool, clock, itype="m5.xlarge", zone="us-east-1b")  # the zonal RI pays for it
    karpenters_claim("k-ri-2", pool, clock, itype="m5.xlarge", zone="us-east-1b")  # the RI has one unit: list
    audit_new_claims(clock())
    assert audited("k-listed") == (0.384, "list")
    assert audited("k-sp") == (0.06, "savings-plan")
    assert audited("k-ri") == (0.0, "reserved-instance")
    assert audited("k-ri-2") == (0.192, "list")
    page = viewer_client.get(reverse("scheduling:karpenter_audit")).content.decode()
    assert "$0.0600 (Savings Plan rate)" in page and "$0.0000 (Reserved Instance ($0 at the margin))" in page
    assert "$0.3840<" in page  # a list-price figure as before
    api = viewer_client.get("/api/v1/karpenter-launches/").json()
    assert {r["nodeClaim"]: r["priceBasis"] for r in api["results"]} == {
        "k-listed": "list", "k-sp": "savings-plan", "k-ri": "reserved-instance", "k-ri-2": "list"}


def test_without_commitments_the_audit_figures_stay_at_list_price(pool, world, clock):
    world.add_savings_plan({"m5.large": 0.06})
    world.refuse_commitments(ri=True, sp=True)
    steps.sync_ec2(clock())
    karpenters_claim("k-sp", pool, clock)
    audit_new_claims(clock())
    assert audited("k-sp") == (0.096, "list")
