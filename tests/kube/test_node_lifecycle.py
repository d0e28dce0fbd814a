"""After the launch, against the real kube-apiserver and the EC2 test server (moto's EC2 and SQS over
HTTP): the Node registered with the instance's providerID takes the NodeClaim to Registered (labels
and taints synced, the unregistered taint gone) and then Initialized once ready without startup
taints; a claim whose node never comes is deleted after the registration TTL and its instance
terminated; an orphan instance karpweb tagged is collected and another tool's is not; an
interruption on the SQS queue drains the node at once, an unknown message is deleted and counted,
and a worker that dies before deleting a message acts once."""

import json
from datetime import timedelta

import pytest

from scheduling.adapters.ec2.client import Caller
from scheduling.adapters.ec2.interruptionqueue import InterruptionQueue
from scheduling.adapters.kube.resources import NODE, NODECLAIM, POD
from scheduling.adapters.kube.sync import ClusterSync
from scheduling.loop import nodes
from scheduling.models import Decision, EventCount, NodeClaim
from tests.support.ec2_fixtures import *  # noqa: F403 - the EC2 test server and providers
from django.utils.timezone import now as utc_now  # after the star import, which brings its own timezone
from tests.support.clusters import use_kube_server

from . import helpers as h

pytestmark = [pytest.mark.kube, pytest.mark.django_db]
ZONE = "us-east-1a"


@pytest.fixture(autouse=True)
def control(settings, aws_test_credentials, kube_server):
    use_kube_server(kube_server)
    settings.KARPWEB_PROVIDER = "aws"
    settings.KARPWEB_MODE = "control"
    settings.KARPWEB_KARPENTER = "absent"


def run_instance(raw_ec2, tags):
    answer = raw_ec2.run_instances(ImageId="ami-12c6146b", MinCount=1, MaxCount=1, InstanceType="m5.large",
                                   Placement={"AvailabilityZone": ZONE},
                                   TagSpecifications=[{"ResourceType": "instance",
                                                       "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}])
    return answer["Instances"][0]["InstanceId"]


def karpweb_claim(rest, name, pool, instance_id, launched_at="2026-11-25T12:00:00Z", finalizers=()):
    """A NodeClaim karpweb created and launched (what provisioning leaves behind)."""
    rest.create(NODECLAIM, {
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": name, "finalizers": list(finalizers), "labels": {"karpenter.sh/nodepool": pool, "karpweb.io/provisioner": "karpweb",
                                              "karpenter.sh/capacity-type": "on-demand", "team": "ml",
                                              "node.kubernetes.io/instance-type": "m5.large",
                                              "topology.kubernetes.io/zone": ZONE},
                     "annotations": {"example.com/owner": "ml-platform"}},
        "spec": {"nodeClassRef": {**h.NODE_CLASS_REF}, "requirements": [],
                 "resources": {"requests": {"cpu": "1"}}},
    })
    rest.patch(NODECLAIM, name, {"status": {
        "providerID": f"aws:///{ZONE}/{instance_id}",
        "conditions": [{"type": "Launched", "status": "True", "reason": "Launched", "message": "",
                        "lastTransitionTime": launched_at}]}}, subresource="status")


def kubelet_node(rest, name, instance_id, ready=False, taints=()):
    """A Node as the kubelet registers it: the providerID, the unregistered taint."""
    rest.create(NODE, {"apiVersion": "v1", "kind": "Node",
                       "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
                       "spec": {"providerID": f"aws:///{ZONE}/{instance_id}",
                                "taints": [{"key": "karpenter.sh/unregistered", "effect": "NoExecute"}, *taints]}})
    set_ready(rest, name, ready)


def set_ready(rest, name, ready):
    rest.patch(NODE, name, {"status": {
        "capacity": {"cpu": "2", "memory": "8Gi", "pods": "29"}, "allocatable": {"cpu": "1930m", "memory": "7Gi", "pods": "29"},
        "conditions": [{"type": "Ready", "status": "True" if ready else "False", "reason": "KubeletReady", "message": "",
                        "lastHeartbeatTime": "2026-11-25T12:00:00Z", "lastTransitionTime": "2026-11-25T12:00:00Z"}]}},
        subresource="status")


def conditions_of(rest, claim):
    return {c["type"]: (c["status"], c["reason"]) for c in rest.get(NODECLAIM, claim)["status"].get("conditions", [])}


def test_a_registered_node_takes_the_claim_to_registered_then_initialized(rest, adapter, unique, provider, raw_ec2):
    startup = {"key": "example.com/agent-not-ready", "effect": "NoSchedule"}
    rest.create(h.NODEPOOL, {
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": f"pool-{unique}"},
        "spec": {"template": {"spec": {"nodeClassRef": {**h.NODE_CLASS_REF}, "requirements": [],
                                       "taints": [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}],
                                       "startupTaints": [startup]}}}})
    instance = run_instance(raw_ec2, {"karpweb.io/managed": "true", "karpweb.io/nodeclaim": f"c-{unique}"})
    karpweb_claim(rest, f"c-{unique}", f"pool-{unique}", instance)
    kubelet_node(rest, f"n-{unique}", instance)
    sync = ClusterSync(adapter)
    sync.sync_once()

    assert nodes.after_launch(provider, adapter, utc_now())["registered"] >= 1
    node = rest.get(NODE, f"n-{unique}")
    labels, taints = node["metadata"]["labels"], node["spec"].get("taints", [])
    assert labels["karpenter.sh/registered"] == "true" and labels["team"] == "ml" and labels["karpenter.sh/nodepool"] == f"pool-{unique}"
    assert node["metadata"]["annotations"]["example.com/owner"] == "ml-platform"
    keys = {t["key"] for t in taints}  # (the API server's admission adds node.kubernetes.io/not-ready too)
    assert {"nvidia.com/gpu", "example.com/agent-not-ready"} <= keys and "karpenter.sh/unregistered" not in keys
    assert node["metadata"]["ownerReferences"][0]["name"] == f"c-{unique}"
    claim = rest.get(NODECLAIM, f"c-{unique}")
    assert claim["status"]["nodeName"] == f"n-{unique}"
    assert conditions_of(rest, f"c-{unique}")["Registered"] == ("True", "Registered")

    # Ready, but the startup taint is still there; then the agent removes it.
    set_ready(rest, f"n-{unique}", True)
    sync.sync_once()
    nodes.after_launch(provider, adapter, utc_now())
    assert conditions_of(rest, f"c-{unique}")["Initialized"] == ("False", "StartupTaintsExist")
    # The agent removes its startup taint; the node controller (not running here) the not-ready one.
    rest.patch(NODE, f"n-{unique}", {"spec": {"taints": [t for t in rest.get(NODE, f"n-{unique}")["spec"]["taints"]
                                                        if t["key"] not in (startup["key"], "node.kubernetes.io/not-ready")]}})
    sync.sync_once()
    assert nodes.after_launch(provider, adapter, utc_now())["initialized"] >= 1
    assert conditions_of(rest, f"c-{unique}")["Initialized"] == ("True", "Initialized")
    assert rest.get(NODE, f"n-{unique}")["metadata"]["labels"]["karpenter.sh/initialized"] == "true"
    assert nodes.after_launch(provider, adapter, utc_now())["registered"] == 0  # nothing left to do for it


