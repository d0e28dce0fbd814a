"""Refreshing karpweb's nodes (scheduling/engine/refresh.py decides; this reads and acts):

* **Expiration**: a NodeClaim karpweb created whose `spec.expireAfter` has passed is deleted at
  once (upstream's expiration controller: no budget, no do-not-disrupt, even without a Node). The
  deletion runs the claim's termination (drain, terminate) through its finalizer.
* **Drift marking**: each launched claim of karpweb's gets the `Drifted` condition with upstream's
  reason (NodePoolDrifted, RequirementsDrifted, InstanceTypeNotFound, NodeClassDrift, AMIDrift,
  SecurityGroupDrift, SubnetDrift) or loses it. Acting on drift is the disruption pass: it replaces
  Drifted nodes within the NodePool's budgets (scheduling/loop/disruption.py, reason drift).
  Claims Karpenter created keep the condition Karpenter gave them (the sync mirrors it).
* **Node repair** (KARPWEB_NODE_REPAIR, off by default as upstream's NodeRepair gate): a node
  unhealthy past its policy's toleration has its claim deleted, unless more than 20 % of its
  NodePool's nodes are unhealthy.

Each action is a Decision; observe mode records recommendations and acts on nothing.
"""

from __future__ import annotations

from django.conf import settings
from django.utils import timezone

from scheduling.adapters.ec2.interface import CloudAPIError
from scheduling.adapters.kube.interface import ClusterError, Condition
from scheduling.engine import refresh as engine
from scheduling.engine.budgets import DEFAULT_EXPIRE_AFTER, NEVER, SpecError, parse_duration
from scheduling.engine.requirements import Requirement, Requirements, RequirementError
from scheduling.engine.timeutil import parse_time
from scheduling.claim_hashes import class_hash, pool_hash
from scheduling.loop.nodes import act_in_control_mode, delete_claim  # its finalizer drains the node and terminates the instance
from scheduling.loop.provisioning import PROVISIONER_LABEL
from scheduling.loop.recording import PendingDecision, record
from scheduling.models import Decision, InstanceType, Mode, Node, NodeClaim, Offering
from scheduling.modes import control_refusal, effective_mode



def own_claims():
    return NodeClaim.objects.filter(labels__has_key=PROVISIONER_LABEL, deleting_since__isnull=True)


def _act(decision: PendingDecision, cluster, claim: NodeClaim, now) -> None:
    act_in_control_mode(decision, decision.mode, lambda: delete_claim(cluster, claim, now))


# expiration --------------------------------------------------------------------------------------


def expire_after_of(claim: NodeClaim):
    """The claim's spec.expireAfter (None: Never); a claim written without one has the CRD's default."""
    text = claim.expire_after or ""
    if text == NEVER:
        return None
    if not text:
        return DEFAULT_EXPIRE_AFTER
    try:
        return parse_duration(text)
    except SpecError:
        return DEFAULT_EXPIRE_AFTER


def expire(cluster, now=None) -> dict:
    now = now or timezone.now()
    refusal = control_refusal()
    pending = []
    for claim in own_claims().select_related("node_pool", "reservation"):
        expire_after = expire_after_of(claim)
        if not engine.expired(claim.created_at, expire_after, now):
            continue
        decision = PendingDecision(
            kind=Decision.Kind.EXPIRE, subject=f"NodeClaim {claim.name}", mode=effective_mode(claim.node_pool, refusal),
            node_pool=claim.node_pool, reservation=claim.reservation,
            details={"name": claim.name, "expireAfter": claim.expire_after or "720h", "reason": "Expired"},
            objects_involved={"nodeClaims": [claim.name], "nodes": [claim.node_name] if claim.node_name else []},
            reason=(f"NodeClaim {claim.name} expired: created {claim.created_at:%Y-%m-%d %H:%M} UTC, expireAfter "
                    f"{claim.expire_after or '720h'}; deleting it (not subject to disruption budgets)"))
        _act(decision, cluster, claim, now)
        pending.append(decision)
    return {"expired": len(pending), "expired_acted": sum(d.outcome == Decision.Outcome.ACTED for d in pending),
            "decisions_recorded": record(pending, now)}


