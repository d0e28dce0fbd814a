"""User data that makes an instance join the cluster, per AMI family, as Karpenter's AWS provider
writes it (aws/karpenter-provider-aws ``pkg/providers/amifamily/bootstrap/``). Pure: no AWS calls.

* AL2023: a MIME multipart document; the user's own ``userData`` parts first (a MIME document's
  parts as they are, a YAML map as a ``application/node.eks.aws`` NodeConfig, anything else as a
  shell script), then karpweb's ``NodeConfig``: cluster name, endpoint, CA and service CIDR;
  ``spec.kubelet`` passed through whole as inline kubelet config, with maxPods (the planned figure
  when the class sets none), clusterDNS (discovered when the class sets none) and
  registerWithTaints; the node labels as a kubelet flag; ``localStorage.strategy: RAID0`` for
  ``instanceStorePolicy: RAID0``. nodeadm merges the documents.
* AL2: ``/etc/eks/bootstrap.sh`` after the user's parts (as AL2023's), with ``--dns-cluster-ip``,
  ``--use-max-pods false``, the kubelet settings as ``--kubelet-extra-args`` and ``--local-disks
  raid0``.
* Bottlerocket: TOML ``[settings.kubernetes]`` merged over the user's TOML. As upstream, only the
  ``settings.kubernetes`` keys Bottlerocket knows are kept (its boot config refuses the others),
  the node taints are karpweb's alone, the kubelet settings are written under Bottlerocket's names,
  and RAID0 adds the ``000-mount-instance-storage`` bootstrap command (its ``bind`` takes explicit
  directories before Bottlerocket 1.46.0).
* Windows: the EKS bootstrap PowerShell script, with the user's script first inside the same
  ``<powershell>`` block.
* Custom: the user's ``userData`` untouched.

Labels: the NodeClaim's, less those under kubernetes.io and k8s.io (the kubelet may not set them),
plus ``karpenter.sh/do-not-sync-taints=true``. Taints: the NodePool's taints and startup taints and
``karpenter.sh/unregistered:NoExecute``, which the lifecycle removes once the node registers."""

from __future__ import annotations

import base64
import binascii
import email
import email.message
import email.policy
import hashlib
import ipaddress
import re
import shlex
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import tomli_w
import yaml

from fleet.endpoints import endpoint_problem
from scheduling.engine.ec2types import AL2, AL2023, BOTTLEROCKET, CUSTOM, WINDOWS_BUILDS

UNREGISTERED_TAINT = {"key": "karpenter.sh/unregistered", "effect": "NoExecute"}
DO_NOT_SYNC_TAINTS = "karpenter.sh/do-not-sync-taints"
BOUNDARY = "//"
SHELL_SCRIPT = 'text/x-shellscript; charset="us-ascii"'
NODE_CONFIG = "application/node.eks.aws"
_FORBIDDEN_DOMAINS = ("kubernetes.io", "k8s.io")
RAID0_COMMAND_NAME = "000-mount-instance-storage"
# The directories Bottlerocket before 1.46.0 must be told to bind onto the instance store.
LEGACY_BIND_DIRS = ("/var/lib/containerd", "/var/lib/kubelet", "/var/log/pods")

# The `settings.kubernetes` keys Bottlerocket's boot config accepts, as upstream models them
# (bootstrap/bottlerocketsettings.go `BottlerocketKubernetes`); any other key is dropped.
BOTTLEROCKET_KUBERNETES_KEYS = frozenset({
    "api-server", "cloud-provider", "cluster-certificate", "cluster-name", "cluster-dns-ip", "credential-providers",
    "node-labels", "node-taints", "max-pods", "static-pods", "eviction-hard", "eviction-soft",
    "eviction-soft-grace-period", "eviction-max-pod-grace-period", "kube-reserved", "system-reserved",
    "allowed-unsafe-sysctls", "server-tls-bootstrap", "registry-qps", "registry-burst", "event-qps", "event-burst",
    "kube-api-qps", "kube-api-burst", "container-log-max-size", "container-log-max-files", "cpu-manager-policy",
    "cpu-manager-policy-options", "cpu-manager-reconcile-period", "memory-manager-policy",
    "memory-manager-reserved-memory", "topology-manager-scope", "topology-manager-policy",
    "topology-manager-policy-options", "image-gc-high-threshold-percent", "image-gc-low-threshold-percent",
    "ids-per-pod", "cpu-cfs-quota-enforced", "shutdown-grace-period", "shutdown-grace-period-for-critical-pods",
    "cluster-domain", "seccomp-default", "pod-pids-limit", "device-ownership-from-security-context",
    "single-process-oom-kill", "container-log-max-workers", "container-log-monitor-interval",
    "hostname-override-source", "log-level",
})


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
    max_pods: int | None = None  # the figure karpweb planned the node with, when spec.kubelet sets none
    dns_ip: str = ""  # the cluster DNS address, when spec.kubelet.clusterDNS sets none
    instance_store_raid0: bool = False  # spec.instanceStorePolicy RAID0
    bottlerocket_version: str = ""  # "latest", "v1.46.0", "" (unknown): how RAID0 binds its directories


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
    if not any(t.get("key") == UNREGISTERED_TAINT["key"] and t.get("effect") == UNREGISTERED_TAINT["effect"]
               for t in taints):
        taints.append(dict(UNREGISTERED_TAINT))
    return taints