def test_a_node_that_never_registers_is_given_up_after_the_ttl(rest, adapter, unique, provider, raw_ec2, world):
    h.nodepool(rest, f"ttl-{unique}")
    instance = run_instance(raw_ec2, {"karpweb.io/managed": "true", "karpweb.io/nodeclaim": f"late-{unique}"})
    launched = utc_now().replace(microsecond=0)
    karpweb_claim(rest, f"late-{unique}", f"ttl-{unique}", instance, launched_at=launched.strftime("%Y-%m-%dT%H:%M:%SZ"),
                  finalizers=["karpenter.sh/termination"])  # as provisioning creates it: its finalizer terminates the instance
    ClusterSync(adapter).sync_once()

    # Only this claim is judged: claims earlier tests left on the shared API server are older.
    nodes.after_launch(provider, adapter, launched + timedelta(minutes=14))
    assert not Decision.objects.filter(subject=f"NodeClaim late-{unique}").exists()
    assert rest.get(NODECLAIM, f"late-{unique}")
    nodes.after_launch(provider, adapter, launched + timedelta(minutes=15))
    decision = Decision.objects.get(subject=f"NodeClaim late-{unique}")  # (the terminate decision comes once it is done)
    assert decision.kind == "registration-timeout" and decision.outcome == "acted"
    assert f"launched instance {instance}" in decision.reason and "no node registered for it within 15 minutes" in decision.reason
    state = raw_ec2.describe_instances(InstanceIds=[instance])["Reservations"][0]["Instances"][0]["State"]["Name"]
    assert state in ("shutting-down", "terminated")
    assert NodeClaim.objects.get(name=f"late-{unique}").deleting_since is not None  # no longer capacity
    assert rest.get(NODECLAIM, f"late-{unique}")["metadata"]["deletionTimestamp"]  # held until the instance is gone
    nodes.after_launch(provider, adapter, launched + timedelta(minutes=16))  # the instance is gone: so is the claim
    with pytest.raises(Exception):
        rest.get(NODECLAIM, f"late-{unique}")
    assert not NodeClaim.objects.filter(name=f"late-{unique}").exists()
    assert Decision.objects.get(subject=f"NodeClaim late-{unique}", kind="terminate").outcome == "acted"