# drift -------------------------------------------------------------------------------------------


def _pool_requirements(pool) -> Requirements:
    reqs = []
    for item in pool.requirements or []:
        try:
            reqs.append(Requirement.of(item["key"], item.get("operator", "In"), item.get("values") or []))
        except (KeyError, TypeError, RequirementError):
            continue  # the engine reports an unreadable NodePool; drift leaves it alone
    return Requirements(reqs)


def _class_status(node_class) -> engine.ClassStatus | None:
    status = (node_class.status_launch or {}) if node_class is not None else {}
    if not status:
        return None
    return engine.ClassStatus(
        amis=status.get("amis") or [],
        subnet_ids=frozenset(s["id"] for s in status.get("subnets") or [] if s.get("id")),
        security_group_ids=frozenset(g["id"] for g in status.get("securityGroups") or [] if g.get("id")))


def _offerings_by_type() -> dict[str, list[dict[str, str]]]:
    result: dict[str, list[dict[str, str]]] = {name: [] for name in InstanceType.objects.values_list("name", flat=True)}
    for type_name, zone, zone_id, capacity_type in Offering.objects.values_list(
            "instance_type__name", "zone", "zone_id", "capacity_type"):
        labels = {"topology.kubernetes.io/zone": zone, "karpenter.sh/capacity-type": capacity_type}
        if zone_id:
            labels["topology.k8s.aws/zone-id"] = zone_id
        result.setdefault(type_name, []).append(labels)
    return result


def _instances(cloud, claims) -> dict[str, engine.InstanceFacts]:
    ids = [c.instance_id for c in claims if c.instance_id]
    if not ids:
        return {}
    try:
        found = cloud.describe_instances(ids)
    except CloudAPIError:
        return {}  # unknown this pass: no instance-based drift, as upstream retries
    return {m.instance_id: engine.InstanceFacts(getattr(m, "image_id", ""), getattr(m, "subnet_id", ""),
                                                tuple(getattr(m, "security_group_ids", ()))) for m in found}


def claim_drift(claim: NodeClaim, instances: dict, offerings: dict, types: dict, now,
                pools: dict | None = None) -> engine.Drift | None:
    """`pools`: per NodePool id, its (hash, requirements), filled as met (one computation per pool a pass)."""
    pool = claim.node_pool
    if pool is None:
        return None
    pools = {} if pools is None else pools
    if pool.pk not in pools:
        pools[pool.pk] = (pool_hash(pool), _pool_requirements(pool))
    current_hash, requirements = pools[pool.pk]
    instance = instances.get(claim.instance_id)
    return engine.node_drift(
        engine.ClaimFacts(claim.name, claim.labels or {}, claim.annotations or {}, claim.created_at,
                          claim.image_id or (instance.image_id if instance else "")),
        pool_hash=current_hash, pool_requirements=requirements,
        offerings_by_type=offerings or None, type_labels=types.get(claim.instance_type),
        class_hash=class_hash(claim.node_class), status=_class_status(claim.node_class), instance=instance, now=now)


def mark_drift(cloud, cluster, now=None) -> dict:
    """Set or clear `Drifted` on each launched claim of karpweb's (written to the cluster in control mode)."""
    now = now or timezone.now()
    claims = list(own_claims().exclude(provider_id="").select_related("node_pool", "node_class"))
    instances = _instances(cloud, claims)
    offerings = _offerings_by_type()
    types = {it.name: {**(it.labels or {}), "kubernetes.io/arch": it.arch}
             for it in InstanceType.objects.filter(name__in={c.instance_type for c in claims})}
    refusal = control_refusal()
    counts = {"drifted": 0, "drift_changed": 0}
    pools: dict = {}
    for claim in claims:
        drift = claim_drift(claim, instances, offerings, types, now, pools)
        counts["drifted"] += drift is not None
        if _set_drifted(claim, drift, now):
            counts["drift_changed"] += 1
            if effective_mode(claim.node_pool, refusal) == Mode.CONTROL:
                condition = (Condition(engine.DRIFTED, "True", drift.reason, drift.message) if drift
                             else Condition(engine.DRIFTED, "False", "NotDrifted", ""))
                try:
                    cluster.set_conditions("NodeClaim", claim.name, [condition])
                except ClusterError:
                    pass  # the next pass writes it again
    return counts


