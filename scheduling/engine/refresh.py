"""Refreshing nodes as Karpenter does: expiry, drift and node repair (pure; the loop reads the
database and the cloud and acts: scheduling/loop/refresh.py).

  * Expiration (core `pkg/controllers/nodeclaim/expiration`): a NodeClaim whose `spec.expireAfter`
    (copied from its NodePool's template at creation; upstream default 720h, `Never` disables) has
    passed since its creationTimestamp is deleted, forcefully: no budget, no do-not-disrupt, even
    when it never got a Node.
  * Drift (core `pkg/controllers/nodeclaim/disruption/drift.go`, aws `pkg/cloudprovider/drift.go`),
    first reason found wins, in upstream's order:
      NodePoolDrifted      the claim's `karpenter.sh/nodepool-hash` differs from its NodePool's
                           (same `karpenter.sh/nodepool-hash-version` on both, else no drift);
      RequirementsDrifted  the claim's labels no longer satisfy the NodePool's requirements;
      InstanceTypeNotFound its instance type, or every offering compatible with its labels, is gone
                           (checked from 1 h after creation, as upstream);
      NodeClassDrift       the `karpenter.k8s.aws/ec2nodeclass-hash` (+ `-version`) differs;
      AMIDrift             the class's resolved AMIs for its instance type no longer hold its image;
      SecurityGroupDrift   the instance's security groups are not the class's resolved set;
      SubnetDrift          the instance's subnet is not among the class's resolved subnets.
    A claim not launched yet is never drifted. Missing facts (no resolved AMIs, no instance record)
    drift nothing: upstream returns an error there and retries, it does not drift.
  * Node repair (core `pkg/controllers/node/health`, aws `RepairPolicies`): a node whose condition
    has held an unhealthy status past the policy's toleration is replaced by deleting its claim,
    unless more than 20 % (rounded up) of its NodePool's nodes are unhealthy.

The hashes are karpweb's own (SHA-256 over the hashed fields, zero values left out and lists taken
as sets, as upstream's hashstructure options do), so they are compared only with hashes karpweb
wrote: a claim Karpenter created keeps the Drifted condition Karpenter gave it.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Iterable, Mapping, Sequence

from .labels import CAPACITY_TYPE, INSTANCE_TYPE, OFFERING_LABELS, ON_DEMAND, RESERVATION_LABELS, RESERVED
from .requirements import Requirement, Requirements

NODEPOOL_HASH = "karpenter.sh/nodepool-hash"
NODEPOOL_HASH_VERSION = "karpenter.sh/nodepool-hash-version"
NODEPOOL_HASH_VERSION_VALUE = "v3"  # upstream NodePoolHashVersion
NODECLASS_HASH = "karpenter.k8s.aws/ec2nodeclass-hash"
NODECLASS_HASH_VERSION = "karpenter.k8s.aws/ec2nodeclass-hash-version"
NODECLASS_HASH_VERSION_VALUE = "v6"  # upstream EC2NodeClassHashVersion

DRIFTED = "Drifted"
NODEPOOL_DRIFTED = "NodePoolDrifted"
REQUIREMENTS_DRIFTED = "RequirementsDrifted"
INSTANCE_TYPE_NOT_FOUND = "InstanceTypeNotFound"
NODECLASS_DRIFT = "NodeClassDrift"
AMI_DRIFT = "AMIDrift"
SUBNET_DRIFT = "SubnetDrift"
SECURITY_GROUP_DRIFT = "SecurityGroupDrift"
# Upstream checks instance types only from an hour after creation (a catalogue refresh may lag).
INSTANCE_TYPE_CHECK_AFTER = timedelta(hours=1)

# EC2NodeClass spec fields upstream leaves out of its hash (`hash:"ignore"`): selector terms drift
# dynamically (AMI, subnet, security group, reservation drift), the rest would recycle every node.
NODECLASS_UNHASHED = ("subnetSelectorTerms", "securityGroupSelectorTerms", "capacityReservationSelectorTerms",
                      "ipPrefixCount", "amiSelectorTerms", "amiFamily", "kubelet")


# hashes ------------------------------------------------------------------------------------------


def _without_zero(value: Any) -> Any:
    """hashstructure's IgnoreZeroValue + SlicesAsSets: empty values vanish, lists are sets."""
    if isinstance(value, Mapping):
        kept = {k: _without_zero(v) for k, v in value.items()}
        return {k: v for k, v in sorted(kept.items()) if v not in (None, "", [], {}, 0, False)}
    if isinstance(value, (list, tuple)):
        items = [_without_zero(v) for v in value]
        return sorted((v for v in items if v not in (None, "", [], {})), key=lambda v: json.dumps(v, sort_keys=True))
    return value


