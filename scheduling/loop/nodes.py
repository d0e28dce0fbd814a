"""After the launch, for the NodeClaims karpweb created (kubernetes-sigs/karpenter
`pkg/controllers/nodeclaim/lifecycle/` and `pkg/controllers/node/termination/`; interruptions as
aws/karpenter-provider-aws `pkg/controllers/interruption/`):

* **Registration**: the Node whose providerID is the claim's gets the claim's labels, annotations
  and taints, loses ``karpenter.sh/unregistered`` and gains ``karpenter.sh/registered=true``; the
  claim becomes ``Registered`` with ``status.nodeName``.
* **Initialization**: once the Node is Ready, without startup taints or known ephemeral taints and
  with the claim's requested resources allocatable, the claim becomes ``Initialized`` and the Node
  gains ``karpenter.sh/initialized=true``; until then the condition says what it waits for.
* **Registration again**: a Node the kubelet registered anew (deleted and gone, its finalizer
  removed by hand, while its claim stayed Registered) still carries ``karpenter.sh/unregistered``:
  it is registered again, as the first time. A Node still being deleted (its deletionTimestamp set,
  held by karpenter.sh/termination) is left to termination: neither registered again nor garbage
  collected, since termination deletes its claim (upstream's GC skips claims being deleted).
* **Registration TTL**: a launched claim whose Node has not registered within
  ``KARPWEB_REGISTRATION_TTL_MINUTES`` is deleted (its finalizer terminates the instance), as a
  decision; registrations and timeouts feed the NodePool's ``NodeRegistrationHealthy``
  (registration_health.py). A claim not launched within 5 minutes is deleted by provisioning.py.
* **Claim garbage collection**: a registered claim whose instance EC2 no longer lists, with its
  Node absent or not Ready, is deleted (kept while the Node is Ready): otherwise it would be
  in-flight capacity for its pods forever.
* **Termination** (upstream's NodeClaim and Node termination): a deleted claim (held by the
  ``karpenter.sh/termination`` finalizer karpweb puts on its claims) gets its termination timestamp
  (deletion + terminationGracePeriod), its Nodes are deleted; a deleted Node (held by the same
  finalizer, added at registration; ``kubectl delete node`` too) is tainted and drained as
  Karpenter drains (tiers, do-not-disrupt, PDBs, pods deleted at the termination time), its
  VolumeAttachments waited for, its instance terminated, and then it goes; the claim's finalizer
  goes last, once the instance is gone. Each pass makes what progress it can; nothing is kept in
  memory between passes.
* **Disruption** (interruptions, Capacity Block drains, expiry, drift, consolidation) deletes the
  node's NodeClaim; termination does the rest (:func:`disrupt`).
* **Instance garbage collection**: an instance karpweb tagged (``karpweb.io/managed``), running or
  stopped, that no NodeClaim holds, older than ``KARPWEB_INSTANCE_GC_GRACE_SECONDS``, is terminated
  and its Node deleted. Instances other tools launched never carry that tag and are never touched.
* **Interruptions** from ``KARPWEB_INTERRUPTION_QUEUE`` (SQS, fed by EventBridge) and failed EC2
  status checks: the NodeClaims of the instances (whether or not their Node has registered) are
  deleted; spot pools and reclaimed reservations are marked unavailable; the message is deleted once
  the claim is. A queue karpweb cannot read is counted and recorded, never failing the run.
  Rebalance recommendations are decisions, nothing more.

Observe mode acts on none of it: each would-be action is a recommendation."""

from __future__ import annotations

import datetime
import logging

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from fleet.connection import is_kubernetes
from scheduling.adapters.kube import termination as T
from scheduling.engine.budgets import SpecError, parse_duration
from scheduling.engine.labels import NODEPOOL as NODEPOOL_LABEL
from scheduling.engine.timeutil import format_time, parse_time

from scheduling.adapters.ec2.interface import SPOT, CloudAPIError
from scheduling.adapters.kube.interface import ClusterError, Condition
from scheduling.engine import interruptions
from scheduling.loop import registration_health
from scheduling.loop.provisioning import PROVISIONER_LABEL, TERMINATION_FINALIZER, mark_unavailable
from scheduling.loop.recording import PendingDecision, record
from scheduling.models import Decision, EventCount, Mode, Node, NodeClaim, Offering
from scheduling.modes import control_refusal, effective_mode, global_mode

log = logging.getLogger(__name__)

EPHEMERAL_TAINTS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable",
                    "node.cloudprovider.kubernetes.io/uninitialized", "karpenter.sh/unregistered")
INITIALIZED_LABEL = "karpenter.sh/initialized"
UNREGISTERED_TAINT_KEY = "karpenter.sh/unregistered"
# What EC2 lists and the instance GC collects: upstream's CloudProvider.List lists stopped instances too.
ORPHAN_STATES = ("pending", "running", "stopping", "stopped")
REPEAT_WINDOW = datetime.timedelta(hours=1)  # an interruption acted on within this is not acted on again
INTERRUPTION_MESSAGES = "interruption_messages"  # EventCount name, label = the message's kind or unknown/ignored
QUEUE_ERRORS = "interruption_queue_errors"  # EventCount name, label = the error code (QueueDoesNotExist, AccessDenied, ...)


