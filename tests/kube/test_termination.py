"""Node termination, the drain and interruptions as Karpenter's suites test them, against the real
kube-apiserver and the EC2 test server (moto's EC2 and SQS over HTTP). Each test is named after
its upstream counterpart: kubernetes-sigs/karpenter `pkg/controllers/node/termination/suite_test.go`
(and its terminator), `pkg/controllers/nodeclaim/lifecycle/termination_test.go`, and
aws/karpenter-provider-aws `pkg/controllers/interruption/suite_test.go`.

No kubelet runs: pods with terminationGracePeriodSeconds 0 go as soon as they are evicted; pods
with a longer one stay terminating until the test removes them as their kubelet would."""

import json
from datetime import timedelta

import pytest

from scheduling.adapters.ec2.client import Caller
from scheduling.adapters.ec2.interruptionqueue import InterruptionQueue
from scheduling.adapters.kube.adapter import KubeClusterAdapter
from scheduling.adapters.kube.resources import NODE, NODECLAIM, POD, Resource
from scheduling.adapters.kube.sync import ClusterSync
from scheduling.loop import nodes, steps
from scheduling.models import Decision, EventCount
from tests.support.ec2_fixtures import *  # noqa: F403 - the EC2 test server and providers
from django.utils.timezone import now as utc_now  # after the star import, which brings its own timezone
from tests.support.clusters import use_cluster, use_kube_server

from . import helpers as h
from .test_node_lifecycle import conditions_of, karpweb_claim, kubelet_node, run_instance

pytestmark = [pytest.mark.kube, pytest.mark.django_db]
VOLUMEATTACHMENT = Resource("VolumeAttachment", "storage.k8s.io", "v1", "volumeattachments")
DAEMONSET_OWNER = {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent",
                   "uid": "00000000-0000-0000-0000-0000000000d5", "controller": True}


@pytest.fixture(autouse=True)
def control(settings, aws_test_credentials, kube_server):
    use_kube_server(kube_server)
    settings.KARPWEB_PROVIDER = "aws"
    settings.KARPWEB_MODE = "control"
    settings.KARPWEB_KARPENTER = "absent"


@pytest.fixture
def adapter(kube_api_client):
    """Short waits: a pass gives up on a PodDisruptionBudget after about a second."""
    return KubeClusterAdapter(kube_api_client, eviction_timeout=1.0, eviction_attempts=3,
                              eviction_backoff=(0.1, 0.3), pod_wait=1.0)


def later(kube_api_client, **delta):
    """The adapter as it would run `delta` from now (only the clock moves)."""
    return KubeClusterAdapter(kube_api_client, eviction_timeout=1.0, eviction_attempts=3, eviction_backoff=(0.1, 0.3),
                              pod_wait=1.0, clock=lambda: utc_now() + timedelta(**delta))


class Node:
    """A karpweb NodeClaim, its instance and its registered Node (which then carries
    karpenter.sh/termination), and a namespace for its pods."""

    def __init__(self, rest, adapter, provider, raw_ec2, unique, ready=True, **template):
        self.rest, self.adapter, self.provider = rest, adapter, provider
        self.name = self.claim = f"t-{unique}"
        rest.create(h.NODEPOOL, {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": self.name},
                                 "spec": {"template": {"spec": {"nodeClassRef": {**h.NODE_CLASS_REF},
                                                                "requirements": [], **template}}}})
        self.instance = run_instance(raw_ec2, {"karpweb.io/managed": "true", "karpweb.io/nodeclaim": self.claim})
        karpweb_claim(rest, self.claim, self.name, self.instance, finalizers=["karpenter.sh/termination"])
        kubelet_node(rest, self.name, self.instance, ready=ready)
        self.ns = h.namespace(rest, f"t-{unique}")
        self.sync = ClusterSync(adapter)
        self.sync.sync_once()
        nodes.after_launch(provider, adapter, utc_now())  # registered

    def pod(self, name, grace=0, labels=None, annotations=None, owner=None, priority_class=None, tolerations=()):
        """A running pod on this node; `grace`: its terminationGracePeriodSeconds."""
        metadata = {"name": name, "namespace": self.ns, "labels": labels or {}, "annotations": annotations or {},
                    "ownerReferences": [owner] if owner else []}
        spec = {"nodeName": self.name, "terminationGracePeriodSeconds": grace, "tolerations": list(tolerations),
                "containers": [{"name": "app", "image": "registry.example/app:1"}]}
        if priority_class:
            spec["priorityClassName"] = priority_class
        self.rest.create(POD, {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}, namespace=self.ns)
        self.rest.patch(POD, name, {"status": h._pod_status("Running")}, namespace=self.ns, subresource="status")
        return name

    def terminate_pass(self, adapter=None, now=None):
        self.sync.sync_once()
        return nodes.after_launch(self.provider, adapter or self.adapter, now or utc_now())

    def pods(self):
        return sorted(p["metadata"]["name"] for p in self.rest.list(POD, field_selector=f"spec.nodeName={self.name}")["items"])

    def terminating(self):
        return sorted(p["metadata"]["name"] for p in self.rest.list(POD, field_selector=f"spec.nodeName={self.name}")["items"]
                      if p["metadata"].get("deletionTimestamp"))

    def kubelet_removes(self, *names):
        for name in names:
            self.rest.delete(POD, name, self.ns, body={"gracePeriodSeconds": 0})

    def exists(self, resource, name=None):
        try:
            return self.rest.get(resource, name or self.name)
        except Exception:
            return None

    def instance_state(self, raw_ec2):
        return raw_ec2.describe_instances(InstanceIds=[self.instance])["Reservations"][0]["Instances"][0]["State"]["Name"]


