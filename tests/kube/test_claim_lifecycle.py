"""A NodeClaim's life before its termination, on the real kube-apiserver and the EC2 test server
(moto over HTTP), each test named after the upstream Ginkgo `It` it holds karpweb to:

* in-flight nodes (kubernetes-sigs/karpenter `pkg/controllers/provisioning/scheduling/suite_test.go`,
  "In-Flight Nodes"): a node coming up is capacity for the pods it was launched for, its startup,
  ephemeral and unregistered taints ignored until it is initialized;
* garbage collection (kubernetes-sigs/karpenter `pkg/controllers/nodeclaim/garbagecollection`,
  aws/karpenter-provider-aws `pkg/controllers/nodeclaim/garbagecollection`) and liveness
  (`pkg/controllers/nodeclaim/lifecycle/liveness_test.go`);
* re-registration of a Node the kubelet registered again, registration health, extended resources.

Only this test's NodePool is in control mode (the API server is shared with other tests: their
pending pods stay recommendations)."""

from datetime import timedelta

import pytest
from django.utils.timezone import now as utc_now

from reservations.models import EC2NodeClass
from scheduling.adapters.ec2.sync import sync_catalogue
from scheduling.adapters.kube.resources import EC2NODECLASS, NODE, NODECLAIM, NODEPOOL, POD
from scheduling.adapters.kube.sync import ClusterSync
from scheduling.loop import nodes, provisioning
from scheduling.loop.keptworld import KeptWorld
from scheduling.models import Decision, Mode, NodeClaim, NodePool
from tests.faults.worlds import launchable_spec
from tests.support.ec2_fixtures import *  # noqa: F403 - the EC2 test server and providers

from . import helpers as h

pytestmark = [pytest.mark.kube, pytest.mark.django_db]
ZONE = "us-east-1a"
STARTUP_TAINT = {"key": "example.com/cni-not-ready", "value": "true", "effect": "NoSchedule"}


@pytest.fixture(autouse=True)
def cluster_settings(settings, aws_test_credentials):
    settings.KARPWEB_CLUSTER = "kubernetes"
    settings.KARPWEB_PROVIDER = "aws"
    settings.KARPWEB_MODE = "observe"  # the pool of each test is put in control itself
    settings.KARPWEB_KARPENTER = "absent"


