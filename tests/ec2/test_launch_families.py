"""The launch template karpweb sends for each AMI family, read back from the EC2 test server over
HTTP and checked semantically (MIME parts, the NodeConfig YAML, Bottlerocket's TOML, the AL2
bootstrap and Windows PowerShell arguments), as aws/karpenter-provider-aws writes them
(``pkg/providers/launchtemplate/suite_test.go``, ``pkg/providers/amifamily/bootstrap/``):

* every spec.kubelet field reaches the node on AL2023, AL2, Bottlerocket and Windows;
* instanceStorePolicy RAID0 on each family (Bottlerocket before and from 1.46.0);
* Bottlerocket drops settings.kubernetes keys it does not know and writes karpweb's taints only;
* maxPods is pinned to the figure karpweb planned with when the class sets none;
* an image is deprecated only once its DeprecationTime has passed;
* the MIME header order (a user's document may start with Content-Type) and the Windows merge.

The EC2NodeClass and NodePool are rows as the Kubernetes sync writes them; the launch is built
from them by the loop's own ``node_class_launch``."""

from __future__ import annotations

import base64
import shlex
import tomllib
from datetime import datetime, timedelta, timezone

import pytest
import yaml

from reservations.models import EC2NodeClass
from scheduling.adapters.ec2.interface import ON_DEMAND, SPOT, LaunchOffering, LaunchRequest, NodeClassLaunch
from scheduling.adapters.ec2.userdata import decode_node_configs, mime_parts
from scheduling.loop.provisioning import node_class_launch
from scheduling.models import NodeClaim, NodePool
from tests.ec2.test_launch_resolution import CLUSTER, ROLE, ZONE, account  # noqa: F401 - the account fixture
from tests.factories.scheduling import InstanceTypeFactory
from tests.support.ec2_fixtures import *  # noqa: F403 - the EC2 test server and providers
from tests.support.ec2_fixtures import T0

pytestmark = pytest.mark.django_db
DNS = "172.20.0.10"

# Every kubelet field Karpenter's EC2NodeClass has that the families write.
FULL_KUBELET = {
    "clusterDNS": ["172.20.0.53"],
    "maxPods": 42,
    "systemReserved": {"cpu": "250m", "memory": "300Mi", "ephemeral-storage": "1Gi"},
    "kubeReserved": {"cpu": "150m", "memory": "500Mi", "ephemeral-storage": "2Gi"},
    "evictionHard": {"memory.available": "5%", "nodefs.available": "10%"},
    "evictionSoft": {"memory.available": "10%", "nodefs.available": "15%"},
    "evictionSoftGracePeriod": {"memory.available": "1m", "nodefs.available": "90s"},
    "evictionMaxPodGracePeriod": 120,
    "imageGCHighThresholdPercent": 80,
    "imageGCLowThresholdPercent": 60,
    "cpuCFSQuota": False,
}
NODEPOOL_TAINTS = [{"key": "example.com/dedicated", "value": "ml", "effect": "NoSchedule"}]
STARTUP_TAINTS = [{"key": "example.com/warming", "effect": "NoExecute"}]


@pytest.fixture(autouse=True)
def _aws(aws_test_credentials, settings):
    settings.KARPWEB_CLUSTER_DNS = DNS


@pytest.fixture
def images(account, world):
    """Public images of every family (AL2023 comes with the account)."""
    return {"AL2023": account["images"], "AL2": world.publish_family_images("AL2"),
            "Bottlerocket": world.publish_family_images("Bottlerocket"),
            "Windows2022": world.publish_family_images("Windows2022")}


ALIASES = {"AL2023": "al2023@latest", "AL2": "al2@latest", "Bottlerocket": "bottlerocket@latest",
           "Windows2022": "windows2022@latest"}


def node_class_spec(family: str, **changes) -> dict:
    spec = {
        "amiSelectorTerms": [{"alias": ALIASES[family]}] if family in ALIASES else [],
        "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": CLUSTER}}],
        "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": CLUSTER}}],
        "role": ROLE,
    }
    spec.update(changes)
    return spec


