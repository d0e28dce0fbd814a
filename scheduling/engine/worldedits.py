"""What-if by editing: changes applied to a WORLD.json (a copy), and the plan summarised so two
worlds can be read side by side. Pure: dicts in, dicts out; each bad edit is a problem naming its
field, and the other edits still apply.

Edits (each a dict with ``kind``):

* ``add-reservation``: ``instanceType``, ``zone``, ``count`` (1-10000), optional ``end`` (RFC 3339) and
  ``capacityBlock`` (true for a Capacity Block); selected by every EC2NodeClass (an id term is added).
* ``remove-reservation`` / ``expire-block``: ``id``.
* ``set-reservation-count``: ``id``, ``count`` (what a shrink would leave; never below what runs in it).
* ``scale-workload``: ``like`` (``namespace/name`` of a pod), ``times`` (1-1000): that many pending copies.
* ``nodepool-capacity-types``: ``nodePool``, ``values`` (a subset of reserved, spot, on-demand).
* ``nodeclass-selector-terms``: ``nodeClass`` (a name), ``terms`` (a list of term objects): the class's
  ``capacityReservationSelectorTerms`` replaced, as the selector-term editor would save them.
* ``at-reservation-start``: ``id`` of a reservation that has not started (scheduled, assessing, ...): the
  world at its StartDate (``now`` moved there, never back), the reservation active with every unit free.
  The plan it is compared with is the world at that same clock without the reservation (at_the_same_clock).
"""

from __future__ import annotations

import copy
import re

from .reservations import UPCOMING_STATES
from .timeutil import format_time, parse_time

KINDS = ("add-reservation", "remove-reservation", "expire-block", "set-reservation-count", "scale-workload",
         "nodepool-capacity-types", "nodeclass-selector-terms", "at-reservation-start")
CAPACITY_TYPES = ("reserved", "spot", "on-demand")
_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$")


def apply_edits(world: dict, edits: list[dict]) -> tuple[dict, list[str]]:
    edited = copy.deepcopy(world)
    problems: list[str] = []
    for index, edit in enumerate(edits):
        where = f"edits[{index}]"
        kind = edit.get("kind") if isinstance(edit, dict) else None
        if kind not in KINDS:
            problems.append(f"{where}.kind: {kind!r} is not one of {', '.join(KINDS)}")
            continue
        problem = _EDITS[kind](edited, edit, index)
        if problem:
            problems.append(f"{where}.{problem}")
    return edited, problems


def at_the_same_clock(world: dict, edited: dict, edits: list) -> dict:
    """The world to compare the edited one with, at the edited one's clock: an at-reservation-start edit
    moves ``now`` to the reservation's start, so the plan before is the world at that moment without the
    reservation (what ends by then has ended in both), not the world now."""
    if edited.get("now") == world.get("now"):
        return world
    started = {edit.get("id") for edit in edits if isinstance(edit, dict) and edit.get("kind") == "at-reservation-start"}
    return {**world, "now": edited.get("now"), "capacityReservations": [
        item for item in world.get("capacityReservations") or [] if item.get("CapacityReservationId") not in started]}


def _count(edit: dict, field: str, low: int, high: int) -> int | str:
    value = edit.get(field)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        return f"{field}: {value!r} is not a whole number from {low} to {high}"
    return value


def _reservation(world: dict, edit: dict) -> dict | str:
    rid = edit.get("id")
    for item in world.get("capacityReservations") or []:
        if item.get("CapacityReservationId") == rid:
            return item
    return f"id: no reservation {rid!r} in this world"


def _add_reservation(world: dict, edit: dict, index: int) -> str:
    count = _count(edit, "count", 1, 10000)
    if isinstance(count, str):
        return count
    for field in ("instanceType", "zone"):
        if not isinstance(edit.get(field), str) or not edit[field]:
            return f"{field}: required"
    if edit.get("end") is not None and (not isinstance(edit["end"], str) or not _TIME.match(edit["end"])):
        return f"end: {edit['end']!r} is not an RFC 3339 time such as 2026-12-01T00:00:00Z"
    block = bool(edit.get("capacityBlock"))
    if block and not edit.get("end"):
        return "end: a Capacity Block needs its end"
    rid = f"cr-whatif{index:09d}"
    world.setdefault("capacityReservations", []).append({
        "CapacityReservationId": rid, "OwnerId": "000000000000", "InstanceType": edit["instanceType"],
        "InstancePlatform": "Linux/UNIX", "AvailabilityZone": edit["zone"], "Tenancy": "default",
        "TotalInstanceCount": count, "AvailableInstanceCount": count, "State": "active",
        "InstanceMatchCriteria": "targeted", "ReservationType": "capacity-block" if block else "default",
        "EndDateType": "limited" if edit.get("end") else "unlimited", "Tags": [{"Key": "karpweb.io/what-if", "Value": "true"}],
        **({"EndDate": edit["end"]} if edit.get("end") else {}),
    })
    for node_class in world.get("ec2NodeClasses") or []:
        spec = node_class.setdefault("spec", {})
        spec["capacityReservationSelectorTerms"] = [*(spec.get("capacityReservationSelectorTerms") or []), {"id": rid}]
    return ""


def _remove_reservation(world: dict, edit: dict, index: int) -> str:
    found = _reservation(world, edit)
    if isinstance(found, str):
        return found
    world["capacityReservations"].remove(found)
    return ""