# --- node termination (node/termination/suite_test.go, nodeclaim/lifecycle/termination_test.go) ------

def test_should_delete_nodeclaims_and_the_node_when_the_node_is_deleted(rest, adapter, unique, provider, raw_ec2):
    """kubectl delete node: the finalizer holds the Node, its pods are drained, its NodeClaim is
    deleted and its instance terminated, and only then does the Node go."""
    node = Node(rest, adapter, provider, raw_ec2, unique)
    assert rest.get(NODE, node.name)["metadata"]["finalizers"] == ["karpenter.sh/termination"]
    node.pod("web")
    rest.delete(NODE, node.name)  # an operator's kubectl delete node

    node.terminate_pass()
    assert node.pods() == []
    assert rest.get(NODECLAIM, node.claim)["metadata"]["deletionTimestamp"]
    assert node.instance_state(raw_ec2) in ("shutting-down", "terminated")
    node.terminate_pass()
    node.terminate_pass()
    assert node.exists(NODE) is None and node.exists(NODECLAIM, node.claim) is None
    assert Decision.objects.filter(subject=f"NodeClaim {node.claim}", kind="terminate", outcome="acted").exists()


def test_should_not_evict_pods_when_the_instance_is_gone_and_the_node_is_not_ready(rest, adapter, unique, provider,
                                                                                raw_ec2):
    """Upstream 609: no kubelet is left to drain, so the Node goes without pod-by-pod eviction."""
    node = Node(rest, adapter, provider, raw_ec2, unique, ready=False)
    node.pod("web")
    raw_ec2.terminate_instances(InstanceIds=[node.instance])
    rest.delete(NODE, node.name)

    node.terminate_pass()
    assert node.exists(NODE) is None
    assert node.pods() == ["web"]  # never evicted: the pod garbage collector removes it
    node.terminate_pass()
    assert node.exists(NODECLAIM, node.claim) is None


def test_should_not_delete_nodes_with_no_underlying_instance_if_the_node_is_still_ready(rest, adapter, unique, provider,
                                                                                    raw_ec2):
    """Upstream 643: a Ready Node still has a kubelet, so it is drained pod by pod."""
    node = Node(rest, adapter, provider, raw_ec2, unique, ready=True)
    node.pod("web")
    raw_ec2.terminate_instances(InstanceIds=[node.instance])
    rest.delete(NODE, node.name)

    assert node.terminate_pass()["terminated"] == 0
    assert node.pods() == []  # evicted
    for _ in range(2):
        node.terminate_pass()
    assert node.exists(NODE) is None and node.exists(NODECLAIM, node.claim) is None


