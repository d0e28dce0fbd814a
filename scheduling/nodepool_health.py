"""A NodePool's health as upstream reports it, the same wherever the pool appears (its page, the list, the
overview) and in what the loop writes:

- ``NodeClassReady`` (kubernetes-sigs/karpenter `pkg/controllers/nodepool/readiness`): False with reason
  ``NodeClassNotFound`` when the EC2NodeClass its ``spec.template.spec.nodeClassRef`` names does not
  exist, ``NodeClassNotReady`` when that class is not Ready (or its selector terms are invalid), else True.
- ``Ready`` is the root condition (awslabs/operatorpkg `status/condition_set.go`): False with reason
  ``UnhealthyDependents`` and a message like ``NodeClassReady=False`` whenever a dependent is False.

The class is the one ``node_class_ref`` names (what Karpenter and the engine read); the ``node_class`` link
is only a cache of it, and a stale link never makes a pool look healthy or lend it reservations.

Limits: a pool whose nodes' allocatable exceeds ``spec.limits`` (e.g. "203.03 of 100 CPU") is flagged.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from reservations.models import EC2NodeClass
from scheduling.engine.quantities import CPU, MEMORY, parse_resource

DEPENDENTS = ("ValidationSucceeded", "NodeClassReady", "NodeRegistrationHealthy")
NOT_FOUND_MESSAGE = "NodeClass not found on cluster"


def node_class_name(pool) -> str:
    """The EC2NodeClass the pool's nodeClassRef names (the link's name only when no ref was ever stored)."""
    ref = pool.node_class_ref or {}
    if ref.get("name"):
        return ref["name"]
    return pool.node_class.name if pool.node_class_id and pool.node_class else ""


def resolved_node_class(pool, classes: dict[str, EC2NodeClass] | None = None) -> EC2NodeClass | None:
    """The class that exists under the referenced name, or None (never a stale link to another class)."""
    name = node_class_name(pool)
    if not name:
        return None
    if classes is not None:
        return classes.get(name)
    if pool.node_class_id and pool.node_class and pool.node_class.name == name:
        return pool.node_class
    return EC2NodeClass.objects.filter(name=name).first()


def _condition(kind: str, status: str, reason: str, message: str = "") -> dict:
    return {"type": kind, "status": status, "reason": reason, "message": message}


def node_class_ready(pool, node_class: EC2NodeClass | None) -> dict:
    if node_class is None:
        name = node_class_name(pool)
        return _condition("NodeClassReady", "False", "NodeClassNotFound",
                          f"{NOT_FOUND_MESSAGE} (EC2NodeClass {name!r})" if name else f"{NOT_FOUND_MESSAGE} (no nodeClassRef)")
    terms = node_class.condition("CapacityReservationsReady")
    if terms and terms.get("status") == "False" and terms.get("reason") == "InvalidSelectorTerms":
        return _condition("NodeClassReady", "False", "NodeClassNotReady", f"EC2NodeClass {node_class.name}: {terms.get('message', '')}")
    ready = node_class.condition("Ready")
    if ready and ready.get("status") != "True":
        return _condition("NodeClassReady", "False", "NodeClassNotReady",
                          f"EC2NodeClass {node_class.name} is not ready: {ready.get('reason', '')} {ready.get('message', '')}".strip())
    return _condition("NodeClassReady", "True", "NodeClassReady")


def root_ready(conditions: list[dict]) -> dict:
    """Ready from its dependents, as operatorpkg computes the root condition."""
    unhealthy = [c for c in conditions if c.get("type") in DEPENDENTS and c.get("status") in ("False", "Unknown")]
    if not unhealthy:
        return _condition("Ready", "True", "Ready")
    status = "False" if any(c["status"] == "False" for c in unhealthy) else "Unknown"
    return _condition("Ready", status, "UnhealthyDependents", ", ".join(f"{c['type']}={c['status']}" for c in unhealthy))


def computed_conditions(pool, node_class: EC2NodeClass | None, engine: list[dict] = ()) -> list[dict]:
    """NodeClassReady and Ready for the pool now; an engine's NodeClassReady=False (the plan found the class
    unusable) stands unless karpweb's own check finds it False too (then karpweb's, naming the class)."""
    ours = node_class_ready(pool, node_class)
    engine_verdict = next((c for c in engine if c.get("type") == "NodeClassReady"), None)
    if ours["status"] == "True" and engine_verdict and engine_verdict.get("status") == "False":
        ours = dict(engine_verdict)
    others = [c for c in (pool.conditions or []) if c.get("type") in DEPENDENTS and c.get("type") != "NodeClassReady"]
    return [ours, root_ready([*others, ours])]


@dataclass
class PoolHealth:
    node_class: EC2NodeClass | None
    node_class_ready: dict
    ready: dict
    over_limits: list[str] = field(default_factory=list)
    conditions: list[dict] = field(default_factory=list)  # the stored ones with the two above in their place

    @property
    def is_ready(self) -> bool:
        return self.ready["status"] == "True"

    @property
    def why_not_ready(self) -> str:
        """E.g. "NodeClassReady=False: NodeClassNotFound, NodeClass not found on cluster (EC2NodeClass 'gone')"."""
        if self.is_ready:
            return ""
        dependent = self.node_class_ready if self.node_class_ready["status"] != "True" else None
        if dependent is None:
            return f"{self.ready['reason']}: {self.ready['message']}".strip(": ")
        return f"{self.ready['message']}: {dependent['reason']}, {dependent['message']}"


def health(pool, classes: dict[str, EC2NodeClass] | None = None, usage: dict | None = None) -> PoolHealth:
    """`usage` = {"cpu": millicores, "memory": bytes, "nodes": count} of its nodes' allocatable, for the limits."""
    node_class = resolved_node_class(pool, classes)
    node_class_ready_now, ready = computed_conditions(pool, node_class)
    shown = [c for c in (pool.conditions or []) if c.get("type") not in ("Ready", "NodeClassReady")]
    return PoolHealth(node_class=node_class, node_class_ready=node_class_ready_now, ready=ready,
                      over_limits=over_limits(pool.limits or {}, usage) if usage is not None else [],
                      conditions=[ready, node_class_ready_now, *shown])


def over_limits(limits: dict, usage: dict) -> list[str]:
    """Each limit the nodes exceed, e.g. "203.03 of 100 CPU" (upstream stops launching past a limit)."""
    exceeded = []
    for resource, unit in ((CPU, "CPU"), (MEMORY, "memory"), ("nodes", "nodes")):
        if resource not in limits or resource not in usage:
            continue
        try:
            limit = int(limits[resource]) if resource == "nodes" else parse_resource(resource, limits[resource])
        except (TypeError, ValueError):
            continue
        used = usage[resource]
        if used > limit:
            shown = f"{used / 1000:g}" if resource == CPU else (f"{used / 2**30:.1f}Gi" if resource == MEMORY else str(used))
            exceeded.append(f"{shown} of {limits[resource]} {unit}")
    return exceeded


def classes_by_name() -> dict[str, EC2NodeClass]:
    return {nc.name: nc for nc in EC2NodeClass.objects.all()}