def _taint_text(taint: Mapping[str, str]) -> str:
    value = f"={taint['value']}" if taint.get("value") else ""
    return f"{taint['key']}{value}:{taint['effect']}"


def kubelet_settings(bootstrap: Bootstrap) -> dict[str, Any]:
    """``spec.kubelet`` as the node gets it: maxPods pinned to the planned figure and clusterDNS
    defaulted to the discovered address when the class sets neither (upstream's resolver)."""
    kubelet = dict(bootstrap.kubelet)
    if kubelet.get("maxPods") is None and bootstrap.max_pods:
        kubelet["maxPods"] = int(bootstrap.max_pods)
    if not kubelet.get("clusterDNS") and bootstrap.dns_ip:
        kubelet["clusterDNS"] = [bootstrap.dns_ip]
    return kubelet


def supports_default_bind(version: str) -> bool:
    """Bottlerocket 1.46.0 and later bind the instance store's default directories themselves
    (upstream ``version.SupportsDefaultBind``: ``latest`` counts as new, anything unparsable as old)."""
    if version == "latest":
        return True
    parts = version.lstrip("v").split(".")
    if len(parts) < 3 or not (parts[0].isdigit() and parts[1].isdigit()):
        return False
    major, minor = int(parts[0]), int(parts[1])
    return major > 1 or (major == 1 and minor >= 46)


def build(family: str | None, bootstrap: Bootstrap, user_data: str | None) -> str:
    """The instance's user data, plain text (the launch template base64-encodes it). Every value
    karpweb writes is checked first (`check_bootstrap`) and then quoted for its language."""
    family = family or AL2023
    if family == CUSTOM:
        return user_data or ""
    check_bootstrap(bootstrap)
    if family == AL2023:
        return al2023(bootstrap, user_data)
    if family == BOTTLEROCKET:
        return bottlerocket(bootstrap, user_data)
    if family == AL2:
        return _mime(_user_parts(user_data, yaml_part=False) + [(SHELL_SCRIPT, al2(bootstrap))])
    if family in WINDOWS_BUILDS:
        return windows(bootstrap, user_data)
    raise UserDataError(f"amiFamily {family!r} is not one karpweb can bootstrap")


# --- what may reach a boot script ---------------------------------------------------------------
# Each value is quoted for its language as well; these checks refuse, naming the field, what no
# cluster could mean (a Kubernetes label a kubelet refuses, an endpoint with a path) so that a
# hostile value stops here rather than in a node's boot log.

EKS_CLUSTER_NAME = re.compile(r"^[0-9A-Za-z][A-Za-z0-9_-]{0,99}$")  # EKS CreateCluster's pattern
_LABEL_NAME = r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)"
LABEL_KEY = re.compile(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?" + _LABEL_NAME + "$")
LABEL_VALUE = re.compile(r"^" + _LABEL_NAME + "?$")
TAINT_EFFECTS = frozenset({"NoSchedule", "PreferNoSchedule", "NoExecute"})
# A kubelet map's keys and values: signals (memory.available), resources (cpu, ephemeral-storage),
# quantities (100Mi, 5%) and durations (1m30s); nothing a shell, systemd or PowerShell reads specially.
KUBELET_WORD = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._%/+-]{0,252}$")
KUBELET_MAPS = ("systemReserved", "kubeReserved", "evictionHard", "evictionSoft", "evictionSoftGracePeriod")


