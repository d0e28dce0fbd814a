"""Control mode on a real account, through the EC2 test server (moto's EC2, SSM, IAM and EKS over
HTTP): an EC2NodeClass written as Karpenter users write it (an al2023 alias, subnets and security
groups by tag, a role) resolves to the SSM image for each architecture and accelerator, the zone's
tagged subnet with the most free addresses, the tagged security groups and an instance profile
created for the role; the launch template carries user data whose NodeConfig names the cluster, its
endpoint, CA and service CIDR (from EKS DescribeCluster), the node's labels and taints, merged after
the user's own script. A class that selects no subnet is not Ready and launches nothing."""

import base64
import json

import pytest

from scheduling.adapters.ec2.interface import ON_DEMAND, LaunchOffering, LaunchRequest, NodeClassLaunch
from scheduling.adapters.ec2.userdata import decode_node_configs
from tests.support.ec2_fixtures import *  # noqa: F403 - the EC2 test server and providers
from datetime import datetime, timezone  # after the star import, which brings its own

pytestmark = pytest.mark.django_db
ZONE = "us-east-1a"
CLUSTER = "ml-prod"
ROLE = "KarpenterNodeRole-ml-prod"


@pytest.fixture(autouse=True)
def _aws(aws_test_credentials):
    pass


@pytest.fixture
def account(world, provider, boto_session, config, settings, monkeypatch):
    """Images, a discovery-tagged VPC layout, the node role and the EKS cluster, as an account has them."""
    for name in ("KARPWEB_CLUSTER_ENDPOINT", "KARPWEB_CLUSTER_CA_BUNDLE", "KARPWEB_CLUSTER_CIDR", "KARPWEB_KUBERNETES_VERSION"):
        setattr(settings, name, "")  # from EKS DescribeCluster
        monkeypatch.delenv(name, raising=False)
    settings.KARPWEB_CLUSTER_NAME = CLUSTER
    images = world.publish_eks_images("1.31")
    ec2 = provider.ec2
    vpc = ec2.describe_vpcs()["Vpcs"][0]["VpcId"]
    small = ec2.create_subnet(VpcId=vpc, CidrBlock="172.31.200.0/26", AvailabilityZone=ZONE)["Subnet"]["SubnetId"]
    large = ec2.create_subnet(VpcId=vpc, CidrBlock="172.31.208.0/22", AvailabilityZone=ZONE)["Subnet"]["SubnetId"]
    other_zone = ec2.create_subnet(VpcId=vpc, CidrBlock="172.31.224.0/24", AvailabilityZone="us-east-1b")["Subnet"]["SubnetId"]
    ec2.create_tags(Resources=[small, large, other_zone], Tags=[{"Key": "karpenter.sh/discovery", "Value": CLUSTER}])
    group = ec2.create_security_group(GroupName=f"{CLUSTER}-nodes", Description="nodes", VpcId=vpc)["GroupId"]
    ec2.create_tags(Resources=[group], Tags=[{"Key": "karpenter.sh/discovery", "Value": CLUSTER}])
    iam = boto_session.client("iam", region_name="us-east-1", endpoint_url=config.iam_endpoint_url)
    try:
        iam.create_role(RoleName=ROLE, AssumeRolePolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": []}))
    except iam.exceptions.EntityAlreadyExistsException:
        pass
    eks = boto_session.client("eks", region_name="us-east-1", endpoint_url=config.eks_endpoint_url)
    if CLUSTER not in eks.list_clusters()["clusters"]:
        eks.create_cluster(name=CLUSTER, version="1.31", roleArn=f"arn:aws:iam::123456789012:role/eks-{CLUSTER}",
                           resourcesVpcConfig={"subnetIds": [small, large]},
                           kubernetesNetworkConfig={"serviceIpv4Cidr": "172.20.0.0/16"})
    cluster = eks.describe_cluster(name=CLUSTER)["cluster"]
    return {"images": images, "large": large, "small": small, "other_zone": other_zone, "group": group, "cluster": cluster,
            "iam": iam}


def karpenter_class(**changes):
    spec = {
        "amiSelectorTerms": [{"alias": "al2023@latest"}],
        "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": CLUSTER}}],
        "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": CLUSTER}}],
        "role": ROLE,
        "tags": {"team": "ml"},
        "kubelet": {"maxPods": 58},
        "userData": "#!/bin/bash\necho 'vm.max_map_count=262144' > /etc/sysctl.d/90-es.conf\n",
        "blockDeviceMappings": [{"deviceName": "/dev/xvda", "rootVolume": True,
                                 "ebs": {"volumeSize": "100Gi", "volumeType": "gp3", "encrypted": True}}],
        "metadataOptions": {"httpPutResponseHopLimit": 2},
    }
    spec.update(changes)
    return spec


