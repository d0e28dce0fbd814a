"""Taints and tolerations, with the Kubernetes scheduler's semantics.

Only `NoSchedule` and `NoExecute` taints keep a pod off a node; `PreferNoSchedule` is a
preference the scheduler may ignore, so it never makes a pod unschedulable here either.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

NO_SCHEDULE, PREFER_NO_SCHEDULE, NO_EXECUTE = "NoSchedule", "PreferNoSchedule", "NoExecute"
EFFECTS = (NO_SCHEDULE, PREFER_NO_SCHEDULE, NO_EXECUTE)
# The taint a cordoned node carries (`spec.unschedulable: true`).
UNSCHEDULABLE_TAINT_KEY = "node.kubernetes.io/unschedulable"


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str = ""
    effect: str = NO_SCHEDULE

    def __str__(self) -> str:
        return f"{self.key}={self.value}:{self.effect}" if self.value else f"{self.key}:{self.effect}"


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"  # Equal | Exists
    value: str = ""
    effect: str = ""  # empty matches every effect

    def tolerates(self, taint: Taint) -> bool:
        if self.effect and self.effect != taint.effect:
            return False
        if not self.key:
            # An empty key with Exists tolerates everything.
            return self.operator == "Exists"
        if self.key != taint.key:
            return False
        return self.operator == "Exists" or self.value == taint.value


def untolerated(taints: Iterable[Taint], tolerations: Iterable[Toleration]) -> Taint | None:
    """The first taint that keeps a pod with these tolerations off the node, or None."""
    tolerations = tuple(tolerations)
    for taint in taints:
        if taint.effect == PREFER_NO_SCHEDULE:
            continue
        if not any(t.tolerates(taint) for t in tolerations):
            return taint
    return None


# Taints a node carries while it comes up, which say nothing about the pods it will take
# (kubernetes-sigs/karpenter pkg/scheduling/taints.go KnownEphemeralTaints): (key, effect, value or None for any).
KNOWN_EPHEMERAL_TAINTS = (
    ("node.kubernetes.io/not-ready", NO_SCHEDULE, None),
    ("node.kubernetes.io/not-ready", NO_EXECUTE, None),
    ("node.kubernetes.io/unreachable", NO_SCHEDULE, None),
    ("node.cloudprovider.kubernetes.io/uninitialized", NO_SCHEDULE, "true"),
    ("karpenter.sh/unregistered", NO_EXECUTE, None),
)
KNOWN_EPHEMERAL_TAINT_PREFIXES = ("readiness.k8s.io/",)  # the Node Readiness Controller's taints


def is_known_ephemeral(key: str, effect: str, value: str = "") -> bool:
    if any(key.startswith(prefix) for prefix in KNOWN_EPHEMERAL_TAINT_PREFIXES):
        return True
    return any(key == k and effect == e and (v is None or (value or "") == v) for k, e, v in KNOWN_EPHEMERAL_TAINTS)
