"""Builders for consolidation and reservation-lifecycle worlds: Karpenter nodes with the labels a
launch gives them, pods bound to them, NodePools with a disruption spec."""

from __future__ import annotations

from .builders import NOW, node, node_pool, pod

LABEL_POOL = "karpenter.sh/nodepool"
LABEL_TYPE = "node.kubernetes.io/instance-type"
LABEL_ZONE = "topology.kubernetes.io/zone"
LABEL_CAPACITY = "karpenter.sh/capacity-type"
LABEL_RID = "karpenter.k8s.aws/capacity-reservation-id"
LABEL_RTYPE = "karpenter.k8s.aws/capacity-reservation-type"
LABEL_RINT = "karpenter.k8s.aws/capacity-reservation-interruptible"
RESERVATION_LABELS = [LABEL_RID, LABEL_RTYPE, LABEL_RINT]
HOUR_AGO = "2026-11-21T11:00:00Z"


def knode(name, itype, *, cpu="2", memory="8Gi", pool="default", capacity="on-demand", zone="us-east-1a",
          reservation=None, reservation_type="default", created=HOUR_AGO, annotations=None, instance=None,
          ready=True, deleting=False, extra_labels=None, pods=110):
    """A node Karpenter launched: nodepool, instance type, zone and capacity type labels, and the
    reservation labels when reserved."""
    labels = {LABEL_POOL: pool, LABEL_TYPE: itype, LABEL_ZONE: zone, LABEL_CAPACITY: capacity,
              "kubernetes.io/hostname": name, **(extra_labels or {})}
    if reservation is not None:
        labels.update({LABEL_RID: reservation, LABEL_RTYPE: reservation_type, LABEL_RINT: "false"})
    item = node(name, cpu=cpu, memory=memory, pods=pods, labels=labels, deleting=deleting)
    if created:
        item["metadata"]["creationTimestamp"] = created
    if annotations:
        item["metadata"]["annotations"] = annotations
    item["spec"]["providerID"] = f"aws:///{zone}/{instance or 'i-' + name}"
    if not ready:
        item["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
    return item


def bound(name, node_name, cpu="100m", memory="128Mi", *, created=HOUR_AGO, annotations=None, daemon=False, **kwargs):
    item = pod(name, cpu, memory, node=node_name, created=created, **kwargs)
    if annotations:
        item["metadata"]["annotations"] = annotations
    if daemon:
        item["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "ds", "uid": "u"}]
    return item


def dpool(name="default", *, policy=None, after=None, budgets=None, keep_idle=None, expire_after=None, **kwargs):
    """A NodePool with `spec.disruption` (only the fields given) and the keep-idle annotation."""
    item = node_pool(name, **kwargs)
    disruption = {}
    if policy is not None:
        disruption["consolidationPolicy"] = policy
    if after is not None:
        disruption["consolidateAfter"] = after
    if budgets is not None:
        disruption["budgets"] = budgets
    if disruption:
        item["spec"]["disruption"] = disruption
    if keep_idle is not None:
        item["metadata"]["annotations"] = {"karpweb.io/keep-idle-reserved-nodes": keep_idle}
    if expire_after is not None:
        item["spec"]["template"]["spec"]["expireAfter"] = expire_after
    return item


def instance(iid, itype, *, zone="us-east-1a", reservation=None, preference=None, state="running", lifecycle=None):
    """One DescribeInstances item, as scheduling/loop/disruption.py instance_membership() sends it."""
    item = {"InstanceId": iid, "InstanceType": itype, "State": {"Name": state}, "Placement": {"AvailabilityZone": zone},
            "CapacityReservationSpecification": {
                "CapacityReservationPreference": preference or ("capacity-reservations-only" if reservation else "open")}}
    if reservation:
        item["CapacityReservationId"] = reservation
    if lifecycle:
        item["InstanceLifecycle"] = lifecycle
    return item


__all__ = ["NOW", "knode", "bound", "dpool", "instance", "RESERVATION_LABELS"]
