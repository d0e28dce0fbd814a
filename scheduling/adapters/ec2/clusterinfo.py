"""What a node needs to know to join the cluster, as Karpenter's AWS provider finds it
(aws/karpenter-provider-aws ``pkg/operator/operator.go``): the cluster name (required), the API endpoint and certificate authority
(settings, else EKS DescribeCluster), the service CIDR (DescribeCluster's kubernetesNetworkConfig,
AL2023's NodeConfig requires it) and the Kubernetes minor version (for the AMI aliases).

Settings: KARPWEB_CLUSTER_NAME, KARPWEB_CLUSTER_ENDPOINT, KARPWEB_CLUSTER_CA_BUNDLE (base64 PEM, as
Karpenter's CLUSTER_CA_BUNDLE), KARPWEB_CLUSTER_CIDR, KARPWEB_KUBERNETES_VERSION, KARPWEB_CLUSTER_DNS.
What is not set is asked of EKS once and kept for an hour.

Cluster DNS: KARPWEB_CLUSTER_DNS, else, as upstream (``pkg/operator/operator.go`` ``KubeDNSIP``), the
ClusterIP of the kube-system/kube-dns Service, read through the Kubernetes adapter and kept for an
hour like the rest (a failed read is retried after a minute: nodes then get their AMI's default,
as upstream's do when it cannot read the Service). ``dns_source`` says where the address came
from; the EC2NodeClass's ValidationSucceeded message repeats it."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from .client import Caller, setting
from .interface import CloudAPIError

REFRESH = timedelta(hours=1)
DNS_RETRY = timedelta(minutes=1)
KUBE_DNS_SERVICE = "kube-system/kube-dns"
_MINOR = re.compile(r"^1\.(\d+)")


@dataclass(frozen=True)
class ClusterInfo:
    name: str
    endpoint: str
    ca_bundle: str  # base64 PEM
    service_cidr: str
    version: str  # "1.31"
    dns_ip: str = ""  # the cluster DNS address; "" leaves the AMI's default
    dns_source: str = ""  # where dns_ip came from, in words
    dns_found: bool = True  # False: the kube-dns read failed (retried sooner)


# Reads the kube-dns Service's ClusterIP ("" when the Service has none); raises when it cannot.
KubeDNSLookup = Callable[[], str]


class ClusterInfoProvider:
    def __init__(self, eks: Any, call: Caller, clock: Callable[[], datetime],
                 kube_dns: KubeDNSLookup | None = None, cluster: Mapping[str, str] | None = None) -> None:
        """`cluster`: what the fleet cluster's row says ({"name", "endpoint", "ca", "cidr", "version"}:
        blank ones are asked of DescribeCluster); None reads them from the settings (a single-cluster install)."""
        self._eks = eks
        self._cluster = cluster
        self._call = call
        self._clock = clock
        self._kube_dns = kube_dns
        self._cached: tuple[datetime, ClusterInfo] | None = None
        self._lock = threading.Lock()

    def get(self) -> ClusterInfo:
        """Raises CloudAPIError naming the setting or the call that failed."""
        with self._lock:
            if self._cached:
                kept_for = REFRESH if self._cached[1].dns_found else DNS_RETRY
                if self._clock() - self._cached[0] < kept_for:
                    return self._cached[1]
        info = self._resolve()
        with self._lock:
            self._cached = (self._clock(), info)
        return info

    def _cluster_dns(self) -> tuple[str, str, bool]:
        """(address, where it came from, whether the lookup worked)."""
        configured = setting("KARPWEB_CLUSTER_DNS", "") or ""
        if configured:
            return configured, "the KARPWEB_CLUSTER_DNS setting", True
        if self._kube_dns is None:
            return "", "none: no KARPWEB_CLUSTER_DNS and no Kubernetes cluster to read kube-system/kube-dns from", True
        try:
            address = self._kube_dns()
        except Exception as exc:  # any failure to read the Service: nodes keep the AMI's default, as upstream
            return "", f"none: the {KUBE_DNS_SERVICE} Service could not be read ({exc})", False
        if not address or address == "None":
            return "", f"none: no {KUBE_DNS_SERVICE} Service with a ClusterIP", True
        return address, f"the {KUBE_DNS_SERVICE} Service's ClusterIP", True

    def _resolve(self) -> ClusterInfo:
        if self._cluster is not None:  # a fleet's cluster: its row says what it knows; the rest from DescribeCluster
            name = self._cluster.get("name") or ""
            given = {key: self._cluster.get(key) or None for key in ("endpoint", "ca", "cidr", "version")}
        else:
            name = setting("KARPWEB_CLUSTER_NAME")
            given = {"endpoint": setting("KARPWEB_CLUSTER_ENDPOINT"), "ca": setting("KARPWEB_CLUSTER_CA_BUNDLE"),
                     "cidr": setting("KARPWEB_CLUSTER_CIDR"), "version": setting("KARPWEB_KUBERNETES_VERSION")}
        if not name:
            raise CloudAPIError("ClusterNameNotSet", "set KARPWEB_CLUSTER_NAME to the EKS cluster's name: nodes "
                                "cannot join a cluster karpweb cannot name", "config")
        if not all(given.values()):
            cluster = self._call(self._eks, "describe_cluster", name=name)["cluster"]
            network = cluster.get("kubernetesNetworkConfig") or {}
            given = {
                "endpoint": given["endpoint"] or cluster.get("endpoint") or "",
                "ca": given["ca"] or (cluster.get("certificateAuthority") or {}).get("data") or "",
                "cidr": given["cidr"] or network.get("serviceIpv4Cidr") or network.get("serviceIpv6Cidr") or "",
                "version": given["version"] or cluster.get("version") or "",
            }
        missing = [key for key, value in given.items() if not value]
        if missing:
            raise CloudAPIError("ClusterInfoIncomplete", f"EKS cluster {name}: no {', '.join(missing)} from settings "
                                "or DescribeCluster (set KARPWEB_CLUSTER_ENDPOINT, KARPWEB_CLUSTER_CA_BUNDLE, "
                                "KARPWEB_CLUSTER_CIDR, KARPWEB_KUBERNETES_VERSION)", "describe_cluster")
        match = _MINOR.match(str(given["version"]))
        if not match:
            raise CloudAPIError("ClusterVersionUnknown", f"Kubernetes version {given['version']!r} is not 1.N", "config")
        dns_ip, dns_source, dns_found = self._cluster_dns()
        return ClusterInfo(name=name, endpoint=given["endpoint"], ca_bundle=given["ca"], service_cidr=given["cidr"],
                           version=f"1.{match.group(1)}", dns_ip=dns_ip, dns_source=dns_source, dns_found=dns_found)
