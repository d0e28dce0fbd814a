"""Refreshing nodes on the simulated world (its EC2 has images, subnets and security groups):
expiry, drift within the NodePool's budgets, never-Ready nodes, node repair. Each test is named
after the upstream Ginkgo `It` it answers (kubernetes-sigs/karpenter
`pkg/controllers/nodeclaim/{expiration,disruption}/*_test.go`, `pkg/controllers/disruption/drift_test.go`,
`pkg/controllers/node/health/suite_test.go`)."""

import datetime

import pytest
import time_machine
from django.utils import timezone

from reservations.models import EC2NodeClass
from scheduling.adapters.ec2.catalogue import instance_type_info
from scheduling.adapters.ec2.sync import instance_type_row
from scheduling.demo import described_types
from scheduling.loop import refresh, simulated, steps
from scheduling.loop.engine_run import simulate_readable
from scheduling.models import CapacityType, Decision, InstanceType, Node, NodeClaim, NodePool, Offering, Pod, SimulatedInstance
from scheduling.world import current_world
from tests.factories.reservations import EC2NodeClassFactory
from tests.factories.scheduling import NodeClaimFactory, NodeFactory, NodePoolFactory, PodFactory

pytestmark = pytest.mark.django_db

T0 = datetime.datetime(2026, 11, 21, 12, 0, tzinfo=datetime.UTC)
OLD_AMI = {"alias": "al2023@v20261001"}
LATEST_AMI = {"alias": "al2023@latest"}
DEMO = {"tags": {"karpenter.sh/discovery": "demo"}}


def launch_spec(ami=OLD_AMI, subnets=DEMO, groups=DEMO) -> dict:
    return {"role": "KarpenterNodeRole-test", "amiSelectorTerms": [ami], "subnetSelectorTerms": [subnets],
            "securityGroupSelectorTerms": [groups]}


