"""Objects for the kube tests, created on the real API server.

No kubelet, scheduler or controller-manager runs, so tests bind pods (spec.nodeName), set pod and
node status, and set PodDisruptionBudget status themselves, the way those controllers would.
"""

from __future__ import annotations

from scheduling.adapters.kube.resources import EC2NODECLASS, NODE, NODECLAIM, NODEPOOL, POD, Resource
from scheduling.adapters.kube.rest import KubeRest

NAMESPACE = Resource("Namespace", "", "v1", "namespaces")
SERVICE_ACCOUNT = Resource("ServiceAccount", "", "v1", "serviceaccounts", namespaced=True)
CLUSTER_ROLE = Resource("ClusterRole", "rbac.authorization.k8s.io", "v1", "clusterroles")
CLUSTER_ROLE_BINDING = Resource("ClusterRoleBinding", "rbac.authorization.k8s.io", "v1", "clusterrolebindings")
# Kubernetes 1.20 serves PodDisruptionBudgets only as policy/v1beta1.
PDB = Resource("PodDisruptionBudget", "policy", "v1beta1", "poddisruptionbudgets", namespaced=True)

RESERVED_LABELS = {
    "karpenter.sh/capacity-type": "reserved",
    "karpenter.k8s.aws/capacity-reservation-id": "cr-0123456789abcdef0",
    "karpenter.k8s.aws/capacity-reservation-type": "capacity-block",
    "karpenter.k8s.aws/capacity-reservation-interruptible": "false",
}
NODE_CLASS_REF = {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}


def namespace(rest: KubeRest, name: str) -> str:
    rest.create(NAMESPACE, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    return name


def ec2nodeclass(rest: KubeRest, name: str, terms: list | None = None, **spec) -> dict:
    body_spec = {"role": "KarpenterNodeRole", "amiSelectorTerms": [{"alias": "al2023@latest"}], **spec}
    if terms is not None:
        body_spec["capacityReservationSelectorTerms"] = terms
    return rest.create(EC2NODECLASS, {
        "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": name}, "spec": body_spec,
    })


def nodepool(rest: KubeRest, name: str, node_class: str = "default", **spec) -> dict:
    return rest.create(NODEPOOL, {
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name},
        "spec": {"template": {
            "metadata": {"labels": {"team": "ml"}},
            "spec": {
                "nodeClassRef": {**NODE_CLASS_REF, "name": node_class},
                "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In",
                                  "values": ["reserved", "on-demand"]}],
            },
        }, **spec},
    })


def nodeclaim(rest: KubeRest, name: str, nodepool_name: str, labels: dict | None = None, node_name: str | None = None,
              node_class: str = "default") -> dict:
    created = rest.create(NODECLAIM, {
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": name, "labels": {"karpenter.sh/nodepool": nodepool_name,
                                              "node.kubernetes.io/instance-type": "p5.48xlarge",
                                              "topology.kubernetes.io/zone": "us-east-1a", **(labels or {})}},
        "spec": {
            "nodeClassRef": {**NODE_CLASS_REF, "name": node_class},
            "requirements": [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["p5.48xlarge"]}],
            "resources": {"requests": {"cpu": "4", "memory": "16Gi"}},
        },
    })
    if node_name:
        created = rest.patch(NODECLAIM, name, {"status": {
            "nodeName": node_name, "providerID": f"aws:///us-east-1a/i-{name[-8:]}", "imageID": "ami-0abc",
            "capacity": {"cpu": "192", "memory": "2048Gi", "pods": "110"},
            "allocatable": {"cpu": "191450m", "memory": "2000Gi", "pods": "110"},
            "conditions": [{"type": "Launched", "status": "True", "reason": "Launched", "message": "",
                            "lastTransitionTime": "2026-11-21T05:00:00Z"},
                           {"type": "Registered", "status": "True", "reason": "Registered", "message": "",
                            "lastTransitionTime": "2026-11-21T05:01:00Z"}],
        }}, subresource="status")
    return created


