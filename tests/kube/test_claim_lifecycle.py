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
from scheduling.models import Decision, InstanceType, Mode, NodeClaim, NodePool
from tests.faults.worlds import launchable_spec
from tests.support.ec2_fixtures import *  # noqa: F403 - the EC2 test server and providers
from tests.support.clusters import use_kube_server

from . import helpers as h

pytestmark = [pytest.mark.kube, pytest.mark.django_db]
ZONE = "us-east-1a"
STARTUP_TAINT = {"key": "example.com/cni-not-ready", "value": "true", "effect": "NoSchedule"}


@pytest.fixture(autouse=True)
def cluster_settings(settings, aws_test_credentials, kube_server):
    use_kube_server(kube_server)
    settings.KARPWEB_PROVIDER = "aws"
    settings.KARPWEB_MODE = "observe"  # the pool of each test is put in control itself
    settings.KARPWEB_KARPENTER = "absent"


class Lifecycle:
    """One NodePool of this test's own in control mode, on m5.large on-demand in one zone, with a
    startup taint, and what the kubelet and the loop do around it."""

    def __init__(self, rest, adapter, provider, raw_ec2, unique, mode=Mode.CONTROL, startup_taints=(STARTUP_TAINT,),
                 instance_type="m5.large"):
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
                                       {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": [instance_type]},
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

    def launched_claims(self):
        """The claims whose instance is launched (their status has the providerID)."""
        return [c for c in self.claims() if self.rest.get(NODECLAIM, c).get("status", {}).get("providerID")]

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

    def collections(self, *claims) -> int:
        """The garbage collections of these claims so far (after_launch's count is the whole cluster's,
        so a test counts only the claims it made)."""
        return Decision.objects.filter(kind="garbage-collect", subject__in=[f"NodeClaim {c}" for c in claims]).count()

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


# Garbage collection of claims (kubernetes-sigs/karpenter pkg/controllers/nodeclaim/garbagecollection) --


def registered_claim(life, ready=False):
    """One pod, its claim launched and registered with a Node (NotReady unless `ready`)."""
    life.pod("app")
    assert life.provision()["launched"] == 1
    [claim] = life.claims()
    node = life.kubelet_registers(claim, ready=ready)
    assert life.after_launch()["registered"] == 1
    return claim, node, life.instance_of(claim)


def test_should_delete_the_nodeclaim_when_the_node_is_there_in_a_notready_state_and_the_instance_is_gone(life):
    claim, node, instance = registered_claim(life)
    assert "karpenter.sh/termination" in life.rest.get(NODECLAIM, claim)["metadata"]["finalizers"]  # row 3
    life.raw_ec2.terminate_instances(InstanceIds=[instance])  # a spot reclaim with no queue, a manual terminate
    assert life.provision()["launched"] == 0  # before the collection: the claim is (phantom) capacity

    life.after_launch()
    decision = Decision.objects.get(subject=f"NodeClaim {claim}", kind="garbage-collect")
    assert decision.outcome == "acted" and f"EC2 no longer lists its instance {instance}" in decision.reason
    assert f"its node {node} is not Ready" in decision.reason
    life.after_launch()  # the finalizer goes once nothing is left
    with pytest.raises(Exception):
        life.rest.get(NODECLAIM, claim)
    assert not NodeClaim.objects.filter(name=claim).exists()
    assert life.provision()["launched"] == 1  # the pending pod gets a new node
    [new] = life.claims()
    assert new != claim
    life.after_launch()
    assert life.collections(claim, new) == 1  # idempotent: nothing left to collect


def node_gone(life, node):
    """The Node deleted and gone at once: karpweb's Nodes carry karpenter.sh/termination, which
    holds them until termination lets go, so its finalizer is removed by hand (as upstream's suites
    remove finalizers) to reach the world where the Node isn't there but its claim still is."""
    life.rest.delete(NODE, node)
    life.rest.patch(NODE, node, {"metadata": {"finalizers": []}})
    with pytest.raises(Exception):
        life.rest.get(NODE, node)


def test_should_delete_the_nodeclaim_when_the_node_was_deleted_and_the_instance_is_gone(life):
    claim, node, instance = registered_claim(life)
    node_gone(life, node)  # the Node went, then the instance is lost
    life.raw_ec2.terminate_instances(InstanceIds=[instance])
    life.after_launch()
    assert life.collections(claim) == 1
    assert "its node is gone" in Decision.objects.get(subject=f"NodeClaim {claim}", kind="garbage-collect").reason
    assert life.provision()["launched"] == 1
    assert claim not in life.claims() and len(life.claims()) == 1


def test_shouldnt_delete_the_nodeclaim_when_the_node_is_there_in_a_ready_state_and_the_instance_is_gone(life):
    claim, _node, instance = registered_claim(life, ready=True)
    life.raw_ec2.terminate_instances(InstanceIds=[instance])
    life.after_launch()
    assert life.collections(claim) == 0  # the kubelet still reports Ready: EC2 may be behind
    assert life.claims() == [claim] and NodeClaim.objects.get(name=claim).deleting_since is None


def test_shouldnt_delete_the_nodeclaim_when_the_node_isnt_there_but_the_instance_is_there(life):
    """Also: a registered claim is never timed out (row 13), a day after its launch."""
    claim, node, _instance = registered_claim(life)
    node_gone(life, node)
    life.after_launch(utc_now() + timedelta(days=1))
    assert life.claims() == [claim] and not Decision.objects.filter(subject=f"NodeClaim {claim}").exists()


def test_a_node_being_deleted_is_left_to_termination_not_to_garbage_collection(life):
    """`kubectl delete node` and the instance lost: the Node lingers (karpenter.sh/termination) and,
    as upstream, its termination deletes the claim; the claim GC, which skips claims being deleted,
    decides nothing about it."""
    claim, node, instance = registered_claim(life)
    life.rest.delete(NODE, node)
    assert life.rest.get(NODE, node)["metadata"]["deletionTimestamp"]  # held by its finalizer
    life.raw_ec2.terminate_instances(InstanceIds=[instance])
    life.after_launch()
    assert not Decision.objects.filter(subject=f"NodeClaim {claim}", kind="garbage-collect").exists()
    decision = Decision.objects.get(subject=f"node {node}", kind="terminate")
    assert decision.outcome == "acted" and f"deleting NodeClaim {claim}" in decision.reason
    with pytest.raises(Exception):
        life.rest.get(NODE, node)  # NotReady with its instance gone: nothing to drain, let go
    assert claim not in life.claims()
    life.after_launch()  # the claim's finalizer goes: its instance is gone
    with pytest.raises(Exception):
        life.rest.get(NODECLAIM, claim)


def test_claim_garbage_collection_is_a_recommendation_in_observe_mode(life):
    claim, _node, instance = registered_claim(life)
    NodePool.objects.filter(name=life.pool).update(mode=Mode.OBSERVE)
    life.raw_ec2.terminate_instances(InstanceIds=[instance])
    life.after_launch()
    decision = Decision.objects.get(subject=f"NodeClaim {claim}", kind="garbage-collect")
    assert decision.outcome == "recommended" and decision.mode == "observe"
    assert life.claims() == [claim] and NodeClaim.objects.get(name=claim).deleting_since is None


def test_claims_of_another_controller_are_ignored(life, unique):
    """Row 4: a NodeClaim karpweb did not create (no karpweb.io/provisioner label) is not
    registered, timed out or collected by karpweb, whatever its Node and instance."""
    from .test_node_lifecycle import run_instance

    instance = run_instance(life.raw_ec2, {"karpenter.sh/nodeclaim": f"theirs-{unique}"})
    life.rest.create(NODECLAIM, {
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": f"theirs-{unique}", "labels": {"karpenter.sh/nodepool": life.pool}},
        "spec": {"nodeClassRef": {**h.NODE_CLASS_REF, "name": life.pool}, "requirements": []}})
    life.rest.patch(NODECLAIM, f"theirs-{unique}", {"status": {"providerID": f"aws:///{ZONE}/{instance}", "conditions": [
        {"type": "Launched", "status": "True", "reason": "Launched", "message": "", "lastTransitionTime": "2026-11-25T12:00:00Z"},
        {"type": "Registered", "status": "True", "reason": "Registered", "message": "",
         "lastTransitionTime": "2026-11-25T12:00:00Z"}]}}, subresource="status")
    life.kubelet_registers(f"theirs-{unique}")
    life.raw_ec2.terminate_instances(InstanceIds=[instance])
    life.after_launch(utc_now() + timedelta(hours=2))
    assert not Decision.objects.filter(subject=f"NodeClaim theirs-{unique}").exists()
    assert NodeClaim.objects.get(name=f"theirs-{unique}").deleting_since is None
    taints = {t["key"] for t in life.rest.get(NODE, f"theirs-{unique}-node")["spec"]["taints"]}
    assert "karpenter.sh/unregistered" in taints and f"theirs-{unique}" in life.claims()


# Liveness (kubernetes-sigs/karpenter pkg/controllers/nodeclaim/lifecycle/liveness_test.go) -----------


class LaunchesRefused:
    """The EC2 test server's provider whose RunInstances keeps failing (throttled): a fault injected
    into the real provider, as tests/faults does, since moto cannot be made to throttle."""

    def __init__(self, provider):
        self.provider = provider

    def __getattr__(self, name):
        return getattr(self.provider, name)

    def launch(self, request):
        from scheduling.adapters.ec2.interface import CloudAPIError

        raise CloudAPIError("RequestLimitExceeded", "Request limit exceeded.", "run_instances")


def test_should_delete_the_nodeclaim_when_the_launch_timeout_has_passed(life):
    from scheduling.world import in_flight_nodes

    refused = LaunchesRefused(life.provider)
    life.pod("app")
    life.sync.sync_once()
    first = provisioning.provision(refused, life.adapter, utc_now())
    assert (first["launched"], first["launch_failures"]) == (0, 1)
    [claim] = life.claims()
    assert claim in {n["metadata"]["name"] for n in in_flight_nodes()}  # retried meanwhile, as capacity
    provisioning.provision(refused, life.adapter, utc_now() + timedelta(minutes=4))
    assert life.claims() == [claim]  # within the timeout: retried, kept, and no second claim for the pod

    provisioning.provision(refused, life.adapter, utc_now() + timedelta(minutes=5, seconds=1))
    decision = Decision.objects.get(subject=f"NodeClaim {claim}", kind="registration-timeout")
    assert decision.outcome == "acted" and "was not launched within 5 minutes" in decision.reason
    assert "RequestLimitExceeded" in decision.reason
    assert claim not in {n["metadata"]["name"] for n in in_flight_nodes()}  # no longer capacity
    assert claim not in life.claims()  # deleting (its finalizer goes on the next pass)
    life.after_launch()
    with pytest.raises(Exception):
        life.rest.get(NODECLAIM, claim)
    # The pod was planned again in that run; with EC2 answering, its new claim launches.
    [new] = life.claims()
    assert new != claim and provisioning.provision(life.provider, life.adapter, utc_now())["relaunched"] >= 1
    assert life.rest.get(NODECLAIM, new)["status"]["providerID"]


# Orphan instances (aws/karpenter-provider-aws pkg/controllers/nodeclaim/garbagecollection) -----------


def test_should_delete_an_instance_along_with_the_node_if_there_is_no_nodeclaim_owner(life, settings, unique):
    from .test_node_lifecycle import run_instance

    settings.KARPWEB_MODE = "control"  # the instance GC acts on the account: the global mode
    orphan = run_instance(life.raw_ec2, {"karpweb.io/managed": "true", "karpweb.io/nodeclaim": f"gone-{unique}"})
    life.rest.create(NODE, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"orphan-{unique}"},
                            "spec": {"providerID": f"aws:///{ZONE}/{orphan}"}})
    life.sync.sync_once()
    assert nodes.collect_instances(life.provider, utc_now() + timedelta(minutes=5), life.adapter)["orphan_instances"] >= 1
    assert life.instance_state(orphan) in ("shutting-down", "terminated")
    with pytest.raises(Exception):
        life.rest.get(NODE, f"orphan-{unique}")
    decision = Decision.objects.get(subject=f"instance {orphan}")
    assert decision.outcome == "acted" and f"and deleting its node orphan-{unique}" in decision.reason


