"""Drift against the real kube-apiserver and the EC2 test server (moto's EC2, SSM, IAM and EKS over
HTTP): AWS publishes a new EKS AMI, the EC2NodeClass resolves to it, karpweb's claims launched with
the old one get `Drifted=True/AMIDrift`, and the disruption pass replaces them one at a time under a
`nodes: "1"` budget, the replacement launched (with the new image) before the old node is drained.
A NodePool template edit drifts them as NodePoolDrifted. Upstream: kubernetes-sigs/karpenter
`pkg/controllers/nodeclaim/disruption/drift_test.go`, `pkg/controllers/disruption/drift_test.go`;
aws/karpenter-provider-aws `pkg/cloudprovider/drift.go`."""

import json

import pytest

from scheduling.adapters.ec2.catalogue import instance_type_info
from scheduling.adapters.ec2.sync import instance_type_row
from scheduling.adapters.kube.resources import NODE, NODECLAIM, NODEPOOL
from scheduling.adapters.kube.sync import ClusterSync
from scheduling.demo import described_types
from scheduling.loop import disruption, nodes, refresh
from scheduling.loop.nodeclass_launch import refresh_launch_status
from scheduling.loop.provisioning import create_claim, launch_claim
from scheduling.models import CapacityType, Decision, InstanceType, NodeClaim, NodePool, Offering
from tests.support.ec2_fixtures import *  # noqa: F403 - the EC2 test server and providers
from django.utils.timezone import now as utc_now  # after the star import, which brings its own timezone
from datetime import datetime, timedelta, timezone  # after the star import too
from tests.support.clusters import use_kube_server

from . import helpers as h

pytestmark = [pytest.mark.kube, pytest.mark.django_db]
ZONE = "us-east-1a"
CLUSTER = "refresh-prod"
ROLE = "KarpenterNodeRole-refresh"
K8S = "1.31"


@pytest.fixture(autouse=True)
def control(settings, aws_test_credentials, monkeypatch, kube_server):
    use_kube_server(kube_server)
    settings.KARPWEB_PROVIDER = "aws"
    settings.KARPWEB_MODE = "control"
    settings.KARPWEB_KARPENTER = "absent"
    for name in ("KARPWEB_CLUSTER_ENDPOINT", "KARPWEB_CLUSTER_CA_BUNDLE", "KARPWEB_CLUSTER_CIDR", "KARPWEB_KUBERNETES_VERSION"):
        setattr(settings, name, "")  # from EKS DescribeCluster
        monkeypatch.delenv(name, raising=False)
    settings.KARPWEB_CLUSTER_NAME = CLUSTER


