"""EC2 instances as DescribeInstances reports them: which reservation each node's instance sits in.

The optional top-level WORLD.json key `instances` (the control loop sends it; see
scheduling/loop/disruption.py `instance_membership`). Nodes are matched by `spec.providerID`
(`aws:///<zone>/<instance id>`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

RESERVED_PREFERENCE = "capacity-reservations-only"
# Instances in these states are on their way out; they tell nothing about a reservation.
GONE_STATES = ("shutting-down", "terminated", "stopping", "stopped")


@dataclass(frozen=True, slots=True)
class Instance:
    """One item of `aws ec2 describe-instances` (the fields the engine reads)."""

    id: str
    instance_type: str = ""
    state: str = "running"
    zone: str = ""
    reservation_id: str | None = None
    preference: str = "open"
    lifecycle: str = ""  # InstanceLifecycle: spot, capacity-block, ... ("" for on-demand)

    @property
    def reserved(self) -> bool:
        """Upstream `capacityTypeFromInstance`: reserved iff targeted at a reservation."""
        return self.reservation_id is not None and self.preference == RESERVED_PREFERENCE

    @property
    def live(self) -> bool:
        return self.state not in GONE_STATES


def instance_id(provider_id: str) -> str:
    """`aws:///us-east-1a/i-0abc` -> `i-0abc` ("" when there is none)."""
    return provider_id.rstrip("/").rsplit("/", 1)[-1] if provider_id else ""


def parse_instances(value: Any, problem: Callable[[str, str], None]) -> list[Instance] | None:
    """The optional top-level `instances`: a list of DescribeInstances items, or the whole
    `{"Reservations": [{"Instances": [...]}]}` output. None when absent."""
    if value is None:
        return None
    entries: list[tuple[str, Any]] = []
    if isinstance(value, dict) and isinstance(value.get("Reservations"), list):
        for r_index, group in enumerate(value["Reservations"]):
            items = group.get("Instances") if isinstance(group, dict) else None
            if not isinstance(items, list):
                problem(f"instances.Reservations[{r_index}].Instances", "expected a list")
                continue
            entries += [(f"instances.Reservations[{r_index}].Instances[{i}]", item) for i, item in enumerate(items)]
    elif isinstance(value, list):
        entries = [(f"instances[{i}]", item) for i, item in enumerate(value)]
    else:
        problem("instances", "expected a list of DescribeInstances items")
        return []
    result, seen = [], set()
    for path, item in entries:
        instance = _instance(item, path, problem)
        if instance is None:
            continue
        if instance.id in seen:
            problem(f"{path}.InstanceId", f"duplicate instance {instance.id}")
            continue
        seen.add(instance.id)
        result.append(instance)
    return result


def _instance(item: Any, path: str, problem: Callable[[str, str], None]) -> Instance | None:
    if not isinstance(item, dict):
        problem(path, "expected an object")
        return None
    ok = True

    def text(parent: Any, key: str, where: str, required: bool = False) -> str | None:
        nonlocal ok
        value = parent.get(key) if isinstance(parent, dict) else None
        if value is None:
            if required:
                problem(f"{where}.{key}", "is required")
                ok = False
            return None
        if not isinstance(value, str):
            problem(f"{where}.{key}", f"expected a string, got {value!r}"[:120])
            ok = False
            return None
        return value

    def nested(key: str) -> dict:
        nonlocal ok
        value = item.get(key)
        if value is None:
            return {}
        if not isinstance(value, dict):
            problem(f"{path}.{key}", "expected an object")
            ok = False
            return {}
        return value

    iid = text(item, "InstanceId", path, required=True)
    state, placement, spec = nested("State"), nested("Placement"), nested("CapacityReservationSpecification")
    instance = Instance(
        id=iid or "",
        instance_type=text(item, "InstanceType", path) or "",
        state=text(state, "Name", f"{path}.State") or "running",
        zone=text(placement, "AvailabilityZone", f"{path}.Placement") or "",
        reservation_id=text(item, "CapacityReservationId", path) or None,
        preference=text(spec, "CapacityReservationPreference", f"{path}.CapacityReservationSpecification") or "open",
        lifecycle=text(item, "InstanceLifecycle", path) or "",
    )
    return instance if ok and iid else None