def node(rest: KubeRest, name: str, labels: dict | None = None, ready: bool = True) -> dict:
    rest.create(NODE, {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
        "spec": {"providerID": f"aws:///us-east-1a/i-{name[-8:]}"},
    })
    return rest.patch(NODE, name, {"status": {
        "capacity": {"cpu": "4", "memory": "16Gi", "pods": "110"},
        "allocatable": {"cpu": "3920m", "memory": "15Gi", "pods": "110"},
        "conditions": [{"type": "Ready", "status": "True" if ready else "False", "reason": "KubeletReady",
                        "message": "", "lastHeartbeatTime": "2026-11-21T05:00:00Z",
                        "lastTransitionTime": "2026-11-21T05:00:00Z"}],
    }}, subresource="status")


def pod(rest: KubeRest, ns: str, name: str, node_name: str | None = None, labels: dict | None = None,
        annotations: dict | None = None, cpu: str = "500m", memory: str = "1Gi", owner: dict | None = None,
        phase: str | None = None, node_selector: dict | None = None) -> dict:
    """`node_selector` replaces the default (reserved capacity); {} for none."""
    metadata = {"name": name, "namespace": ns, "labels": labels or {}}
    if annotations:
        metadata["annotations"] = annotations
    if owner:
        metadata["ownerReferences"] = [owner]
    spec = {
        "containers": [{"name": "app", "image": "registry.example/app:1",
                        "resources": {"requests": {"cpu": cpu, "memory": memory}}}],
        # No kubelet runs: a zero grace period lets an eviction remove the pod at once.
        "terminationGracePeriodSeconds": 0,
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "nodeSelector": {"karpenter.sh/capacity-type": "reserved"} if node_selector is None else node_selector,
    }
    if not spec["nodeSelector"]:
        del spec["nodeSelector"]
    if node_name:
        spec["nodeName"] = node_name
    created = rest.create(POD, {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}, namespace=ns)
    phase = phase or ("Running" if node_name else None)
    if phase:
        created = rest.patch(POD, name, {"status": _pod_status(phase)}, namespace=ns, subresource="status")
    return created


def _pod_status(phase: str) -> dict:
    """What the kubelet reports; an eviction only counts Ready pods against a budget."""
    ready = "True" if phase == "Running" else "False"
    return {"phase": phase, "conditions": [{"type": "Ready", "status": ready, "lastTransitionTime": "2026-11-21T05:00:00Z"}]}


def pdb(rest: KubeRest, ns: str, name: str, selector: dict, disruptions_allowed: int, healthy: int) -> dict:
    """A PodDisruptionBudget with the status the disruption controller would write."""
    created = rest.create(PDB, {
        "apiVersion": "policy/v1beta1", "kind": "PodDisruptionBudget", "metadata": {"name": name, "namespace": ns},
        "spec": {"minAvailable": max(healthy - disruptions_allowed, 0), "selector": {"matchLabels": selector}},
    }, namespace=ns)
    return set_pdb_status(rest, ns, name, disruptions_allowed, healthy, created["metadata"]["generation"])


def set_pdb_status(rest: KubeRest, ns: str, name: str, disruptions_allowed: int, healthy: int,
                   generation: int | None = None) -> dict:
    if generation is None:
        generation = rest.get(PDB, name, ns)["metadata"]["generation"]
    return rest.patch(PDB, name, {"status": {
        "observedGeneration": generation, "disruptionsAllowed": disruptions_allowed,
        "currentHealthy": healthy, "desiredHealthy": max(healthy - disruptions_allowed, 0), "expectedPods": healthy,
    }}, namespace=ns, subresource="status")


def bind(rest: KubeRest, ns: str, name: str, node_name: str) -> None:
    """What the scheduler does: POST a Binding to the pod's binding subresource."""
    rest.create(POD, {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name, "namespace": ns},
                      "target": {"apiVersion": "v1", "kind": "Node", "name": node_name}},
                namespace=ns, subresource="binding", name=name)
    rest.patch(POD, name, {"status": _pod_status("Running")}, namespace=ns, subresource="status")
