"""PodDisruptionBudgets as Karpenter's disruption controller reads them (kubernetes-sigs/karpenter
`pkg/utils/pdb/pdb.go`, `CanEvictPods`): a node is no candidate for a graceful disruption
(consolidation, drift, emptiness) while one of its evictable pods is selected by a budget that
allows no disruption now (`status.disruptionsAllowed` 0), or by more than one budget (the Eviction
API refuses such a pod). Pods that are not evicted anyway (DaemonSet and static pods) do not count.

karpweb differs on one point: a budget with `unhealthyPodEvictionPolicy: AlwaysAllow` lets an unready
pod go upstream; the world carries no pod readiness, so such a budget counts as for any pod."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .podaffinity import LabelSelector


@dataclass(frozen=True)
class DisruptionBudget:
    namespace: str
    name: str
    selector: LabelSelector | None  # None (no selector): selects no pod (policy/v1)
    disruptions_allowed: int

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def selects(self, pod) -> bool:
        return self.selector is not None and pod.namespace == self.namespace and self.selector.matches(pod.labels)


def eviction_blocked(pods, budgets: list[DisruptionBudget]) -> str | None:
    """Why evicting `pods` is refused now (a reason naming the budget and the pod), or None."""
    if not budgets:
        return None
    for pod in pods:
        if pod.daemon:
            continue
        selecting = [b for b in budgets if b.selects(pod)]
        if len(selecting) > 1:
            names = ", ".join(b.key for b in selecting)
            return f"pod {pod.key} is selected by more than one PodDisruptionBudget ({names}): it cannot be evicted"
        if selecting and selecting[0].disruptions_allowed <= 0:
            return f"PodDisruptionBudget {selecting[0].key} allows no disruption now (pod {pod.key})"
    return None


def parse_budgets(value: Any, reader) -> list[DisruptionBudget]:
    """`podDisruptionBudgets`: policy/v1 objects as the API server writes them, status included."""
    return reader.collect(value, "podDisruptionBudgets", lambda item, path: _budget(reader, item, path),
                          "PodDisruptionBudget", key=lambda budget: budget.key)


def _budget(reader, item: dict, path: str) -> DisruptionBudget | None:
    meta = reader.mapping(item.get("metadata"), f"{path}.metadata")
    name = reader.string(meta, "name", f"{path}.metadata", required=True)
    namespace = reader.string(meta, "namespace", f"{path}.metadata", default="default") or "default"
    spec = reader.mapping(item.get("spec"), f"{path}.spec")
    status = reader.mapping(item.get("status"), f"{path}.status")
    selector = reader.label_selector(spec.get("selector"), f"{path}.spec.selector")
    allowed = reader.integer(status, "disruptionsAllowed", f"{path}.status", default=0) or 0
    return DisruptionBudget(namespace, name, selector, allowed) if name else None
