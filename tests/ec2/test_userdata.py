"""User data per AMI family, on its own (no AWS): the user's parts are kept and come first, labels
the kubelet may not set are left out, the unregistered taint is always there, Bottlerocket's TOML
is merged with karpweb's keys winning, and input that cannot be merged is refused by name; the
pieces upstream's bootstrap relies on (Go durations, Bottlerocket's version rule)."""

import tomllib
from dataclasses import replace

import pytest
import yaml

from scheduling.adapters.ec2.amis import Image, bottlerocket_version
from scheduling.adapters.ec2.userdata import (
    Bootstrap,
    UserDataError,
    build,
    decode_node_configs,
    go_duration,
    node_labels,
    supports_default_bind,
)

BOOT = Bootstrap("prod", "https://api.prod.example", "Q0EtREFUQQ==", "10.100.0.0/16",
                 labels={"karpenter.sh/nodepool": "gpu", "topology.kubernetes.io/zone": "us-east-1a",
                         "node.kubernetes.io/instance-type": "p5.48xlarge", "team": "ml", "example.k8s.io/x": "1"},
                 taints=[{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}], kubelet={"maxPods": 110},
                 dns_ip="10.100.0.10")


def test_labels_under_kubernetes_io_and_k8s_io_are_left_to_the_kubelet():
    assert node_labels(BOOT.labels) == {"karpenter.sh/do-not-sync-taints": "true", "karpenter.sh/nodepool": "gpu", "team": "ml"}


def test_al2023_merges_the_users_mime_parts_and_nodeconfig():
    users = ("MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"BOUNDARY\"\n\n--BOUNDARY\n"
             "Content-Type: application/node.eks.aws\n\napiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\n"
             "spec:\n  kubelet:\n    config:\n      shutdownGracePeriod: 30s\n--BOUNDARY\n"
             "Content-Type: text/x-shellscript\n\n#!/bin/bash\necho users\n--BOUNDARY--\n")
    text = build("AL2023", BOOT, users)
    configs = decode_node_configs(text)
    assert configs[0]["spec"]["kubelet"]["config"] == {"shutdownGracePeriod": "30s"}  # the user's, first
    ours = configs[1]["spec"]
    assert ours["cluster"] == {"name": "prod", "apiServerEndpoint": "https://api.prod.example",
                               "certificateAuthority": "Q0EtREFUQQ==", "cidr": "10.100.0.0/16"}
    assert ours["kubelet"]["config"]["clusterDNS"] == ["10.100.0.10"] and ours["kubelet"]["config"]["maxPods"] == 110
    assert {"key": "karpenter.sh/unregistered", "effect": "NoExecute"} in ours["kubelet"]["config"]["registerWithTaints"]
    assert "echo users" in text and text.index("echo users") < text.rindex("application/node.eks.aws")


def test_al2023_takes_a_bare_nodeconfig_as_one():
    bare = yaml.safe_dump({"apiVersion": "node.eks.aws/v1alpha1", "kind": "NodeConfig", "spec": {"instance": {}}})
    assert len(decode_node_configs(build("AL2023", BOOT, bare))) == 2


def test_bottlerocket_merges_toml_and_karpwebs_keys_win():
    users = '[settings.kubernetes]\ncluster-name = "wrong"\nimage-gc-high-threshold-percent = 85\n[settings.host-containers.admin]\nenabled = true\n'
    merged = tomllib.loads(build("Bottlerocket", BOOT, users))
    kubernetes = merged["settings"]["kubernetes"]
    assert kubernetes["cluster-name"] == "prod" and kubernetes["image-gc-high-threshold-percent"] == 85
    assert merged["settings"]["host-containers"]["admin"]["enabled"] is True
    assert kubernetes["node-taints"] == {"nvidia.com/gpu": ["true:NoSchedule"], "karpenter.sh/unregistered": [":NoExecute"]}
    assert kubernetes["node-labels"]["team"] == "ml" and kubernetes["max-pods"] == 110
    with pytest.raises(UserDataError, match="not TOML"):
        build("Bottlerocket", BOOT, "#!/bin/bash\necho no")


def test_al2_bootstraps_after_the_users_script_and_custom_is_untouched():
    text = build("AL2", BOOT, "#!/bin/bash\necho first")
    assert text.index("echo first") < text.index("/etc/eks/bootstrap.sh prod ")
    assert "--register-with-taints=\"nvidia.com/gpu=true:NoSchedule,karpenter.sh/unregistered:NoExecute\"" in text
    assert build("Custom", BOOT, "my own") == "my own"


@pytest.mark.parametrize("written, go", [("1m", "1m0s"), ("90s", "1m30s"), ("2h", "2h0m0s"), ("1h30m", "1h30m0s"),
                                         ("500ms", "500ms"), ("1.5s", "1.5s"), ("0s", "0s"), ("soon", "soon")])
def test_grace_periods_are_written_as_go_prints_durations(written, go):
    assert go_duration(written) == go


@pytest.mark.parametrize("version, default_bind", [("latest", True), ("v1.46.0", True), ("1.47.0", True), ("2.0.0", True),
                                                   ("v1.45.0", False), ("1.9.0", False), ("1.46", False), ("", False)])
def test_bottlerocket_binds_default_directories_from_1_46(version, default_bind):
    assert supports_default_bind(version) is default_bind


def test_the_bottlerocket_version_comes_from_the_alias_a_name_or_the_images():
    image = Image("ami-0b7", "bottlerocket-aws-k8s-1.31-x86_64-v1.44.2-5c1d", "amd64", None)
    assert bottlerocket_version([{"alias": "bottlerocket@v1.46.0"}], [image]) == "v1.46.0"
    assert bottlerocket_version([{"name": "bottlerocket-aws-k8s-1.31-x86_64-v1.47.1-*"}], [image]) == "v1.47.1"
    assert bottlerocket_version([{"id": "ami-0b7"}], [image]) == "v1.44.2"
    assert bottlerocket_version([{"tags": {"team": "ml"}}], []) == ""


def test_an_ipv6_cluster_dns_sets_al2s_ip_family():
    text = build("AL2", replace(BOOT, kubelet={}, dns_ip="fd00:10:96::a"), None)
    assert "--ip-family ipv6" in text and "--dns-cluster-ip fd00:10:96::a" in text
    assert "--ip-family" not in build("AL2", BOOT, None)