def launch_instance_id(provider, spec: dict, instance_type: str = "m5.large", capacity_type: str = ON_DEMAND,
                       eni_pods: int = 29, vcpus: int = 2) -> str:
    """Launch one node of `instance_type` for a NodePool of the class, as the loop does."""
    node_class, _ = EC2NodeClass.objects.update_or_create(name="ml", defaults={"uid": "5b1f0c7e-uid", "spec": spec})
    pool, _ = NodePool.objects.update_or_create(name="ml", defaults={"node_class": node_class, "taints": NODEPOOL_TAINTS,
                                                                     "startup_taints": STARTUP_TAINTS})
    InstanceTypeFactory(name=instance_type, cpu_millicores=vcpus * 1000, max_pods=eni_pods, arch="amd64", labels={})
    labels = {"karpenter.sh/nodepool": "ml", "karpenter.sh/capacity-type": capacity_type, "team": "ml",
              "node.kubernetes.io/instance-type": instance_type, "topology.kubernetes.io/zone": ZONE}
    name = f"ml-{NodeClaim.objects.count()}"
    row = NodeClaim.objects.create(name=name, node_pool=pool, node_class=node_class, labels=labels,
                                   instance_type=instance_type, zone=ZONE, capacity_type=capacity_type,
                                   created_at=T0)
    request = LaunchRequest(nodeclaim_name=name, nodeclass_name="ml", image_id="",
                            offerings=[LaunchOffering(instance_type, ZONE, capacity_type, 0.1)],
                            tags={"karpenter.sh/nodeclaim": name}, node_class=node_class_launch(row))
    result = provider.launch(request)
    assert result.ok, result.error_message
    return result.instance_id


def launch(provider, spec: dict, **options) -> str:
    """The user data of the launch template EC2 got for a node of the class (see launch_instance_id)."""
    return base64.b64decode(template_of(provider, launch_instance_id(provider, spec, **options))["UserData"]).decode()


def template_of(provider, instance_id: str) -> dict:
    instance = provider.ec2.describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"][0]
    template = next(t["Value"] for t in instance["Tags"] if t["Key"] == "aws:ec2launchtemplate:id")
    return provider.ec2.describe_launch_template_versions(LaunchTemplateId=template)["LaunchTemplateVersions"][0][
        "LaunchTemplateData"]


def our_node_config(user_data: str) -> dict:
    return decode_node_configs(user_data)[-1]


def al2_bootstrap_args(user_data: str) -> dict[str, str]:
    """The options of the /etc/eks/bootstrap.sh line (continuations joined), with the kubelet
    flags of --kubelet-extra-args as their own `kubelet:` entries."""
    script = mime_parts(user_data)[-1][1]
    command = script[script.index("/etc/eks/bootstrap.sh"):].replace("\\\n", " ")
    words = shlex.split(command)
    args = {"cluster": words[1]}
    i = 2
    while i < len(words):
        args[words[i]] = words[i + 1]
        i += 2
    args.update(kubelet_flags(args.pop("--kubelet-extra-args")))
    return args


def kubelet_flags(text: str) -> dict[str, str]:
    return {f"kubelet:{flag.split('=', 1)[0]}": flag.split("=", 1)[1] for flag in shlex.split(text)}


def windows_args(user_data: str) -> dict[str, str]:
    line = next(line for line in user_data.splitlines() if line.startswith("& $EKSBootstrapScriptFile"))
    words = shlex.split(line.removeprefix("& $EKSBootstrapScriptFile "))
    args = dict(zip(words[::2], words[1::2]))
    args.update(kubelet_flags(args.pop("-KubeletExtraArgs")))
    return args


def pairs(text: str, separator: str) -> dict[str, str]:
    return dict(item.split(separator, 1) for item in text.split(","))


# --- every kubelet field, every family ------------------------------------------------------------

def test_al2023_nodeconfig_carries_every_kubelet_field(images, provider):
    config = our_node_config(launch(provider, node_class_spec("AL2023", kubelet=FULL_KUBELET)))
    kubelet = config["spec"]["kubelet"]["config"]
    assert {k: v for k, v in kubelet.items() if k != "registerWithTaints"} == FULL_KUBELET  # passed through whole
    assert kubelet["registerWithTaints"] == [*NODEPOOL_TAINTS, *STARTUP_TAINTS,
                                             {"key": "karpenter.sh/unregistered", "effect": "NoExecute"}]


