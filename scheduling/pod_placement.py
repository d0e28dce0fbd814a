"""Where a pod runs (or would run) and in what capacity, and if not in a reservation, why not: the answer
every pod page gives, pending or running. The reasoning is the engine's (scheduling.engine.explain
`why_not_reserved`); this module reads the rows it needs: the usable reservations as units a node of them
would be, the pod as the engine parses it, its NodePool's requirements and EC2NodeClass."""

from __future__ import annotations

import dataclasses

from django.db.models import Q

from reservations.models import CapacityReservation, EC2NodeClass
from scheduling.engine import parse_world
from scheduling.engine.explain import COULD_USE, NOT_STARTED, ReservedAnswer, ReservedUnit, why_not_reserved
from scheduling.engine.reservations import UPCOMING_STATES
from scheduling.engine.selectors import selects_once_active
from scheduling.engine.labels import CAPACITY_TYPE, RESERVATION_ID, RESERVATION_TYPE, RESERVED, ZONE, ZONE_ID
from scheduling.engine.quantities import ResourceList
from scheduling.engine.requirements import Requirement, RequirementError, Requirements
from scheduling.engine.world import WorldError, parse_pod
from scheduling.models import Decision, InstanceType, Node, NodePool
from scheduling.nodepool_health import node_class_name
from scheduling.world import node_allocatable, pod_object, reservation_item, world_groups

NODEPOOL_LABEL = "karpenter.sh/nodepool"
POOLS_EXPLAINED = 3


def reserved_units(now, *, upcoming: bool = True) -> list[ReservedUnit]:
    """Every usable reservation as the node a launch into it would make: its type's labels and room; with
    `upcoming`, also those that have not started (their `not_started` says when they do), selected by the
    classes whose terms will select them once active."""
    reservations = list(CapacityReservation.objects.usable(now).prefetch_related("node_classes").defer("tags", "capacity_allocations"))
    later = upcoming_reservations(now) if upcoming else []
    types = {it.name: it for it in InstanceType.objects.filter(name__in={r.instance_type for r in reservations + later})}
    units = [unit for r in reservations
             if (unit := reserved_unit(r, types, selected_by(classes_selecting(now, r)))) is not None]
    if later:
        classes, groups = selector_context()
        for r in later:
            unit = reserved_unit(r, types, selected_by(classes_selecting(now, r, classes, groups)),
                                 not_started=engine_reservation(r).not_started_reason(now))
            if unit is not None:
                units.append(unit)
    return units


def selector_context() -> tuple[list[EC2NodeClass], dict]:
    """The EC2NodeClasses (their terms) and the world's Capacity Reservation groups: what judging whether
    a class will select a reservation reads (classes_selecting)."""
    classes = list(EC2NodeClass.objects.only("name", "cluster_id", "capacity_reservation_selector_terms"))
    return classes, {g["GroupArn"]: frozenset(g["CapacityReservationIds"]) for g in world_groups()}


def classes_selecting(now, reservation: CapacityReservation, classes: list[EC2NodeClass] | None = None,
                      groups: dict | None = None) -> list[EC2NodeClass]:
    """The one rule for which EC2NodeClasses select a reservation, which every page and plan uses: once it
    has started, those whose status names it (Karpenter's own answer); before, those whose terms will
    select it once it is active (Karpenter's status names active reservations only). `classes` and
    `groups`: selector_context(), read once for several reservations."""
    if not reservation.is_upcoming(now):
        return list(reservation.node_classes.all())
    if classes is None or groups is None:
        classes, groups = selector_context()
    engine = engine_reservation(reservation)
    return [nc for nc in classes if selects_once_active(nc.capacity_reservation_selector_terms, engine, groups)]


def selected_by(classes: list[EC2NodeClass]) -> tuple[str, ...]:
    return tuple(sorted(nc.name for nc in classes))


def reserved_unit(r: CapacityReservation, types: dict, selected_by: tuple[str, ...], not_started: str = "") -> ReservedUnit | None:
    it = types.get(r.instance_type)
    if it is None:
        return None  # a type karpweb's catalogue does not know: no node of it can be reasoned about
    labels = {**(it.labels or {}), ZONE: r.availability_zone, ZONE_ID: r.availability_zone_id or "",
              CAPACITY_TYPE: RESERVED, RESERVATION_ID: r.reservation_id, RESERVATION_TYPE: r.reservation_type}
    # Nothing runs in one that has not started: all its units will be free.
    free = r.total_instance_count if not_started else r.available_instance_count
    return ReservedUnit(r.reservation_id, r.instance_type, r.availability_zone, labels,
                        ResourceList(node_allocatable(it, None)), free, r.total_instance_count, selected_by, not_started)


def upcoming_reservations(now) -> list[CapacityReservation]:
    """The reservations that have not started (scheduled, assessing, pending, payment-pending, delayed), soonest first."""
    rows = CapacityReservation.objects.filter(state__in=UPCOMING_STATES).order_by("start_date", "reservation_id")
    return [r for r in rows if r.is_upcoming(now)]