def test_a_stopped_orphan_instance_is_collected(life, settings, unique):
    from .test_node_lifecycle import run_instance

    settings.KARPWEB_MODE = "control"
    orphan = run_instance(life.raw_ec2, {"karpweb.io/managed": "true", "karpweb.io/nodeclaim": f"stopped-{unique}"})
    life.raw_ec2.stop_instances(InstanceIds=[orphan])
    assert life.instance_state(orphan) in ("stopping", "stopped")
    nodes.collect_instances(life.provider, utc_now() + timedelta(minutes=5), life.adapter)
    assert life.instance_state(orphan) in ("shutting-down", "terminated")


def test_orphan_instances_are_a_recommendation_in_observe_mode(life, unique):
    from .test_node_lifecycle import run_instance

    orphan = run_instance(life.raw_ec2, {"karpweb.io/managed": "true", "karpweb.io/nodeclaim": f"kept-{unique}"})
    life.rest.create(NODE, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"kept-{unique}"},
                            "spec": {"providerID": f"aws:///{ZONE}/{orphan}"}})
    life.sync.sync_once()
    nodes.collect_instances(life.provider, utc_now() + timedelta(minutes=5), life.adapter)
    assert life.instance_state(orphan) == "running" and life.rest.get(NODE, f"kept-{unique}")
    assert Decision.objects.get(subject=f"instance {orphan}").outcome == "recommended"


