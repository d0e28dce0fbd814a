"""User data that makes an instance join the cluster, per AMI family, as Karpenter's AWS provider
writes it (aws/karpenter-provider-aws `pkg/providers/amifamily/bootstrap/`). Pure: no AWS calls.

* AL2023: a MIME multipart document; the user's own ``userData`` parts first (MIME parts as they
  are, a NodeConfig YAML as ``application/node.eks.aws``, anything else as a shell script), then
  karpweb's ``NodeConfig`` (cluster name, endpoint, CA, service CIDR; kubelet config with maxPods,
  clusterDNS and registerWithTaints; the node labels as a kubelet flag). nodeadm merges them.
* Bottlerocket: TOML ``[settings.kubernetes]`` merged over the user's TOML (karpweb's keys win).
* AL2: ``/etc/eks/bootstrap.sh`` with the cluster, labels, taints and max pods, after the user's
  script in a MIME document.
* Windows: the EKS bootstrap PowerShell script, after the user's.
* Custom: the user's ``userData`` untouched.

Labels: the NodeClaim's, less those under kubernetes.io and k8s.io (the kubelet may not set them),
plus ``karpenter.sh/do-not-sync-taints=true``. Taints: the NodePool's taints and startup taints and
``karpenter.sh/unregistered:NoExecute``, which the lifecycle removes once the node registers."""

from __future__ import annotations

import email
import email.policy
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import tomli_w
import yaml

from scheduling.engine.ec2types import AL2, AL2023, BOTTLEROCKET, CUSTOM, WINDOWS_BUILDS

UNREGISTERED_TAINT = {"key": "karpenter.sh/unregistered", "effect": "NoExecute"}
DO_NOT_SYNC_TAINTS = "karpenter.sh/do-not-sync-taints"
BOUNDARY = "//"
_FORBIDDEN_DOMAINS = ("kubernetes.io", "k8s.io")


class UserDataError(ValueError):
    """The user's userData cannot be merged (bad TOML for Bottlerocket, a broken MIME document)."""


@dataclass(frozen=True)
class Bootstrap:
    cluster_name: str
    endpoint: str
    ca_bundle: str  # base64 PEM
    service_cidr: str
    labels: Mapping[str, str]
    taints: Sequence[Mapping[str, str]] = ()  # NodePool taints and startup taints
    kubelet: Mapping[str, Any] = field(default_factory=dict)  # EC2NodeClass spec.kubelet
    max_pods: int | None = None
    dns_ip: str = ""


def node_labels(labels: Mapping[str, str]) -> dict[str, str]:
    """The labels the kubelet registers with (sorted): none the NodeRestriction admission refuses."""
    def allowed(key: str) -> bool:
        domain = key.split("/", 1)[0] if "/" in key else ""
        return not any(domain == d or domain.endswith("." + d) for d in _FORBIDDEN_DOMAINS)
    kept = {k: v for k, v in labels.items() if allowed(k)}
    kept[DO_NOT_SYNC_TAINTS] = "true"
    return dict(sorted(kept.items()))


def register_taints(bootstrap: Bootstrap) -> list[dict[str, str]]:
    taints = [dict(t) for t in bootstrap.taints]
    if not any(t.get("key") == UNREGISTERED_TAINT["key"] for t in taints):
        taints.append(dict(UNREGISTERED_TAINT))
    return taints


def _taint_text(taint: Mapping[str, str]) -> str:
    value = f"={taint['value']}" if taint.get("value") else ""
    return f"{taint['key']}{value}:{taint['effect']}"


def _max_pods(bootstrap: Bootstrap) -> int | None:
    return bootstrap.kubelet.get("maxPods") or bootstrap.max_pods


def build(family: str | None, bootstrap: Bootstrap, user_data: str | None) -> str:
    """The instance's user data, plain text (the launch template base64-encodes it)."""
    family = family or AL2023
    if family == CUSTOM:
        return user_data or ""
    if family == AL2023:
        return al2023(bootstrap, user_data)
    if family == BOTTLEROCKET:
        return bottlerocket(bootstrap, user_data)
    if family == AL2:
        return _mime(_user_parts(user_data, yaml_part=False) + [("text/x-shellscript; charset=\"us-ascii\"", al2(bootstrap))])
    if family in WINDOWS_BUILDS:
        return (user_data + "\n" if user_data else "") + windows(bootstrap)
    raise UserDataError(f"amiFamily {family!r} is not one karpweb can bootstrap")


# --- AL2023 -------------------------------------------------------------------------------------

def node_config(bootstrap: Bootstrap) -> dict[str, Any]:
    config = {k: v for k, v in bootstrap.kubelet.items() if k != "clusterDNS"}
    if _max_pods(bootstrap):
        config["maxPods"] = _max_pods(bootstrap)
    dns = bootstrap.kubelet.get("clusterDNS") or ([bootstrap.dns_ip] if bootstrap.dns_ip else [])
    if dns:
        config["clusterDNS"] = list(dns)
    config["registerWithTaints"] = register_taints(bootstrap)
    labels = ",".join(f"{k}={v}" for k, v in node_labels(bootstrap.labels).items())
    return {
        "apiVersion": "node.eks.aws/v1alpha1", "kind": "NodeConfig",
        "spec": {
            "cluster": {"name": bootstrap.cluster_name, "apiServerEndpoint": bootstrap.endpoint,
                        "certificateAuthority": bootstrap.ca_bundle, "cidr": bootstrap.service_cidr},
            "kubelet": {"config": config, "flags": [f'--node-labels="{labels}"']},
        },
    }