def launch_request(name, spec, instance_type="m5.large", shape=("amd64", "standard")):
    labels = {"karpenter.sh/nodepool": "ml", "karpenter.sh/capacity-type": "on-demand", "team": "ml",
              "node.kubernetes.io/instance-type": instance_type, "topology.kubernetes.io/zone": ZONE}
    return LaunchRequest(
        nodeclaim_name=name, nodeclass_name="ml", image_id="", offerings=[LaunchOffering(instance_type, ZONE, ON_DEMAND, 0.1)],
        tags={"karpenter.sh/nodeclaim": name},
        node_class=NodeClassLaunch(uid="3f6c2a9e-uid", spec=spec, nodepool="ml", labels=labels,
                                   taints=[{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"},
                                           {"key": "example.com/warming", "effect": "NoExecute"}],
                                   shapes={instance_type: shape}))


def template_data(provider, instance):
    template = next(t["Value"] for t in instance["Tags"] if t["Key"] == "aws:ec2launchtemplate:id") \
        if any(t["Key"] == "aws:ec2launchtemplate:id" for t in instance.get("Tags", [])) else None
    versions = provider.ec2.describe_launch_template_versions(LaunchTemplateId=template)["LaunchTemplateVersions"]
    return versions[0]["LaunchTemplateData"]


def test_a_karpenter_style_class_launches_a_node_that_can_join(account, provider):
    resolved = provider.resolve_node_class("ml", "3f6c2a9e-uid", karpenter_class())
    assert resolved.ready, resolved.why_not_ready
    status = resolved.status_fields()
    # Most free addresses first (/22, /24 in another zone, /26).
    assert [s["id"] for s in status["subnets"]] == [account["large"], account["other_zone"], account["small"]]
    assert [g["id"] for g in status["securityGroups"]] == [account["group"]]
    assert {a["id"] for a in status["amis"]} == set(account["images"].values())
    standard = next(a for a in status["amis"] if a["id"] == account["images"][("x86_64", "standard")])
    assert {"key": "karpenter.k8s.aws/instance-gpu-count", "operator": "DoesNotExist"} in standard["requirements"]
    assert status["instanceProfile"].startswith(f"{CLUSTER}_")
    profile = account["iam"].get_instance_profile(InstanceProfileName=status["instanceProfile"])["InstanceProfile"]
    assert [r["RoleName"] for r in profile["Roles"]] == [ROLE]
    assert profile["Path"] == f"/karpenter/us-east-1/{CLUSTER}/3f6c2a9e-uid/"
    assert {t["Key"]: t["Value"] for t in profile.get("Tags", [])}.get("eks:eks-cluster-name", CLUSTER) == CLUSTER

    result = provider.launch(launch_request("ml-x1a2b", karpenter_class()))
    assert result.ok, result.error_message
    instance = provider.ec2.describe_instances(InstanceIds=[result.instance_id])["Reservations"][0]["Instances"][0]
    assert instance["ImageId"] == account["images"][("x86_64", "standard")]
    assert instance["SubnetId"] == account["large"]
    assert account["group"] in {g["GroupId"] for g in instance["SecurityGroups"]}
    tags = {t["Key"]: t["Value"] for t in instance["Tags"]}
    assert {k: tags.get(k) for k in ("team", "karpenter.sh/nodepool", "karpenter.sh/nodeclaim", "eks:eks-cluster-name",
                                     "karpenter.k8s.aws/ec2nodeclass", f"kubernetes.io/cluster/{CLUSTER}")} == {
        "team": "ml", "karpenter.sh/nodepool": "ml", "karpenter.sh/nodeclaim": "ml-x1a2b", "eks:eks-cluster-name": CLUSTER,
        "karpenter.k8s.aws/ec2nodeclass": "ml", f"kubernetes.io/cluster/{CLUSTER}": "owned"}

    data = template_data(provider, instance)
    assert data["IamInstanceProfile"]["Name"] == status["instanceProfile"]
    assert data["MetadataOptions"]["HttpPutResponseHopLimit"] == 2 and data["MetadataOptions"]["HttpTokens"] == "required"
    assert data["BlockDeviceMappings"][0]["Ebs"]["VolumeSize"] == 100
    user_data = base64.b64decode(data["UserData"]).decode()
    assert user_data.index("vm.max_map_count") < user_data.index("application/node.eks.aws")  # the user's part first
    [config] = decode_node_configs(user_data)
    cluster = account["cluster"]
    assert config["spec"]["cluster"] == {"name": CLUSTER, "apiServerEndpoint": cluster["endpoint"],
                                         "certificateAuthority": cluster["certificateAuthority"]["data"],
                                         "cidr": "172.20.0.0/16"}
    kubelet = config["spec"]["kubelet"]
    assert kubelet["config"]["maxPods"] == 58
    assert kubelet["config"]["registerWithTaints"] == [
        {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}, {"key": "example.com/warming", "effect": "NoExecute"},
        {"key": "karpenter.sh/unregistered", "effect": "NoExecute"}]
    assert kubelet["flags"] == ['--node-labels="karpenter.sh/capacity-type=on-demand,karpenter.sh/do-not-sync-taints=true,'
                                'karpenter.sh/nodepool=ml,team=ml"']


@pytest.mark.parametrize("instance_type, shape, image", [
    ("m6g.large", ("arm64", "standard"), ("arm64", "standard")),
    ("p5.48xlarge", ("amd64", "nvidia"), ("x86_64", "nvidia")),
    ("trn1.2xlarge", ("amd64", "neuron"), ("x86_64", "neuron")),
])
def test_each_architecture_and_accelerator_gets_its_image(account, provider, instance_type, shape, image):
    request = launch_request(f"ml-{instance_type.replace('.', '-')}", karpenter_class(), instance_type, shape)
    completed = provider._complete(request)
    assert completed.image_ids == {instance_type: account["images"][image]}


def test_a_class_without_subnets_is_not_ready_and_launches_nothing(account, provider, world):
    spec = karpenter_class(subnetSelectorTerms=[{"tags": {"karpenter.sh/discovery": "no-such-cluster"}}])
    resolved = provider.resolve_node_class("ml", "3f6c2a9e-uid", spec)
    conditions = {c["type"]: (c["status"], c["reason"]) for c in resolved.all_conditions()}
    assert conditions["SubnetsReady"] == ("False", "SubnetsNotFound")
    assert conditions["Ready"] == ("False", "UnhealthyDependents") and conditions["AMIsReady"] == ("True", "AMIsReady")
    fleets = len(world.calls_of("CreateFleet"))
    result = provider.launch(launch_request("ml-nosubnet", spec))
    assert not result.ok and result.error_code == "NodeClassNotReady"
    assert "SubnetsReady is False (SubnetsNotFound): spec.subnetSelectorTerms selects no subnet" in result.error_message
    assert len(world.calls_of("CreateFleet")) == fleets


def test_an_unknown_alias_and_restricted_tags_are_named(account, provider):
    resolved = provider.resolve_node_class("ml", "uid", karpenter_class(
        amiSelectorTerms=[{"alias": "al2023@v19990101"}], tags={"eks:eks-cluster-name": "other"}))
    conditions = {c["type"]: c for c in resolved.all_conditions()}
    assert conditions["AMIsReady"]["reason"] == "AMINotFound" and "al2023@v19990101" in conditions["AMIsReady"]["message"]
    assert conditions["ValidationSucceeded"]["reason"] == "TagValidationFailed"
    assert "spec.tags may not set eks:eks-cluster-name" in conditions["ValidationSucceeded"]["message"]


def test_the_pinned_alias_and_an_image_by_name(account, provider, world):
    pinned = provider.resolve_node_class("ml", "uid", karpenter_class(amiSelectorTerms=[{"alias": "al2023@v20261101"}]))
    assert {i.id for i in pinned.images} == set(account["images"].values())
    older = world.add_image("team-golden-2026-10", created=datetime(2026, 10, 1, tzinfo=timezone.utc), owner="123456789012")
    newer = world.add_image("team-golden-2026-11", created=datetime(2026, 11, 1, tzinfo=timezone.utc), owner="123456789012")
    by_name = provider.resolve_node_class("ml", "uid", karpenter_class(amiSelectorTerms=[{"name": "team-golden-*", "owner": "self"}]))
    assert [i.id for i in by_name.images] == [newer] and older != newer