# Registration again, registration health, extended resources ------------------------------------------


def test_a_node_registered_again_for_a_registered_claim_is_registered_again(life):
    """The Node gone (deleted, its finalizer removed by hand), then the instance's kubelet registers
    it anew, with the unregistered taint and no labels: karpweb registers it again, as the first time."""
    claim, node, _instance = registered_claim(life, ready=True)
    node_gone(life, node)
    life.kubelet_registers(claim, name=node, ready=True)
    assert life.after_launch()["registered"] == 1
    again = life.rest.get(NODE, node)
    labels, taints = again["metadata"]["labels"], {t["key"] for t in again["spec"].get("taints", [])}
    assert labels["karpenter.sh/registered"] == "true" and labels["karpenter.sh/nodepool"] == life.pool
    assert "karpenter.sh/unregistered" not in taints and STARTUP_TAINT["key"] in taints
    assert again["metadata"]["ownerReferences"][0]["name"] == claim
    # ... and initialized again once its startup taint is gone.
    life.rest.patch(NODE, node, {"spec": {"taints": [t for t in again["spec"]["taints"]
                                                     if t["key"] not in (STARTUP_TAINT["key"], "node.kubernetes.io/not-ready")]}})
    assert life.after_launch()["initialized"] == 1
    assert life.rest.get(NODE, node)["metadata"]["labels"]["karpenter.sh/initialized"] == "true"
    assert life.after_launch()["registered"] == 0  # nothing left to do