def _expire_block(world: dict, edit: dict, index: int) -> str:
    found = _reservation(world, edit)
    if isinstance(found, str):
        return found
    if found.get("ReservationType") != "capacity-block":
        return f"id: {edit['id']} is not a Capacity Block"
    found["State"], found["AvailableInstanceCount"] = "expired", 0
    return ""


def _set_count(world: dict, edit: dict, index: int) -> str:
    found = _reservation(world, edit)
    if isinstance(found, str):
        return found
    used = int(found.get("TotalInstanceCount") or 0) - int(found.get("AvailableInstanceCount") or 0)
    count = _count(edit, "count", max(used, 0), 10000)
    if isinstance(count, str):
        return count + f" ({used} run in it now)"
    found["TotalInstanceCount"], found["AvailableInstanceCount"] = count, count - used
    return ""


def _at_reservation_start(world: dict, edit: dict, index: int) -> str:
    found = _reservation(world, edit)
    if isinstance(found, str):
        return found
    if found.get("State") not in UPCOMING_STATES:
        return f"id: {edit['id']} has started (state {found.get('State', 'active')})"
    try:
        start = parse_time(found.get("StartDate"))
        now = parse_time(world["now"]) if world.get("now") else start
    except (TypeError, ValueError):
        return f"id: {edit['id']} has no start date to plan at"
    world["now"] = format_time(max(start, now))
    # Nothing ran in it before its start: every unit is free from it.
    found["State"], found["AvailableInstanceCount"] = "active", int(found.get("TotalInstanceCount") or 0)
    return ""


def _scale_workload(world: dict, edit: dict, index: int) -> str:
    times = _count(edit, "times", 1, 1000)
    if isinstance(times, str):
        return times
    like = edit.get("like")
    namespace, _, name = (like or "").partition("/")
    pods = world.get("pods") or []
    original = next((p for p in pods if (p.get("metadata") or {}).get("name") == name
                     and (p.get("metadata") or {}).get("namespace", "default") == (namespace or "default")), None)
    if original is None:
        return f"like: no pod {like!r} in this world"
    for copy_index in range(times):
        pod = copy.deepcopy(original)
        meta = pod.setdefault("metadata", {})
        meta["name"] = f"{name}-whatif-{index}-{copy_index}"
        meta.pop("uid", None)
        pod.setdefault("spec", {}).pop("nodeName", None)
        pod["status"] = {"phase": "Pending"}
        pods.append(pod)
    world["pods"] = pods
    return ""


def _nodepool_capacity_types(world: dict, edit: dict, index: int) -> str:
    values = edit.get("values")
    if not isinstance(values, list) or not values or any(v not in CAPACITY_TYPES for v in values):
        return f"values: {values!r} is not a non-empty list of {', '.join(CAPACITY_TYPES)}"
    for pool in world.get("nodePools") or []:
        if (pool.get("metadata") or {}).get("name") == edit.get("nodePool"):
            spec = pool.setdefault("spec", {}).setdefault("template", {}).setdefault("spec", {})
            others = [r for r in spec.get("requirements") or [] if r.get("key") != "karpenter.sh/capacity-type"]
            spec["requirements"] = [*others, {"key": "karpenter.sh/capacity-type", "operator": "In", "values": list(values)}]
            return ""
    return f"nodePool: no NodePool {edit.get('nodePool')!r} in this world"


def _nodeclass_selector_terms(world: dict, edit: dict, index: int) -> str:
    terms = edit.get("terms")
    if not isinstance(terms, list) or not all(isinstance(term, dict) for term in terms):
        return f"terms: {terms!r} is not a list of selector terms (objects)"
    for node_class in world.get("ec2NodeClasses") or []:
        if (node_class.get("metadata") or {}).get("name") == edit.get("nodeClass"):
            node_class.setdefault("spec", {})["capacityReservationSelectorTerms"] = copy.deepcopy(terms)
            return ""
    return f"nodeClass: no EC2NodeClass {edit.get('nodeClass')!r} in this world"


_EDITS = {"add-reservation": _add_reservation, "remove-reservation": _remove_reservation, "expire-block": _expire_block,
          "set-reservation-count": _set_count, "scale-workload": _scale_workload,
          "nodepool-capacity-types": _nodepool_capacity_types, "nodeclass-selector-terms": _nodeclass_selector_terms,
          "at-reservation-start": _at_reservation_start}


def summarize(decisions: dict) -> dict:
    """What a plan does, as the side-by-side view shows it."""
    claims = decisions.get("nodeClaims") or []
    by_type: dict[str, int] = {}
    reservations: dict[str, int] = {}
    dollars = 0.0
    for claim in claims:
        launch = claim.get("launch") or {}
        kind = launch.get("capacityType", "")
        by_type[kind] = by_type.get(kind, 0) + 1
        if launch.get("reservationID"):
            reservations[launch["reservationID"]] = reservations.get(launch["reservationID"], 0) + 1
        elif isinstance(launch.get("price"), (int, float)):
            dollars += launch["price"]
    return {"newNodes": len(claims), "byCapacityType": dict(sorted(by_type.items())),
            "reservationsUsed": dict(sorted(reservations.items())), "bound": len(decisions.get("bindings") or []),
            "pending": len(decisions.get("unschedulable") or []) + len(decisions.get("deferred") or []),
            "paidDollarsPerHour": round(dollars, 4)}

