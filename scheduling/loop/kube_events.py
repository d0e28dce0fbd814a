"""Which Kubernetes Events karpweb writes, and when (scheduling/adapters/kube/events.py writes them).

Only for what karpweb does in control mode (a pool whose effective mode is control): in observe
mode karpweb changes nothing in the cluster, Events included; its recommendations are in the
decision log. Like Karpenter's recorder (pkg/events/recorder.go), an event is not written again for
the same object and reason within its dedupe window (2 minutes, 15 for Unconsolidatable); the
window is kept in the shared cache (`cache.add`), so of several workers one writes it. Nominated
events are also rate-limited per process (upstream's token bucket: 5 a second, bursts of 10)."""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Iterable
from types import SimpleNamespace

from django.core.cache import cache
from django.db.models import Q
from django.utils import timezone

from fleet.scope import working_cluster
from scheduling.adapters.kube import events as E
from scheduling.engine.cluster import do_not_disrupt_active
from scheduling.engine.consolidation import DO_NOT_DISRUPT, do_not_disrupt
from scheduling.engine.world import TERMINAL_PHASES, parse_world
from scheduling.models import KubeObject, Mode, Node, NodePool, Pod
from scheduling.modes import control_refusal, effective_mode

WHEN_EMPTY = "WhenEmpty"
NEVER = "Never"
# The engine's disruption reasons as upstream names them in "Disrupting Node: <reason>".
UPSTREAM_REASON = {"empty": "Empty", "multi": "Underutilized", "single": "Underutilized", "drift": "Drifted"}


class TokenBucket:
    """flowcontrol.NewTokenBucketRateLimiter(qps, burst): `take()` is False once the bucket is empty."""

    def __init__(self, rate: float, burst: int, clock=time.monotonic):
        self.rate, self.burst, self.clock = rate, burst, clock
        self.tokens, self.at = float(burst), clock()
        self.lock = threading.Lock()

    def take(self) -> bool:
        with self.lock:
            now = self.clock()
            self.tokens = min(self.burst, self.tokens + (now - self.at) * self.rate)
            self.at = now
            if self.tokens < 1:
                return False
            self.tokens -= 1
            return True


NOMINATIONS = TokenBucket(rate=5, burst=10)


def _first_time(event: E.Event) -> bool:
    key = f"{working_cluster().name}|{event.dedupe_key()}"
    digest = hashlib.sha256(key.encode()).hexdigest()[:40]
    return cache.add(f"karpweb:kube-event:{digest}", 1, timeout=event.dedupe_timeout.total_seconds())


def keeps_events(cluster) -> bool:
    return getattr(cluster, "keeps_events", True)  # the simulated world's cluster keeps none


def publish(cluster, events: Iterable[E.Event]) -> int:
    """Write the events not written within their dedupe window; returns how many were written."""
    if not keeps_events(cluster):
        return 0
    fresh = [e for e in events if _first_time(e) and (e.reason != E.NOMINATED or NOMINATIONS.take())]
    return cluster.create_events(fresh) if fresh else 0


# --- what karpweb did ---------------------------------------------------------------------------

def _pod_refs(keys: Iterable[str]) -> dict[str, E.ObjectRef]:
    """"namespace/name" -> the pod's reference with its UID (one query)."""
    wanted = {tuple(key.split("/", 1)) for key in keys if "/" in key}
    if not wanted:
        return {}
    rows = Pod.objects.filter(name__in={name for _, name in wanted}).values_list("namespace", "name", "uid")
    return {f"{ns}/{name}": E.pod_ref(ns, name, uid) for ns, name, uid in rows if (ns, name) in wanted}


def launch_events(claim: dict, row, result) -> list[E.Event]:
    """A NodeClaim karpweb launched: its pods are nominated to it (upstream's Nominated), and a launch
    into a reservation says which (karpweb's LaunchedIntoReservation)."""
    refs = _pod_refs(claim.get("pods") or [])
    found = [E.nominated(refs[key], nodeclaim=row.name) for key in claim.get("pods") or [] if key in refs]
    reservation_id = getattr(result, "reservation_id", None)
    if reservation_id:
        found.append(E.launched_into_reservation(E.nodeclaim_ref(row.name, row.uid), reservation_id, row.instance_type,
                                                 row.zone))
    return found


def binding_events(bindings: list[dict]) -> list[E.Event]:
    """Pods the plan places on nodes that exist (Karpenter nominates them to those nodes)."""
    refs = _pod_refs(b["pod"] for b in bindings)
    return [E.nominated(refs[b["pod"]], node=b["node"]) for b in bindings if b["pod"] in refs]


def _refs(node) -> tuple[E.ObjectRef, E.ObjectRef | None]:
    claim = node.node_claim
    return E.node_ref(node.name, node.uid), (E.nodeclaim_ref(claim.name, claim.uid) if claim is not None else None)


def disruption_events(disruption: dict, members: list) -> list[E.Event]:
    """Nodes karpweb is disrupting: upstream's DisruptionTerminating, or, for a Capacity Block about to
    end, karpweb's CapacityBlockDraining. A static NodePool's scale-down writes none (upstream's static
    deprovisioning deletes the NodeClaims without a disruption event)."""
    if disruption["reason"] == "static":
        return []
    found = []
    for node in members:
        node_ref, claim_ref = _refs(node)
        if disruption["reason"] == "capacity-block-expiring":
            block = node.reservation
            found += E.capacity_block_draining(node_ref, claim_ref, block.reservation_id if block else "",
                                               block.end_date if block else None)
        else:
            kind = "drift" if disruption["reason"] == "drift" else disruption.get("consolidationType", "single")
            found += E.disruption_terminating(node_ref, claim_ref, UPSTREAM_REASON.get(kind, "Underutilized"))
    return found