def pool_condition(life, condition="NodeRegistrationHealthy"):
    found = [c for c in life.rest.get(NODEPOOL, life.pool).get("status", {}).get("conditions", []) if c["type"] == condition]
    return (found[0]["status"], found[0]["reason"]) if found else None


def test_node_registration_healthy_follows_the_last_registrations(life, unique):
    """kubernetes-sigs/karpenter registration_test / liveness_test "NodeRegistrationHealthy": Unknown
    for a new NodePool; False once half of the last 4 claims failed to register (here: two past the
    registration TTL); True again once successes outnumber them; Unknown again when the template changes."""
    from .test_node_lifecycle import karpweb_claim, run_instance

    life.after_launch()
    assert pool_condition(life) == ("Unknown", "AwaitingReconciliation")
    late = utc_now() - timedelta(minutes=20)
    for index in range(2):
        name = f"late-{index}-{unique}"
        karpweb_claim(life.rest, name, life.pool, run_instance(life.raw_ec2, {"karpweb.io/nodeclaim": name}),
                      launched_at=late.strftime("%Y-%m-%dT%H:%M:%SZ"))
    life.after_launch()
    assert pool_condition(life) == ("False", "RegistrationFailed")
    for index in range(3):  # [failed, failed, ok, ok] is still half failures; [failed, ok, ok, ok] is not
        name = f"ok-{index}-{unique}"
        karpweb_claim(life.rest, name, life.pool, run_instance(life.raw_ec2, {"karpweb.io/nodeclaim": name}))
        life.kubelet_registers(name)
        life.after_launch()
        assert pool_condition(life) == (("True", "NodeRegistrationHealthy") if index == 2 else ("False", "RegistrationFailed"))
    life.rest.patch(NODEPOOL, life.pool, {"spec": {"template": {"metadata": {"labels": {"team": "search"}}}}})
    life.after_launch()
    assert pool_condition(life) == ("Unknown", "AwaitingReconciliation")
    assert NodePool.objects.get(name=life.pool).registration_health["results"] == []


