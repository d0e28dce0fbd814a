"""The NodePool condition `NodeRegistrationHealthy`, as upstream keeps it
(kubernetes-sigs/karpenter `pkg/state/nodepoolhealth/tracker.go`, `pkg/controllers/nodeclaim/lifecycle`
registration.go and liveness.go, `pkg/controllers/nodepool/registrationhealth`):

* every NodeClaim that registers is a success, every one deleted for not launching or not
  registering in time a failure; the last 4 results are kept per NodePool;
* the condition turns False (reason `RegistrationFailed`, or the claim's launch failure) once half
  of those are failures, and True again once a success leaves fewer;
* a change to the NodePool's template or its EC2NodeClass's spec forgets the results and sets it
  Unknown (`AwaitingReconciliation`) until the next result.

Upstream keeps the results in memory; karpweb's steps run in separate processes, so they are kept
on the NodePool row (`registration_health`: the results and the fingerprint they were had under)."""

from __future__ import annotations

import hashlib
import json
import logging


from fleet.connection import is_kubernetes
from scheduling.adapters.kube.interface import ClusterError, Condition
from scheduling.models import NodePool

CONDITION = "NodeRegistrationHealthy"
BUFFER_SIZE = 4
THRESHOLD_FALSE = 0.5  # this share of failures among the last BUFFER_SIZE: unhealthy
HEALTHY, UNHEALTHY, UNKNOWN = "healthy", "unhealthy", "unknown"
log = logging.getLogger(__name__)


def status(results: list[bool]) -> str:
    if not results:
        return UNKNOWN
    failures = sum(1 for ok in results if not ok)
    return UNHEALTHY if failures / BUFFER_SIZE >= THRESHOLD_FALSE else HEALTHY


def fingerprint(pool: NodePool) -> str:
    """What a change to resets the results: the NodePool's template and its EC2NodeClass's spec
    (upstream: the NodePool's generation and the NodeClass's observed generation)."""
    node_class = pool.node_class
    template = {"requirements": pool.requirements, "taints": pool.taints, "startupTaints": pool.startup_taints,
                "labels": pool.labels, "nodeClassRef": pool.node_class_ref, "expireAfter": pool.expire_after,
                "nodeClass": node_class.spec if node_class is not None else None}
    return hashlib.sha256(json.dumps(template, sort_keys=True, default=str).encode()).hexdigest()[:16]


def record_result(cluster, pool: NodePool | None, success: bool, now, reason: str = "RegistrationFailed",
                  message: str = "Failed to register node") -> None:
    """One claim of `pool` registered (`success`) or was given up; the condition follows."""
    if pool is None:
        return
    pool.refresh_from_db(fields=["registration_health", "conditions"])
    health = _current(pool)
    results = (health["results"] + [success])[-BUFFER_SIZE:]
    current = pool.condition_status(CONDITION)
    if success and status(results) == HEALTHY and current != "True":
        _set(cluster, pool, Condition(CONDITION, "True", CONDITION, ""), now)
    elif not success and status(results) == UNHEALTHY and current != "False":
        _set(cluster, pool, Condition(CONDITION, "False", reason, message), now)
    pool.registration_health = {**health, "results": results}
    pool.save(update_fields=["registration_health", "conditions"])


def refresh(cluster, now) -> int:
    """NodePools without the condition, or whose template or EC2NodeClass changed since their
    results: Unknown, results forgotten. Returns how many changed."""
    changed = 0
    for pool in NodePool.objects.select_related("node_class").filter(node_class__isnull=False):  # (upstream: none without its class)
        stamp = fingerprint(pool)
        if pool.condition(CONDITION) and (pool.registration_health or {}).get("fingerprint") == stamp:
            continue
        _set(cluster, pool, Condition(CONDITION, "Unknown", "AwaitingReconciliation", "object is awaiting reconciliation"), now)
        pool.registration_health = {"fingerprint": stamp, "results": []}
        pool.save(update_fields=["registration_health", "conditions"])
        changed += 1
    return changed


def _current(pool: NodePool) -> dict:
    health = dict(pool.registration_health or {})
    if health.get("fingerprint") != fingerprint(pool):
        health = {"fingerprint": fingerprint(pool), "results": []}
    health.setdefault("results", [])
    return health


def _set(cluster, pool: NodePool, condition: Condition, now) -> None:
    pool.set_condition(condition.type, condition.status, condition.reason, condition.message, now=now)
    if is_kubernetes() and cluster is not None:
        try:
            cluster.set_conditions("NodePool", pool.name, [condition])
        except ClusterError as exc:  # the next change writes it again; a status write never fails a pass
            if not exc.not_found:  # (not found: a NodePool only the database has, a demo world's)
                log.warning("NodePool %s: could not write %s: %s", pool.name, CONDITION, exc)