class Lifecycle:
    """One NodePool of this test's own in control mode, on m5.large on-demand in one zone, with a
    startup taint, and what the kubelet and the loop do around it."""

    def __init__(self, rest, adapter, provider, raw_ec2, unique, mode=Mode.CONTROL, startup_taints=(STARTUP_TAINT,)):
        self.rest, self.adapter, self.provider, self.raw_ec2 = rest, adapter, provider, raw_ec2
        self.pool, self.ns = f"lc-{unique}", h.namespace(rest, f"lc-{unique}")
        sync_catalogue(provider, now=utc_now())
        rest.create(EC2NODECLASS, {"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
                                   "metadata": {"name": self.pool}, "spec": launchable_spec(provider)})
        rest.create(NODEPOOL, {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": self.pool},
                               "spec": {"template": {"spec": {
                                   "nodeClassRef": {**h.NODE_CLASS_REF, "name": self.pool},
                                   "startupTaints": list(startup_taints),
                                   "requirements": [
                                       {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                                       {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large"]},
                                       {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [ZONE]}]}}}})
        self.sync = ClusterSync(adapter)
        self.sync.sync_once()
        NodePool.objects.filter(name=self.pool).update(mode=mode)
        EC2NodeClass.objects.filter(name=self.pool).update(spec=launchable_spec(provider))

    def pod(self, name, cpu="500m", **extra):
        return h.pod(self.rest, self.ns, name, cpu=cpu, node_selector={"karpenter.sh/nodepool": self.pool}, **extra)

    def provision(self, world_at=None):
        self.sync.sync_once()
        return provisioning.provision(self.provider, self.adapter, utc_now(), world_at)

    def claims(self):
        return sorted(c["metadata"]["name"] for c in self.rest.list(NODECLAIM, label_selector=f"karpenter.sh/nodepool={self.pool}")["items"]
                      if not c["metadata"].get("deletionTimestamp"))

    def instance_of(self, claim):
        return self.rest.get(NODECLAIM, claim)["status"]["providerID"].rsplit("/", 1)[-1]

    def kubelet_registers(self, claim, name=None, ready=False):
        """The Node as the kubelet registers it: the providerID, the unregistered taint, the startup
        taints its user data gives it, not-ready (the node lifecycle controller's taint) while NotReady."""
        name = name or f"{claim}-node"
        taints = [{"key": "karpenter.sh/unregistered", "effect": "NoExecute"}, dict(STARTUP_TAINT),
                  {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]
        self.rest.create(NODE, {"apiVersion": "v1", "kind": "Node",
                                "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
                                "spec": {"providerID": f"aws:///{ZONE}/{self.instance_of(claim)}", "taints": taints}})
        self.set_node_status(name, ready)
        return name

    def set_node_status(self, name, ready, extended=None):
        allocatable = {"cpu": "1930m", "memory": "7Gi", "pods": "29", **(extended or {})}
        self.rest.patch(NODE, name, {"status": {
            "capacity": allocatable, "allocatable": allocatable,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False", "reason": "KubeletReady",
                            "message": "", "lastHeartbeatTime": "2026-11-25T12:00:00Z",
                            "lastTransitionTime": "2026-11-25T12:00:00Z"}]}}, subresource="status")

    def after_launch(self, now=None):
        self.sync.sync_once()
        return nodes.after_launch(self.provider, self.adapter, now or utc_now())

    def instance_state(self, instance):
        found = self.raw_ec2.describe_instances(InstanceIds=[instance])["Reservations"]
        return found[0]["Instances"][0]["State"]["Name"]


@pytest.fixture
def life(rest, adapter, provider, raw_ec2, unique):
    return Lifecycle(rest, adapter, provider, raw_ec2, unique)


# In-flight nodes -------------------------------------------------------------------------------------


def coming_up_across_runs(life, runs, world_at=None):
    """One pod, its claim launched; its node registers, stays NotReady with a startup taint while
    `runs` provisioning runs go by (the loop registering it in between)."""
    life.pod("app")
    first = life.provision(world_at)
    assert first["launched"] == 1, first
    [claim] = life.claims()
    assert life.provision(world_at)["launched"] == 0  # launched, no Node yet: in flight
    node = life.kubelet_registers(claim)
    launched = []
    for run in range(runs):
        if run == 1:
            life.after_launch()  # registered: the unregistered taint goes, the NodePool's taints come
        if run == 3:
            life.set_node_status(node, ready=True)  # Ready, the startup taint still there
            life.after_launch()
        launched.append(life.provision(world_at)["launched"])
    return claim, node, launched


def test_should_assume_pod_will_schedule_to_a_tainted_node_with_a_custom_startup_taint(life):
    """The periodic path: the world rebuilt from the database for every run."""
    claim, node, launched = coming_up_across_runs(life, runs=6)
    assert launched == [0] * 6 and life.claims() == [claim]
    taints = {t["key"] for t in life.rest.get(NODE, node)["spec"]["taints"]}
    assert STARTUP_TAINT["key"] in taints and "karpenter.sh/unregistered" not in taints
    assert nodes.not_initialized(NodeClaim.objects.get(name=claim), NodeClaim.objects.get(name=claim).node)[0] == \
        "StartupTaintsExist"


def test_should_assume_pod_will_schedule_to_a_tainted_node_with_a_custom_startup_taint_with_the_watch_process(life):
    """The watch process's path: planned from the world it keeps (pods and Nodes parsed once, kept
    current from the watch's changes), the claims coming up read fresh for every run."""
    kept = KeptWorld()

    def provision(world_at=None):
        stats = life.sync.sync_once()
        kept.apply(stats)
        return provisioning.provision(life.provider, life.adapter, utc_now(), kept.world)

    life.provision = provision
    claim, _node, launched = coming_up_across_runs(life, runs=6)
    assert launched == [0] * 6 and life.claims() == [claim]
    assert kept.check() == {}  # the kept world is what the database says


def test_should_not_assume_pod_will_schedule_to_a_node_with_startup_taints_after_initialization(life):
    """Once initialized, a node's taints are its own: a startup taint put back keeps pods off."""
    life.pod("first")
    assert life.provision()["launched"] == 1
    [claim] = life.claims()
    node = life.kubelet_registers(claim, ready=True)
    life.after_launch()
    life.rest.patch(NODE, node, {"spec": {"taints": [t for t in life.rest.get(NODE, node)["spec"]["taints"]
                                                     if t["key"] not in (STARTUP_TAINT["key"], "node.kubernetes.io/not-ready")]}})
    life.after_launch()
    assert life.rest.get(NODE, node)["metadata"]["labels"]["karpenter.sh/initialized"] == "true"
    life.rest.patch(NODE, node, {"spec": {"taints": [dict(STARTUP_TAINT)]}})
    life.pod("second")
    assert life.provision()["launched"] == 1
    assert len(life.claims()) == 2


def test_in_flight_capacity_is_a_recommendation_only_in_observe_mode(rest, adapter, provider, raw_ec2, unique):
    """Observe mode acts on nothing: no NodeClaim, no instance, a recommendation."""
    life = Lifecycle(rest, adapter, provider, raw_ec2, unique, mode=Mode.OBSERVE)
    life.pod("app")
    counts = life.provision()
    assert counts["launched"] == 0 and life.claims() == []
    decision = Decision.objects.get(kind="launch", node_pool__name=life.pool)
    assert decision.outcome == "recommended"
    assert not raw_ec2.describe_instances(Filters=[{"Name": "tag:karpenter.sh/nodepool", "Values": [life.pool]}])["Reservations"]
