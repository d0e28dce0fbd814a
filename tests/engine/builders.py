"""Small builders for WORLD.json documents, so tests read like the scenario they describe."""

from __future__ import annotations

import copy

NOW = "2026-11-21T12:00:00Z"
ZERO_OVERHEAD = {
    "kubeReserved": {"cpu": "0", "memory": "0", "ephemeral-storage": "0"},
    "evictionHard": {"memory.available": "0", "nodefs.available": "0%"},
}


def instance_type(name, cpu, memory, *, pods=110, zones=("us-east-1a",), od=0.1, spot=None, labels=None,
                  resources=None, od_available=True):
    offerings = [{"capacityType": "on-demand", "zone": z, "price": od, "available": od_available} for z in zones]
    if spot is not None:
        offerings += [{"capacityType": "spot", "zone": z, "price": spot} for z in zones]
    item = {"name": name, "cpu": cpu, "memory": memory, "pods": pods, "labels": labels or {}, "offerings": offerings}
    if resources:
        item["resources"] = resources
    return item


def reservation(rid, itype, *, zone="us-east-1a", available=1, total=None, state="active", kind="default",
                end=None, tags=None, owner="123456789012", criteria="targeted", ultraserver=None, interruptible=None):
    item = {
        "CapacityReservationId": rid, "OwnerId": owner, "InstanceType": itype, "AvailabilityZone": zone,
        "AvailableInstanceCount": available, "TotalInstanceCount": available if total is None else total,
        "State": state, "InstanceMatchCriteria": criteria, "ReservationType": kind,
        "Tags": [{"Key": k, "Value": v} for k, v in (tags or {}).items()],
    }
    if end is not None:
        item["EndDate"] = end
    if ultraserver:
        item["UltraserverType"] = ultraserver
    if interruptible is not None:
        item["Interruptible"] = interruptible
    return item


def node_class(name="default", terms=None, *, overhead=False, kubelet=None):
    spec = {}
    if terms is not None:
        spec["capacityReservationSelectorTerms"] = terms
    if kubelet is not None:
        spec["kubelet"] = kubelet
    elif not overhead:
        spec["kubelet"] = copy.deepcopy(ZERO_OVERHEAD)
    return {"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": name}, "spec": spec}


def node_pool(name="default", *, node_class="default", weight=None, capacity_types=None, requirements=(),
              taints=(), limits=None, labels=None):
    reqs = list(requirements)
    if capacity_types is not None:
        reqs.append({"key": "karpenter.sh/capacity-type", "operator": "In", "values": list(capacity_types)})
    spec = {"template": {"spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass",
                                                   "name": node_class},
                                  "requirements": reqs, "taints": list(taints)}}}
    if labels:
        spec["template"]["metadata"] = {"labels": labels}
    if weight is not None:
        spec["weight"] = weight
    if limits is not None:
        spec["limits"] = limits
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name}, "spec": spec}


def pod(name, cpu="100m", memory="128Mi", *, namespace="default", node=None, selector=None, terms=None,
        tolerations=None, labels=None, anti_affinity=False, extra=None, created=None):
    requests = {"cpu": cpu, "memory": memory, **(extra or {})}
    spec = {"containers": [{"name": "main", "resources": {"requests": requests}}]}
    if node:
        spec["nodeName"] = node
    if selector:
        spec["nodeSelector"] = selector
    affinity = {}
    if terms is not None:
        affinity["nodeAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}
    if anti_affinity:
        labels = {"app": name.rsplit("-", 1)[0], **(labels or {})}
        affinity["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [{
            "labelSelector": {"matchLabels": {"app": labels["app"]}},
            "topologyKey": "kubernetes.io/hostname",
        }]}
    if affinity:
        spec["affinity"] = affinity
    if tolerations:
        spec["tolerations"] = tolerations
    meta = {"name": name, "namespace": namespace, "labels": labels or {}}
    if created:
        meta["creationTimestamp"] = created
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def node(name, *, cpu="4", memory="16Gi", pods=110, labels=None, taints=None, unschedulable=False, deleting=False):
    meta = {"name": name, "labels": labels or {}}
    if deleting:
        meta["deletionTimestamp"] = NOW
    spec = {"taints": taints or []}
    if unschedulable:
        spec["unschedulable"] = True
    status = {"allocatable": {"cpu": cpu, "memory": memory, "pods": str(pods)},
              "capacity": {"cpu": cpu, "memory": memory, "pods": str(pods)}}
    return {"apiVersion": "v1", "kind": "Node", "metadata": meta, "spec": spec, "status": status}


def world(*, instance_types=(), reservations=(), node_classes=None, node_pools=None, nodes=(), pods=(),
          gate=True, now=NOW, daemon_sets=None):
    doc = {
        "now": now,
        "featureGates": {"ReservedCapacity": gate},
        "instanceTypes": list(instance_types),
        "capacityReservations": list(reservations),
        "ec2NodeClasses": list(node_classes) if node_classes is not None else [node_class("default", [{"tags": {"team": "ml"}}])],
        "nodePools": list(node_pools) if node_pools is not None else [node_pool()],
        "nodes": list(nodes),
        "pods": list(pods),
    }
    if daemon_sets is not None:
        doc["daemonSets"] = daemon_sets
    return doc


def placement(decisions):
    """pod key -> ("claim", claim dict) | ("node", node name) | ("unschedulable"|"deferred", reason)."""
    where = {}
    for claim in decisions["nodeClaims"]:
        for key in claim["pods"]:
            where[key] = ("claim", claim)
    for binding in decisions["bindings"]:
        where[binding["pod"]] = ("node", binding["node"])
    for kind in ("unschedulable", "deferred"):
        for item in decisions[kind]:
            where[item["pod"]] = (kind, item["reason"])
    return where


def capacity_types(decisions):
    return sorted(c["launch"]["capacityType"] for c in decisions["nodeClaims"])