def build_world(*, budget="1", expire_after="720h", zones=("us-east-1a",)):
    """One m5.large on-demand NodePool whose class resolves against the simulated EC2."""
    InstanceType.objects.create(**instance_type_row(instance_type_info(described_types()["m5.large"]), None))
    it = InstanceType.objects.get(name="m5.large")
    for zone in ("us-east-1a", "us-east-1b"):
        Offering.objects.create(instance_type=it, capacity_type=CapacityType.ON_DEMAND, zone=zone, price=0.096,
                                zone_id={"us-east-1a": "use1-az1", "us-east-1b": "use1-az2"}[zone])
    node_class = EC2NodeClassFactory(name="default", capacity_reservation_selector_terms=[], spec=launch_spec())
    pool = NodePoolFactory(
        name="default", node_class=node_class, limits={}, budgets=[{"nodes": budget}], expire_after=expire_after,
        consolidation_policy="WhenEmpty", consolidate_after="Never",
        requirements=[{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                      {"key": "topology.kubernetes.io/zone", "operator": "In", "values": list(zones)}])
    simulated.resolve_node_classes()
    return pool


def big_pods(count: int) -> list[Pod]:
    """Pods of 1.5 CPU: one per m5.large."""
    return [PodFactory(name=f"big-{i}", cpu_request_millicores=1500,
                       spec={"containers": [{"name": "app", "resources": {"requests": {"cpu": "1500m", "memory": "1Gi"}}}]})
            for i in range(count)]


def settle(now) -> None:
    """The simulated kube-scheduler binds what waits, provisioning launches for the rest, and binds again."""
    simulated.bind_pending_pods(simulate_readable(current_world(now), now))
    steps.provision(now)
    simulated.bind_pending_pods(simulate_readable(current_world(now), now))


def launched_nodes(count: int, now) -> list[Node]:
    big_pods(count)
    settle(now)
    nodes = list(Node.objects.all())
    assert len(nodes) == count and not Pod.objects.filter(node_name="").exists()
    return nodes


def reclass(**spec) -> None:
    node_class = EC2NodeClass.objects.get(name="default")
    node_class.spec = launch_spec(**spec)
    node_class.save()
    simulated.resolve_node_classes()


def drift_reasons() -> dict[str, str]:
    return {c.name: (c.condition("Drifted") or {}).get("reason", "") for c in NodeClaim.objects.all()}


def acted(kind: str):
    return Decision.objects.filter(kind=kind, outcome=Decision.Outcome.ACTED)


def replace_one_at_a_time(now, originals: set[str]) -> list[int]:
    """Lifecycle passes until no original node is left; per pass, how many originals went."""
    gone_per_pass = []
    for minute in range(1, 12):
        before = set(Node.objects.values_list("name", flat=True)) & originals
        if not before:
            break
        with time_machine.travel(now + datetime.timedelta(minutes=minute), tick=False):
            steps.lifecycle(timezone.now())
            settle(timezone.now())
        after = set(Node.objects.values_list("name", flat=True)) & originals
        gone_per_pass.append(len(before - after))
    return gone_per_pass


# expiration --------------------------------------------------------------------------------------


def test_should_remove_nodeclaims_that_are_expired():
    """expiration suite: "should remove nodeclaims that are expired" (and its instance with it)."""
    with time_machine.travel(T0, tick=False):
        build_world(expire_after="1h")
        node = launched_nodes(1, T0)[0]
        claim = node.node_claim
        assert claim.expire_after == "1h"
    with time_machine.travel(T0 + datetime.timedelta(minutes=59), tick=False):
        steps.lifecycle(timezone.now())
        assert NodeClaim.objects.filter(pk=claim.pk).exists()
    with time_machine.travel(T0 + datetime.timedelta(minutes=61), tick=False):
        steps.lifecycle(timezone.now())
    assert not NodeClaim.objects.filter(name=claim.name).exists()
    assert SimulatedInstance.objects.get(client_token=claim.name).state == "terminated"
    assert acted("expire").filter(subject=f"NodeClaim {claim.name}").exists()


def test_should_not_remove_the_nodeclaims_when_expiration_is_disabled():
    """expiration suite: "should not remove the NodeClaims when expiration is disabled" (expireAfter Never)."""
    with time_machine.travel(T0, tick=False):
        build_world(expire_after="Never")
        claim = launched_nodes(1, T0)[0].node_claim
        assert claim.expire_after == "Never"
    with time_machine.travel(T0 + datetime.timedelta(days=400), tick=False):
        steps.lifecycle(timezone.now())
    assert NodeClaim.objects.filter(pk=claim.pk).exists()
    assert not Decision.objects.filter(kind="expire").exists()


def test_should_delete_nodeclaims_if_the_nodeclaim_is_expired_but_the_node_isnt():
    """expiration suite: "should remove nodeclaims that are expired" even with no Node yet (not subject to budgets)."""
    with time_machine.travel(T0, tick=False):
        pool = build_world(budget="0")
        claim = NodeClaimFactory(name="claim-no-node", node_pool=pool, node_class=pool.node_class, expire_after="30m",
                                 labels={"karpweb.io/provisioner": "karpweb"})
    with time_machine.travel(T0 + datetime.timedelta(minutes=31), tick=False):
        steps.lifecycle(timezone.now())
    assert not NodeClaim.objects.filter(pk=claim.pk).exists()


# drift -------------------------------------------------------------------------------------------


def test_should_replace_drifted_nodes_ami_drift_within_a_budget_of_one():
    """disruption drift_test: "should replace drifted nodes" + budgets ("should only allow 1 node to be
    disrupted"), for aws AMIDrift: a new AMI replaces the nodes one at a time, replacement first."""
    with time_machine.travel(T0, tick=False):
        build_world(budget="1")
        originals = {n.name for n in launched_nodes(3, T0)}
        old_images = set(SimulatedInstance.objects.values_list("image_id", flat=True))
        reclass(ami=LATEST_AMI)
        refresh.mark_drift(simulated.SimulatedCloud(), simulated.SimulatedCluster())
        assert set(drift_reasons().values()) == {"AMIDrift"}
    assert replace_one_at_a_time(T0, originals) == [1, 1, 1]
    live = SimulatedInstance.objects.filter(state="running")
    assert live.count() == 3 and not set(live.values_list("image_id", flat=True)) & old_images
    assert acted("drift").count() == 3
    assert all("AMIDrift" in d.reason for d in acted("drift"))
    assert not Pod.objects.filter(node_name="").exists()


def test_should_detect_static_drift_nodepool_template_within_a_budget_of_one():
    """nodeclaim disruption drift_test: "should detect static drift" (template labels change -> NodePoolDrifted),
    then the disruption drift method replaces the nodes one at a time under `nodes: "1"`."""
    with time_machine.travel(T0, tick=False):
        build_world(budget="1")
        originals = {n.name for n in launched_nodes(2, T0)}
        pool = NodePool.objects.get(name="default")
        pool.labels = {"team": "payments"}
        pool.save()
        refresh.mark_drift(simulated.SimulatedCloud(), simulated.SimulatedCluster())
        assert set(drift_reasons().values()) == {"NodePoolDrifted"}
    assert replace_one_at_a_time(T0, originals) == [1, 1]
    assert all(n.labels.get("team") == "payments" for n in Node.objects.all())


def test_should_return_drifted_if_the_nodeclaim_labels_dont_match_the_nodepool_requirements():
    """nodeclaim disruption drift_test: requirement drift (zone requirement moves to us-east-1b)."""
    with time_machine.travel(T0, tick=False):
        build_world(budget="1")
        launched_nodes(1, T0)
        pool = NodePool.objects.get(name="default")
        pool.requirements = [r if r["key"] != "topology.kubernetes.io/zone" else {**r, "values": ["us-east-1b"]}
                             for r in pool.requirements]
        pool.save()
    with time_machine.travel(T0 + datetime.timedelta(minutes=1), tick=False):
        steps.lifecycle(timezone.now())
        settle(timezone.now())
    assert acted("drift").filter(reason__contains="RequirementsDrifted").count() == 1
    assert list(Node.objects.values_list("zone", flat=True)) == ["us-east-1b"]


def test_should_remove_the_status_condition_from_the_nodeclaim_if_the_nodeclaim_is_no_longer_drifted():
    """nodeclaim disruption drift_test: a budget of 0 holds the drifted node; once the NodePool's
    requirements admit it again its claim is no longer Drifted (False/NotDrifted on karpweb's side:
    the adapter merges conditions) and nothing is replaced."""
    with time_machine.travel(T0, tick=False):
        build_world(budget="0")
        launched_nodes(1, T0)
        pool = NodePool.objects.get(name="default")
        original = pool.requirements
        pool.requirements = [r if r["key"] != "topology.kubernetes.io/zone" else {**r, "values": ["us-east-1b"]}
                             for r in original]
        pool.save()
    with time_machine.travel(T0 + datetime.timedelta(minutes=1), tick=False):
        steps.lifecycle(timezone.now())
    assert list(drift_reasons().values()) == ["RequirementsDrifted"]
    pool.requirements = original
    pool.save()
    with time_machine.travel(T0 + datetime.timedelta(minutes=2), tick=False):
        steps.lifecycle(timezone.now())
    claim = NodeClaim.objects.get()
    assert claim.condition_status("Drifted") != "True"
    assert not acted("drift").exists()


@pytest.mark.parametrize("change, reason", [
    ({"subnets": {"tags": {"karpenter.sh/discovery": "demo-private"}}}, "SubnetDrift"),
    ({"groups": {"tags": {"karpenter.sh/discovery": "demo-strict"}}}, "SecurityGroupDrift"),
])
def test_should_return_drifted_if_the_subnet_or_security_groups_are_drifted(change, reason):
    """aws cloudprovider drift: "should return drifted if the subnet is drifted" / "...security groups are drifted"."""
    with time_machine.travel(T0, tick=False):
        build_world(budget="1")
        launched_nodes(1, T0)
        before = SimulatedInstance.objects.get(state="running")
        reclass(**change)
        steps.lifecycle(timezone.now())
        settle(timezone.now())
    assert acted("drift").filter(reason__contains=reason).count() == 1
    after = SimulatedInstance.objects.get(state="running")
    assert after.instance_id != before.instance_id
    assert (after.subnet_id, after.security_group_ids) != (before.subnet_id, before.security_group_ids)


def test_should_not_disrupt_a_drifted_node_with_a_do_not_disrupt_pod():
    """disruption drift_test: "should ignore nodes with the karpenter.sh/do-not-disrupt annotation" (on a pod)."""
    with time_machine.travel(T0, tick=False):
        build_world(budget="1")
        launched_nodes(1, T0)
        Pod.objects.update(annotations={"karpenter.sh/do-not-disrupt": "true"})
        reclass(ami=LATEST_AMI)
        steps.lifecycle(timezone.now())
    assert set(drift_reasons().values()) == {"AMIDrift"}
    assert not Decision.objects.filter(kind="drift").exists()
    assert SimulatedInstance.objects.filter(state="running").count() == 1


def test_observe_mode_marks_and_recommends_but_acts_on_nothing(settings):
    """Observe mode: drift, expiry and repair are recommendations; no claim, node or instance goes."""
    with time_machine.travel(T0, tick=False):
        build_world(budget="1", expire_after="1h")
        launched_nodes(2, T0)
        reclass(ami=LATEST_AMI)
        Node.objects.filter(pk=Node.objects.first().pk).update(ready=False)
    settings.KARPWEB_MODE = "observe"
    settings.KARPWEB_NODE_REPAIR = True
    with time_machine.travel(T0 + datetime.timedelta(hours=2), tick=False):
        steps.lifecycle(timezone.now())
    kinds = set(Decision.objects.filter(outcome="recommended").values_list("kind", flat=True))
    assert {"expire", "repair"} <= kinds
    assert not Decision.objects.filter(outcome="acted", kind__in=["expire", "repair", "drift"]).exists()
    assert NodeClaim.objects.filter(deleting_since__isnull=True).count() == 2
    assert SimulatedInstance.objects.filter(state="running").count() == 2


# never-Ready nodes and repair --------------------------------------------------------------------


def test_a_never_ready_node_does_not_freeze_consolidation():
    """disruption helpers BuildDisruptionBudgetMapping: uninitialized nodes count neither towards the
    total nor as disrupting, so one stuck node leaves a `nodes: "1"` budget to an empty node."""
    with time_machine.travel(T0, tick=False):
        pool = build_world(budget="1")
        for name in ("empty-a", "empty-b"):
            NodeFactory(name=name, node_pool=pool, labels={"karpenter.sh/nodepool": "default",
                                                           "node.kubernetes.io/instance-type": "m5.large",
                                                           "karpenter.sh/capacity-type": "on-demand",
                                                           "topology.kubernetes.io/zone": "us-east-1a",
                                                           "karpenter.sh/initialized": "true"},
                        created_at=T0 - datetime.timedelta(hours=1))
        NodeFactory(name="stuck", node_pool=pool, ready=False, labels={"karpenter.sh/nodepool": "default",
                                                                       "node.kubernetes.io/instance-type": "m5.large"})
        NodePool.objects.filter(pk=pool.pk).update(consolidate_after="0s")
        steps.lifecycle(timezone.now())
    assert Decision.objects.filter(kind="consolidate-delete").count() == 1


def never_ready_node(pool, name="sick"):
    claim = NodeClaimFactory(name=f"claim-{name}", node_pool=pool, node_class=pool.node_class,
                             labels={"karpweb.io/provisioner": "karpweb"}, provider_id=f"aws:///us-east-1a/i-{name}")
    return NodeFactory(name=name, node_pool=pool, node_claim=claim, ready=False, created_at=T0,
                       conditions=[{"type": "Ready", "status": "False", "lastTransitionTime": "2026-11-21T12:00:00Z"}])


def test_node_repair_is_off_by_default():
    """health suite: NodeRepair is a feature gate, off by default: a long NotReady node stays."""
    with time_machine.travel(T0, tick=False):
        never_ready_node(build_world())
    with time_machine.travel(T0 + datetime.timedelta(hours=5), tick=False):
        steps.lifecycle(timezone.now())
    assert NodeClaim.objects.filter(name="claim-sick").exists()
    assert not Decision.objects.filter(kind="repair").exists()


def test_should_delete_nodeclaim_when_node_is_unhealthy_past_its_toleration(settings):
    """health suite: "should delete nodes that are unhealthy by the cloud provider" after the 30 min
    Ready=False toleration (not before: "should not delete node when unhealthy type does not match" /
    before the toleration)."""
    settings.KARPWEB_NODE_REPAIR = True
    with time_machine.travel(T0, tick=False):
        pool = build_world()
        launched_nodes(4, T0)  # four healthy nodes: one unhealthy of five is within the 20 %
        never_ready_node(pool)
    with time_machine.travel(T0 + datetime.timedelta(minutes=29), tick=False):
        steps.lifecycle(timezone.now())
        assert NodeClaim.objects.filter(name="claim-sick").exists()
    with time_machine.travel(T0 + datetime.timedelta(minutes=31), tick=False):
        steps.lifecycle(timezone.now())
    assert not NodeClaim.objects.filter(name="claim-sick").exists()
    assert acted("repair").filter(subject="node sick").exists()


def test_should_not_delete_when_more_than_20_percent_of_the_nodepool_is_unhealthy(settings):
    """health suite: "should ignore unhealthy nodes if more then 20% of the nodes are unhealthy"."""
    settings.KARPWEB_NODE_REPAIR = True
    with time_machine.travel(T0, tick=False):
        pool = build_world()
        launched_nodes(2, T0)
        never_ready_node(pool, "sick-a")
        never_ready_node(pool, "sick-b")
    with time_machine.travel(T0 + datetime.timedelta(hours=1), tick=False):
        steps.lifecycle(timezone.now())
    assert NodeClaim.objects.filter(name__in=["claim-sick-a", "claim-sick-b"]).count() == 2
    assert Decision.objects.filter(kind="repair", outcome="skipped").count() == 2