def test_a_deleted_claim_drains_terminates_and_only_then_lets_go(rest, adapter, unique, provider, raw_ec2):
    h.nodepool(rest, f"fin-{unique}")
    instance = run_instance(raw_ec2, {"karpweb.io/managed": "true", "karpweb.io/nodeclaim": f"fin-{unique}"})
    karpweb_claim(rest, f"fin-{unique}", f"fin-{unique}", instance, finalizers=["karpenter.sh/termination"])
    kubelet_node(rest, f"fin-{unique}", instance, ready=True)
    ns = h.namespace(rest, f"fin-{unique}")
    h.pod(rest, ns, "batch-1", node_name=f"fin-{unique}", node_selector={})
    sync = ClusterSync(adapter)
    sync.sync_once()
    nodes.after_launch(provider, adapter, utc_now())  # registered

    rest.delete(NODECLAIM, f"fin-{unique}")  # someone deletes it: the finalizer holds it
    assert rest.get(NODECLAIM, f"fin-{unique}")["metadata"]["deletionTimestamp"]
    sync.sync_once()
    assert nodes.after_launch(provider, adapter, utc_now())["terminated"] == 0  # drained, terminating
    with pytest.raises(Exception):
        rest.get(POD, "batch-1", namespace=ns)
    node = rest.get(NODE, f"fin-{unique}")  # deleted, held by its finalizer until the instance is gone
    assert node["metadata"]["deletionTimestamp"] and node["metadata"]["finalizers"] == ["karpenter.sh/termination"]
    state = raw_ec2.describe_instances(InstanceIds=[instance])["Reservations"][0]["Instances"][0]["State"]["Name"]
    assert state in ("shutting-down", "terminated")
    sync.sync_once()
    assert nodes.after_launch(provider, adapter, utc_now())["terminated"] == 1
    with pytest.raises(Exception):
        rest.get(NODE, f"fin-{unique}")
    with pytest.raises(Exception):
        rest.get(NODECLAIM, f"fin-{unique}")  # the finalizer went last
    decision = Decision.objects.get(subject=f"NodeClaim fin-{unique}", kind="terminate")
    assert decision.outcome == "acted" and f"terminating instance {instance}" in decision.reason


def test_orphan_instances_karpweb_launched_are_collected_and_others_are_not(provider, raw_ec2, unique):
    orphan = run_instance(raw_ec2, {"karpweb.io/managed": "true", "karpweb.io/nodeclaim": f"gone-{unique}"})
    foreign = run_instance(raw_ec2, {"karpenter.sh/nodepool": "default", "team": "other"})
    now = utc_now() + timedelta(minutes=5)
    assert nodes.collect_instances(provider, now)["orphan_instances"] >= 1
    state = {i["InstanceId"]: i["State"]["Name"] for r in raw_ec2.describe_instances(InstanceIds=[orphan, foreign])["Reservations"]
             for i in r["Instances"]}
    assert state[orphan] in ("shutting-down", "terminated") and state[foreign] == "running"
    assert Decision.objects.filter(subject=f"instance {orphan}", kind="garbage-collect", outcome="acted").exists()


class DiesBeforeDeleting(InterruptionQueue):
    """A worker killed after acting, before deleting the message."""

    held = None

    def delete(self, message):
        self.held = message
        raise SystemExit("killed")