def test_al2_kubelet_extra_args_carry_every_kubelet_field(images, provider):
    args = al2_bootstrap_args(launch(provider, node_class_spec("AL2", kubelet={**FULL_KUBELET, "podsPerCore": 20})))
    assert args["--dns-cluster-ip"] == "172.20.0.53" and args["--use-max-pods"] == "false"
    assert args["kubelet:--max-pods"] == "42" and args["kubelet:--pods-per-core"] == "20"
    assert pairs(args["kubelet:--system-reserved"], "=") == FULL_KUBELET["systemReserved"]
    assert pairs(args["kubelet:--kube-reserved"], "=") == FULL_KUBELET["kubeReserved"]
    assert pairs(args["kubelet:--eviction-hard"], "<") == FULL_KUBELET["evictionHard"]
    assert pairs(args["kubelet:--eviction-soft"], "<") == FULL_KUBELET["evictionSoft"]
    assert pairs(args["kubelet:--eviction-soft-grace-period"], "=") == {"memory.available": "1m0s",
                                                                       "nodefs.available": "1m30s"}
    assert args["kubelet:--eviction-max-pod-grace-period"] == "120"
    assert (args["kubelet:--image-gc-high-threshold"], args["kubelet:--image-gc-low-threshold"]) == ("80", "60")
    assert args["kubelet:--cpu-cfs-quota"] == "false"
    assert args["kubelet:--register-with-taints"] == ("example.com/dedicated=ml:NoSchedule,example.com/warming:NoExecute,"
                                                      "karpenter.sh/unregistered:NoExecute")
    assert args["kubelet:--node-labels"] == ("karpenter.sh/capacity-type=on-demand,karpenter.sh/do-not-sync-taints=true,"
                                             "karpenter.sh/nodepool=ml,team=ml")


def test_bottlerocket_toml_carries_every_kubelet_field(images, provider):
    kubernetes = tomllib.loads(launch(provider, node_class_spec("Bottlerocket", kubelet=FULL_KUBELET)))["settings"]["kubernetes"]
    assert kubernetes["cluster-dns-ip"] == "172.20.0.53" and kubernetes["max-pods"] == 42
    assert kubernetes["system-reserved"] == FULL_KUBELET["systemReserved"]
    assert kubernetes["kube-reserved"] == FULL_KUBELET["kubeReserved"]
    assert kubernetes["eviction-hard"] == FULL_KUBELET["evictionHard"]
    assert kubernetes["eviction-soft"] == FULL_KUBELET["evictionSoft"]
    assert kubernetes["eviction-soft-grace-period"] == {"memory.available": "1m0s", "nodefs.available": "1m30s"}
    assert kubernetes["eviction-max-pod-grace-period"] == 120
    assert (kubernetes["image-gc-high-threshold-percent"], kubernetes["image-gc-low-threshold-percent"]) == ("80", "60")
    assert kubernetes["cpu-cfs-quota-enforced"] is False
    assert kubernetes["node-taints"] == {"example.com/dedicated": ["ml:NoSchedule"], "example.com/warming": [":NoExecute"],
                                         "karpenter.sh/unregistered": [":NoExecute"]}


def test_windows_kubelet_extra_args_carry_every_kubelet_field(images, provider):
    args = windows_args(launch(provider, node_class_spec("Windows2022", kubelet=FULL_KUBELET)))
    assert args["-EKSClusterName"] == CLUSTER and args["-DNSClusterIP"] == "172.20.0.53"
    assert args["kubelet:--max-pods"] == "42"
    assert pairs(args["kubelet:--system-reserved"], "=") == FULL_KUBELET["systemReserved"]
    assert pairs(args["kubelet:--kube-reserved"], "=") == FULL_KUBELET["kubeReserved"]
    assert pairs(args["kubelet:--eviction-hard"], "<") == FULL_KUBELET["evictionHard"]
    assert pairs(args["kubelet:--eviction-soft"], "<") == FULL_KUBELET["evictionSoft"]
    assert pairs(args["kubelet:--eviction-soft-grace-period"], "=") == {"memory.available": "1m0s",
                                                                       "nodefs.available": "1m30s"}
    assert args["kubelet:--eviction-max-pod-grace-period"] == "120"
    assert (args["kubelet:--image-gc-high-threshold"], args["kubelet:--image-gc-low-threshold"]) == ("80", "60")
    assert args["kubelet:--cpu-cfs-quota"] == "false"