def check_bootstrap(bootstrap: Bootstrap) -> None:
    """Raises UserDataError naming the first field whose value no node may be given."""
    if not EKS_CLUSTER_NAME.match(bootstrap.cluster_name or ""):
        raise UserDataError(f"cluster name {bootstrap.cluster_name[:100]!r} is not an EKS cluster name")
    problem = endpoint_problem(bootstrap.endpoint)
    if problem:
        raise UserDataError(f"cluster endpoint {bootstrap.endpoint[:100]!r} {problem}")
    try:
        base64.b64decode(bootstrap.ca_bundle, validate=True)
    except (binascii.Error, ValueError):
        raise UserDataError("cluster CA bundle is not base64") from None
    for name, value in (("service CIDR", bootstrap.service_cidr), ("cluster DNS", bootstrap.dns_ip)):
        if value and not _is_network(value):
            raise UserDataError(f"{name} {value[:64]!r} is not an IP address or CIDR block")
    for key, value in bootstrap.labels.items():
        if not LABEL_KEY.match(str(key)) or len(str(key)) > 317 or not LABEL_VALUE.match(str(value)):
            raise UserDataError(f"node label {str(key)[:100]}={str(value)[:100]} is not a Kubernetes label")
    for taint in bootstrap.taints:
        key, value, effect = str(taint.get("key", "")), str(taint.get("value") or ""), str(taint.get("effect", ""))
        if not LABEL_KEY.match(key) or not LABEL_VALUE.match(value) or effect not in TAINT_EFFECTS:
            raise UserDataError(f"taint {key[:100]}={value[:100]}:{effect[:20]} is not a Kubernetes taint")
    _check_kubelet(bootstrap.kubelet)


def _check_kubelet(kubelet: Mapping[str, Any]) -> None:
    for name in KUBELET_MAPS:
        for key, value in (kubelet.get(name) or {}).items():
            if not (KUBELET_WORD.match(str(key)) and KUBELET_WORD.match(str(value))):
                raise UserDataError(f"spec.kubelet.{name}: {str(key)[:64]}={str(value)[:64]} is not a kubelet setting")
    for address in kubelet.get("clusterDNS") or []:
        if not _is_network(str(address)):
            raise UserDataError(f"spec.kubelet.clusterDNS: {str(address)[:64]!r} is not an IP address")


def _is_network(value: str) -> bool:
    try:
        ipaddress.ip_network(value, strict=False)
    except ValueError:
        return False
    return True


def powershell_quote(value: str) -> str:
    """`value` as one PowerShell single-quoted string: PowerShell ends such a string at any of four
    quote marks (' and the typographic three), and reads each doubled as itself."""
    return "'" + re.sub("([\u0027\u2018\u2019\u201a\u201b])", r"\1\1", value) + "'"


# --- durations (Go's time.Duration.String(), which upstream writes for AL2, Bottlerocket, Windows) ----

_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_NANOS = {"ns": 1, "us": 10**3, "µs": 10**3, "ms": 10**6, "s": 10**9, "m": 60 * 10**9, "h": 3600 * 10**9}


def go_duration(text: str) -> str:
    """``1m`` -> ``1m0s``, ``90s`` -> ``1m30s``, ``2h`` -> ``2h0m0s``: the form upstream's parsed
    metav1.Duration prints. Text that is not a duration is returned as it is."""
    text = str(text).strip()
    parts = _DURATION_PART.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return text
    nanos = int(sum(Decimal(number) * _NANOS[unit] for number, unit in parts))
    if nanos == 0:
        return "0s"
    if nanos < 10**9:
        for unit, size in (("ms", 10**6), ("µs", 10**3), ("ns", 1)):
            if nanos >= size:
                return f"{_trim(Decimal(nanos) / size)}{unit}"
    hours, rest = divmod(nanos, 3600 * 10**9)
    minutes, rest = divmod(rest, 60 * 10**9)
    seconds = f"{_trim(Decimal(rest) / 10**9)}s"
    if hours:
        return f"{hours}h{minutes}m{seconds}"
    return f"{minutes}m{seconds}" if minutes else seconds