def after_launch(cloud, cluster, now=None) -> dict:
    """Registration (again, for a Node the kubelet registered anew), initialization, the
    registration TTL and the garbage collection of claims whose instance is gone, for karpweb's
    claims (on a cluster); then the claims being deleted are finalized."""
    now = now or timezone.now()
    refusal = control_refusal()
    claims = list(NodeClaim.objects.filter(labels__has_key=PROVISIONER_LABEL, deleting_since__isnull=True)
                  .exclude(provider_id="").select_related("node_pool"))
    nodes = {n.provider_id: n for n in Node.objects.filter(provider_id__in=[c.provider_id for c in claims])}
    counts = {"registered": 0, "initialized": 0, "registration_timeouts": 0, "claims_collected": 0, "terminated": 0}
    decisions = []
    ttl = datetime.timedelta(minutes=settings.KARPWEB_REGISTRATION_TTL_MINUTES)
    if not refusal:  # NodeRegistrationHealthy: Unknown for a new or changed NodePool (Karpenter's own, if it runs)
        counts["registration_health_reset"] = registration_health.refresh(cluster, now)
    gone = instances_gone(cloud, [c for c in claims if c.condition_status("Registered") == "True"])
    for claim in claims:
        mode = effective_mode(claim.node_pool, refusal)
        node = nodes.get(claim.provider_id)
        registered = claim.condition_status("Registered") == "True"
        if node is not None and node.deleting_since is not None:
            continue  # being deleted (`kubectl delete node`): termination deletes the claim, not GC or registration
        if claim.instance_id in gone and not (node is not None and node.ready):
            decisions.append(collect_claim(cluster, claim, node, mode, now))
            counts["claims_collected"] += 1
        elif not registered or (node is not None and unregistered(node)):
            if node is not None and mode == Mode.CONTROL:
                register(cluster, claim, node, now)
                counts["registered"] += 1
                if not registered:
                    registration_health.record_result(cluster, claim.node_pool, True, now)
            elif node is None and claim.launched_at and now - claim.launched_at >= ttl:
                decisions.append(registration_timeout(cloud, cluster, claim, mode, ttl, now))
                counts["registration_timeouts"] += 1
        elif claim.condition_status("Initialized") != "True" and node is not None and mode == Mode.CONTROL:
            counts["initialized"] += initialize(cluster, claim, node, now)
    counts.update(terminate(cloud, cluster, now, decisions, refusal))
    record(decisions, now)
    return counts


def unregistered(node: Node) -> bool:
    """The kubelet registered this Node anew (deleted, say, while its claim stayed Registered)."""
    return any(t.get("key") == UNREGISTERED_TAINT_KEY for t in node.taints or [])


def instances_gone(cloud, claims: list[NodeClaim]) -> set[str]:
    """The instances of these claims that EC2 no longer lists (terminated, or unknown); nothing
    when EC2 cannot be asked now (the next pass asks again)."""
    wanted = [c.instance_id for c in claims if c.instance_id]
    if not wanted:
        return set()
    try:
        listed = {m.instance_id for m in cloud.describe_instances(wanted)}
    except CloudAPIError as exc:
        log.warning("claim garbage collection: cannot list instances now: %s", exc)
        return set()
    return set(wanted) - listed


def delete_claim(cluster, claim: NodeClaim, now) -> None:
    """Delete a NodeClaim as upstream's controllers do: in the cluster, where its finalizer holds it
    while `finalize` drains its node and terminates its instance. It stops being capacity at once."""
    cluster.delete_nodeclaim(claim.name)  # False: already deleted, which is as good
    claim.deleting_since = claim.deleting_since or now  # the first deletion is when termination began
    # (a simulated cluster deleted the row)
    NodeClaim.objects.filter(pk=claim.pk, deleting_since__isnull=True).update(deleting_since=now)


def collect_claim(cluster, claim: NodeClaim, node: Node | None, mode: str, now) -> PendingDecision:
    """kubernetes-sigs/karpenter pkg/controllers/nodeclaim/garbagecollection: a registered claim whose
    instance is gone, with its Node absent or not Ready, is deleted (it would be capacity forever)."""
    where = f"its node {node.name} is not Ready" if node is not None else "its node is gone"
    decision = PendingDecision(
        kind=Decision.Kind.GARBAGE_COLLECT, subject=f"NodeClaim {claim.name}", mode=mode, node_pool=claim.node_pool,
        details={"name": claim.name, "instanceID": claim.instance_id, "node": node.name if node else ""},
        reason=(f"NodeClaim {claim.name}: EC2 no longer lists its instance {claim.instance_id} and {where}: "
                "deleting the NodeClaim, so that its pods are planned onto a new node"))
    return act_in_control_mode(decision, mode, lambda: delete_claim(cluster, claim, now))