def test_custom_user_data_is_sent_untouched(images, provider):
    script = "#!/bin/bash\n/opt/join-cluster.sh --fast\n"
    spec = node_class_spec("Custom", amiFamily="Custom", kubelet=FULL_KUBELET, userData=script,
                           amiSelectorTerms=[{"id": images["AL2023"][("x86_64", "standard")]}])
    assert launch(provider, spec) == script


# --- instanceStorePolicy: RAID0 -----------------------------------------------------------------

def test_raid0_on_al2023_is_the_nodeconfig_local_storage_strategy(images, provider):
    assert our_node_config(launch(provider, node_class_spec("AL2023", instanceStorePolicy="RAID0")))[
        "spec"]["instance"] == {"localStorage": {"strategy": "RAID0"}}
    assert "instance" not in our_node_config(launch(provider, node_class_spec("AL2023")))["spec"]


def test_raid0_on_al2_is_local_disks_raid0(images, provider):
    assert al2_bootstrap_args(launch(provider, node_class_spec("AL2", instanceStorePolicy="RAID0")))["--local-disks"] == "raid0"
    assert "--local-disks" not in al2_bootstrap_args(launch(provider, node_class_spec("AL2")))


@pytest.mark.parametrize("version, bind", [
    ("latest", ["apiclient", "ephemeral-storage", "bind"]),
    ("v1.46.0", ["apiclient", "ephemeral-storage", "bind"]),
    ("v1.45.0", ["apiclient", "ephemeral-storage", "bind", "--dirs", "/var/lib/containerd", "/var/lib/kubelet", "/var/log/pods"]),
])
def test_raid0_on_bottlerocket_is_a_bootstrap_command_by_version(images, world, provider, version, bind):
    if version != "latest":
        world.publish_family_images("Bottlerocket", version=version)
    users = "[settings.bootstrap-commands.111-say-hello]\ncommands = [['echo', 'hello']]\nmode = 'always'\nessential = true\n"
    spec = node_class_spec("Bottlerocket", amiSelectorTerms=[{"alias": f"bottlerocket@{version}"}],
                           instanceStorePolicy="RAID0", userData=users)
    commands = tomllib.loads(launch(provider, spec))["settings"]["bootstrap-commands"]
    assert commands["000-mount-instance-storage"] == {
        "commands": [["apiclient", "ephemeral-storage", "init"], bind], "mode": "always", "essential": True}
    assert commands["111-say-hello"]["commands"] == [["echo", "hello"]]  # the user's command is kept


def test_raid0_on_windows_writes_nothing_as_upstream(images, provider):
    with_raid = launch(provider, node_class_spec("Windows2022", instanceStorePolicy="RAID0"))
    without = launch(provider, node_class_spec("Windows2022"))
    assert with_raid == without  # upstream's Windows bootstrap takes no instance-store policy


# --- Bottlerocket merge ---------------------------------------------------------------------------

def test_bottlerocket_drops_unknown_kubernetes_settings_and_writes_karpwebs_taints(images, provider):
    users = """
[settings.kubernetes]
"unknown-setting" = "unknown"
cluster-name = "someone-else"
cloud-provider = "external"
allowed-unsafe-sysctls = ["net.core.somaxconn"]

[settings.kubernetes.node-labels]
"custom-node-label" = "custom"
"team" = "overridden-by-karpweb"

[settings.kubernetes.node-taints]
"user-taint" = ["me:NoSchedule"]

[settings.ntp]
time-servers = ["169.254.169.123"]
"""
    spec = node_class_spec("Bottlerocket", userData=users)
    settings = tomllib.loads(launch(provider, spec))["settings"]
    kubernetes = settings["kubernetes"]
    assert "unknown-setting" not in kubernetes
    assert kubernetes["cloud-provider"] == "external" and kubernetes["allowed-unsafe-sysctls"] == ["net.core.somaxconn"]
    assert kubernetes["cluster-name"] == CLUSTER and kubernetes["cluster-dns-ip"] == DNS
    assert kubernetes["node-labels"]["custom-node-label"] == "custom" and kubernetes["node-labels"]["team"] == "ml"
    assert kubernetes["node-taints"] == {"example.com/dedicated": ["ml:NoSchedule"], "example.com/warming": [":NoExecute"],
                                         "karpenter.sh/unregistered": [":NoExecute"]}  # not the user's
    assert settings["ntp"] == {"time-servers": ["169.254.169.123"]}
    resolved = provider.resolve_node_class("ml", "5b1f0c7e-uid", spec)
    validation = next(c for c in resolved.conditions if c["type"] == "ValidationSucceeded")
    assert validation["status"] == "True" and "dropped: unknown-setting" in validation["message"]