def _trim(value: Decimal) -> str:
    text = format(value.normalize(), "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


# --- AL2023 -------------------------------------------------------------------------------------

def node_config(bootstrap: Bootstrap) -> dict[str, Any]:
    config = kubelet_settings(bootstrap)
    config["registerWithTaints"] = register_taints(bootstrap)
    labels = ",".join(f"{k}={v}" for k, v in node_labels(bootstrap.labels).items())
    spec: dict[str, Any] = {
        "cluster": {"name": bootstrap.cluster_name, "apiServerEndpoint": bootstrap.endpoint,
                    "certificateAuthority": bootstrap.ca_bundle, "cidr": bootstrap.service_cidr},
        "kubelet": {"config": config, "flags": [f'--node-labels="{labels}"']},
    }
    if bootstrap.instance_store_raid0:
        spec["instance"] = {"localStorage": {"strategy": "RAID0"}}
    return {"apiVersion": "node.eks.aws/v1alpha1", "kind": "NodeConfig", "spec": spec}


def al2023(bootstrap: Bootstrap, user_data: str | None) -> str:
    ours = (NODE_CONFIG, "# karpweb generated NodeConfig\n" + yaml.safe_dump(node_config(bootstrap), sort_keys=True))
    return _mime(_user_parts(user_data, yaml_part=True) + [ours])


def is_mime(user_data: str) -> bool:
    """A MIME document, whichever of its two headers comes first (upstream checks both)."""
    stripped = user_data.strip()
    return stripped.startswith("MIME-Version:") or stripped.startswith("Content-Type:")


def _user_parts(user_data: str | None, *, yaml_part: bool) -> list[tuple[str, str]]:
    """The user's userData as (content type, body) parts: a MIME document's own parts, a YAML map
    (AL2023: a NodeConfig), or a shell script."""
    if not user_data or not user_data.strip():
        return []
    if is_mime(user_data):
        message = email.message_from_string(user_data.strip() + "\n", policy=email.policy.compat32)
        if not message.is_multipart():
            raise UserDataError("userData is a MIME document but not multipart")
        return [(part.get("Content-Type", SHELL_SCRIPT), part.get_payload()) for part in message.get_payload()]
    if yaml_part and _is_yaml_map(user_data):
        return [(NODE_CONFIG, user_data)]
    return [(SHELL_SCRIPT, user_data)]


def _is_yaml_map(text: str) -> bool:
    try:
        return isinstance(yaml.safe_load(text), dict)
    except yaml.YAMLError:
        return False


def _mime(parts: list[tuple[str, str]]) -> str:
    """A multipart/mixed document built by `email`: MIME-Version first, then the multipart
    Content-Type, as upstream writes them, with upstream's boundary ("//") unless a part holds it (a
    part that could end the document early gets a boundary it does not hold)."""
    bodies = [body.replace("\r", "").rstrip("\n") for _type, body in parts]
    boundary = BOUNDARY
    while any(line.startswith("--" + boundary) for body in bodies for line in body.split("\n")):
        boundary = hashlib.sha256((boundary + "".join(bodies)).encode()).hexdigest()[:24]
    document = email.message.Message(policy=email.policy.compat32)
    document["MIME-Version"] = "1.0"
    document["Content-Type"] = "multipart/mixed"
    document.set_boundary(boundary)
    for (content_type, _body), body in zip(parts, bodies):
        part = email.message.Message(policy=email.policy.compat32)
        part["Content-Type"] = " ".join(str(content_type).split())  # one line: no header of its own
        part.set_payload(body)
        document.attach(part)
    return document.as_string(policy=email.policy.compat32.clone(linesep="\n", max_line_length=0)).rstrip("\n") + "\n"


def mime_parts(user_data: str) -> list[tuple[str, str]]:
    """(content type, body) of each part of a multipart user data (for tests and the class page)."""
    message = email.message_from_string(user_data, policy=email.policy.compat32)
    return [(part.get("Content-Type", ""), part.get_payload()) for part in message.get_payload()]


def decode_node_configs(user_data: str) -> list[dict[str, Any]]:
    """The NodeConfig documents in an AL2023 user data (for tests and the class page)."""
    return [yaml.safe_load(body) for content_type, body in mime_parts(user_data)
            if content_type.split(";")[0].strip() == NODE_CONFIG]


# --- Bottlerocket -------------------------------------------------------------------------------

def dropped_bottlerocket_keys(user_data: str | None) -> list[str]:
    """The user's ``settings.kubernetes`` keys Bottlerocket does not know: karpweb drops them, as
    upstream does (for the class's status to name)."""
    try:
        document = tomllib.loads(user_data or "")
    except tomllib.TOMLDecodeError:
        return []
    kubernetes = (document.get("settings") or {}).get("kubernetes") or {}
    return sorted(k for k in kubernetes if k not in BOTTLEROCKET_KUBERNETES_KEYS)


def bottlerocket(bootstrap: Bootstrap, user_data: str | None) -> str:
    try:
        document = tomllib.loads(user_data or "")
    except tomllib.TOMLDecodeError as exc:
        raise UserDataError(f"userData is not TOML, which Bottlerocket needs: {exc}") from None
    settings = document.get("settings")
    settings = dict(settings) if isinstance(settings, dict) else {}
    users = settings.get("kubernetes") if isinstance(settings.get("kubernetes"), dict) else {}
    kubernetes = {k: v for k, v in users.items() if k in BOTTLEROCKET_KUBERNETES_KEYS}
    kubernetes.update({"cluster-name": bootstrap.cluster_name, "api-server": bootstrap.endpoint,
                       "cluster-certificate": bootstrap.ca_bundle})
    kubernetes["node-labels"] = {**(kubernetes.get("node-labels") or {}), **node_labels(bootstrap.labels)}
    kubernetes.update(_bottlerocket_kubelet(kubelet_settings(bootstrap)))
    taints: dict[str, list[str]] = {}  # karpweb's taints alone, as upstream (the user's are replaced)
    for taint in register_taints(bootstrap):
        taints.setdefault(taint["key"], []).append(f"{taint.get('value', '')}:{taint['effect']}")
    kubernetes["node-taints"] = taints
    settings["kubernetes"] = kubernetes
    if bootstrap.instance_store_raid0:
        commands = dict(settings.get("bootstrap-commands") or {})
        commands[RAID0_COMMAND_NAME] = _raid0_command(bootstrap.bottlerocket_version)
        settings["bootstrap-commands"] = commands
    # Only `settings` survives the merge, as upstream's BottlerocketConfig (its one field).
    return tomli_w.dumps({"settings": settings})


def _raid0_command(version: str) -> dict[str, Any]:
    bind = ["apiclient", "ephemeral-storage", "bind"]
    if not supports_default_bind(version):
        bind += ["--dirs", *LEGACY_BIND_DIRS]
    return {"commands": [["apiclient", "ephemeral-storage", "init"], bind], "mode": "always", "essential": True}


def _bottlerocket_kubelet(kubelet: Mapping[str, Any]) -> dict[str, Any]:
    """spec.kubelet under Bottlerocket's setting names (upstream bootstrap/bottlerocket.go). podsPerCore
    has no Bottlerocket setting: the planner does not apply it to Bottlerocket either."""
    out: dict[str, Any] = {}
    if kubelet.get("clusterDNS"):
        out["cluster-dns-ip"] = str(kubelet["clusterDNS"][0])
    if kubelet.get("maxPods") is not None:
        out["max-pods"] = int(kubelet["maxPods"])
    for field_name, setting in (("systemReserved", "system-reserved"), ("kubeReserved", "kube-reserved"),
                                ("evictionHard", "eviction-hard"), ("evictionSoft", "eviction-soft")):
        if kubelet.get(field_name) is not None:
            out[setting] = {str(k): str(v) for k, v in kubelet[field_name].items()}
    if kubelet.get("evictionSoftGracePeriod") is not None:
        out["eviction-soft-grace-period"] = {str(k): go_duration(v) for k, v in kubelet["evictionSoftGracePeriod"].items()}
    if kubelet.get("evictionMaxPodGracePeriod") is not None:
        out["eviction-max-pod-grace-period"] = int(kubelet["evictionMaxPodGracePeriod"])
    for field_name, setting in (("imageGCHighThresholdPercent", "image-gc-high-threshold-percent"),
                                ("imageGCLowThresholdPercent", "image-gc-low-threshold-percent")):
        if kubelet.get(field_name) is not None:
            out[setting] = str(int(kubelet[field_name]))  # Bottlerocket takes these as strings
    if kubelet.get("cpuCFSQuota") is not None:
        out["cpu-cfs-quota-enforced"] = bool(kubelet["cpuCFSQuota"])
    return out


# --- AL2 and Windows ----------------------------------------------------------------------------

def _joined(name: str, values: Mapping[str, Any] | None, separator: str, show=str) -> list[str]:
    if not values:
        return []
    return [f'{name}="{",".join(f"{k}{separator}{show(v)}" for k, v in sorted(values.items()))}"']


def kubelet_extra_args(bootstrap: Bootstrap) -> list[str]:
    """The kubelet flags upstream builds from spec.kubelet for AL2 and Windows (bootstrap.go
    ``kubeletExtraArgs``); map entries sorted so the text is stable."""
    kubelet = kubelet_settings(bootstrap)
    labels = ",".join(f"{k}={v}" for k, v in node_labels(bootstrap.labels).items())
    taints = ",".join(_taint_text(t) for t in register_taints(bootstrap))
    args = [f'--node-labels="{labels}"', f'--register-with-taints="{taints}"']
    if kubelet.get("maxPods") is not None:
        args.append(f"--max-pods={int(kubelet['maxPods'])}")
    if kubelet.get("podsPerCore") is not None:
        args.append(f"--pods-per-core={int(kubelet['podsPerCore'])}")
    args += _joined("--system-reserved", kubelet.get("systemReserved"), "=")
    args += _joined("--kube-reserved", kubelet.get("kubeReserved"), "=")
    args += _joined("--eviction-hard", kubelet.get("evictionHard"), "<")
    args += _joined("--eviction-soft", kubelet.get("evictionSoft"), "<")
    args += _joined("--eviction-soft-grace-period", kubelet.get("evictionSoftGracePeriod"), "=", go_duration)
    if kubelet.get("evictionMaxPodGracePeriod") is not None:
        args.append(f"--eviction-max-pod-grace-period={int(kubelet['evictionMaxPodGracePeriod'])}")
    if kubelet.get("imageGCHighThresholdPercent") is not None:
        args.append(f"--image-gc-high-threshold={int(kubelet['imageGCHighThresholdPercent'])}")
    if kubelet.get("imageGCLowThresholdPercent") is not None:
        args.append(f"--image-gc-low-threshold={int(kubelet['imageGCLowThresholdPercent'])}")
    if kubelet.get("cpuCFSQuota") is not None:
        args.append(f"--cpu-cfs-quota={'true' if kubelet['cpuCFSQuota'] else 'false'}")
    return args


def _is_ipv6(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).version == 6
    except ValueError:
        return False


def al2(bootstrap: Bootstrap) -> str:
    kubelet = kubelet_settings(bootstrap)
    dns = str(kubelet["clusterDNS"][0]) if kubelet.get("clusterDNS") else ""
    q = shlex.quote
    command = (f"/etc/eks/bootstrap.sh {q(bootstrap.cluster_name)} --apiserver-endpoint {q(bootstrap.endpoint)} "
               f"--b64-cluster-ca {q(bootstrap.ca_bundle)}")
    if _is_ipv6(dns):
        command += " \\\n--ip-family ipv6"
    if dns:
        command += f" \\\n--dns-cluster-ip {q(dns)}"
    if kubelet.get("maxPods") is not None:
        command += " \\\n--use-max-pods false"
    command += f" \\\n--kubelet-extra-args {q(' '.join(kubelet_extra_args(bootstrap)))}"
    if bootstrap.instance_store_raid0:
        command += " \\\n--local-disks raid0"
    return "#!/bin/bash -xe\nexec > >(tee /var/log/user-data.log|logger -t user-data -s 2>/dev/console) 2>&1\n" + command + "\n"


def windows(bootstrap: Bootstrap, user_data: str | None) -> str:
    """The user's PowerShell runs first, inside the same ``<powershell>`` block (upstream
    bootstrap/windows.go). Windows has no instance-store setting: RAID0 is not written."""
    kubelet = kubelet_settings(bootstrap)
    lines = ["<powershell>"]
    if user_data:
        lines.append(user_data.rstrip("\n"))
    lines.append('[string]$EKSBootstrapScriptFile = "$env:ProgramFiles\\Amazon\\EKS\\Start-EKSBootstrap.ps1"')
    q = powershell_quote
    command = (f"& $EKSBootstrapScriptFile -EKSClusterName {q(bootstrap.cluster_name)} -APIServerEndpoint "
               f"{q(bootstrap.endpoint)} -Base64ClusterCA {q(bootstrap.ca_bundle)} "
               f"-KubeletExtraArgs {q(' '.join(kubelet_extra_args(bootstrap)))}")
    if kubelet.get("clusterDNS"):
        command += f" -DNSClusterIP {q(str(kubelet['clusterDNS'][0]))}"
    lines += [command, "</powershell>"]
    return "\n".join(lines) + "\n"
