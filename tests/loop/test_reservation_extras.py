"""Issue 12 in the loop, on the simulated world (no Celery: the steps are called directly): open
mode launches that EC2 places in an open reservation (counted, reported, never relabelled), a launch
that targets a Capacity Reservation group, group members handed to the engine, and the
ReservedCapacityAvailable condition on NodePools and NodeClaims going False and back to True."""

import pytest
from django.urls import reverse
from django.utils import timezone

from reservations.groups import launch_group_arn, store_group, sync_groups
from reservations.models import CapacityReservation, CapacityReservationGroup, OpenReservationInstance
from scheduling.adapters.ec2.interface import CloudAPIError
from scheduling.loop import provisioning, steps
from scheduling.loop.simulated import SimulatedCloud, SimulatedCluster
from scheduling.models import CapacityType, Node, NodeClaim, NodePool, SimulatedInstance
from scheduling.world import current_world, world_groups
from tests.factories.reservations import CapacityReservationFactory, EC2NodeClassFactory
from tests.factories.scheduling import InstanceTypeFactory, NodeClaimFactory, NodePoolFactory, OfferingFactory, PodFactory

pytestmark = pytest.mark.django_db

ARN = "arn:aws:resource-groups:us-east-1:123456789012:group/web-pool"
ON_DEMAND_LABELS = {"karpenter.sh/capacity-type": "on-demand", "node.kubernetes.io/instance-type": "m5.large",
                    "topology.kubernetes.io/zone": "us-east-1a"}


@pytest.fixture
def m5_large(db):
    it = InstanceTypeFactory(name="m5.large", cpu_millicores=2000, memory_bytes=8 * 2**30, max_pods=29, family="m5", size="large")
    OfferingFactory(instance_type=it, capacity_type=CapacityType.ON_DEMAND, zone="us-east-1a", price=0.096)
    return it


def launch(pool, labels, capacity_type="on-demand", reservation_id=None):
    launch = {"instanceType": "m5.large", "zone": "us-east-1a", "capacityType": capacity_type}
    if reservation_id:
        launch["reservationID"] = reservation_id
    row = provisioning.create_claim(SimulatedCluster(), {"nodePool": pool.name, "labels": labels, "launch": launch}, pool)
    return row, provisioning.launch_claim(SimulatedCloud(), SimulatedCluster(), row)


# --- open mode ----------------------------------------------------------------------------------

def test_open_mode_on_demand_launch_lands_in_the_open_reservation_counted_not_relabelled(m5_large, viewer_client, settings):
    settings.KARPWEB_MODE = "control"
    trap = CapacityReservationFactory(reservation_id="cr-0open", instance_type="m5.large", availability_zone="us-east-1a",
                                      instance_match_criteria="open", total_instance_count=3, available_instance_count=3, tags={})
    node_class = EC2NodeClassFactory(name="od", capacity_reservation_selector_terms=[], open_reservations=True)
    pool = NodePoolFactory(name="od", node_class=node_class,
                           requirements=[{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}])

    row, result = launch(pool, ON_DEMAND_LABELS)
    assert result.ok and result.capacity_type == "on-demand"
    assert (result.reservation_id, result.open_reservation_id) == (None, "cr-0open")
    trap.refresh_from_db()
    assert (trap.used_instance_count, trap.available_instance_count) == (1, 2)  # EC2 counts it in the reservation
    node = Node.objects.get(node_claim__name=row.name)
    assert node.capacity_type == "on-demand" and node.reservation is None
    assert not any(key.startswith("karpenter.k8s.aws/capacity-reservation") for key in node.labels)

    counts = steps.sync_ec2()
    assert counts["open_instances"] == 1
    record = OpenReservationInstance.objects.get()
    assert (record.reservation_id, record.node_name, record.instance_id) == (trap.pk, node.name, result.instance_id)
    # Demotion sees an on-demand instance with preference open: nothing to relabel.
    assert steps.demote()["demotions"] == 0
    node.refresh_from_db()
    assert node.capacity_type == "on-demand" and node.reservation is None

    page = viewer_client.get(reverse("reservations:detail", args=["cr-0open"])).content.decode()
    assert 'id="open-instances"' in page and node.name in page and result.instance_id in page
    assert "1 / 2 / 3" in page  # used / available / total
    report = viewer_client.get(reverse("reservations:unselected")).content.decode()
    row_html = report.split('data-reservation="cr-0open"')[1].split("</tr>")[0]
    in_it = row_html.split('class="open-in-it"')[1]
    assert node.name in in_it
    assert node.name not in row_html.split('class="open-in-it"')[0]  # not listed as "could use it"

    # The instance goes away: the next sync forgets it and EC2 gives the unit back.
    SimulatedCloud().terminate([result.instance_id])
    assert steps.sync_ec2()["open_instances"] == 0 and not OpenReservationInstance.objects.exists()
    trap.refresh_from_db()
    assert trap.available_instance_count == 3