# --- maxPods pinned -------------------------------------------------------------------------------

def test_max_pods_is_pinned_to_the_planned_figure_on_every_family(images, provider):
    assert our_node_config(launch(provider, node_class_spec("AL2023")))["spec"]["kubelet"]["config"]["maxPods"] == 29
    args = al2_bootstrap_args(launch(provider, node_class_spec("AL2")))
    assert (args["--use-max-pods"], args["kubelet:--max-pods"]) == ("false", "29")
    assert tomllib.loads(launch(provider, node_class_spec("Bottlerocket")))["settings"]["kubernetes"]["max-pods"] == 29
    assert windows_args(launch(provider, node_class_spec("Windows2022")))["kubelet:--max-pods"] == "110"


def test_pods_per_core_caps_the_pinned_figure_except_on_bottlerocket(images, provider):
    kubelet = {"podsPerCore": 4}
    assert our_node_config(launch(provider, node_class_spec("AL2023", kubelet=kubelet)))[
        "spec"]["kubelet"]["config"]["maxPods"] == 8  # 4 per core x 2 vCPUs < 29
    assert tomllib.loads(launch(provider, node_class_spec("Bottlerocket", kubelet=kubelet)))[
        "settings"]["kubernetes"]["max-pods"] == 29


def test_one_launch_template_per_distinct_max_pods(images, provider):
    two_sizes = NodeClassLaunch(uid="u", spec=node_class_spec("AL2023"), nodepool="ml", labels={"team": "ml"},
                                shapes={"m5.large": ("amd64", "standard"), "m5.xlarge": ("amd64", "standard")},
                                max_pods={"m5.large": 29, "m5.xlarge": 58})
    request = LaunchRequest(nodeclaim_name="ml-two", nodeclass_name="ml", image_id="", node_class=two_sizes,
                            offerings=[LaunchOffering("m5.large", ZONE, ON_DEMAND, 0.096),
                                       LaunchOffering("m5.xlarge", ZONE, ON_DEMAND, 0.192)])
    assert provider.launch(request).ok
    templates = provider.ec2.describe_launch_templates()["LaunchTemplates"]
    pods = sorted(our_node_config(user_data_of(provider, t["LaunchTemplateId"]))["spec"]["kubelet"]["config"]["maxPods"]
                  for t in templates)
    assert pods == [29, 58]


def user_data_of(provider, template_id: str) -> str:
    data = provider.ec2.describe_launch_template_versions(LaunchTemplateId=template_id)["LaunchTemplateVersions"][0]
    return base64.b64decode(data["LaunchTemplateData"]["UserData"]).decode()


# --- AMI deprecation --------------------------------------------------------------------------------

def golden(world, name, created, deprecation=None):
    return world.add_image(name, created=created, owner="123456789012", deprecation=deprecation)


def test_a_future_deprecation_time_is_not_deprecation(images, world, provider):
    older = golden(world, "team-golden-2026-10", datetime(2026, 10, 1, tzinfo=timezone.utc))
    newer = golden(world, "team-golden-2026-11", datetime(2026, 11, 1, tzinfo=timezone.utc),
                   deprecation=T0 + timedelta(days=700))  # as AWS sets on every public image
    resolved = provider.resolve_node_class("ml", "u", node_class_spec("AL2023", amiSelectorTerms=[{"name": "team-golden-*"}]))
    assert [(a["id"], a.get("deprecated", False)) for a in resolved.status_fields()["amis"]] == [(newer, False)]
    assert older != newer