# --- why karpweb leaves a node alone --------------------------------------------------------------

def pdb_blocked(nodes) -> dict[int, str]:
    """Node pk -> upstream's message (state/statenode.go ValidatePodsDisruptable) for the nodes whose evictable
    pods a PodDisruptionBudget allows no disruption now, or that more than one budget selects."""
    bodies = list(KubeObject.objects.filter(kind=KubeObject.Kind.POD_DISRUPTION_BUDGET).values_list("body", flat=True))
    if not bodies:
        return {}
    budgets = parse_world({"podDisruptionBudgets": bodies}).pod_disruption_budgets
    pods: dict[int, list] = {}
    for row in Pod.objects.filter(node__in=nodes, deleting_since__isnull=True).exclude(phase__in=TERMINAL_PHASES) \
            .exclude(owner_kind="DaemonSet").values("node_id", "namespace", "name", "labels"):
        pods.setdefault(row["node_id"], []).append(SimpleNamespace(
            namespace=row["namespace"], labels=row["labels"] or {}, daemon=False, key=f"{row['namespace']}/{row['name']}"))
    found = {}
    for node_id, on_node in pods.items():
        for pod in on_node:
            selecting = [b for b in budgets if b.selects(pod)]
            if len(selecting) > 1:
                found[node_id] = ("eviction does not support multiple PDBs (PodDisruptionBudget(s)="
                                  f"[{', '.join(b.key for b in selecting)}])")
                break
            if selecting and selecting[0].disruptions_allowed <= 0:
                found[node_id] = f"pdb prevents pod evictions (PodDisruptionBudget=[{selecting[0].key}])"
                break
    return found


def blocked_and_unconsolidatable() -> list[E.Event]:
    """For the nodes of karpweb's NodeClaims in control-mode NodePools, upstream's reasons a node is no
    disruption candidate (state/statenode.go: the do-not-disrupt annotation on the node or on one of
    its pods: DisruptionBlocked) or cannot be consolidated (disruption/consolidation.go: consolidation
    disabled, or WhenEmpty on a node that is not empty: Unconsolidatable). Reads only the nodes that
    may have such a reason, not the whole cluster, each lifecycle pass."""
    refusal = control_refusal()
    pools = {p.pk: p for p in NodePool.objects.all() if effective_mode(p, refusal) == Mode.CONTROL}
    if not pools:
        return []
    ours = Node.objects.filter(node_pool_id__in=list(pools), node_claim__isnull=False)
    blocking_pods = Pod.objects.filter(node__in=ours, annotations__has_key=DO_NOT_DISRUPT, deleting_since__isnull=True
                                       ).exclude(phase__in=TERMINAL_PHASES).order_by("namespace", "name")
    blocking = {}
    now = timezone.now()
    for pod in blocking_pods.only("namespace", "name", "annotations", "node_id", "started_at"):
        # The engine's rule: "true", or a duration still running since the pod started.
        if do_not_disrupt_active((pod.annotations or {}).get(DO_NOT_DISRUPT), pod.started_at, now):
            blocking.setdefault(pod.node_id, pod)
    blocking.update({pk: reason for pk, reason in pdb_blocked(ours).items() if pk not in blocking})
    restricted = [pk for pk, p in pools.items() if p.consolidate_after == NEVER or p.consolidation_policy == WHEN_EMPTY]
    busy = set(Pod.objects.filter(node__node_pool_id__in=restricted).exclude(phase__in=TERMINAL_PHASES)
               .exclude(owner_kind="DaemonSet").values_list("node_id", flat=True).distinct()) if restricted else set()
    nodes = ours.filter(Q(annotations__has_key=DO_NOT_DISRUPT) | Q(pk__in=list(blocking)) | Q(node_pool_id__in=restricted))
    found = []
    for node in nodes.select_related("node_claim").order_by("name"):
        pool, (node_ref, claim_ref) = pools[node.node_pool_id], _refs(node)
        if do_not_disrupt(node.annotations or {}):
            found += E.disruption_blocked(node_ref, claim_ref, f'disruption is blocked through the "{DO_NOT_DISRUPT}" annotation')
        elif node.pk in blocking and isinstance(blocking[node.pk], str):
            found += E.disruption_blocked(node_ref, claim_ref, blocking[node.pk])
        elif node.pk in blocking:
            pod = blocking[node.pk]
            found += E.disruption_blocked(node_ref, claim_ref, f'pod has "{DO_NOT_DISRUPT}" annotation (Pod={pod.namespace}/{pod.name})')
        elif pool.consolidate_after == NEVER:
            found += E.unconsolidatable(node_ref, claim_ref, f'NodePool "{pool.name}" has consolidation disabled')
        elif pool.consolidation_policy == WHEN_EMPTY and node.pk in busy:
            found += E.unconsolidatable(node_ref, claim_ref, f'NodePool "{pool.name}" has consolidation policy '
                                                             "WhenEmpty, but node is not empty")
    return found