def act_in_control_mode(decision: PendingDecision, mode: str, action) -> PendingDecision:
    """Run `action` in control mode (the decision says how it went); a recommendation otherwise."""
    if mode != Mode.CONTROL:
        return decision
    try:
        action()
    except (CloudAPIError, ClusterError) as exc:
        decision.outcome, decision.error = Decision.Outcome.FAILED, str(exc)
        return decision
    decision.outcome = Decision.Outcome.ACTED
    return decision


# --- termination (kubernetes-sigs/karpenter nodeclaim/lifecycle finalize, node/termination) -------

def terminate(cloud, cluster, now, decisions: list, refusal: str = "") -> dict:
    """One pass over everything being deleted: karpweb's NodeClaims (their Nodes are deleted and
    drained, then the instance terminated, then the claim's finalizer goes), then deleted Nodes
    whose claim is not being finalized yet (`kubectl delete node`: the claim is deleted too)."""
    counts = {"terminated": 0, "nodes_terminated": 0}
    deleting = NodeClaim.objects.filter(labels__has_key=PROVISIONER_LABEL, deleting_since__isnull=False) \
        .select_related("node_pool", "reservation")
    handled: set[str] = set()
    for claim in deleting:
        handled.update(n.name for n in nodes_of(claim))
        decision = finalize(cloud, cluster, claim, effective_mode(claim.node_pool, refusal), now)
        if decision is not None:
            decisions.append(decision)
            counts["terminated"] += decision.outcome == Decision.Outcome.ACTED
    for node in Node.objects.filter(deleting_since__isnull=False).exclude(name__in=handled) \
            .select_related("node_pool", "node_claim", "reservation"):
        decision = finalize_node(cloud, cluster, node, effective_mode(node.node_pool, refusal), now)
        if decision is not None:
            decisions.append(decision)
            counts["nodes_terminated"] += decision.outcome == Decision.Outcome.ACTED
    return counts


def nodes_of(claim: NodeClaim) -> list[Node]:
    """Every Node of the claim (upstream deletes all of them, should there be several)."""
    match = Q(node_claim=claim)
    if claim.provider_id:
        match |= Q(provider_id=claim.provider_id)
    if claim.node_name:
        match |= Q(name=claim.node_name)
    return list(Node.objects.filter(match).select_related("node_pool", "node_claim", "reservation"))


def finalize(cloud, cluster, claim: NodeClaim, mode: str, now=None) -> PendingDecision | None:
    """A claim of karpweb's is being deleted: its termination timestamp is written, its Nodes are
    deleted and terminated (drained; see terminate_node), its instance terminated, and only once
    the instance is gone does the finalizer go. Each step is retried on the next pass until it is
    done; None while waiting."""
    now = now or timezone.now()
    instance = claim.instance_id
    decision = PendingDecision(
        kind=Decision.Kind.TERMINATE, subject=f"NodeClaim {claim.name}", mode=mode, node_pool=claim.node_pool,
        reservation=claim.reservation, details={"name": claim.name, "instanceID": instance},
        reason=f"NodeClaim {claim.name} was deleted: draining its node"
               + (f", terminating instance {instance}" if instance else "") + " and then removing its finalizer")
    if mode != Mode.CONTROL:
        return decision
    try:
        claim_obj = ensure_termination_timestamp(cluster, cluster.get_nodeclaim(claim.name))
        deadline = T.termination_time(claim_obj)
        if claim.condition_status("Registered") == "True" or claim.node_name:
            gone = [terminate_node(cloud, cluster, node, claim, deadline, now) for node in nodes_of(claim)]
            if not all(gone):
                return None  # a drain, volumes or the instance: the next pass goes on
        if instance and _alive(cloud, instance):
            cloud.terminate([instance])
            _ClaimConditions(cluster, claim).set(Condition("InstanceTerminating", "True", "InstanceTerminating", ""))
            return None  # the next pass removes the finalizer once the instance is gone
        cluster.remove_finalizer(claim.name, TERMINATION_FINALIZER)
    except ClusterError as exc:
        if not exc.not_found:
            decision.outcome, decision.error = Decision.Outcome.FAILED, str(exc)
            return decision
    except CloudAPIError as exc:
        decision.outcome, decision.error = Decision.Outcome.FAILED, str(exc)
        return decision
    claim.delete()
    decision.outcome = Decision.Outcome.ACTED
    return decision