def test_should_delete_multiple_nodes_if_multiple_nodes_map_to_the_nodeclaim(rest, adapter, unique, provider, raw_ec2):
    node = Node(rest, adapter, provider, raw_ec2, unique)
    # A second Node with the same providerID, without the finalizer (as one registered before karpweb
    # added it): karpweb puts it on before deleting the Node, so that Node is drained too.
    kubelet_node(rest, f"{node.name}-b", node.instance, ready=True)
    node.pod("web")
    h.pod(rest, node.ns, "web-b", node_name=f"{node.name}-b", node_selector={})
    rest.delete(NODECLAIM, node.claim)

    node.terminate_pass()
    # Both drained (without the finalizer the second Node would have gone at once, leaving web-b).
    assert rest.list(POD, namespace=node.ns)["items"] == []
    for _ in range(2):
        node.terminate_pass()
    assert node.exists(NODE) is None and node.exists(NODE, f"{node.name}-b") is None
    assert node.exists(NODECLAIM, node.claim) is None


# --- the drain (terminator) -------------------------------------------------------------------------

def test_should_evict_pods_in_order_and_wait_for_each_group(rest, adapter, unique, provider, raw_ec2):
    """Non-critical, then non-critical DaemonSet, then critical, then critical DaemonSet pods, each
    group only once the one before is gone (upstream 415, 485)."""
    node = Node(rest, adapter, provider, raw_ec2, unique)
    node.pod("app", grace=30)
    node.pod("agent", grace=30, owner=DAEMONSET_OWNER)
    node.pod("dns", grace=30, priority_class="system-cluster-critical")
    node.pod("cni", grace=30, owner=DAEMONSET_OWNER, priority_class="system-node-critical")

    for group in ("app", "agent", "dns", "cni"):
        result = adapter.drain(node.name)
        assert node.terminating() == [group], result.summary()
        assert not result.drained
        node.kubelet_removes(group)
    assert adapter.drain(node.name).drained and node.pods() == []


def test_should_not_gate_past_deadline_pods_behind_graceful_eviction_of_earlier_tiers(rest, adapter, unique, provider,
                                                                                    raw_ec2):
    """Upstream 777: a critical pod whose 10-minute grace would outlast the node's termination time
    (5 minutes away) is deleted now, while a PDB still holds a non-critical pod."""
    node = Node(rest, adapter, provider, raw_ec2, unique)
    node.pod("app", labels={"app": "web"})
    h.pdb(rest, node.ns, "web", {"app": "web"}, disruptions_allowed=0, healthy=1)
    node.pod("dns", grace=600, priority_class="system-cluster-critical")

    result = adapter.drain(node.name, termination_time=utc_now() + timedelta(minutes=5))
    assert result.deleted_pods == [f"{node.ns}/dns"] and f"{node.ns}/app" in result.blocked
    dns = rest.get(POD, "dns", node.ns)
    assert 280 <= dns["metadata"]["deletionGracePeriodSeconds"] <= 300  # clamped to the time left
    assert node.terminating() == ["dns"]


def test_should_not_evict_pods_that_tolerate_the_disrupted_taint(rest, adapter, unique, provider, raw_ec2):
    node = Node(rest, adapter, provider, raw_ec2, unique)
    node.pod("web")
    node.pod("tolerant", tolerations=[{"key": "karpenter.sh/disrupted", "operator": "Exists"}])

    result = adapter.drain(node.name)
    assert result.drained and result.evicted == [f"{node.ns}/web"]
    assert node.pods() == ["tolerant"]