def al2023(bootstrap: Bootstrap, user_data: str | None) -> str:
    ours = ("application/node.eks.aws", yaml.safe_dump(node_config(bootstrap), sort_keys=True))
    return _mime(_user_parts(user_data, yaml_part=True) + [ours])


def _user_parts(user_data: str | None, *, yaml_part: bool) -> list[tuple[str, str]]:
    """The user's userData as (content type, body) parts: a MIME document's own parts, a NodeConfig
    (AL2023), or a shell script."""
    if not user_data or not user_data.strip():
        return []
    if user_data.lstrip().startswith("MIME-Version:"):
        message = email.message_from_string(user_data, policy=email.policy.compat32)
        if not message.is_multipart():
            raise UserDataError("userData is a MIME document but not multipart/mixed")
        return [(part.get("Content-Type", "text/x-shellscript"), part.get_payload())
                for part in message.get_payload()]
    if yaml_part and "apiVersion: node.eks.aws/" in user_data:
        return [("application/node.eks.aws", user_data)]
    return [('text/x-shellscript; charset="us-ascii"', user_data)]


def _mime(parts: list[tuple[str, str]]) -> str:
    lines = ["MIME-Version: 1.0", f'Content-Type: multipart/mixed; boundary="{BOUNDARY}"', ""]
    for content_type, body in parts:
        lines += [f"--{BOUNDARY}", f"Content-Type: {content_type}", "", body.rstrip("\n")]
    lines += [f"--{BOUNDARY}--", ""]
    return "\n".join(lines)


def decode_node_configs(user_data: str) -> list[dict[str, Any]]:
    """The NodeConfig documents in an AL2023 user data (for tests and the class page)."""
    message = email.message_from_string(user_data, policy=email.policy.compat32)
    return [yaml.safe_load(part.get_payload()) for part in message.get_payload()
            if part.get_content_type() == "application/node.eks.aws"]


# --- Bottlerocket -------------------------------------------------------------------------------

def bottlerocket(bootstrap: Bootstrap, user_data: str | None) -> str:
    try:
        document = tomllib.loads(user_data or "")
    except tomllib.TOMLDecodeError as exc:
        raise UserDataError(f"userData is not TOML, which Bottlerocket needs: {exc}") from None
    kubernetes = document.setdefault("settings", {}).setdefault("kubernetes", {})
    kubernetes.update({"api-server": bootstrap.endpoint, "cluster-certificate": bootstrap.ca_bundle,
                       "cluster-name": bootstrap.cluster_name})
    if bootstrap.dns_ip:
        kubernetes["cluster-dns-ip"] = bootstrap.dns_ip
    if _max_pods(bootstrap):
        kubernetes["max-pods"] = int(_max_pods(bootstrap))
    kubernetes["node-labels"] = {**kubernetes.get("node-labels", {}), **node_labels(bootstrap.labels)}
    taints: dict[str, list[str]] = {k: list(v) for k, v in kubernetes.get("node-taints", {}).items()}
    for taint in register_taints(bootstrap):
        entries = taints.setdefault(taint["key"], [])
        entry = f"{taint.get('value', '')}:{taint['effect']}"
        if entry not in entries:
            entries.append(entry)
    kubernetes["node-taints"] = taints
    return tomli_w.dumps(document)


# --- AL2 and Windows ----------------------------------------------------------------------------

def _kubelet_args(bootstrap: Bootstrap) -> str:
    labels = ",".join(f"{k}={v}" for k, v in node_labels(bootstrap.labels).items())
    args = [f'--node-labels="{labels}"', f'--register-with-taints="{",".join(_taint_text(t) for t in register_taints(bootstrap))}"']
    if _max_pods(bootstrap):
        args.append(f"--max-pods={int(_max_pods(bootstrap))}")
    return " ".join(args)


def al2(bootstrap: Bootstrap) -> str:
    command = (f"/etc/eks/bootstrap.sh '{bootstrap.cluster_name}' --apiserver-endpoint '{bootstrap.endpoint}' "
               f"--b64-cluster-ca '{bootstrap.ca_bundle}'")
    if bootstrap.dns_ip:
        command += f" --dns-cluster-ip '{bootstrap.dns_ip}'"
    if _max_pods(bootstrap):
        command += " --use-max-pods false"
    command += f" --kubelet-extra-args '{_kubelet_args(bootstrap)}'"
    return "#!/bin/bash -xe\nexec > >(tee /var/log/user-data.log|logger -t user-data -s 2>/dev/console) 2>&1\n" + command + "\n"


def windows(bootstrap: Bootstrap) -> str:
    dns = f" -DNSClusterIP '{bootstrap.dns_ip}'" if bootstrap.dns_ip else ""
    return ("<powershell>\n[string]$EKSBootstrapScriptFile = \"$env:ProgramFiles\\Amazon\\EKS\\Start-EKSBootstrap.ps1\"\n"
            f"& $EKSBootstrapScriptFile -EKSClusterName '{bootstrap.cluster_name}' -APIServerEndpoint '{bootstrap.endpoint}' "
            f"-Base64ClusterCA '{bootstrap.ca_bundle}' -KubeletExtraArgs '{_kubelet_args(bootstrap)}'{dns}\n</powershell>\n")
