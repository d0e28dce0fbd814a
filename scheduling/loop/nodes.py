"""After the launch, for the NodeClaims karpweb created (kubernetes-sigs/karpenter
`pkg/controllers/nodeclaim/lifecycle/`;
interruptions as aws/karpenter-provider-aws `pkg/controllers/interruption/`):

* **Registration**: the Node whose providerID is the claim's gets the claim's labels, annotations
  and taints, loses ``karpenter.sh/unregistered`` and gains ``karpenter.sh/registered=true``; the
  claim becomes ``Registered`` with ``status.nodeName``.
* **Initialization**: once the Node is Ready, without startup taints or known ephemeral taints and
  with the claim's requested resources allocatable, the claim becomes ``Initialized`` and the Node
  gains ``karpenter.sh/initialized=true``; until then the condition says what it waits for.
* **Registration again**: a Node the kubelet registered anew (deleted while its claim stayed
  Registered) still carries ``karpenter.sh/unregistered``: it is registered again, as the first time.
* **Registration TTL**: a launched claim whose Node has not registered within
  ``KARPWEB_REGISTRATION_TTL_MINUTES`` is deleted (its finalizer terminates the instance), as a
  decision; registrations and timeouts feed the NodePool's ``NodeRegistrationHealthy``
  (registration_health.py). A claim not launched within 5 minutes is deleted by provisioning.py.
* **Claim garbage collection**: a registered claim whose instance EC2 no longer lists, with its
  Node absent or not Ready, is deleted (kept while the Node is Ready): otherwise it would be
  in-flight capacity for its pods forever.
* **Termination**: a deleted claim (held by the ``karpenter.sh/termination`` finalizer karpweb puts on
  its claims) has its node drained and its instance terminated; the finalizer goes last.
* **Instance garbage collection**: an instance karpweb tagged (``karpweb.io/managed``), running or
  stopped, that no NodeClaim holds, older than ``KARPWEB_INSTANCE_GC_GRACE_SECONDS``, is terminated
  and its Node deleted. Instances other tools launched never carry that tag and are never touched.
* **Interruptions** from ``KARPWEB_INTERRUPTION_QUEUE`` (SQS, fed by EventBridge): the affected nodes
  are cordoned and drained at once (their pods are planned again by the next provisioning run,
  reserved first), spot pools and reclaimed reservations are marked unavailable; the message is
  deleted only after it was acted on. Rebalance recommendations are decisions, nothing more.

Observe mode acts on none of it: each would-be action is a recommendation."""

from __future__ import annotations

import datetime
import logging

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

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
    deleting = NodeClaim.objects.filter(labels__has_key=PROVISIONER_LABEL, deleting_since__isnull=False) \
        .select_related("node_pool", "reservation")
    for claim in deleting:
        decision = finalize(cloud, cluster, claim, effective_mode(claim.node_pool, refusal))
        if decision is not None:
            decisions.append(decision)
            counts["terminated"] += decision.outcome == Decision.Outcome.ACTED
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
    cluster.delete_nodeclaim(claim.name)
    claim.deleting_since = now
    NodeClaim.objects.filter(pk=claim.pk).update(deleting_since=now)  # (a simulated cluster deleted the row)


def collect_claim(cluster, claim: NodeClaim, node: Node | None, mode: str, now) -> PendingDecision:
    """kubernetes-sigs/karpenter pkg/controllers/nodeclaim/garbagecollection: a registered claim whose
    instance is gone, with its Node absent or not Ready, is deleted (it would be capacity forever)."""
    where = f"its node {node.name} is not Ready" if node is not None else "its node is gone"
    decision = PendingDecision(
        kind=Decision.Kind.GARBAGE_COLLECT, subject=f"NodeClaim {claim.name}", mode=mode, node_pool=claim.node_pool,
        details={"name": claim.name, "instanceID": claim.instance_id, "node": node.name if node else ""},
        reason=(f"NodeClaim {claim.name}: EC2 no longer lists its instance {claim.instance_id} and {where}: "
                "deleting the NodeClaim, so that its pods are planned onto a new node"))
    return _act(decision, mode, lambda: delete_claim(cluster, claim, now))


def _act(decision: PendingDecision, mode: str, action) -> PendingDecision:
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