def ensure_termination_timestamp(cluster, claim_obj: dict) -> dict:
    """Upstream's ensureTerminationGracePeriodTerminationTimeAnnotation: deletionTimestamp +
    spec.terminationGracePeriod, written once. A claim without the field takes its NodePool's
    spec.template.spec.terminationGracePeriod (claims created before karpweb copied it)."""
    meta = claim_obj.get("metadata") or {}
    if T.TERMINATION_TIMESTAMP in (meta.get("annotations") or {}) or not meta.get("deletionTimestamp"):
        return claim_obj
    grace = (claim_obj.get("spec") or {}).get("terminationGracePeriod") or _pool_grace(cluster, meta)
    if not grace:
        return claim_obj
    try:
        when = parse_time(meta["deletionTimestamp"]) + parse_duration(grace)
    except (SpecError, ValueError):
        log.warning("NodeClaim %s: terminationGracePeriod %r is not a duration; no termination time", meta.get("name"), grace)
        return claim_obj
    return cluster.annotate_nodeclaim(meta["name"], T.TERMINATION_TIMESTAMP, format_time(when))


def _pool_grace(cluster, meta: dict) -> str | None:
    pool = (meta.get("labels") or {}).get(NODEPOOL_LABEL)
    if not pool:
        return None
    try:
        nodepool = cluster.get("NodePool", pool)
    except ClusterError as exc:
        if exc.not_found:
            return None
        raise
    return (((nodepool.get("spec") or {}).get("template") or {}).get("spec") or {}).get("terminationGracePeriod")


def terminate_node(cloud, cluster, node: Node, claim: NodeClaim | None, deadline, now) -> bool:
    """One pass of upstream's node termination; True once the Node is gone. The Node is deleted
    (if it is not already), and while it carries karpenter.sh/termination: a NotReady Node whose
    instance is gone lets go at once (no kubelet to drain); otherwise it is drained, its
    VolumeAttachments are waited for (until the termination time), its instance is terminated
    (karpweb's claims only), and then the finalizer goes."""
    if node.deleting_since is None:
        if claim is not None:  # a Node registered before karpweb added the finalizer: drained all the same
            cluster.add_node_finalizer(node.name, TERMINATION_FINALIZER)
        cluster.delete_node(node.name)
        node.deleting_since = now
        Node.objects.filter(pk=node.pk).update(deleting_since=now)
    try:
        obj = cluster.get("Node", node.name)
    except ClusterError as exc:
        if exc.not_found:
            node.delete()
            return True
        raise
    if TERMINATION_FINALIZER not in ((obj.get("metadata") or {}).get("finalizers") or []):
        return False  # not karpweb's to finalize: Kubernetes removes it once its other finalizers go
    instance = claim.instance_id if claim is not None else ""
    if not _node_ready(obj) and (not node.instance_id or not _alive(cloud, node.instance_id)):
        return _let_go(cluster, node)
    report = _ClaimConditions(cluster, claim)
    report.set(Condition("Drained", "Unknown", "Draining", f"draining node {node.name}"), unless_true=True)
    drained = cluster.drain(node.name, termination_time=deadline)
    if drained.errors:
        raise drained.errors[0]
    if not drained.drained:
        return False
    report.set(Condition("Drained", "True", "Drained", ""))
    if cluster.pending_volume_attachments(node.name):
        if not (deadline and now > deadline):
            report.set(Condition("VolumesDetached", "Unknown", "AwaitingVolumeDetachment", "AwaitingVolumeDetachment"))
            return False
        report.set(Condition("VolumesDetached", "False", "TerminationGracePeriodElapsed", "TerminationGracePeriodElapsed"))
    else:
        report.set(Condition("VolumesDetached", "True", "VolumesDetached", ""))
    if instance and _alive(cloud, instance):
        cloud.terminate([instance])
        report.set(Condition("InstanceTerminating", "True", "InstanceTerminating", ""))
        return False
    return _let_go(cluster, node)


class _ClaimConditions:
    """Upstream's termination conditions on the NodeClaim (Drained, VolumesDetached,
    InstanceTerminating), written only when they change; nothing without a claim."""

    def __init__(self, cluster, claim: NodeClaim | None) -> None:
        self.cluster, self.claim = cluster, claim

    def set(self, condition: Condition, unless_true: bool = False) -> None:
        if self.claim is None:
            return
        current = self.claim.condition(condition.type) or {}
        if current.get("status") == condition.status and current.get("reason") == condition.reason:
            return
        if unless_true and current.get("status") == "True":
            return
        try:
            self.cluster.set_conditions("NodeClaim", self.claim.name, [condition])
        except ClusterError as exc:
            if not exc.not_found:
                raise
        self.claim.set_condition(condition.type, condition.status, condition.reason, condition.message)


def _let_go(cluster, node: Node) -> bool:
    cluster.remove_node_finalizer(node.name, TERMINATION_FINALIZER)
    node.delete()
    return True


def _node_ready(obj: dict) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (obj.get("status") or {}).get("conditions") or [])