def test_should_not_consider_the_nodeclaim_initialized_when_all_requested_resources_arent_registered(
        rest, adapter, make_provider, raw_ec2, unique):
    """A GPU pod's claim asks for the GPUs (spec.resources.requests, as upstream writes it); its
    node is not Initialized until its device plugin makes them allocatable."""
    provider = make_provider(instance_type_patterns=("m5.*", "g5.xlarge"))
    life = Lifecycle(rest, adapter, provider, raw_ec2, unique, startup_taints=(), instance_type="g5.xlarge")
    assert InstanceType.objects.get(name="g5.xlarge").gpu_count == 1  # as EC2 describes it
    rest.create(POD, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "trainer", "namespace": life.ns}, "spec": {
        "containers": [{"name": "train", "image": "registry.example/train:1",
                        "resources": {"requests": {"cpu": "1", "memory": "2Gi"}, "limits": {"nvidia.com/gpu": "1"}}}],
        "nodeSelector": {"karpenter.sh/nodepool": life.pool}}}, namespace=life.ns)
    life.sync.sync_once()
    counts = provisioning.provision(life.provider, life.adapter, utc_now())
    assert counts["launched"] == 1, (counts, list(Decision.objects.filter(subject__contains="trainer").values_list("reason", flat=True)))
    [claim] = life.claims()
    requests = life.rest.get(NODECLAIM, claim)["spec"]["resources"]["requests"]
    assert requests["nvidia.com/gpu"] == "1" and requests["cpu"].startswith("1") and requests["pods"] == "1"
    node = life.kubelet_registers(claim, ready=True)
    life.rest.patch(NODE, node, {"spec": {"taints": []}})  # Ready, no startup or not-ready taint left
    life.after_launch()
    life.after_launch()
    assert conditions(life, claim)["Initialized"] == ("False", "ResourceNotRegistered")
    assert life.provision()["launched"] == 0  # still the GPU pod's capacity while the plugin starts
    life.set_node_status(node, ready=True, extended={"nvidia.com/gpu": "1"})  # the device plugin registered
    assert life.after_launch()["initialized"] == 1
    assert conditions(life, claim)["Initialized"] == ("True", "Initialized")


def conditions(life, claim):
    return {c["type"]: (c["status"], c["reason"]) for c in life.rest.get(NODECLAIM, claim)["status"]["conditions"]}


@pytest.mark.django_db(transaction=True)  # the watch process runs in its own thread, on its own connection
def test_should_assume_pod_will_schedule_to_a_tainted_node_with_a_custom_startup_taint_in_the_watch_loop(
        rest, adapter, provider, raw_ec2, unique):
    """The running watch process (scheduling/loop/watch.py), as `manage.py watch` runs it: each
    change to the pending pod opens a batch planned from the kept world, and each Node event runs
    the registration pass. One claim, whatever the node coming up looks like."""
    import time

    from scheduling.loop.watch import WatchLoop

    from .test_watch import start

    life = Lifecycle(rest, adapter, provider, raw_ec2, unique)
    kept, launched = KeptWorld(), []

    def provision():
        launched.append(provisioning.provision(provider, adapter, utc_now(), kept.world)["launched"])

    def wait_for_batch(count):
        deadline = time.monotonic() + 20
        while len(launched) < count and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(launched) >= count, launched

    loop = WatchLoop(adapter, provision=provision, after_launch=lambda: nodes.after_launch(provider, adapter),
                     kept=kept, idle_seconds=0.3, max_seconds=2, check_seconds=3600)
    worker, stop = start(loop)
    try:
        while not kept.loaded:
            time.sleep(0.05)
        life.pod("app")
        wait_for_batch(1)
        # A batch can open before the pod is in the kept world (the next one launches), and a claim is
        # created before its instance is launched: wait for the claim's providerID, which the node needs.
        deadline = time.monotonic() + 20
        while not life.launched_claims() and time.monotonic() < deadline:
            time.sleep(0.05)
        [claim] = life.launched_claims()
        batches_before_the_claim = len(launched)
        node = life.kubelet_registers(claim)
        for touch in range(6):  # each change to the pod is a provisioning batch
            if touch == 3:
                life.set_node_status(node, ready=True)  # Ready, the startup taint still there
            time.sleep(0.5)  # the watch registers the node meanwhile
            rest.patch(POD, "app", {"metadata": {"labels": {"touch": str(touch)}}}, namespace=life.ns)
            wait_for_batch(batches_before_the_claim + touch + 1)
    finally:
        stop.set()
        worker.join(10)
    # One launch in all the batches (a second claim for the same pod was the bug), whichever batch made it.
    assert sum(launched) == 1 and set(launched) <= {0, 1}, launched
    assert life.claims() == [claim]
    labels = rest.get(NODE, node)["metadata"]["labels"]
    assert labels.get("karpenter.sh/registered") == "true" and "karpenter.sh/initialized" not in labels