def stable_hash(value: Any) -> str:
    """A decimal 64-bit hash of `value`'s non-zero fields (upstream writes a uint64 too)."""
    text = json.dumps(_without_zero(value), sort_keys=True, separators=(",", ":"))
    return str(int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big"))


def nodepool_hash(labels: Mapping[str, str], annotations: Mapping[str, str], taints: Sequence[Mapping],
                  startup_taints: Sequence[Mapping], node_class_ref: Mapping[str, str], expire_after: str | None,
                  termination_grace_period: str | None = None) -> str:
    """Upstream `NodePool.Hash()`: spec.template, requirements and resources ignored."""
    return stable_hash({
        "metadata": {"labels": dict(labels or {}), "annotations": dict(annotations or {})},
        "spec": {"taints": list(taints or []), "startupTaints": list(startup_taints or []),
                 "nodeClassRef": dict(node_class_ref or {}), "expireAfter": expire_after or "",
                 "terminationGracePeriod": termination_grace_period or ""},
    })


def nodeclass_hash(spec: Mapping[str, Any]) -> str:
    """Upstream `EC2NodeClass.Hash()`: the static spec fields (not the selector terms, amiFamily,
    kubelet, ipPrefixCount)."""
    return stable_hash({k: v for k, v in (spec or {}).items() if k not in NODECLASS_UNHASHED})


def hash_annotations(pool_hash: str, class_hash: str | None) -> dict[str, str]:
    """What a new NodeClaim carries, so that later edits of its NodePool or class drift it."""
    result = {NODEPOOL_HASH: pool_hash, NODEPOOL_HASH_VERSION: NODEPOOL_HASH_VERSION_VALUE}
    if class_hash is not None:
        result |= {NODECLASS_HASH: class_hash, NODECLASS_HASH_VERSION: NODECLASS_HASH_VERSION_VALUE}
    return result


# drift -------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ClaimFacts:
    """One launched NodeClaim as drift reads it."""

    name: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    created: datetime | None
    image_id: str = ""


@dataclass(frozen=True, slots=True)
class InstanceFacts:
    """DescribeInstances: what the claim's instance was launched with."""

    image_id: str = ""
    subnet_id: str = ""
    security_group_ids: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ClassStatus:
    """The EC2NodeClass as resolved now: status.amis (each with its requirements), subnets, groups."""

    amis: Sequence[Mapping[str, Any]] = ()
    subnet_ids: frozenset[str] = frozenset()
    security_group_ids: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class Drift:
    reason: str
    message: str


def static_drift(claim: Mapping[str, str], current_hash: str | None, hash_key: str, version_key: str,
                 version: str) -> bool:
    """Upstream `areStaticFieldsDrifted`: both hashes known at the same version, and different."""
    if current_hash is None or hash_key not in claim or version_key not in claim:
        return False
    return claim[version_key] == version and claim[hash_key] != current_hash


def requirements_drift(pool_requirements: Requirements, labels: Mapping[str, str]) -> str | None:
    """Upstream `areRequirementsDrifted`: the claim's labels, as requirements, compatible with the
    NodePool's. Returns the conflict in words."""
    return Requirements.from_labels(labels).compatible(pool_requirements)


def instance_type_gone(labels: Mapping[str, str], offerings_by_type: Mapping[str, Sequence]) -> str | None:
    """Upstream `instanceTypeNotFound`: the type is unknown, or none of its offerings is
    compatible with the claim's labels (a reserved claim may also be on-demand, after demotion).
    `offerings_by_type`: type -> each offering's labels (zone, capacity type, ...), available or not."""
    name = labels.get(INSTANCE_TYPE, "")
    if name not in offerings_by_type:
        return f"instance type {name or '(unlabelled)'} is no longer offered"
    requirements = Requirements.from_labels(labels)
    if labels.get(CAPACITY_TYPE) == RESERVED:
        kept = [r for r in requirements if r.key not in RESERVATION_LABELS and r.key != CAPACITY_TYPE]
        requirements = Requirements([*kept, Requirement.of(CAPACITY_TYPE, "In", [RESERVED, ON_DEMAND])])
    if not any(_offering_compatible(o, requirements) for o in offerings_by_type[name]):
        return f"instance type {name} has no offering left that matches the claim's labels"
    return None


def _offering_compatible(labels: Mapping[str, str], requirements: Requirements) -> bool:
    """Upstream `Offerings.HasCompatible`, on the offering's labels (one it lacks: DoesNotExist)."""
    for key in OFFERING_LABELS:
        req = requirements.get(key)
        if req is None:
            continue
        value = labels.get(key)
        if (req.admits_absent if value is None else req.has(value)) is False:
            return False
    return True


def ami_drift(image_id: str, instance_type_labels: Mapping[str, str], amis: Sequence[Mapping[str, Any]]) -> bool:
    """Upstream `isAMIDrifted`: the resolved AMIs whose requirements the instance type meets (the
    first per requirement set, as `MapToInstanceTypes`) do not include the claim's image."""
    if not image_id or not amis:
        return False  # nothing resolved (yet): upstream errors and retries, it does not drift
    labels = dict(instance_type_labels)
    seen: set[tuple] = set()
    usable = set()
    for ami in amis:
        requirements = Requirements([Requirement.of(r["key"], r["operator"], r.get("values") or [])
                                     for r in ami.get("requirements") or []])
        key = requirements.key
        if key in seen or not requirements.matches_labels(labels):
            continue
        seen.add(key)
        usable.add(ami.get("id"))
    return image_id not in usable


def node_drift(claim: ClaimFacts, *, pool_hash: str | None, pool_requirements: Requirements,
               offerings_by_type: Mapping[str, Sequence] | None, type_labels: Mapping[str, str] | None,
               class_hash: str | None, status: ClassStatus | None, instance: InstanceFacts | None,
               now: datetime) -> Drift | None:
    """The first drift reason that holds for a launched claim, in upstream's order."""
    annotations = claim.annotations
    if static_drift(annotations, pool_hash, NODEPOOL_HASH, NODEPOOL_HASH_VERSION, NODEPOOL_HASH_VERSION_VALUE):
        return Drift(NODEPOOL_DRIFTED, "the NodePool's template changed since the claim was created")
    conflict = requirements_drift(pool_requirements, claim.labels)
    if conflict:
        return Drift(REQUIREMENTS_DRIFTED, f"the NodePool's requirements no longer admit the claim: {conflict}")
    old_enough = claim.created is None or now - claim.created > INSTANCE_TYPE_CHECK_AFTER
    if offerings_by_type is not None and old_enough:
        gone = instance_type_gone(claim.labels, offerings_by_type)
        if gone:
            return Drift(INSTANCE_TYPE_NOT_FOUND, gone)
    if static_drift(annotations, class_hash, NODECLASS_HASH, NODECLASS_HASH_VERSION, NODECLASS_HASH_VERSION_VALUE):
        return Drift(NODECLASS_DRIFT, "the EC2NodeClass's static fields changed since the claim was created")
    if status is None:
        return None
    image = claim.image_id or (instance.image_id if instance else "")
    if ami_drift(image, type_labels or {}, status.amis):
        return Drift(AMI_DRIFT, f"image {image} is no longer among the EC2NodeClass's resolved AMIs")
    if instance is None:
        return None
    # An instance record without groups or subnet (a simulated one from before they were kept) tells nothing.
    if status.security_group_ids and instance.security_group_ids and \
            set(instance.security_group_ids) != set(status.security_group_ids):
        return Drift(SECURITY_GROUP_DRIFT, f"security groups {', '.join(sorted(instance.security_group_ids)) or '(none)'} "
                                           f"are not the resolved {', '.join(sorted(status.security_group_ids))}")
    if status.subnet_ids and instance.subnet_id and instance.subnet_id not in status.subnet_ids:
        return Drift(SUBNET_DRIFT, f"subnet {instance.subnet_id or '(none)'} is not among the resolved subnets")
    return None


def drifted_claims(value: Any, problem) -> dict[str, Drift]:
    """The optional top-level `nodeClaims` of a world: per Node name, the Drifted=True condition of
    its NodeClaim (what the disruption controller acts on)."""
    result: dict[str, Drift] = {}
    if value is None:
        return result
    if not isinstance(value, list):
        problem("nodeClaims", "expected a list of NodeClaims")
        return result
    for index, item in enumerate(value):
        status = item.get("status") if isinstance(item, dict) else None
        if not isinstance(status, dict):
            continue
        node = status.get("nodeName")
        for condition in status.get("conditions") or []:
            if isinstance(condition, dict) and condition.get("type") == DRIFTED and condition.get("status") == "True":
                if isinstance(node, str) and node:
                    result[node] = Drift(str(condition.get("reason") or DRIFTED), str(condition.get("message") or ""))
    return result


# expiration --------------------------------------------------------------------------------------


def expires_at(created: datetime | None, expire_after: timedelta | None) -> datetime | None:
    if created is None or expire_after is None:
        return None
    return created + expire_after


def expired(created: datetime | None, expire_after: timedelta | None, now: datetime) -> bool:
    """Upstream expiration: `now >= creationTimestamp + expireAfter` (`Never`: None)."""
    moment = expires_at(created, expire_after)
    return moment is not None and now >= moment


# node repair -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RepairPolicy:
    condition_type: str
    status: str
    toleration: timedelta


# aws `CloudProvider.RepairPolicies()`: the kubelet's Ready, and the node monitoring agent's.
REPAIR_POLICIES = (
    RepairPolicy("Ready", "False", timedelta(minutes=30)),
    RepairPolicy("Ready", "Unknown", timedelta(minutes=30)),
    RepairPolicy("AcceleratedHardwareReady", "False", timedelta(minutes=10)),
    RepairPolicy("StorageReady", "False", timedelta(minutes=30)),
    RepairPolicy("NetworkingReady", "False", timedelta(minutes=30)),
    RepairPolicy("KernelReady", "False", timedelta(minutes=30)),
    RepairPolicy("ContainerRuntimeReady", "False", timedelta(minutes=30)),
)
ALLOWED_UNHEALTHY_PERCENT = 20


@dataclass(frozen=True, slots=True)
class Unhealthy:
    condition_type: str
    status: str
    since: datetime
    toleration: timedelta

    @property
    def repair_at(self) -> datetime:
        return self.since + self.toleration


def unhealthy(conditions: Iterable[tuple[str, str, datetime | None]], fallback_since: datetime | None
              ) -> list[Unhealthy]:
    """The node's conditions (type, status, lastTransitionTime) a repair policy matches; a
    condition without a transition time counts from `fallback_since` (the node's creation)."""
    found = []
    for condition_type, status, since in conditions:
        moment = since or fallback_since
        if moment is None:
            continue
        for policy in REPAIR_POLICIES:
            if policy.condition_type == condition_type and policy.status == status:
                found.append(Unhealthy(condition_type, status, moment, policy.toleration))
    return found


def due_repair(conditions: Iterable[tuple[str, str, datetime | None]], fallback_since: datetime | None,
               now: datetime) -> Unhealthy | None:
    """The unhealthy condition whose toleration ran out first, if one has."""
    due = [u for u in unhealthy(conditions, fallback_since) if now >= u.repair_at]
    return min(due, key=lambda u: u.repair_at) if due else None


def repair_allowed(unhealthy_nodes: int, nodes: int) -> bool:
    """Upstream `isNodePoolHealthy`: at most 20 % of the NodePool's nodes (rounded up) unhealthy."""
    return unhealthy_nodes <= math.ceil(nodes * ALLOWED_UNHEALTHY_PERCENT / 100)