def finalize(cloud, cluster, claim: NodeClaim, mode: str) -> PendingDecision | None:
    """A claim of karpweb's is being deleted: drain its node (PodDisruptionBudgets honoured), terminate
    its instance, and only once the instance is gone remove the finalizer. Each step is retried on
    the next pass until it is done; None while waiting."""
    instance = claim.instance_id
    decision = PendingDecision(
        kind=Decision.Kind.TERMINATE, subject=f"NodeClaim {claim.name}", mode=mode, node_pool=claim.node_pool,
        reservation=claim.reservation, details={"name": claim.name, "instanceID": instance},
        reason=f"NodeClaim {claim.name} was deleted: draining its node"
               + (f", terminating instance {instance}" if instance else "") + " and then removing its finalizer")
    if mode != Mode.CONTROL:
        return decision
    node = Node.objects.filter(Q(provider_id=claim.provider_id) if claim.provider_id else Q(name=claim.node_name or "-")).first()
    try:
        if node is not None:
            drained = cluster.drain(node.name, force=False, delete=True)
            if not drained.drained:
                return None  # PodDisruptionBudgets or do-not-disrupt pods: the next pass goes on
        if instance and _alive(cloud, instance):
            cloud.terminate([instance])
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

    return _act(decision, mode, give_up)


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
    """One receive from the interruption queue. Each message is acted on, then deleted; a message
    that means nothing karpweb knows is logged, counted and deleted. A worker killed before the
    delete leaves the message visible again: acting twice is harmless (cordon and drain are
    idempotent; a decision already recorded is not repeated)."""
    now = now or timezone.now()
    counts = {"messages": 0, "interrupted_nodes": 0, "unknown_messages": 0}
    for message in queue.receive(max_messages):
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
        queue.delete(message)
    return counts


def launched_by_karpweb(node: Node) -> bool:
    claim = node.node_claim
    return bool(claim is not None and PROVISIONER_LABEL in (claim.labels or {}) and node.instance_id)


def count_message(result: str) -> None:
    EventCount.bump(INTERRUPTION_MESSAGES, result)


def act_on(event: interruptions.Interruption, cloud, cluster, now) -> int:
    providers = Q()
    for instance in event.instance_ids:
        providers |= Q(provider_id__endswith=f"/{instance}")
    nodes = list(Node.objects.filter(providers).select_related("node_pool", "reservation", "node_claim"))
    if event.kind == interruptions.SPOT_INTERRUPTED:
        for node in nodes:  # upstream: the spot pool is unavailable for a while; karpweb plans elsewhere
            Offering.objects.filter(instance_type__name=node.instance_type, zone=node.zone, capacity_type=SPOT,
                                    reservation__isnull=True).update(available=False)
    if event.kind == interruptions.RESERVATION_INTERRUPTED and event.reservation_id:
        mark_unavailable([event.reservation_id])
    refusal = control_refusal()
    decisions, acted = [], 0
    for node in nodes:
        mode = effective_mode(node.node_pool, refusal)
        decision = PendingDecision(
            kind=Decision.Kind.INTERRUPTION, subject=f"node {node.name}", mode=mode, node_pool=node.node_pool,
            reservation=node.reservation, details={"kind": event.kind, "instanceIDs": list(event.instance_ids)},
            reason=(f"node {node.name} ({node.instance_type} {node.capacity_type} in {node.zone}): {event.detail}"
                    + (": cordoning and draining it now; its pods are planned again, reserved capacity first"
                       if event.drains else "; recorded only (Karpenter does not drain on a rebalance recommendation)")))
        if not event.drains:
            decision.outcome = Decision.Outcome.ACTED if mode == Mode.CONTROL else Decision.Outcome.RECOMMENDED
        elif mode == Mode.CONTROL:
            # The same message again (its consumer died before deleting it): the drain goes on, the
            # action is not counted or recorded a second time.
            again = Decision.objects.filter(subject=decision.subject, kind=Decision.Kind.INTERRUPTION,
                                            outcome=Decision.Outcome.ACTED, created_at__gte=now - REPEAT_WINDOW).exists()
            try:
                drained = cluster.drain(node.name, force=False, delete=True)
            except ClusterError as exc:
                if not exc.not_found:
                    decision.outcome, decision.error = Decision.Outcome.FAILED, str(exc)
                    decisions.append(decision)
                    continue
                drained = None  # drained and deleted already
            if drained is not None and drained.drained and launched_by_karpweb(node):
                cloud.terminate([node.instance_id])  # as upstream deletes the NodeClaim: the instance goes too
            if again:
                continue
            decision.outcome = Decision.Outcome.ACTED
            acted += 1
        decisions.append(decision)
    if not nodes:
        log.info("interruption for %s: no node of this cluster runs there", ", ".join(event.instance_ids))
    record(decisions, now)
    return acted
