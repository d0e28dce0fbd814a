"""The small interface the control loop uses for a cluster, shared by Kubernetes and the simulated world.

Everything crossing it is plain data: objects are dicts in the Kubernetes API's own JSON shape
(``{"metadata": {...}, "spec": {...}, "status": {...}}``, camelCase), requests and results are the
dataclasses below. :class:`~scheduling.adapters.kube.adapter.KubeClusterAdapter` implements it on
the official client; a simulated world implements it in memory; :mod:`.sync` turns either one's
``list``/``watch`` into the Django models.

Kinds are ``EC2NodeClass``, ``NodePool``, ``NodeClaim``, ``Node`` and ``Pod``, and the storage kinds
the engine's volume rules read: ``StorageClass``, ``PersistentVolume``, ``PersistentVolumeClaim`` and
``CSINode``, ``NodeOverlay`` (alpha: a cluster without its CRD has none), ``PodDisruptionBudget`` and
``DaemonSet`` (its template only), and,
when default topology spread constraints are configured, the selectors of ``Service``, ``ReplicaSet``,
``StatefulSet`` and ``ReplicationController`` objects.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from .errors import ClusterError, ResourceVersionExpired  # noqa: F401 - part of the interface

KINDS = ("EC2NodeClass", "NodePool", "NodeClaim", "Node", "Pod",
         "StorageClass", "PersistentVolume", "PersistentVolumeClaim", "CSINode", "NodeOverlay", "PodDisruptionBudget",
         "DaemonSet", "Service", "ReplicaSet", "StatefulSet", "ReplicationController")
# Kept whole as scheduling.models.KubeObject rows: what the engine reads of volumes, and NodeOverlays.
STORAGE_KINDS = ("StorageClass", "PersistentVolume", "PersistentVolumeClaim", "CSINode")
# What a pod's default topology spread selector is deduced from: mirrored (trimmed to selectors) only when
# default constraints are configured (KARPWEB_DEFAULT_TOPOLOGY_SPREAD_CONSTRAINTS).
SPREAD_SOURCE_KINDS = ("Service", "ReplicaSet", "StatefulSet", "ReplicationController")
KEPT_WHOLE_KINDS = (*STORAGE_KINDS, "NodeOverlay", "PodDisruptionBudget", "DaemonSet", *SPREAD_SOURCE_KINDS)
# Kinds a cluster may not serve at all (an alpha CRD not installed): none to mirror, no error.
OPTIONAL_KINDS = ("NodeOverlay",)

# Annotation and taint karpweb shares with Karpenter.
DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"
DISRUPTED_TAINT = {"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}


@dataclass(frozen=True)
class ObjectList:
    """A consistent snapshot of one kind: its objects and the resourceVersion to watch from."""

    kind: str
    items: list[dict]
    resource_version: str


@dataclass(frozen=True)
class WatchEvent:
    """ADDED, MODIFIED, DELETED, or BOOKMARK (the object then carries only metadata.resourceVersion)."""

    kind: str
    type: str
    object: dict

    @property
    def resource_version(self) -> str:
        return (self.object.get("metadata") or {}).get("resourceVersion", "")


@dataclass
class NodeClaimRequest:
    """What a provisioning decision asks for: one node for a NodePool."""

    nodepool: str
    node_class_ref: dict  # {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": ...}
    requirements: list[dict]  # [{"key", "operator", "values"?, "minValues"?}]
    resources: dict[str, str] = field(default_factory=dict)  # spec.resources.requests
    name: str | None = None  # None: the API server generates "<nodepool>-xxxxx"
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    taints: list[dict] = field(default_factory=list)
    startup_taints: list[dict] = field(default_factory=list)
    expire_after: str | None = None
    termination_grace_period: str | None = None
    finalizers: list[str] = field(default_factory=list)  # karpweb's own claims: karpenter.sh/termination


@dataclass(frozen=True)
class Condition:
    type: str
    status: str  # "True" | "False" | "Unknown"
    reason: str = ""
    message: str = ""


@dataclass
class DemotionResult:
    """What demotion to on-demand changed: per object ("NodeClaim x", "Node y") the labels removed."""

    changed: dict[str, list[str]] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)  # object -> why it was left alone


@dataclass
class DrainResult:
    node: str
    cordoned: bool = False
    evicted: list[str] = field(default_factory=list)  # "namespace/name"
    blocked: dict[str, str] = field(default_factory=dict)  # pod -> why it was not evicted
    remaining: list[str] = field(default_factory=list)  # pods the drain still waits for after this pass
    errors: list[ClusterError] = field(default_factory=list)
    deleted_pods: list[str] = field(default_factory=list)  # deleted at the termination time (grace clamped)

    @property
    def drained(self) -> bool:
        return not self.remaining and not self.blocked and not self.errors

    def summary(self) -> str:
        parts = [f"node {self.node}: " + ("drained" if self.drained else "not drained")]
        if self.evicted:
            parts.append(f"evicted {len(self.evicted)} pod(s)")
        parts.extend(f"{pod} blocked: {why}" for pod, why in sorted(self.blocked.items()))
        if self.remaining and not self.blocked:
            parts.append(f"{len(self.remaining)} pod(s) still to go")
        if self.deleted_pods:
            parts.append(f"deleted {len(self.deleted_pods)} pod(s) at the termination time")
        parts.extend(str(error) for error in self.errors)
        return "; ".join(parts)


@runtime_checkable
class ClusterAdapter(Protocol):
    def list(self, kind: str) -> ObjectList:
        """Every object of ``kind`` (pods: all but finished ones) and the list's resourceVersion."""

    def watch(self, kind: str, resource_version: str, timeout_seconds: int = 60) -> Iterator[WatchEvent]:
        """Changes after ``resource_version`` until the watch times out. Raises
        :class:`ResourceVersionExpired` when that version is too old (list again)."""

    def create_nodeclaim(self, request: NodeClaimRequest) -> dict:
        """Create a NodeClaim; returns it as created."""

    def delete_nodeclaim(self, name: str) -> bool:
        """Delete a NodeClaim; False if it was already gone."""

    def demote(self, *, nodeclaim: str | None = None, node: str | None = None) -> DemotionResult:
        """Relabel a NodeClaim and its Node capacity-type=on-demand and remove every reservation label."""

    def drain(self, node: str, *, termination_time: datetime | None = None) -> DrainResult:
        """One pass of Karpenter's drain: taint karpenter.sh/disrupted:NoSchedule (and label the node
        out of external load balancers), evict its pods tier by tier honouring PodDisruptionBudgets
        and do-not-disrupt, and delete those whose grace period would outlast ``termination_time``.
        Deletes neither the Node nor its NodeClaim; a Node that is gone is drained."""

    def pending_volume_attachments(self, node: str) -> list[str]:
        """The node's VolumeAttachments its termination waits for (none on a world without volumes)."""

    def delete_node(self, name: str) -> bool:
        """Delete a Node (karpweb's carry karpenter.sh/termination: the drain runs first); False if gone."""

    def add_node_finalizer(self, name: str, finalizer: str = "karpenter.sh/termination") -> bool:
        """Put ``finalizer`` on a Node not being deleted yet; False if it is gone or being deleted."""

    def remove_node_finalizer(self, name: str, finalizer: str = "karpenter.sh/termination") -> bool:
        """Take ``finalizer`` off a Node (a deleted one then goes); False if it is gone."""

    def annotate_nodeclaim(self, name: str, key: str, value: str) -> dict:
        """Set an annotation on a NodeClaim unless it has one under ``key`` already."""

    def register_node(self, node: str, nodeclaim: dict, taints: list[dict]) -> dict:
        """Sync a NodeClaim's labels, annotations and taints onto its registered Node, remove the
        unregistered taint, add karpenter.sh/registered=true and the karpenter.sh/termination finalizer."""

    def label_node(self, node: str, key: str, value: str) -> dict:
        """Set one label on a Node."""

    def get_nodeclaim(self, name: str) -> dict:
        """One NodeClaim as the API server has it."""

    def remove_finalizer(self, name: str, finalizer: str) -> bool:
        """Take `finalizer` off a NodeClaim (it then goes, if it was being deleted); False if gone."""

    def set_conditions(self, kind: str, name: str, conditions: list[Condition], status_fields: dict | None = None) -> dict:
        """Write status conditions (and other status fields) of an EC2NodeClass, NodePool or NodeClaim."""

    def create_events(self, events: list) -> int:
        """Write Kubernetes Events (scheduling/adapters/kube/events.py); returns how many were written."""

    def update_selector_terms(self, nodeclass: str, terms: list[dict], resource_version: str) -> dict:
        """Replace the whole capacityReservationSelectorTerms list, only if the EC2NodeClass is still
        at ``resource_version``; raises a conflict :class:`ClusterError` otherwise."""