def test_without_open_mode_on_demand_launches_stay_out(m5_large):
    trap = CapacityReservationFactory(reservation_id="cr-0open", instance_type="m5.large", availability_zone="us-east-1a",
                                      instance_match_criteria="open", total_instance_count=3, available_instance_count=3)
    pool = NodePoolFactory(name="od", node_class=EC2NodeClassFactory(name="od", capacity_reservation_selector_terms=[]))
    _, result = launch(pool, ON_DEMAND_LABELS)
    assert result.ok and result.open_reservation_id is None
    trap.refresh_from_db()
    assert trap.available_instance_count == 3


def test_open_mode_leaves_targeted_reservations_alone(m5_large):
    targeted = CapacityReservationFactory(reservation_id="cr-0targeted", instance_type="m5.large", availability_zone="us-east-1a",
                                          instance_match_criteria="targeted", total_instance_count=3, available_instance_count=3)
    node_class = EC2NodeClassFactory(name="od", capacity_reservation_selector_terms=[], open_reservations=True)
    _, result = launch(NodePoolFactory(name="od", node_class=node_class), ON_DEMAND_LABELS)
    assert result.ok and result.open_reservation_id is None
    targeted.refresh_from_db()
    assert targeted.available_instance_count == 3


# --- groups -------------------------------------------------------------------------------------

def group_world():
    a = CapacityReservationFactory(reservation_id="cr-0a", instance_type="m5.large", availability_zone="us-east-1a",
                                   total_instance_count=2, available_instance_count=0)
    b = CapacityReservationFactory(reservation_id="cr-0b", instance_type="m5.large", availability_zone="us-east-1a",
                                   total_instance_count=2, available_instance_count=2)
    store_group(ARN, ["cr-0a", "cr-0b", "cr-0gone"])
    node_class = EC2NodeClassFactory(name="grouped", capacity_reservation_selector_terms=[{"resourceGroupARN": ARN}])
    pool = NodePoolFactory(name="grouped", node_class=node_class,
                           requirements=[{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["reserved"]}])
    return a, b, node_class, pool


def test_a_launch_into_a_group_member_targets_the_group_and_records_the_member_ec2_chose(m5_large):
    a, b, node_class, pool = group_world()
    assert launch_group_arn(node_class, "cr-0a") == ARN
    labels = {**ON_DEMAND_LABELS, "karpenter.sh/capacity-type": "reserved", "karpenter.k8s.aws/capacity-reservation-id": "cr-0a",
              "karpenter.k8s.aws/capacity-reservation-type": "default"}
    # The plan said cr-0a (karpweb's count was a moment old); cr-0a is full, the group's cr-0b has room.
    row, result = launch(pool, labels, capacity_type="reserved", reservation_id="cr-0a")
    assert result.ok and result.reservation_id == "cr-0b"
    row.refresh_from_db()
    assert (row.reservation_label, row.reservation_id, row.labels["karpenter.k8s.aws/capacity-reservation-id"]) == ("cr-0b", b.pk, "cr-0b")
    node = Node.objects.get(node_claim=row)
    assert node.reservation_id == b.pk and node.labels["karpenter.k8s.aws/capacity-reservation-id"] == "cr-0b"
    b.refresh_from_db()
    assert b.available_instance_count == 1
    assert SimulatedInstance.objects.get(instance_id=result.instance_id).reservation_id == "cr-0b"


def test_no_group_target_for_a_lone_member_or_a_class_without_the_group_term(m5_large):
    a, b, node_class, pool = group_world()
    b.instance_type = "m5.xlarge"
    b.save()
    assert launch_group_arn(node_class, "cr-0a") is None
    b.instance_type = "m5.large"
    b.save()
    assert launch_group_arn(EC2NodeClassFactory(name="by-tags"), "cr-0a") is None


def test_groups_reach_the_engine_and_the_class_status(m5_large):
    group_world()
    assert world_groups() == [{"GroupArn": ARN, "CapacityReservationIds": ["cr-0a", "cr-0b", "cr-0gone"]}]
    assert current_world()["capacityReservationGroups"] == world_groups()
    steps.sync_ec2()
    node_class = EC2NodeClassFactory(name="grouped")
    assert sorted(r["id"] for r in node_class.status_capacity_reservations) == ["cr-0a", "cr-0b"]
    assert set(CapacityReservation.objects.get(reservation_id="cr-0b").groups.values_list("arn", flat=True)) == {ARN}


class GroupLister:
    """A provider with the Resource Groups API (the EC2 adapter's group_members)."""

    def __init__(self, members, fail=()):
        self.members, self.fail, self.asked = members, set(fail), []

    def group_members(self, arn):
        self.asked.append(arn)
        if arn in self.fail:
            raise CloudAPIError("AccessDeniedException", "not allowed", "ListGroupResources")
        return self.members.get(arn, [])