def test_should_taint_the_node_and_evict_others_while_a_do_not_disrupt_pod_waits_until_the_termination_time(
        rest, adapter, kube_api_client, unique, provider, raw_ec2):
    """Upstream 751-880: the taint comes first, always; the do-not-disrupt pod is not evicted but
    is deleted once the NodeClaim's termination time (deletion + the NodePool's
    terminationGracePeriod) comes, its grace clamped."""
    node = Node(rest, adapter, provider, raw_ec2, unique, terminationGracePeriod="10m")
    node.pod("web")
    node.pod("training", grace=30, annotations={"karpenter.sh/do-not-disrupt": "true"})
    rest.delete(NODECLAIM, node.claim)

    node.terminate_pass()
    claim = rest.get(NODECLAIM, node.claim)
    deleted = claim["metadata"]["deletionTimestamp"]
    stamp = claim["metadata"]["annotations"]["karpenter.sh/nodeclaim-termination-timestamp"]
    from scheduling.engine.timeutil import parse_time
    assert parse_time(stamp) - parse_time(deleted) == timedelta(minutes=10)
    taints = rest.get(NODE, node.name)["spec"]["taints"]
    assert any(t["key"] == "karpenter.sh/disrupted" and t["effect"] == "NoSchedule" for t in taints)
    assert node.pods() == ["training"] and node.terminating() == []  # web evicted, training waits
    assert node.instance_state(raw_ec2) == "running"

    # 9 min 50 s later the pod's 30 s grace would outlast the termination time: it is deleted with
    # the 10 s that are left (upstream's forceDelete), PDBs and do-not-disrupt notwithstanding.
    node.terminate_pass(adapter=later(kube_api_client, minutes=9, seconds=50))
    training = rest.get(POD, "training", node.ns)
    assert training["metadata"]["deletionTimestamp"] and training["metadata"]["deletionGracePeriodSeconds"] <= 10
    node.kubelet_removes("training")
    for _ in range(2):
        node.terminate_pass()
    assert node.exists(NODE) is None and node.exists(NODECLAIM, node.claim) is None


def test_should_wait_for_volume_attachments_before_terminating_the_instance(rest, adapter, unique, provider, raw_ec2):
    node = Node(rest, adapter, provider, raw_ec2, unique)
    rest.create(VOLUMEATTACHMENT, {
        "apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttachment", "metadata": {"name": f"va-{unique}"},
        "spec": {"attacher": "ebs.csi.aws.com", "nodeName": node.name, "source": {"persistentVolumeName": f"pv-{unique}"}}})
    rest.delete(NODECLAIM, node.claim)

    node.terminate_pass()
    node.terminate_pass()
    assert node.instance_state(raw_ec2) == "running" and node.exists(NODE)  # drained, volumes still attached
    conditions = conditions_of(rest, node.claim)  # upstream's termination conditions on the claim
    assert conditions["Drained"] == ("True", "Drained")
    assert conditions["VolumesDetached"] == ("Unknown", "AwaitingVolumeDetachment")
    assert adapter.pending_volume_attachments(node.name) == [f"va-{unique}"]
    rest.delete(VOLUMEATTACHMENT, f"va-{unique}")  # the attach-detach controller detached it
    node.terminate_pass()
    assert node.instance_state(raw_ec2) in ("shutting-down", "terminated")
    node.terminate_pass()
    assert node.exists(NODE) is None and node.exists(NODECLAIM, node.claim) is None


def test_should_wait_for_volume_attachments_until_the_termination_grace_period_expires(rest, adapter, unique, provider,
                                                                                     raw_ec2):
    node = Node(rest, adapter, provider, raw_ec2, unique, terminationGracePeriod="1m")
    rest.create(VOLUMEATTACHMENT, {
        "apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttachment", "metadata": {"name": f"va-{unique}"},
        "spec": {"attacher": "ebs.csi.aws.com", "nodeName": node.name, "source": {"persistentVolumeName": f"pv-{unique}"}}})
    rest.delete(NODECLAIM, node.claim)

    node.terminate_pass()
    assert node.instance_state(raw_ec2) == "running"  # within the minute: the volume is waited for
    node.terminate_pass(now=utc_now() + timedelta(minutes=2))
    assert node.instance_state(raw_ec2) in ("shutting-down", "terminated")  # past it: no longer
    conditions = conditions_of(rest, node.claim)
    assert conditions["VolumesDetached"] == ("False", "TerminationGracePeriodElapsed")
    assert conditions["InstanceTerminating"] == ("True", "InstanceTerminating")


def test_should_exclude_the_node_from_load_balancers_when_draining(rest, adapter, unique, provider, raw_ec2):
    node = Node(rest, adapter, provider, raw_ec2, unique)
    adapter.drain(node.name)
    labels = rest.get(NODE, node.name)["metadata"]["labels"]
    assert labels["node.kubernetes.io/exclude-from-external-load-balancers"] == "karpenter"


# --- interruptions (aws interruption/suite_test.go) ---------------------------------------------------

def queue_for(boto_session, config, unique):
    sqs = boto_session.client("sqs", region_name="us-east-1", endpoint_url=config.endpoint_url)
    url = sqs.create_queue(QueueName=f"karpweb-int-{unique}")["QueueUrl"]
    return sqs, url, InterruptionQueue(sqs, Caller(config), url, wait_seconds=0)