def finalize_node(cloud, cluster, node: Node, mode: str, now) -> PendingDecision | None:
    """A deleted Node (say `kubectl delete node`) whose claim is not being finalized yet: as
    upstream, its NodeClaim is deleted (so its instance goes too) and the Node terminated."""
    claim = node.node_claim if node.node_claim_id and PROVISIONER_LABEL in (node.node_claim.labels or {}) else None
    decision = PendingDecision(
        kind=Decision.Kind.TERMINATE, subject=f"node {node.name}", mode=mode, node_pool=node.node_pool,
        reservation=node.reservation, details={"name": node.name, "nodeClaim": claim.name if claim else ""},
        reason=f"node {node.name} was deleted: draining it"
               + (f", deleting NodeClaim {claim.name} (and so its instance)" if claim else "")
               + " and then removing its finalizer")
    if mode != Mode.CONTROL:
        return decision
    try:
        deadline = None
        if claim is not None:
            cluster.delete_nodeclaim(claim.name)
            NodeClaim.objects.filter(pk=claim.pk, deleting_since__isnull=True).update(deleting_since=now)
            deadline = T.termination_time(ensure_termination_timestamp(cluster, cluster.get_nodeclaim(claim.name)))
        if not terminate_node(cloud, cluster, node, claim, deadline, now):
            return None
    except (ClusterError, CloudAPIError) as exc:
        if not getattr(exc, "not_found", False):
            decision.outcome, decision.error = Decision.Outcome.FAILED, str(exc)
            return decision
    decision.outcome = Decision.Outcome.ACTED
    return decision


def disrupt(cloud, cluster, node: Node | None, claim: NodeClaim | None = None, now=None, forceful: bool = False) -> str:
    """Disrupting a node, for interruptions, Capacity Block drains, expiry, drift and consolidation:
    as upstream, its NodeClaim is deleted and termination does the rest (drain, volumes, instance),
    pass after pass until it is done; the first pass runs now. A Node without a claim of karpweb's
    is deleted (karpweb's finalizer, if it carries it, drains it). Returns "" when the termination
    is under way or done, else why not. `forceful` (a failed EC2 status check): the claim's
    termination time is now, as upstream's ForcefulTermination annotates it. The simulated world
    (no API server, no finalizers) drains and deletes at once."""
    now = now or timezone.now()
    claim = claim or (node.node_claim if node is not None and node.node_claim_id else None)
    if not is_kubernetes():
        return _terminate_at_once(cloud, cluster, node, claim)
    if claim is not None and PROVISIONER_LABEL in (claim.labels or {}):
        if forceful:
            cluster.annotate_nodeclaim(claim.name, T.TERMINATION_TIMESTAMP, format_time(now.replace(microsecond=0)))
        delete_claim(cluster, claim, now)
        claim.refresh_from_db()
        failed = finalize(cloud, cluster, claim, Mode.CONTROL, now)
        return failed.error if failed is not None and failed.outcome == Decision.Outcome.FAILED else ""
    if node is None:
        return f"NodeClaim {claim.name} is not karpweb's: left to its controller" if claim else "nothing to disrupt"
    finalizers = (cluster.get("Node", node.name).get("metadata") or {}).get("finalizers") or []
    if TERMINATION_FINALIZER not in finalizers:  # deleting it would drop its pods undrained
        return f"node {node.name} has no NodeClaim of karpweb's and no {TERMINATION_FINALIZER} finalizer: left alone"
    cluster.delete_node(node.name)
    Node.objects.filter(pk=node.pk, deleting_since__isnull=True).update(deleting_since=now)
    node.refresh_from_db()
    terminate_node(cloud, cluster, node, None, None, now)
    return ""


def _terminate_at_once(cloud, cluster, node: Node | None, claim: NodeClaim | None) -> str:
    if node is not None:
        drained = cluster.drain(node.name)
        if not drained.drained:
            return drained.summary()
        if launched_by_karpweb(node):
            cloud.terminate([node.instance_id])
        cluster.delete_node(node.name)
    elif claim is not None and claim.instance_id and PROVISIONER_LABEL in (claim.labels or {}):
        cloud.terminate([claim.instance_id])
    if claim is not None:
        cluster.delete_nodeclaim(claim.name)
    return ""


def _alive(cloud, instance_id: str) -> bool:
    """Still there for EC2's purposes (AWS lists terminated instances for a while; they are gone)."""
    try:
        found = cloud.describe_instances([instance_id])
    except CloudAPIError as exc:
        if "NotFound" in exc.code:
            return False
        raise
    return any(m.state in ("pending", "running", "stopping", "stopped", "shutting-down") for m in found)


def register(cluster, claim: NodeClaim, node: Node, now) -> None:
    pool = claim.node_pool
    taints = [*(pool.taints or []), *(pool.startup_taints or [])] if pool else []
    cluster.register_node(node.name, cluster.get_nodeclaim(claim.name), taints)
    registered = [Condition("Registered", "True", "Registered", ""),
                  Condition("Initialized", "Unknown", "NodeNotReady", f"node {node.name} registered; waiting for it to be ready")]
    cluster.set_conditions("NodeClaim", claim.name, registered, status_fields={"nodeName": node.name})
    claim.node_name, claim.registered_at, claim.initialized_at = node.name, now, None  # (registered again: anew)
    for condition in registered:
        claim.set_condition(condition.type, condition.status, condition.reason, condition.message, now=now)
    claim.save(update_fields=["node_name", "registered_at", "initialized_at", "conditions"])