def test_sync_groups_lists_the_groups_the_terms_name_and_forgets_the_others(db):
    other = "arn:aws:resource-groups:us-east-1:123456789012:group/other"
    store_group("arn:aws:resource-groups:us-east-1:123456789012:group/unused", ["cr-0x"])
    EC2NodeClassFactory(name="a", capacity_reservation_selector_terms=[{"resourceGroupARN": ARN}, {"tags": {"team": "web"}}])
    EC2NodeClassFactory(name="b", capacity_reservation_selector_terms=[{"resourceGroupARN": other}])
    store_group(other, ["cr-0kept"])
    counts = sync_groups(GroupLister({ARN: ["cr-0b", "cr-0a"]}, fail={other}), timezone.now())
    assert counts == {"groups": 1, "group_errors": 1}
    stored = dict(CapacityReservationGroup.objects.values_list("arn", "reservation_ids"))
    assert stored == {ARN: ["cr-0a", "cr-0b"], other: ["cr-0kept"]}  # a failed listing keeps what was known
    # The simulated world has no Resource Groups API: its groups (entered in the admin) stay.
    assert sync_groups(SimulatedCloud()) == {"groups": 2}


# --- ReservedCapacityAvailable on NodePools and NodeClaims --------------------------------------

def test_nodepool_and_nodeclaim_conditions_go_false_and_back_to_true(m5_large, viewer_client):
    reservation = CapacityReservationFactory(reservation_id="cr-0full", instance_type="m5.large", availability_zone="us-east-1a",
                                             total_instance_count=1, available_instance_count=0, tags={"team": "web"})
    pool = NodePoolFactory(name="reserved", node_class=EC2NodeClassFactory(name="web"),
                           requirements=[{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["reserved"]}])
    claim = NodeClaimFactory(name="reserved-abcde", node_pool=pool, capacity_type="reserved", reservation=reservation,
                             reservation_label="cr-0full")
    big = {"containers": [{"name": "app", "resources": {"requests": {"cpu": "1500m", "memory": "1Gi"}}}]}
    PodFactory(name="first", spec=big, cpu_request_millicores=1500)  # goes to the claim's node, still launching
    PodFactory(name="waiting", spec=big, cpu_request_millicores=1500)

    assert steps.status()["node_claims_changed"] == 1
    condition = NodePool.objects.get(name="reserved").condition("ReservedCapacityAvailable")
    assert (condition["status"], condition["reason"]) == ("False", "LimitExceeded")
    claim_condition = NodeClaim.objects.get(pk=claim.pk).condition("ReservedCapacityAvailable")
    assert (claim_condition["status"], claim_condition["reason"]) == ("False", "LimitExceeded")
    assert claim_condition["message"].startswith("NodePool reserved: 1 pod(s) could use reserved capacity")
    page = viewer_client.get(claim.get_absolute_url()).content.decode()
    assert "ReservedCapacityAvailable" in page and "LimitExceeded" in page

    # Capacity frees up (the reservation grew): the next run places the pod and nothing waits.
    CapacityReservation.objects.filter(pk=reservation.pk).update(total_instance_count=2, available_instance_count=1)
    steps.status()
    assert NodePool.objects.get(name="reserved").condition("ReservedCapacityAvailable")["status"] == "True"
    claim_condition = NodeClaim.objects.get(pk=claim.pk).condition("ReservedCapacityAvailable")
    assert (claim_condition["status"], claim_condition["reason"]) == ("True", "Available")
    assert steps.status()["node_claims_changed"] == 0  # unchanged: nothing written again


def test_an_accounts_ec2_step_serves_the_groups_and_open_instances_of_its_every_cluster(db):
    """One account may run several clusters; its EC2 step runs in the first one's scope. The groups the
    second cluster's EC2NodeClasses name were forgotten each sync, and its nodes on open-mode instances
    were never named."""
    from fleet.models import Cluster
    from fleet.scope import cluster_scope, default_cluster, loop_code
    from reservations.open_mode import record_open_instances
    from scheduling.adapters.ec2.interface import InstanceMembership

    first = default_cluster()
    second = Cluster.objects.create(name="second", account=first.account, region=first.region)
    CapacityReservationFactory(reservation_id="cr-0open", instance_type="m5.large", availability_zone="us-east-1a")
    with cluster_scope(second):
        EC2NodeClassFactory(name="batch", capacity_reservation_selector_terms=[{"resourceGroupARN": ARN}])
        Node.objects.create(name="batch-1", instance_type="m5.large", zone="us-east-1a",
                            provider_id="aws:///us-east-1a/i-0second")
    on_it = InstanceMembership(instance_id="i-0second", instance_type="m5.large", zone="us-east-1a", state="running",
                               capacity_type="on-demand", reservation_id=None, reservation_type=None, interruptible=False,
                               capacity_reservation_preference="open", launch_time=None, tags={},
                               open_reservation_id="cr-0open")
    now = timezone.now()
    with cluster_scope(first), loop_code():
        served = steps.clusters_of_the_account_and_region()
        assert [c.name for c in served] == sorted([first.name, "second"])
        assert sync_groups(GroupLister({ARN: ["cr-0open"]}), now, served) == {"groups": 1, "group_errors": 0}
        assert record_open_instances([on_it], now, served) == 1
    assert CapacityReservationGroup.objects.get(arn=ARN).reservation_ids == ["cr-0open"]
    assert OpenReservationInstance.objects.get(instance_id="i-0second").node_name == "batch-1"
