"""Which pods a node's drain waits for and in what order, as Karpenter's terminator decides it
(kubernetes-sigs/karpenter `pkg/controllers/node/termination/terminator/{terminator,eviction}.go`,
`pkg/utils/pod/scheduling.go`). Plain functions on pods as API dicts; the adapter does the calls.

- A pod is *waited for* unless it is terminal, a static (mirror) pod, tolerates the
  ``karpenter.sh/disrupted:NoSchedule`` taint, or has been terminating past its deadline plus a
  minute (its kubelet is gone).
- Waited-for pods are evicted by tier: non-critical pods, then non-critical DaemonSet pods, then
  critical ones (``system-cluster-critical`` / ``system-node-critical``), then critical DaemonSet
  pods; a tier is evicted only once every earlier tier is gone.
- Pods under an active ``karpenter.sh/do-not-disrupt`` are waited for but never evicted.
- With a termination time (the claim's ``karpenter.sh/nodeclaim-termination-timestamp``), a pod
  whose own grace period would outlast it is deleted (grace clamped to what is left, at least 1 s),
  PodDisruptionBudgets and do-not-disrupt notwithstanding, whatever its tier.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from scheduling.engine.cluster import do_not_disrupt_active as engine_do_not_disrupt_active
from scheduling.engine.timeutil import parse_optional_time, parse_time

from .interface import DISRUPTED_TAINT, DO_NOT_DISRUPT

TERMINATION_FINALIZER = "karpenter.sh/termination"
TERMINATION_TIMESTAMP = "karpenter.sh/nodeclaim-termination-timestamp"
EXCLUDE_LB_LABEL = "node.kubernetes.io/exclude-from-external-load-balancers"
CRITICAL_PRIORITY_CLASSES = ("system-cluster-critical", "system-node-critical")
MIRROR_POD_ANNOTATION = "kubernetes.io/config.mirror"
STUCK_TERMINATING_AFTER = timedelta(minutes=1)  # as Karpenter: past deletionTimestamp + 1 min, the kubelet is gone


def _meta(obj: dict) -> dict:
    return obj.get("metadata") or {}


def pod_key(pod: dict) -> str:
    return f"{_meta(pod).get('namespace', '')}/{_meta(pod).get('name', '')}"


def is_terminal(pod: dict) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def is_terminating(pod: dict) -> bool:
    return bool(_meta(pod).get("deletionTimestamp"))


def _owned_by(pod: dict, api_version: str, kind: str) -> bool:
    return any(ref.get("kind") == kind and ref.get("apiVersion", api_version) == api_version
               for ref in _meta(pod).get("ownerReferences") or [])


def is_static(pod: dict) -> bool:
    """A mirror pod: the kubelet owns it, the API server cannot delete it."""
    return MIRROR_POD_ANNOTATION in (_meta(pod).get("annotations") or {}) or _owned_by(pod, "v1", "Node")


def is_daemonset_pod(pod: dict) -> bool:
    return _owned_by(pod, "apps/v1", "DaemonSet")


def is_critical(pod: dict) -> bool:
    return (pod.get("spec") or {}).get("priorityClassName") in CRITICAL_PRIORITY_CLASSES


def is_stuck_terminating(pod: dict, now: datetime) -> bool:
    deleted = _meta(pod).get("deletionTimestamp")
    return bool(deleted) and now - parse_time(deleted) > STUCK_TERMINATING_AFTER


def tolerates_disrupted(pod: dict) -> bool:
    """Tolerates karpenter.sh/disrupted:NoSchedule (Kubernetes' toleration matching)."""
    for toleration in (pod.get("spec") or {}).get("tolerations") or []:
        key, operator = toleration.get("key") or "", toleration.get("operator") or "Equal"
        effect = toleration.get("effect") or ""
        if effect and effect != DISRUPTED_TAINT["effect"]:
            continue
        if key == "" and operator == "Exists":
            return True
        if key == DISRUPTED_TAINT["key"] and (operator == "Exists" or (toleration.get("value") or "") == ""):
            return True
    return False


def do_not_disrupt_active(pod: dict, now: datetime) -> bool:
    """``karpenter.sh/do-not-disrupt``: "true", or a duration counted from the pod's start (the
    engine's rule, scheduling/engine/cluster.py)."""
    return engine_do_not_disrupt_active((_meta(pod).get("annotations") or {}).get(DO_NOT_DISRUPT),
                                        parse_optional_time((pod.get("status") or {}).get("startTime")), now)


def is_waited_for(pod: dict, now: datetime) -> bool:
    """Upstream's IsWaitingEviction: the drain is not done while such a pod is on the node."""
    return not (is_terminal(pod) or tolerates_disrupted(pod) or is_stuck_terminating(pod, now) or is_static(pod))


def is_evictable(pod: dict, now: datetime) -> bool:
    """Upstream's IsEvictable: active and not under do-not-disrupt (the rest is is_waited_for)."""
    return not is_terminating(pod) and not do_not_disrupt_active(pod, now)


def needs_force_delete(pod: dict, termination_time: datetime | None, now: datetime) -> bool:
    """The pod's grace period would carry it past the node's termination time (or a deletion
    already under way ends after it)."""
    if termination_time is None:
        return False
    if is_terminating(pod):
        return parse_time(_meta(pod)["deletionTimestamp"]) > termination_time
    grace = (pod.get("spec") or {}).get("terminationGracePeriodSeconds")
    if grace is None:
        return False
    return now > termination_time - timedelta(seconds=int(grace))


def clamped_grace_seconds(termination_time: datetime, now: datetime) -> int:
    """What is left until the termination time, at least 1 s (0 would remove the pod from etcd
    before its containers stop)."""
    return max(int((termination_time - now).total_seconds()), 1)


def tiers(pods: list[dict]) -> list[list[dict]]:
    """Non-critical, non-critical DaemonSet, critical, critical DaemonSet (the kubelet's graceful
    node shutdown order)."""
    groups: list[list[dict]] = [[], [], [], []]
    for pod in pods:
        groups[2 * is_critical(pod) + is_daemonset_pod(pod)].append(pod)
    return groups


def termination_time(nodeclaim: dict | None) -> datetime | None:
    """The claim's karpenter.sh/nodeclaim-termination-timestamp (RFC 3339), if any."""
    if not nodeclaim:
        return None
    return parse_optional_time((_meta(nodeclaim).get("annotations") or {}).get(TERMINATION_TIMESTAMP))