@pytest.fixture
def account(world, provider, boto_session, config):
    """Images, a tagged subnet and security group, the node role and the EKS cluster."""
    images = world.publish_eks_images(K8S, release="v20261001")
    ec2 = provider.ec2
    vpc = ec2.describe_vpcs()["Vpcs"][0]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="172.31.232.0/24", AvailabilityZone=ZONE)["Subnet"]["SubnetId"]
    group = ec2.create_security_group(GroupName=f"{CLUSTER}-nodes", Description="nodes", VpcId=vpc)["GroupId"]
    ec2.create_tags(Resources=[subnet, group], Tags=[{"Key": "karpenter.sh/discovery", "Value": CLUSTER}])
    iam = boto_session.client("iam", region_name="us-east-1", endpoint_url=config.iam_endpoint_url)
    try:
        iam.create_role(RoleName=ROLE, AssumeRolePolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": []}))
    except iam.exceptions.EntityAlreadyExistsException:
        pass
    eks = boto_session.client("eks", region_name="us-east-1", endpoint_url=config.eks_endpoint_url)
    if CLUSTER not in eks.list_clusters()["clusters"]:
        eks.create_cluster(name=CLUSTER, version=K8S, roleArn=f"arn:aws:iam::123456789012:role/eks-{CLUSTER}",
                           resourcesVpcConfig={"subnetIds": [subnet]},
                           kubernetesNetworkConfig={"serviceIpv4Cidr": "172.20.0.0/16"})
    return {"images": images, "subnet": subnet, "group": group}


class Cluster:
    """One NodePool (`nodes: "1"`) and its EC2NodeClass on the API server, karpweb's claims and the
    Nodes a kubelet would register for their instances."""

    def __init__(self, rest, adapter, provider, unique):
        self.rest, self.adapter, self.provider, self.unique = rest, adapter, provider, unique
        self.pool, self.node_class = f"drift-{unique}", f"drift-{unique}"
        self.ns = h.namespace(rest, f"drift-{unique}")
        self.sync = ClusterSync(adapter)
        self.serial = 0
        self.seen: list[list[tuple]] = []  # each drift pass's decisions (drift_pass)

    def create(self):
        discovery = [{"tags": {"karpenter.sh/discovery": CLUSTER}}]
        h.ec2nodeclass(self.rest, self.node_class, role=ROLE, subnetSelectorTerms=discovery,
                       securityGroupSelectorTerms=discovery)
        self.rest.create(NODEPOOL, {
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": self.pool},
            "spec": {"template": {"metadata": {"labels": {"team": "ml"}}, "spec": {
                "nodeClassRef": {**h.NODE_CLASS_REF, "name": self.node_class},
                "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                                 {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large"]},
                                 {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [ZONE]}]}},
                     "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "Never",
                                    "budgets": [{"nodes": "1"}]}}})
        InstanceType.objects.get_or_create(**instance_type_row(instance_type_info(described_types()["m5.large"]), None))
        Offering.objects.create(instance_type=InstanceType.objects.get(name="m5.large"), zone=ZONE, zone_id="use1-az1",
                                capacity_type=CapacityType.ON_DEMAND, price=0.096)
        self.resync()

    def resync(self):
        self.sync.sync_once()
        refresh_launch_status(self.provider, self.adapter, utc_now())
        self.sync.sync_once()

    def launch_node(self) -> str:
        """A claim as provisioning writes it, launched, its Node registered and Ready, one pod on it."""
        pool = NodePool.objects.select_related("node_class").get(name=self.pool)
        labels = {"karpenter.sh/nodepool": self.pool, "karpenter.sh/capacity-type": "on-demand", "team": "ml",
                  "node.kubernetes.io/instance-type": "m5.large", "topology.kubernetes.io/zone": ZONE,
                  "kubernetes.io/arch": "amd64"}
        row = create_claim(self.adapter, {"nodePool": self.pool, "labels": labels, "launch": {
            "instanceType": "m5.large", "zone": ZONE, "capacityType": "on-demand"}}, pool)
        assert launch_claim(self.provider, self.adapter, row).ok
        return self.register(NodeClaim.objects.get(pk=row.pk))

    def register(self, claim) -> str:
        self.serial += 1
        name = f"drift-{self.unique}-{self.serial}"
        self.rest.create(NODE, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
                                "spec": {"providerID": claim.provider_id,
                                         "taints": [{"key": "karpenter.sh/unregistered", "effect": "NoExecute"}]}})
        self.rest.patch(NODE, name, {"status": {
            "capacity": {"cpu": "2", "memory": "8Gi", "pods": "29"},
            "allocatable": {"cpu": "1930m", "memory": "7Gi", "pods": "29"},
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "",
                            "lastHeartbeatTime": "2026-11-25T12:00:00Z", "lastTransitionTime": "2026-11-25T12:00:00Z"}]}},
            subresource="status")
        h.pod(self.rest, self.ns, f"app-{self.serial}", node_name=name, cpu="1500m",
              node_selector={"karpenter.sh/nodepool": self.pool},  # a replacement must come from this pool
              owner={"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "app", "uid": "rs-uid", "controller": True})
        self.sync.sync_once()
        nodes.after_launch(self.provider, self.adapter, utc_now())  # registered: labels and claim status
        self.sync.sync_once()
        return name

    def claims(self) -> dict[str, dict]:
        return {c["metadata"]["name"]: c for c in self.adapter.rest.list(NODECLAIM)["items"]
                if (c["metadata"].get("labels") or {}).get("karpenter.sh/nodepool") == self.pool}

    def drifted(self) -> dict[str, str]:
        return {name: next((c["reason"] for c in (claim.get("status") or {}).get("conditions", [])
                            if c["type"] == "Drifted" and c["status"] == "True"), "")
                for name, claim in self.claims().items() if not claim["metadata"].get("deletionTimestamp")}

    def drift_pass(self) -> list[dict]:
        """Mark drift, then one disruption pass; returns this pool's drift decisions of the pass."""
        before = set(Decision.objects.filter(kind="drift").values_list("pk", flat=True))
        refresh.mark_drift(self.provider, self.adapter, utc_now())
        self.sync.sync_once()
        disruption.act_on_disruptions(self.provider, self.adapter, {disruption.DRIFT}, utc_now())
        self.sync.sync_once()
        nodes.after_launch(self.provider, self.adapter, utc_now())  # finalizers: terminate, let go
        self.sync.sync_once()
        made = list(Decision.objects.filter(kind="drift").exclude(pk__in=before).select_related("node_pool"))
        # What the pass decided, every pool's, for a failure's message (an order-dependent miss was seen once).
        self.seen.append([(d.node_pool.name if d.node_pool else None, d.mode, d.outcome, d.error[:120], d.reason[:160])
                          for d in made])
        return [d for d in made if d.node_pool and d.node_pool.name == self.pool]

    def why(self) -> dict:
        """For a failure's message only: each pass's drift decisions, what the engine would do now, and
        what else it sees. A pending pod an earlier test left on the API server once took the drifted
        node (nominated, so not a candidate, as upstream); each test now starts with an empty server."""
        from scheduling.loop.disruption import engine_decisions
        from scheduling.models import Node, Pod

        decisions = engine_decisions(self.provider, utc_now())
        return {"seen": self.seen, "disruptions": [(d["reason"], d["nodes"]) for d in decisions["disruptions"]],
                "bindings": decisions.get("bindings"), "nodeClaims": [c["name"] for c in decisions.get("nodeClaims", [])],
                "nodes": list(Node.objects.filter(node_pool__name=self.pool).values_list("name", "ready", "deleting_since")),
                "pending": list(Pod.objects.filter(node__isnull=True).values_list("namespace", "name")[:20])}

    def register_new_claims(self, known: set[str]) -> None:
        for claim in NodeClaim.objects.filter(node_pool__name=self.pool, deleting_since__isnull=True).exclude(
                name__in=known).exclude(provider_id=""):
            if not claim.node_name:
                self.register(claim)


def image_of(raw_ec2, instance_id):
    return raw_ec2.describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"][0]["ImageId"]


def test_should_replace_drifted_nodes_ami_drift_one_at_a_time_under_a_budget_of_one(
        rest, adapter, unique, provider, raw_ec2, world, account, clock):
    cluster = Cluster(rest, adapter, provider, unique)
    cluster.create()
    for _ in range(2):
        cluster.launch_node()
    originals = set(cluster.claims())
    old_image = account["images"][("x86_64", "standard")]
    assert {image_of(raw_ec2, c.instance_id) for c in NodeClaim.objects.filter(name__in=originals)} == {old_image}
    assert cluster.drift_pass() == []  # nothing changed: nothing drifts

    new_image = world.publish_eks_images(K8S, release="v20261101")[("x86_64", "standard")]
    clock.advance(hours=25)  # the alias's SSM answer is cached a day, as upstream caches it
    cluster.resync()
    refresh.mark_drift(provider, adapter, utc_now())
    cluster.sync.sync_once()
    assert cluster.drifted() == {name: "AMIDrift" for name in originals}
    replaced_per_pass = []
    for _ in range(3):
        if not originals & {name for name, reason in cluster.drifted().items() if reason}:
            break
        acted = [d for d in cluster.drift_pass() if d.outcome == "acted"]
        replaced_per_pass.append(len(acted))
        assert all(d.details["driftReason"] == "AMIDrift" and d.details["action"] == "replace" for d in acted)
        cluster.register_new_claims(originals)
    assert replaced_per_pass == [1, 1], cluster.why()
    live = [c for c in NodeClaim.objects.filter(node_pool__name=cluster.pool, deleting_since__isnull=True)]
    assert len(live) == 2 and not {c.name for c in live} & originals
    assert {image_of(raw_ec2, c.instance_id) for c in live} == {new_image}


def test_should_detect_static_drift_when_the_nodepool_template_changes(rest, adapter, unique, provider, account):
    cluster = Cluster(rest, adapter, provider, unique)
    cluster.create()
    cluster.launch_node()
    [(original, claim)] = cluster.claims().items()
    assert claim["metadata"]["annotations"]["karpenter.sh/nodepool-hash-version"] == "v3"
    assert claim["spec"]["expireAfter"] == "720h"
    rest.patch(NODEPOOL, cluster.pool, {"spec": {"template": {"metadata": {"labels": {"team": "payments"}}}}})
    cluster.resync()
    acted = [d for d in cluster.drift_pass() if d.outcome == "acted"]
    assert len(acted) == 1 and acted[0].details["driftReason"] == "NodePoolDrifted", cluster.why()
    assert set(cluster.claims()) - {original} and original not in cluster.drifted()  # replaced, the old one gone
    [replacement] = NodeClaim.objects.filter(node_pool__name=cluster.pool).exclude(name=original)
    assert replacement.labels["team"] == "payments" and replacement.provider_id


def test_should_remove_nodeclaims_that_are_expired_and_repair_a_node_notready_past_its_toleration(
        rest, adapter, unique, provider, account, settings):
    """expiration suite: "should remove nodeclaims that are expired"; health suite: "should delete nodes
    that are unhealthy by the cloud provider" (Ready=False for 30 min, from the Node's lastTransitionTime)."""
    cluster = Cluster(rest, adapter, provider, unique)
    cluster.create()
    rest.patch(NODEPOOL, cluster.pool, {"spec": {"template": {"spec": {"expireAfter": "2h"}}}})
    cluster.resync()
    expiring = cluster.launch_node()
    expiring_claim = NodeClaim.objects.get(node_name=expiring)
    assert rest.get(NODECLAIM, expiring_claim.name)["spec"]["expireAfter"] == "2h"
    started = utc_now()
    assert refresh.expire(adapter, started + timedelta(minutes=119))["expired"] == 0
    assert refresh.expire(adapter, started + timedelta(minutes=121))["expired_acted"] == 1
    assert rest.get(NODECLAIM, expiring_claim.name)["metadata"]["deletionTimestamp"]  # its finalizer drains and terminates

    # Node repair: off by default, then on; the kubelet reported NotReady at a known time.
    rest.patch(NODEPOOL, cluster.pool, {"spec": {"template": {"spec": {"expireAfter": "Never"}}}})
    cluster.resync()
    sick = cluster.launch_node()
    for _ in range(4):
        cluster.launch_node()  # one unhealthy node of five is within upstream's 20 %
    went_bad = "2026-11-26T08:00:00Z"
    rest.patch(NODE, sick, {"status": {"conditions": [{"type": "Ready", "status": "False", "reason": "KubeletNotReady",
                                                       "message": "", "lastHeartbeatTime": went_bad,
                                                       "lastTransitionTime": went_bad}]}}, subresource="status")
    cluster.sync.sync_once()
    sick_claim = NodeClaim.objects.get(node_name=sick)
    bad_since = datetime(2026, 11, 26, 8, 0, tzinfo=timezone.utc)
    assert refresh.repair(adapter, bad_since + timedelta(hours=5)) == {"repair": 0}  # KARPWEB_NODE_REPAIR is off
    settings.KARPWEB_NODE_REPAIR = True
    assert refresh.repair(adapter, bad_since + timedelta(minutes=29))["repairs"] == 0
    assert refresh.repair(adapter, bad_since + timedelta(minutes=31))["repairs"] == 1
    assert rest.get(NODECLAIM, sick_claim.name)["metadata"]["deletionTimestamp"]
    assert Decision.objects.get(kind="repair", subject=f"node {sick}").outcome == "acted"