def _set_drifted(claim: NodeClaim, drift: engine.Drift | None, now) -> bool:
    current = claim.condition(engine.DRIFTED)
    if drift is None:
        if current is None or current.get("status") != "True":
            return False
        claim.conditions = [c for c in claim.conditions if c.get("type") != engine.DRIFTED]
    elif not claim.set_condition(engine.DRIFTED, "True", drift.reason, drift.message, now=now):
        return False
    claim.save(update_fields=["conditions"])
    return True


def drifted_claim_objects() -> list[dict]:
    """Drifted NodeClaims as the engine's world reads them (`nodeClaims`)."""
    result = []
    for name, node_name, conditions in NodeClaim.objects.filter(deleting_since__isnull=True).exclude(node_name="") \
            .values_list("name", "node_name", "conditions"):
        drifted = [c for c in conditions or [] if c.get("type") == engine.DRIFTED and c.get("status") == "True"]
        if drifted:
            result.append({"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": {"name": name},
                           "status": {"nodeName": node_name, "conditions": drifted}})
    return result


# node repair -------------------------------------------------------------------------------------


def node_conditions(node: Node) -> list[tuple[str, str, object]]:
    """(type, status, lastTransitionTime) of the Node; a row without conditions has its Ready flag."""
    found = []
    for c in node.conditions or []:
        since = c.get("lastTransitionTime")
        try:
            moment = parse_time(since) if since else None
        except ValueError:
            moment = None
        found.append((c.get("type", ""), c.get("status", ""), moment))
    if not any(t == "Ready" for t, _, _ in found):
        found.append(("Ready", "True" if node.ready else "False", None))
    return found


def repair(cluster, now=None) -> dict:
    if not settings.KARPWEB_NODE_REPAIR:
        return {"repair": 0}
    now = now or timezone.now()
    nodes = list(Node.objects.filter(node_claim__isnull=False, node_claim__deleting_since__isnull=True,
                                     node_claim__labels__has_key=PROVISIONER_LABEL)
                 .select_related("node_claim", "node_pool", "node_claim__reservation"))
    sick = {n.pk: engine.unhealthy(node_conditions(n), n.created_at) for n in nodes}
    total, unhealthy = {}, {}
    for node in nodes:
        key = node.node_pool_id
        total[key] = total.get(key, 0) + 1
        unhealthy[key] = unhealthy.get(key, 0) + bool(sick[node.pk])
    refusal = control_refusal()
    pending = []
    for node in nodes:
        due = engine.due_repair(node_conditions(node), node.created_at, now)
        if due is None:
            continue
        claim = node.node_claim
        decision = PendingDecision(
            kind=Decision.Kind.REPAIR, subject=f"node {node.name}", mode=effective_mode(node.node_pool, refusal),
            node_pool=node.node_pool, reservation=claim.reservation,
            details={"node": node.name, "nodeClaim": claim.name, "condition": due.condition_type, "status": due.status,
                     "since": due.since.strftime("%Y-%m-%dT%H:%M:%SZ"),
                     "toleration": f"{int(due.toleration.total_seconds() // 60)}m"},
            objects_involved={"nodes": [node.name], "nodeClaims": [claim.name]},
            reason=(f"node {node.name} has been {due.condition_type}={due.status} since {due.since:%H:%M} UTC, past "
                    f"its {int(due.toleration.total_seconds() // 60)} min toleration: deleting NodeClaim {claim.name}"))
        if not engine.repair_allowed(unhealthy[node.node_pool_id], total[node.node_pool_id]):
            decision.outcome = Decision.Outcome.SKIPPED
            decision.reason += (f"; blocked: {unhealthy[node.node_pool_id]} of {total[node.node_pool_id]} nodes of the "
                                f"NodePool are unhealthy, more than {engine.ALLOWED_UNHEALTHY_PERCENT} %")
        else:
            _act(decision, cluster, claim, now)
        pending.append(decision)
    return {"repairs": sum(d.outcome == Decision.Outcome.ACTED for d in pending), "repair_decisions": len(pending),
            "decisions_recorded": record(pending, now)}
