"""The RBAC karpweb's identity needs, as a ClusterRole (docs/kubernetes.md shows the same YAML;
a test binds it to a service account and runs the whole adapter with nothing more)."""

from __future__ import annotations

import yaml

CLUSTER_ROLE_NAME = "karpweb"

RULES = [
    # Mirror and act on Karpenter's objects.
    {"apiGroups": ["karpenter.sh"], "resources": ["nodepools", "nodeclaims"],
     "verbs": ["get", "list", "watch", "create", "patch", "delete"]},
    {"apiGroups": ["karpenter.sh"], "resources": ["nodepools/status", "nodeclaims/status"],
     "verbs": ["get", "patch"]},
    {"apiGroups": ["karpenter.sh"], "resources": ["nodeoverlays"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": ["karpenter.k8s.aws"], "resources": ["ec2nodeclasses"],
     "verbs": ["get", "list", "watch", "patch"]},
    {"apiGroups": ["karpenter.k8s.aws"], "resources": ["ec2nodeclasses/status"], "verbs": ["get", "patch"]},
    # Nodes: mirror, relabel (demotion), taint, add and remove the termination finalizer, delete.
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch", "patch", "delete"]},
    # Pods: mirror (pending and bound) and evict through the Eviction API; delete only those whose
    # grace period would outlast their node's termination time (the NodePool's terminationGracePeriod).
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch", "delete"]},
    {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]},
    # PodDisruptionBudgets: a node whose pods a budget allows no disruption now is no disruption candidate.
    {"apiGroups": ["policy"], "resources": ["poddisruptionbudgets"], "verbs": ["get", "list", "watch"]},
    # A terminating node waits for its volumes to detach (and reads which claims its pods hold).
    {"apiGroups": ["storage.k8s.io"], "resources": ["volumeattachments"], "verbs": ["list", "watch"]},
    # Where pods' volumes let them run and how many a node may attach (mirrored for the scheduler).
    {"apiGroups": [""], "resources": ["persistentvolumeclaims", "persistentvolumes"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": ["storage.k8s.io"], "resources": ["storageclasses", "csinodes"], "verbs": ["get", "list", "watch"]},
    # Is Karpenter the active controller? Its leader-election Lease and its Deployment, read only.
    {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["list"]},
    {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["list"]},
    # The cluster DNS address nodes are bootstrapped with: the kube-system/kube-dns Service, read only.
    {"apiGroups": [""], "resources": ["services"], "verbs": ["get", "list", "watch"]},
    # Default topology spread (when configured): the selectors kube-scheduler deduces it from.
    {"apiGroups": [""], "resources": ["replicationcontrollers"], "verbs": ["list", "watch"]},
    {"apiGroups": ["apps"], "resources": ["replicasets", "statefulsets"], "verbs": ["list", "watch"]},
    # DaemonSets: the overhead on new nodes of one whose pods have not come yet (its template).
    {"apiGroups": ["apps"], "resources": ["daemonsets"], "verbs": ["list", "watch"]},
    # Events on pods, nodes and NodeClaims, as Karpenter writes them (control mode only).
    {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]},
]


def cluster_role(name: str = CLUSTER_ROLE_NAME) -> dict:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": name},
        "rules": RULES,
    }


def cluster_role_yaml(name: str = CLUSTER_ROLE_NAME) -> str:
    return yaml.safe_dump(cluster_role(name), sort_keys=False, default_flow_style=None, width=120)
