"""The Kubernetes resources karpweb reads and writes, and how their REST paths are built."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote


@dataclass(frozen=True)
class Resource:
    kind: str
    group: str  # "" for the core group
    version: str
    plural: str
    namespaced: bool = False

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def qualified(self) -> str:
        """`nodeclaims.karpenter.sh`, `nodes` (the name RBAC rules and API errors use)."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    def path(self, name: str | None = None, namespace: str | None = None, subresource: str | None = None) -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{quote(namespace, safe='')}"
        base += f"/{self.plural}"
        if name is not None:
            base += f"/{quote(name, safe='')}"
            if subresource:
                base += f"/{subresource}"
        return base

    def describe(self, name: str | None, namespace: str | None = None) -> str:
        """`NodeClaim default-abc`, `Pod team-a/web-1`: how an operator names the object."""
        if not name:
            return self.kind
        return f"{self.kind} {namespace}/{name}" if namespace else f"{self.kind} {name}"


EC2NODECLASS = Resource("EC2NodeClass", "karpenter.k8s.aws", "v1", "ec2nodeclasses")
NODEPOOL = Resource("NodePool", "karpenter.sh", "v1", "nodepools")
NODECLAIM = Resource("NodeClaim", "karpenter.sh", "v1", "nodeclaims")
NODE = Resource("Node", "", "v1", "nodes")
POD = Resource("Pod", "", "v1", "pods", namespaced=True)
CRD = Resource("CustomResourceDefinition", "apiextensions.k8s.io", "v1", "customresourcedefinitions")
# Read only to tell whether Karpenter runs in the cluster (its leader-election Lease, its Deployment).
LEASE = Resource("Lease", "coordination.k8s.io", "v1", "leases", namespaced=True)
DEPLOYMENT = Resource("Deployment", "apps", "v1", "deployments", namespaced=True)
# Read only for the cluster DNS address nodes are bootstrapped with (kube-system/kube-dns).
SERVICE = Resource("Service", "", "v1", "services", namespaced=True)
# Read only while a node terminates: its volumes must be detached before its instance goes.
VOLUMEATTACHMENT = Resource("VolumeAttachment", "storage.k8s.io", "v1", "volumeattachments")
PVC = Resource("PersistentVolumeClaim", "", "v1", "persistentvolumeclaims", namespaced=True)
# Mirrored as they are (scheduling.models.KubeObject) for the engine's volume rules (engine/volumes.py).
PV = Resource("PersistentVolume", "", "v1", "persistentvolumes")
STORAGECLASS = Resource("StorageClass", "storage.k8s.io", "v1", "storageclasses")
CSINODE = Resource("CSINode", "storage.k8s.io", "v1", "csinodes")
# Read whole too: price and capacity overrides per NodePool (engine/overlays.py). Alpha upstream: a
# cluster without its CRD simply has none.
NODEOVERLAY = Resource("NodeOverlay", "karpenter.sh", "v1alpha1", "nodeoverlays")

# In dependency order: a NodePool refers to an EC2NodeClass, a NodeClaim to both, a Node to its
# NodeClaim, a Pod to its Node. Sync writes them in this order.
# The kinds kept whole come after: nothing links to them.
# Read whole: which pods the disruption controller may not evict now (engine/pdbs.py). policy/v1 from
# Kubernetes 1.21; the adapter reads policy/v1beta1 where only that is served.
PDB = Resource("PodDisruptionBudget", "policy", "v1", "poddisruptionbudgets", namespaced=True)
PDB_V1BETA1 = Resource("PodDisruptionBudget", "policy", "v1beta1", "poddisruptionbudgets", namespaced=True)
# What kube-scheduler deduces a pod's default spread selector from (engine/defaultspread.py): read only
# when default constraints are configured, and kept trimmed to their selectors.
REPLICASET = Resource("ReplicaSet", "apps", "v1", "replicasets", namespaced=True)
STATEFULSET = Resource("StatefulSet", "apps", "v1", "statefulsets", namespaced=True)
REPLICATIONCONTROLLER = Resource("ReplicationController", "", "v1", "replicationcontrollers", namespaced=True)
# DaemonSets, for the overhead of one that has no pod yet (one that has is read from its newest pod).
DAEMONSET = Resource("DaemonSet", "apps", "v1", "daemonsets", namespaced=True)
KEPT_WHOLE = (STORAGECLASS, PV, PVC, CSINODE, NODEOVERLAY, PDB, DAEMONSET, SERVICE, REPLICASET, STATEFULSET,
              REPLICATIONCONTROLLER)
SYNCED = (EC2NODECLASS, NODEPOOL, NODECLAIM, NODE, POD, *KEPT_WHOLE)
BY_KIND = {resource.kind: resource for resource in (*SYNCED, CRD)}

# Pods that finished are not part of the world the scheduler sees.
ACTIVE_PODS_SELECTOR = "status.phase!=Succeeded,status.phase!=Failed"


def resource_for(kind: str) -> Resource:
    try:
        return BY_KIND[kind]
    except KeyError:
        raise ValueError(f"unknown kind {kind!r}; expected one of {', '.join(BY_KIND)}") from None