def test_a_past_deprecation_time_loses_to_an_older_image(images, world, provider):
    older = golden(world, "team-golden-2026-10", datetime(2026, 10, 1, tzinfo=timezone.utc))
    golden(world, "team-golden-2026-11", datetime(2026, 11, 1, tzinfo=timezone.utc), deprecation=T0 - timedelta(days=1))
    spec = node_class_spec("AL2023", amiFamily="AL2023", amiSelectorTerms=[{"name": "team-golden-*"}])
    resolved = provider.resolve_node_class("ml", "u", spec)
    assert [a["id"] for a in resolved.status_fields()["amis"]] == [older]
    completed = provider._complete(LaunchRequest(
        nodeclaim_name="x", nodeclass_name="ml", image_id="", offerings=[LaunchOffering("m5.large", ZONE, ON_DEMAND, 0.1)],
        node_class=NodeClassLaunch(uid="u", spec=spec, nodepool="ml", labels={}, shapes={"m5.large": ("amd64", "standard")})))
    assert completed.image_id == older


def test_only_deprecated_images_keep_the_newest_and_say_so(images, world, provider):
    golden(world, "team-golden-2026-10", datetime(2026, 10, 1, tzinfo=timezone.utc), deprecation=T0 - timedelta(days=2))
    newest = golden(world, "team-golden-2026-11", datetime(2026, 11, 1, tzinfo=timezone.utc), deprecation=T0 - timedelta(days=1))
    resolved = provider.resolve_node_class("ml", "u", node_class_spec("AL2023", amiSelectorTerms=[{"name": "team-golden-*"}]))
    assert [(a["id"], a.get("deprecated")) for a in resolved.status_fields()["amis"]] == [(newest, True)]


def test_a_creation_date_tie_goes_to_the_greater_name(images, world, provider):
    when = datetime(2026, 11, 1, tzinfo=timezone.utc)
    golden(world, "team-golden-a", when)
    b = golden(world, "team-golden-b", when)
    resolved = provider.resolve_node_class("ml", "u", node_class_spec("AL2023", amiSelectorTerms=[{"name": "team-golden-*"}]))
    assert [a["id"] for a in resolved.status_fields()["amis"]] == [b]


def test_windows_images_require_windows_and_their_build(images, provider):
    resolved = provider.resolve_node_class("ml", "u", node_class_spec("Windows2022"))
    [ami] = resolved.status_fields()["amis"]
    assert ami["id"] == images["Windows2022"][("x86_64", "standard")]
    assert sorted(ami["requirements"], key=lambda r: r["key"]) == [
        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
        {"key": "kubernetes.io/os", "operator": "In", "values": ["windows"]},
        {"key": "node.kubernetes.io/windows-build", "operator": "In", "values": ["10.0.20348"]}]


# --- MIME header order and the Windows merge ------------------------------------------------------

CONTENT_TYPE_FIRST = """Content-Type: multipart/mixed; boundary="BOUNDARY"
MIME-Version: 1.0

--BOUNDARY
Content-Type: text/x-shellscript; charset="us-ascii"

#!/bin/bash
echo "tuning sysctls"

--BOUNDARY--
"""


@pytest.mark.parametrize("family", ["AL2", "AL2023"])
def test_a_users_mime_document_with_content_type_first_is_merged_part_by_part(images, provider, family):
    user_data = launch(provider, node_class_spec(family, userData=CONTENT_TYPE_FIRST))
    assert user_data.splitlines()[:2] == ["MIME-Version: 1.0", 'Content-Type: multipart/mixed; boundary="//"']
    parts = mime_parts(user_data)
    assert (parts[0][0], parts[0][1].strip()) == ('text/x-shellscript; charset="us-ascii"', '#!/bin/bash\necho "tuning sysctls"')
    assert len(parts) == 2 and "Content-Type" not in parts[0][1]  # the user's document was not wrapped whole
    assert parts[1][0] == ('text/x-shellscript; charset="us-ascii"' if family == "AL2" else "application/node.eks.aws")


def test_al2023_takes_a_yaml_map_as_a_nodeconfig_and_anything_else_as_a_script(images, provider):
    nodeconfig = yaml.safe_dump({"apiVersion": "node.eks.aws/v1alpha1", "kind": "NodeConfig",
                                 "spec": {"kubelet": {"config": {"shutdownGracePeriod": "30s"}}}})
    parts = mime_parts(launch(provider, node_class_spec("AL2023", userData=nodeconfig)))
    assert [p[0] for p in parts] == ["application/node.eks.aws", "application/node.eks.aws"]
    parts = mime_parts(launch(provider, node_class_spec("AL2023", userData="#!/bin/bash\necho hi\n")))
    assert [p[0] for p in parts] == ['text/x-shellscript; charset="us-ascii"', "application/node.eks.aws"]