def engine_reservation(r: CapacityReservation):
    """The row as the engine reads it (the same item the world gives it)."""
    return parse_world({"capacityReservations": [reservation_item(r)]}).reservations[0]


def pool_requirements(pool: NodePool) -> Requirements:
    found = []
    for entry in pool.requirements or []:
        try:
            found.append(Requirement.of(entry["key"], entry["operator"], entry.get("values") or []))
        except (KeyError, TypeError, RequirementError):
            continue  # the admin and the sync refuse these; an odd stored one is left out of the reasoning
    return Requirements(found)


def engine_pod(pod):
    try:
        return parse_pod(pod_object(pod))
    except WorldError:
        return None


def why_not_reserved_in(pod, pool: NodePool | None, units: list[ReservedUnit]) -> ReservedAnswer:
    parsed = engine_pod(pod)
    alternatives = parsed.alternatives if parsed else ()
    requests = parsed.requests if parsed else ResourceList({})
    if pool is None:
        return why_not_reserved(alternatives, requests, None, Requirements(), None, units)
    # A node of the pool carries the pool's own labels too.
    units = [dataclasses.replace(u, labels={**u.labels, **(pool.labels or {}), NODEPOOL_LABEL: pool.name}) for u in units]
    return why_not_reserved(alternatives, requests, pool.name, pool_requirements(pool), node_class_name(pool) or None, units)


def _node_words(node: Node) -> str:
    return f"node {node.name} ({node.instance_type} in {node.zone})"


def _reserved_in(node: Node, now) -> CapacityReservation | None:
    reservation = node.reservation
    return reservation if node.capacity_type == RESERVED and reservation is not None and reservation.is_usable(now) else None


def placement(pod, now, engine_answer: dict | None = None) -> dict:
    """{"where": words, "reserved": reservation or None, "why": ReservedAnswer or None, "why_by_pool": [(pool, answer)]}."""
    units = reserved_units(now)
    node = pod.node
    if node is None and engine_answer and engine_answer.get("kind") == "bind":
        node = Node.objects.select_related("reservation", "node_pool").filter(name=engine_answer.get("node")).first()
    if node is not None:
        verb = "Runs on" if pod.node_id else "Would be bound to the existing"
        reservation = _reserved_in(node, now)
        if reservation is not None:
            return {"where": f"{verb} {_node_words(node)}, in reserved capacity: reservation {reservation.reservation_id} "
                             f"({reservation.get_reservation_type_display()}, {reservation.used_instance_count} of "
                             f"{reservation.total_instance_count} in use)", "reserved": reservation, "why": None}
        capacity = f"in {node.capacity_type or 'unknown'} capacity"
        if node.capacity_type == RESERVED and node.reservation is not None:
            capacity = (f"labelled reserved, but its reservation {node.reservation.reservation_id} is "
                        f"{node.reservation.state}: EC2 bills it on-demand")
        why = why_not_reserved_in(pod, node.node_pool, units)
        return {"where": f"{verb} {_node_words(node)}, {capacity}, not in a reservation", "reserved": None, "why": why}
    if pod.node_name:
        return {"where": f"Runs on node {pod.node_name}, which karpweb has not seen", "reserved": None, "why": None}
    return _pending(pod, engine_answer, units)


def _pending(pod, engine_answer: dict | None, units) -> dict:
    claim = (engine_answer or {}).get("claim")
    if claim is not None:
        launch = claim["launch"]
        pool = NodePool.objects.filter(name=claim["nodePool"]).first()
        if launch.get("reservationID"):
            return {"where": f"Pending: {engine_answer['text']} (reserved capacity)", "reserved":
                    CapacityReservation.objects.filter(reservation_id=launch["reservationID"]).first(), "why": None}
        return {"where": f"Pending: {engine_answer['text']}, in {launch['capacityType']} capacity, not in a reservation",
                "reserved": None, "why": why_not_reserved_in(pod, pool, units)}
    by_pool = [(pool, why_not_reserved_in(pod, pool, units))
               for pool in NodePool.objects.order_by("-weight", "name")[:POOLS_EXPLAINED]]
    where = f"Pending: {engine_answer['text']}" if engine_answer else "Pending: no place found for it yet"
    usable = [answer for _, answer in by_pool if answer.blocker == COULD_USE]
    later = [answer for _, answer in by_pool if answer.blocker == NOT_STARTED]
    return {"where": where, "reserved": None, "why": (usable or later or [None])[0], "why_by_pool": by_pool}


def decisions_about(pod, limit: int):
    """Decisions naming the pod: about it, or launching, binding or refusing it among others."""
    key = f"{pod.namespace}/{pod.name}"
    return (Decision.objects.filter(Q(subject=f"pod {key}") | Q(objects_involved__pods__icontains=f'"{key}"'))
            .select_related("node_pool").order_by("-created_at", "-id")[:limit])