def spot_warning(instance):
    return json.dumps({"version": "0", "source": "aws.ec2", "detail-type": "EC2 Spot Instance Interruption Warning",
                       "detail": {"instance-id": instance, "instance-action": "terminate"}})


def test_should_delete_the_nodeclaim_and_finish_a_pdb_held_drain_after_the_message_is_gone(
        rest, adapter, unique, provider, raw_ec2, config, boto_session, world):
    node = Node(rest, adapter, provider, raw_ec2, unique)
    node.pod("web", labels={"app": "web"})
    h.pdb(rest, node.ns, "web", {"app": "web"}, disruptions_allowed=0, healthy=1)
    sqs, url, queue = queue_for(boto_session, config, unique)
    sqs.send_message(QueueUrl=url, MessageBody=spot_warning(node.instance))

    counts = nodes.handle_interruptions(queue, provider, adapter)
    assert counts["interrupted_nodes"] == 1
    assert sqs.receive_message(QueueUrl=url, VisibilityTimeout=0).get("Messages") in (None, [])  # deleted
    assert rest.get(NODECLAIM, node.claim)["metadata"]["deletionTimestamp"]
    assert node.pods() == ["web"] and node.instance_state(raw_ec2) == "running"  # the budget holds it

    node.terminate_pass()  # still held: termination keeps trying, pass after pass
    assert node.pods() == ["web"]
    assert conditions_of(rest, node.claim)["Drained"] == ("Unknown", "Draining")
    h.set_pdb_status(rest, node.ns, "web", 1, 2)  # a replacement is healthy elsewhere
    node.terminate_pass()
    assert node.pods() == [] and node.instance_state(raw_ec2) in ("shutting-down", "terminated")
    node.terminate_pass()
    assert node.exists(NODE) is None and node.exists(NODECLAIM, node.claim) is None


def test_should_delete_the_nodeclaim_of_an_instance_whose_node_has_not_registered(
        rest, adapter, unique, provider, raw_ec2, config, boto_session, world):
    """Upstream looks NodeClaims up by instance ID, so a claim without a Node is acted on."""
    h.nodepool(rest, f"nn-{unique}")
    instance = run_instance(raw_ec2, {"karpweb.io/managed": "true", "karpweb.io/nodeclaim": f"nn-{unique}"})
    karpweb_claim(rest, f"nn-{unique}", f"nn-{unique}", instance, finalizers=["karpenter.sh/termination"])
    sync = ClusterSync(adapter)
    sync.sync_once()
    sqs, url, queue = queue_for(boto_session, config, unique)
    sqs.send_message(QueueUrl=url, MessageBody=spot_warning(instance))

    assert nodes.handle_interruptions(queue, provider, adapter)["interrupted_nodes"] == 1
    state = raw_ec2.describe_instances(InstanceIds=[instance])["Reservations"][0]["Instances"][0]["State"]["Name"]
    assert state in ("shutting-down", "terminated")
    sync.sync_once()
    nodes.after_launch(provider, adapter, utc_now())
    with pytest.raises(Exception):
        rest.get(NODECLAIM, f"nn-{unique}")
    assert Decision.objects.get(subject=f"NodeClaim nn-{unique}", kind="interruption").outcome == "acted"


def test_should_not_error_when_the_nodeclaim_is_already_deleted(rest, adapter, unique, provider, raw_ec2, config,
                                                                boto_session, world):
    node = Node(rest, adapter, provider, raw_ec2, unique)
    rest.patch(NODECLAIM, node.claim, {"metadata": {"finalizers": []}})
    rest.delete(NODECLAIM, node.claim)  # gone from the API server, still in karpweb's mirror
    sqs, url, queue = queue_for(boto_session, config, unique)
    sqs.send_message(QueueUrl=url, MessageBody=spot_warning(node.instance))

    counts = nodes.handle_interruptions(queue, provider, adapter)
    assert counts["messages"] == 1 and "queue_error" not in counts
    decision = Decision.objects.get(subject=f"node {node.name}", kind="interruption")
    assert decision.outcome == "acted" and decision.error == ""