def test_windows_runs_the_users_powershell_inside_the_same_block_first(images, provider):
    users = 'Write-Host "Running custom user data script"\nSet-TimeZone -Id "UTC"'
    user_data = launch(provider, node_class_spec("Windows2022", userData=users))
    lines = user_data.strip().splitlines()
    assert lines[0] == "<powershell>" and lines[-1] == "</powershell>" and user_data.count("<powershell>") == 1
    assert lines[1:3] == users.splitlines()
    assert lines[3].startswith("[string]$EKSBootstrapScriptFile") and lines[4].startswith("& $EKSBootstrapScriptFile")
    assert windows_args(user_data)["-DNSClusterIP"] == DNS


def test_spot_launch_templates_tag_the_spot_request(images, provider):
    on_demand = template_of(provider, launch_instance_id(provider, node_class_spec("AL2023", tags={"team": "ml"})))
    assert "spot-instances-request" not in {s["ResourceType"] for s in on_demand["TagSpecifications"]}
    spec = node_class_spec("AL2023", tags={"team": "ml"})
    node_class, _ = EC2NodeClass.objects.update_or_create(name="ml", defaults={"uid": "u", "spec": spec})
    pool, _ = NodePool.objects.update_or_create(name="ml", defaults={"node_class": node_class})
    InstanceTypeFactory(name="m5.large", cpu_millicores=2000, max_pods=29, arch="amd64", labels={})
    row = NodeClaim.objects.create(name="ml-spot", node_pool=pool, node_class=node_class, labels={}, instance_type="m5.large",
                                   zone=ZONE, capacity_type=SPOT, created_at=T0)
    result = provider.launch(LaunchRequest(nodeclaim_name="ml-spot", nodeclass_name="ml", image_id="",
                                           offerings=[LaunchOffering("m5.large", ZONE, SPOT, 0.03)],
                                           node_class=node_class_launch(row)))
    assert result.ok, result.error_message
    specs = {s["ResourceType"]: {t["Key"]: t["Value"] for t in s["Tags"]}
             for s in template_of(provider, result.instance_id)["TagSpecifications"]}
    assert {"network-interface", "spot-instances-request"} <= set(specs)  # (moto adds the template's own)
    assert specs["spot-instances-request"]["team"] == "ml" and specs["spot-instances-request"]["eks:eks-cluster-name"] == CLUSTER


# --- instance profile named in the status ---------------------------------------------------------

def test_the_status_instance_profile_is_kept_while_it_holds_the_role(images, account, provider):
    iam = account["iam"]  # IAM lives as long as the test server: made once
    if not any(p["InstanceProfileName"] == f"{CLUSTER}_7700112233" for p in iam.list_instance_profiles()["InstanceProfiles"]):
        iam.create_instance_profile(InstanceProfileName=f"{CLUSTER}_7700112233", Path=f"/karpenter/us-east-1/{CLUSTER}/u/")
        iam.add_role_to_instance_profile(InstanceProfileName=f"{CLUSTER}_7700112233", RoleName=ROLE)
        iam.create_role(RoleName="KarpenterNodeRole-other", AssumeRolePolicyDocument="{}")
    before = {p["InstanceProfileName"] for p in iam.list_instance_profiles()["InstanceProfiles"]}
    kept = provider.resolve_node_class("ml", "u", node_class_spec("AL2023"), status_profile=f"{CLUSTER}_7700112233")
    assert kept.instance_profile == f"{CLUSTER}_7700112233"  # Karpenter's (or an earlier run's) profile, reused
    assert {p["InstanceProfileName"] for p in iam.list_instance_profiles()["InstanceProfiles"]} == before
    moved = provider.resolve_node_class("ml", "u", node_class_spec("AL2023", role="KarpenterNodeRole-other"),
                                        status_profile=f"{CLUSTER}_7700112233")
    assert moved.instance_profile != f"{CLUSTER}_7700112233"  # the role changed: a profile of its own
    roles = iam.get_instance_profile(InstanceProfileName=moved.instance_profile)["InstanceProfile"]["Roles"]
    assert [r["RoleName"] for r in roles] == ["KarpenterNodeRole-other"]