def not_initialized(claim: NodeClaim, node: Node) -> tuple[str, str] | None:
    """(reason, message) while the node is not initialized, upstream's reasons; None once it is."""
    if not node.ready:
        return "NodeNotReady", f"node {node.name} is not Ready"
    taints = {t.get("key") for t in node.taints or []}
    startup = sorted(taints & {t.get("key") for t in (claim.node_pool.startup_taints or [])} if claim.node_pool else set())
    if startup:
        return "StartupTaintsExist", f"node {node.name} still has startup taint {', '.join(startup)}"
    ephemeral = sorted(k for k in taints if k in EPHEMERAL_TAINTS or (k or "").startswith("readiness.k8s.io/"))
    if ephemeral:
        return "KnownEphemeralTaintsExist", f"node {node.name} still has taint {', '.join(ephemeral)}"
    missing = sorted(name for name, amount in (claim.resources or {}).items()
                     if "/" in name and str(amount) not in ("0", "") and not (node.allocatable_extended or {}).get(name))
    if missing:
        return "ResourceNotRegistered", f"node {node.name} does not offer {', '.join(missing)} yet"
    return None


def initialize(cluster, claim: NodeClaim, node: Node, now) -> int:
    waiting = not_initialized(claim, node)
    condition = Condition("Initialized", "False" if waiting else "True", *(waiting or ("Initialized", "")))
    if waiting and claim.condition("Initialized") and claim.condition("Initialized").get("reason") == waiting[0]:
        return 0
    if not waiting:
        cluster.label_node(node.name, INITIALIZED_LABEL, "true")
    cluster.set_conditions("NodeClaim", claim.name, [condition])
    claim.set_condition(condition.type, condition.status, condition.reason, condition.message, now=now)
    if not waiting:
        claim.initialized_at = now
    claim.save(update_fields=["conditions", "initialized_at"])
    return 0 if waiting else 1