def test_queue_errors_are_counted_and_recorded_and_do_not_fail_provisioning(settings, config, boto_session, unique,
                                                                             monkeypatch, world):
    """Upstream returns QueueDoesNotExist and AccessDenied from its reconcile (739, 743); karpweb
    counts them (karpweb_interruption_queue_errors) and records a status decision, and the
    provisioning run that polls the queue goes on."""
    settings.KARPWEB_PROVIDER = "simulated"
    use_cluster(connection="simulated")
    sqs = boto_session.client("sqs", region_name="us-east-1", endpoint_url=config.endpoint_url)
    missing = InterruptionQueue(sqs, Caller(config), f"missing-{unique}", wait_seconds=0)
    monkeypatch.setattr(steps.backends, "interruption_queue", lambda: missing)  # the real queue client, a missing queue

    counts = steps.provision()
    assert counts["queue_error"] == "AWS.SimpleQueueService.NonExistentQueue"  # SQS's QueueDoesNotExist
    assert "claims_planned" in counts  # provisioning ran
    assert EventCount.objects.get(name=nodes.QUEUE_ERRORS, label=counts["queue_error"]).value == 1
    steps.provision()
    assert EventCount.objects.get(name=nodes.QUEUE_ERRORS, label=counts["queue_error"]).value == 2
    status = Decision.objects.filter(subject=nodes.QUEUE_SUBJECT, kind="status")
    assert status.count() == 1 and status[0].outcome == "failed"  # recorded once while it stays the same


def test_observe_mode_acts_on_nothing(settings, rest, adapter, unique, provider, raw_ec2, config, boto_session, world):
    node = Node(rest, adapter, provider, raw_ec2, unique)
    node.pod("web")
    settings.KARPWEB_MODE = "observe"
    sqs, url, queue = queue_for(boto_session, config, unique)
    sqs.send_message(QueueUrl=url, MessageBody=spot_warning(node.instance))
    nodes.handle_interruptions(queue, provider, adapter)
    assert not rest.get(NODECLAIM, node.claim)["metadata"].get("deletionTimestamp")
    assert Decision.objects.get(subject=f"node {node.name}", kind="interruption").outcome == "recommended"

    rest.delete(NODE, node.name)
    node.terminate_pass()
    assert rest.get(NODE, node.name)["metadata"]["finalizers"] == ["karpenter.sh/termination"]
    assert node.pods() == ["web"] and node.instance_state(raw_ec2) == "running"
    assert not rest.get(NODECLAIM, node.claim)["metadata"].get("deletionTimestamp")
    assert Decision.objects.get(subject=f"node {node.name}", kind="terminate").outcome == "recommended"


# --- EC2 status checks (aws interruption/suite_test.go "instance status") -----------------------------

def test_should_annotate_the_nodeclaim_with_a_termination_timestamp_for_forceful_termination(
        rest, adapter, unique, provider, raw_ec2):
    """A failed system status check: the claim's termination time is now and it is deleted, so its
    pods are deleted at once, their PodDisruptionBudget notwithstanding."""
    from scheduling.engine.interruptions import SYSTEM_STATUS, Interruption

    node = Node(rest, adapter, provider, raw_ec2, unique)
    node.pod("web", labels={"app": "web"})
    h.pdb(rest, node.ns, "web", {"app": "web"}, disruptions_allowed=0, healthy=1)
    event = Interruption(SYSTEM_STATUS, (node.instance,), detail="EC2 SystemStatus check failed (reachability)")

    assert nodes.act_on(event, provider, adapter, utc_now()) == 1
    claim = rest.get(NODECLAIM, node.claim)
    assert claim["metadata"]["deletionTimestamp"]
    assert claim["metadata"]["annotations"]["karpenter.sh/nodeclaim-termination-timestamp"]
    web = rest.get(POD, "web", node.ns)
    assert web["metadata"]["deletionTimestamp"] and web["metadata"]["deletionGracePeriodSeconds"] == 1  # forced


def test_instance_statuses_are_read_from_ec2_and_healthy_instances_are_left_alone(rest, adapter, unique, provider,
                                                                                 raw_ec2, world):
    node = Node(rest, adapter, provider, raw_ec2, unique)
    assert nodes.handle_instance_status(provider, adapter, utc_now()) == {"unhealthy_instances": 0}
    assert not rest.get(NODECLAIM, node.claim)["metadata"].get("deletionTimestamp")