def test_interruptions_from_sqs_drain_at_once_and_bad_messages_are_counted(rest, adapter, unique, provider, raw_ec2,
                                                                          config, boto_session, world):
    sqs = boto_session.client("sqs", region_name="us-east-1", endpoint_url=config.endpoint_url)
    url = sqs.create_queue(QueueName=f"karpweb-interruptions-{unique}")["QueueUrl"]
    queue = InterruptionQueue(sqs, Caller(config), f"karpweb-interruptions-{unique}", wait_seconds=0)
    instance = run_instance(raw_ec2, {"karpweb.io/managed": "true", "karpweb.io/nodeclaim": f"spot-{unique}"})
    h.nodepool(rest, f"spot-{unique}")
    karpweb_claim(rest, f"spot-{unique}", f"spot-{unique}", instance, finalizers=["karpenter.sh/termination"])
    kubelet_node(rest, f"spot-{unique}", instance, ready=True)
    rest.patch(NODE, f"spot-{unique}", {"metadata": {"labels": {
        "karpenter.sh/nodepool": f"spot-{unique}", "karpenter.sh/capacity-type": "spot",
        "node.kubernetes.io/instance-type": "m5.large", "topology.kubernetes.io/zone": ZONE}}})
    ns = h.namespace(rest, f"int-{unique}")
    h.pod(rest, ns, "web-1", node_name=f"spot-{unique}", node_selector={})
    ClusterSync(adapter).sync_once()
    nodes.after_launch(provider, adapter, utc_now())  # registered: the Node carries karpenter.sh/termination

    warning = {"version": "0", "source": "aws.ec2", "detail-type": "EC2 Spot Instance Interruption Warning",
               "detail": {"instance-id": instance, "instance-action": "terminate"}}
    sqs.send_message(QueueUrl=url, MessageBody=json.dumps(warning))
    dying = DiesBeforeDeleting(sqs, Caller(config), url, wait_seconds=0)
    with pytest.raises(SystemExit):  # killed between acting and deleting
        nodes.handle_interruptions(dying, provider, adapter)
    with pytest.raises(Exception):
        rest.get(POD, "web-1", namespace=ns)  # evicted at once
    assert rest.get(NODECLAIM, f"spot-{unique}")["metadata"]["deletionTimestamp"]  # acting = deleting the claim
    assert rest.get(NODE, f"spot-{unique}")["metadata"]["deletionTimestamp"]  # drained; goes once the instance has
    state = raw_ec2.describe_instances(InstanceIds=[instance])["Reservations"][0]["Instances"][0]["State"]["Name"]
    assert state in ("shutting-down", "terminated")
    # The message comes back when its visibility ends (made now, not in 20 s).
    sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=dying.held.receipt, VisibilityTimeout=0)

    sqs.send_message(QueueUrl=url, MessageBody="{not json")
    counts = nodes.handle_interruptions(queue, provider, adapter)
    assert counts["messages"] == 2 and counts["unknown_messages"] == 1
    assert sqs.receive_message(QueueUrl=url, VisibilityTimeout=0).get("Messages") in (None, [])  # both deleted
    decisions = Decision.objects.filter(subject=f"node spot-{unique}", kind="interruption")
    assert decisions.count() == 1 and decisions[0].outcome == "acted"  # acted on once, though received twice
    assert "spot interruption warning (terminate): cordoning and draining it now" in decisions[0].reason
    assert EventCount.objects.get(name=nodes.INTERRUPTION_MESSAGES, label="unknown").value == 1
    assert EventCount.objects.get(name=nodes.INTERRUPTION_MESSAGES, label="spot_interrupted").value >= 1


def test_the_interruption_queue_is_not_read_beside_karpenter(rest, adapter, unique, provider, config, boto_session,
                                                            world, settings):
    """Beside Karpenter karpweb takes nothing off the queue: a message it received would be hidden
    from Karpenter's interruption controller for its visibility timeout. (Alone in observe mode it
    reads them and records recommendations: test_termination.py::test_observe_mode_acts_on_nothing.)"""
    settings.KARPWEB_KARPENTER = "present"
    sqs = boto_session.client("sqs", region_name="us-east-1", endpoint_url=config.endpoint_url)
    url = sqs.create_queue(QueueName=f"karpweb-observe-{unique}")["QueueUrl"]
    queue = InterruptionQueue(sqs, Caller(config), f"karpweb-observe-{unique}", wait_seconds=0)
    sqs.send_message(QueueUrl=url, MessageBody=json.dumps({"source": "aws.ec2", "detail-type": "EC2 Spot Instance Interruption Warning",
                                                           "detail": {"instance-id": "i-0123456789abcdef0"}}))

    counts = nodes.handle_interruptions(queue, provider, adapter)

    assert counts == {"messages": 0, "interrupted_nodes": 0, "unknown_messages": 0, "queue_not_read": 1}
    waiting = sqs.receive_message(QueueUrl=url, VisibilityTimeout=0).get("Messages") or []
    assert len(waiting) == 1  # still there for whoever acts, never received by karpweb
    assert sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessagesNotVisible"])[
        "Attributes"]["ApproximateNumberOfMessagesNotVisible"] == "0"