def registration_timeout(cloud, cluster, claim: NodeClaim, mode: str, ttl, now) -> PendingDecision:
    """upstream liveness: no Node within the TTL after the launch: the NodeClaim is deleted (its
    finalizer terminates the instance) and the NodePool's registration health hears of it."""
    instance = claim.instance_id
    minutes = int(ttl.total_seconds() // 60)
    decision = PendingDecision(
        kind=Decision.Kind.REGISTRATION_TIMEOUT, subject=f"NodeClaim {claim.name}", mode=mode, node_pool=claim.node_pool,
        reservation=claim.reservation, details={"name": claim.name, "instanceID": instance},
        reason=(f"NodeClaim {claim.name} ({claim.instance_type} {claim.capacity_type} in {claim.zone}) launched instance "
                f"{instance} at {claim.launched_at:%Y-%m-%d %H:%M:%S} UTC, but no node registered for it within {minutes} "
                "minutes: deleting the NodeClaim and terminating the instance"))

    def give_up():
        delete_claim(cluster, claim, now)
        registration_health.record_result(cluster, claim.node_pool, False, now)

    return act_in_control_mode(decision, mode, give_up)


def collect_instances(cloud, now=None, cluster=None) -> dict:
    """Terminate instances karpweb launched that no NodeClaim holds, stopped ones too, and delete
    their Nodes, so that their pods are planned elsewhere at once (aws/karpenter-provider-aws
    pkg/controllers/nodeclaim/garbagecollection). Control mode only: a recommendation otherwise."""
    now = now or timezone.now()
    from scheduling.adapters.ec2.launch import MANAGED_TAG

    grace = datetime.timedelta(seconds=settings.KARPWEB_INSTANCE_GC_GRACE_SECONDS)
    held = set(NodeClaim.objects.exclude(provider_id="").values_list("provider_id", flat=True))
    held_names = set(NodeClaim.objects.values_list("name", flat=True))
    orphans = [i for i in cloud.describe_instances(tags={MANAGED_TAG: "true"})
               if i.state in ORPHAN_STATES and f"aws:///{i.zone}/{i.instance_id}" not in held
               and i.tags.get("karpweb.io/nodeclaim") not in held_names
               and (i.launch_time is None or now - i.launch_time >= grace)]
    mode = global_mode()
    orphan_nodes = nodes_of_instances([i.instance_id for i in orphans])
    decisions = []
    for i in orphans:
        node = orphan_nodes.get(i.instance_id)
        decisions.append(PendingDecision(
            kind=Decision.Kind.GARBAGE_COLLECT, subject=f"instance {i.instance_id}", mode=mode,
            outcome=Decision.Outcome.ACTED if mode == Mode.CONTROL else Decision.Outcome.RECOMMENDED,
            details={"instanceID": i.instance_id, "nodeClaim": i.tags.get("karpweb.io/nodeclaim", ""),
                     "state": i.state, "node": node.name if node else ""},
            reason=(f"instance {i.instance_id} ({i.instance_type} in {i.zone}, {i.state}) was launched by karpweb for "
                    f"NodeClaim {i.tags.get('karpweb.io/nodeclaim') or '(unknown)'}, which no longer exists: terminating it"
                    + (f" and deleting its node {node.name}" if node else ""))))
    if orphans and mode == Mode.CONTROL:
        cloud.terminate([i.instance_id for i in orphans])
        for decision in decisions:
            decision_node = decision.details["node"]
            if decision_node and getattr(cluster, "delete_node", None) is not None:
                try:
                    cluster.delete_node(decision_node)
                except ClusterError as exc:
                    decision.outcome, decision.error = Decision.Outcome.FAILED, str(exc)
    record(decisions, now)
    return {"orphan_instances": len(orphans)}


def nodes_of_instances(instance_ids: list[str]) -> dict[str, Node]:
    if not instance_ids:
        return {}
    found = Q()
    for instance in instance_ids:
        found |= Q(provider_id__endswith=f"/{instance}")
    return {n.instance_id: n for n in Node.objects.filter(found)}


def handle_interruptions(queue, cloud, cluster, now=None, max_messages: int = 10) -> dict:
    """One receive from the interruption queue. Each message is acted on (its NodeClaims deleted:
    termination then goes on pass after pass until the instance is gone), then deleted; a message
    that means nothing karpweb knows is logged, counted and deleted. A worker killed before the
    delete leaves the message visible again: acting twice is harmless (deleting a claim twice is;
    a decision already recorded is not repeated). A queue karpweb cannot read (missing, access
    denied) is counted and recorded as a status decision, and never stops the run that called it.
    The queue is not read at all while control is refused (Karpenter runs in the cluster, or
    karpweb has not checked yet): observing takes nothing off a queue Karpenter may be reading. In
    observe mode with no Karpenter, messages are read and recorded as recommendations."""
    now = now or timezone.now()
    counts = {"messages": 0, "interrupted_nodes": 0, "unknown_messages": 0}
    if control_refusal():  # a received message is hidden from every other reader: Karpenter's too
        return {**counts, "queue_not_read": 1}
    try:
        messages = queue.receive(max_messages)
    except CloudAPIError as exc:
        return {**counts, "queue_error": queue_error(exc, now)}
    for message in messages:
        counts["messages"] += 1
        meaning = interruptions.parse(message.body)
        if isinstance(meaning, interruptions.Unknown):
            log.warning("interruption queue: deleting a message karpweb cannot use (%s): %.200s", meaning.reason, message.body)
            counts["unknown_messages"] += 1
            count_message("unknown")
        elif meaning is None:
            count_message("ignored")
        else:
            counts["interrupted_nodes"] += act_on(meaning, cloud, cluster, now)
            count_message(meaning.kind)
        try:
            queue.delete(message)
        except CloudAPIError as exc:
            return {**counts, "queue_error": queue_error(exc, now)}
    return counts


def handle_instance_status(cloud, cluster, now=None) -> dict:
    """Upstream's instance-status controller: instances with an EC2 instance or system check failed
    for 2 minutes have their NodeClaims deleted forcefully (termination time now: pods deleted,
    PDBs notwithstanding, volumes not waited for); a scheduled event drains them. Only instances
    of this cluster's claims or nodes are acted on. A missing ec2:DescribeInstanceStatus
    permission is logged and skipped, as upstream."""
    now = now or timezone.now()
    try:
        statuses = cloud.instance_statuses()
    except CloudAPIError as exc:
        EventCount.bump(STATUS_ERRORS, exc.code or "unknown")
        log.warning("DescribeInstanceStatus failed (%s): %s; instance status checks are not handled", exc.code, exc)
        return {"instance_status_error": exc.code or "unknown"}
    acted = 0
    for event in interruptions.status_check_failures(statuses, now):
        done = act_on(event, cloud, cluster, now)
        if done:
            count_message(event.kind)
        acted += done
    return {"unhealthy_instances": acted}


STATUS_ERRORS = "instance_status_errors"  # EventCount name, label = the error code
QUEUE_SUBJECT = "interruption queue"


def queue_error(exc: CloudAPIError, now) -> str:
    """Counted by code (karpweb_interruption_queue_errors) and recorded as a failed status decision
    when it is news (not the same error as the last one within the hour)."""
    EventCount.bump(QUEUE_ERRORS, exc.code or "unknown")
    reason = f"the interruption queue cannot be read ({exc.code}): {exc}; interruptions are not handled until it can"
    last = Decision.objects.filter(subject=QUEUE_SUBJECT, kind=Decision.Kind.STATUS,
                                   created_at__gte=now - REPEAT_WINDOW).order_by("-created_at").first()
    if last is None or last.reason != reason:
        Decision.objects.create(created_at=now, kind=Decision.Kind.STATUS, outcome=Decision.Outcome.FAILED,
                                mode=global_mode(), subject=QUEUE_SUBJECT, reason=reason, error=str(exc))
    log.warning("%s", reason)
    return exc.code or "unknown"


def launched_by_karpweb(node: Node) -> bool:
    claim = node.node_claim
    return bool(claim is not None and PROVISIONER_LABEL in (claim.labels or {}) and node.instance_id)


def count_message(result: str) -> None:
    EventCount.bump(INTERRUPTION_MESSAGES, result)


def act_on(event: interruptions.Interruption, cloud, cluster, now) -> int:
    """Upstream's interruption controller: the NodeClaims of the instances (looked up by instance
    id, so claims whose Node has not registered are included) are deleted, and termination drains
    their nodes. Spot pools are marked unavailable first, reclaimed reservations last."""
    targets = interrupted(event.instance_ids)
    if event.kind == interruptions.SPOT_INTERRUPTED:
        for node, claim in targets:  # upstream: the spot pool is unavailable for a while; karpweb plans elsewhere
            where = node or claim
            Offering.objects.filter(instance_type__name=where.instance_type, zone=where.zone, capacity_type=SPOT,
                                    reservation__isnull=True).update(available=False)
    refusal = control_refusal()
    decisions, acted = [], 0
    for node, claim in targets:
        where = node or claim
        mode = effective_mode(where.node_pool, refusal)
        subject = f"node {node.name}" if node is not None else f"NodeClaim {claim.name}"
        decision = PendingDecision(
            kind=Decision.Kind.INTERRUPTION, subject=subject, mode=mode, node_pool=where.node_pool,
            reservation=where.reservation, details={"kind": event.kind, "instanceIDs": list(event.instance_ids)},
            reason=(f"{subject} ({where.instance_type} {where.capacity_type} in {where.zone}): {event.detail}"
                    + (": cordoning and draining it now (its NodeClaim is deleted); its pods are planned again, "
                       "reserved capacity first"
                       if event.drains else "; recorded only (Karpenter does not drain on a rebalance recommendation)")))
        if not event.drains:
            decision.outcome = Decision.Outcome.ACTED if mode == Mode.CONTROL else Decision.Outcome.RECOMMENDED
        elif mode == Mode.CONTROL:
            # The same message again (its consumer died before deleting it): termination goes on,
            # the action is not counted or recorded a second time.
            again = Decision.objects.filter(subject=decision.subject, kind=Decision.Kind.INTERRUPTION,
                                            outcome=Decision.Outcome.ACTED, created_at__gte=now - REPEAT_WINDOW).exists()
            try:
                problem = disrupt(cloud, cluster, node, claim, now, forceful=event.forceful)
            except (ClusterError, CloudAPIError) as exc:
                problem = "" if getattr(exc, "not_found", False) else str(exc)  # a claim already gone: no error
            if problem and is_kubernetes():
                decision.outcome, decision.error = Decision.Outcome.FAILED, problem
                decisions.append(decision)
                continue
            if again:
                continue
            decision.outcome = Decision.Outcome.ACTED
            acted += 1
        decisions.append(decision)
    if event.kind == interruptions.RESERVATION_INTERRUPTED:
        # After the terminations: a unit an instance leaves in a reclaimed reservation is not free. EC2's
        # warning names only the instance (as upstream, the reservation is the one its NodeClaim runs in).
        reclaimed = {event.reservation_id} if event.reservation_id else {
            (node or claim).reservation.reservation_id for node, claim in targets if (node or claim).reservation_id}
        mark_unavailable(sorted(reclaimed))
    if not targets:
        log.info("interruption for %s: no node or NodeClaim of this cluster runs there", ", ".join(event.instance_ids))
    record(decisions, now)
    return acted


def interrupted(instance_ids) -> list[tuple[Node | None, NodeClaim | None]]:
    """(node, claim) per instance: a claim with no Node yet, a Node with no claim, or both."""
    providers = Q()
    for instance in instance_ids:
        providers |= Q(provider_id__endswith=f"/{instance}")
    if not instance_ids:
        return []
    nodes = list(Node.objects.filter(providers).select_related("node_pool", "reservation", "node_claim"))
    claimed = {node.node_claim_id for node in nodes if node.node_claim_id}
    by_provider = {node.provider_id: node for node in nodes}
    targets = [(node, node.node_claim if node.node_claim_id else None) for node in nodes]
    for claim in NodeClaim.objects.filter(providers).exclude(pk__in=claimed).select_related("node_pool", "reservation"):
        node = by_provider.get(claim.provider_id)
        if node is not None:  # the Node is not linked to it yet
            targets[targets.index((node, None))] = (node, claim)
        else:
            targets.append((None, claim))
    return targets
