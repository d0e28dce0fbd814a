"""Recording Kubernetes failures in the decision log, in the operator's words.

The loop calls :func:`record_cluster_error` when an action fails (or :func:`mark_failed` when it
already created the Decision before acting), and :func:`record_drain` with each drain pass.
"""

from __future__ import annotations

from django.conf import settings

from .errors import ClusterError
from .interface import DrainResult


def _error_details(error: ClusterError) -> dict:
    details = {"status": error.status, "reason": error.reason, "verb": error.verb, "object": error.subject}
    if error.causes:
        details["causes"] = list(error.causes)
    return details


def record_cluster_error(error: ClusterError, *, kind: str, subject: str | None = None, reason: str | None = None,
                         mode: str | None = None, node_pool=None, reservation=None, details: dict | None = None,
                         objects_involved: dict | None = None):
    """A FAILED Decision whose ``error`` is the operator message (e.g. "NodeClaim default-abc:
    forbidden: karpweb's service account (karpweb/karpweb) may not create nodeclaims.karpenter.sh")."""
    from scheduling.models import Decision

    return Decision.objects.create(
        kind=kind,
        outcome=Decision.Outcome.FAILED,
        mode=mode or settings.KARPWEB_MODE,
        subject=(subject or error.subject or "cluster")[:255],
        reason=reason or error.message,
        node_pool=node_pool,
        reservation=reservation,
        objects_involved=objects_involved or {},
        details={**(details or {}), "kubernetes": _error_details(error)},
        error=error.message,
    )


def mark_failed(decision, error: ClusterError):
    """Turn a Decision the loop recorded before acting into a FAILED one carrying ``error``."""
    decision.outcome = type(decision).Outcome.FAILED
    decision.error = error.message
    decision.details = {**(decision.details or {}), "kubernetes": _error_details(error)}
    decision.save(update_fields=["outcome", "error", "details"])
    return decision


def record_drain(result: DrainResult, *, reason: str, mode: str | None = None, kind: str | None = None,
                 node_pool=None, reservation=None):
    """One drain pass as a Decision: ACTED when the node drained, FAILED when the
    API refused something, SKIPPED while PodDisruptionBudgets or do-not-disrupt pods hold it."""
    from scheduling.models import Decision

    if result.errors:
        outcome = Decision.Outcome.FAILED
    elif result.drained:
        outcome = Decision.Outcome.ACTED
    else:
        outcome = Decision.Outcome.SKIPPED
    return Decision.objects.create(
        kind=kind or Decision.Kind.DRAIN,
        outcome=outcome,
        mode=mode or settings.KARPWEB_MODE,
        subject=f"node {result.node}"[:255],
        reason=reason,
        node_pool=node_pool,
        reservation=reservation,
        objects_involved={"nodes": [result.node], "pods": sorted(set(result.evicted) | set(result.blocked))},
        details={
            "summary": result.summary(), "cordoned": result.cordoned, "evicted": result.evicted,
            "blocked": result.blocked, "remaining": result.remaining, "deleted_pods": result.deleted_pods,
            "errors": [_error_details(e) | {"message": e.message} for e in result.errors],
        },
        error="\n".join(e.message for e in result.errors),
    )
