"""A Plan as DECISIONS.json (docs/simulate-interface.md).

`disruptions` and `demotions` are left empty here; `disruption.lifecycle_decisions` fills them
(consolidation, capacity-block expiry, demotion, drift) and `simulate` puts them in.
"""

from __future__ import annotations

from typing import Callable

from .explain import failure_reason
from .groups import group_arns, group_target
from .launch import FinalClaim
from .ledger import ReservationLedger
from .commitments import spend_reserved_instance_units
from .nodeclaim import PoolTemplate
from .planning import Plan
from .quantities import CPU, EPHEMERAL_STORAGE, MEMORY, format_resource


def decisions(plan: Plan) -> dict:
    results = plan.results
    static = tuple(sorted(t.name for t in plan.templates if t.pool.static))
    pool_count = len(plan.templates) - len(static)  # the NodePools pending pods may get claims from
    empty = not plan.world.instance_types
    failures = [(f.pod.key, failure_reason(f, pool_count, empty, static), f.deferred) for f in results.failures]
    by_id = {r.id: r for r in plan.world.reservations} if plan.world.reservation_groups else {}
    return {
        "nodeClaims": spend_reserved_instance_units(
            [(claim.offering, node_claim(claim, launch_group(claim, plan, by_id))) for claim in plan.claims], plan.world.coverage),
        "bindings": [{"pod": pod, "node": node} for pod, node in sorted(results.bindings.items())],
        "unschedulable": [{"pod": pod, "reason": reason} for pod, reason, deferred in sorted(failures) if not deferred],
        "deferred": [{"pod": pod, "reason": reason} for pod, reason, deferred in sorted(failures) if deferred],
        "disruptions": [],
        "demotions": [],
        "nodeClasses": [plan.node_classes[nc.name].status(plan.world.now) for nc in sorted(plan.world.node_classes, key=lambda n: n.name)],
        "nodePools": [node_pool(t, plan) for t in sorted(plan.templates, key=lambda t: t.name)],
        **({"nodeOverlays": [s.as_json() for s in sorted(plan.overlays, key=lambda s: s.name)]} if plan.overlays else {}),
    }


def node_claim(claim: FinalClaim, group_arn: str | None = None) -> dict:
    offering = claim.offering
    launch = {"instanceType": claim.instance_type.name, "zone": offering.zone, "capacityType": offering.capacity_type}
    if offering.reservation is not None:
        launch["reservationID"] = offering.reservation.id
        launch["reservationType"] = offering.reservation.reservation_type
        if group_arn:
            launch["reservationGroupARN"] = group_arn
    launch["price"] = offering.price
    if offering.basis != "list":  # a Savings Plan rate or a zonal RI's $0 (engine/commitments.py); absent: list
        launch["priceBasis"] = offering.basis
    return {
        "name": claim.name,
        "nodePool": claim.claim.template.name,
        "pods": [pod.key for pod in claim.claim.pods],
        "instanceTypeOptions": [it.name for it in claim.instance_type_options],
        "launch": launch,
        "labels": claim.labels,
        # spec.resources.requests, as upstream writes it: the pods' requests and the DaemonSet overhead.
        "resources": {name: requested_quantity(name, amount) for name, amount in sorted(claim.claim.requests.items())
                      if amount},
        # A static NodePool's claim (spec.replicas): launched to keep the pool's size, for no pod.
        **({"static": True} if claim.claim.template.pool.static else {}),
    }


def requested_quantity(name: str, amount: int) -> str:
    """An exact Kubernetes quantity (format_resource rounds large memory for reading)."""
    if name == CPU or name not in (MEMORY, EPHEMERAL_STORAGE):
        return format_resource(name, amount)
    mib = 2**20
    return f"{amount // mib}Mi" if amount % mib == 0 else str(amount)


def launch_group(claim: FinalClaim, plan: Plan, reservations: dict) -> str | None:
    """The Capacity Reservation group a reserved launch targets (see groups.py), or None."""
    reservation = claim.offering.reservation
    world = plan.world
    if reservation is None or not world.reservation_groups:
        return None
    node_class = next((nc for nc in world.node_classes if nc.name == claim.claim.template.pool.node_class), None)
    if node_class is None:
        return None
    return group_target(reservation, group_arns(node_class.selector_terms), world.reservation_groups,
                        reservations, world.now)


def node_pool(template: PoolTemplate, plan: Plan) -> dict:
    conditions = []
    if template.problem is not None:
        conditions.append(_condition("NodeClassReady", "False", "NodeClassNotReady", template.problem))
    elif plan.world.reserved_capacity:
        conditions.append(reserved_capacity_condition(template, plan.results.ledger, lambda: waiting_for_reserved(template, plan)))
    return {"name": template.name, "conditions": conditions}


def waiting_for_reserved(template: PoolTemplate, plan: Plan) -> int:
    """Pods of this run that a full reservation of this NodePool kept out: pending pods the pool
    refused (deferred or unschedulable) that one of its reserved instance types could hold, and
    pods on its new on-demand or spot claims that could have gone to one of its reservations."""
    catalog = template.catalog
    if catalog is None:
        return 0
    count = 0
    for failure in plan.results.failures:
        if any(t is template and (r.reserved_held or _reserved_could_hold(template, failure.pod))
               for t, r in failure.rejections):
            count += 1
    for final in plan.claims:
        claim = final.claim
        if claim.template is template and not final.offering.reserved and any(
                o.reserved and o.compatible(claim.requirements) for it in claim.instance_types for o in it.offerings):
            count += len(claim.pods)
    return count


def _reserved_could_hold(template: PoolTemplate, pod) -> bool:
    catalog = template.catalog
    requests = template.daemon_overhead.add(pod.requests)
    for alternative in pod.alternatives:
        if template.requirements.compatible(alternative, catalog.well_known) is not None:
            continue
        requirements = template.requirements.intersect(alternative)
        for it in catalog.matching(requirements):
            if requests.fits(it.allocatable) and any(o.reserved and o.compatible(requirements) for o in it.offerings):
                return True
    return False


def reserved_capacity_condition(template: PoolTemplate, ledger: ReservationLedger,
                                waiting: Callable[[], int] | None = None) -> dict:
    """`ReservedCapacityAvailable` (seed 001's condition): True / Available while a reservation
    this NodePool can launch into has a free unit after this plan, or while none is free but no
    pod waits for one; False / LimitExceeded when every one is used and `waiting()` pods could
    have used one (None: unknown, counted as waiting). It returns to True once a unit frees up."""
    kind = "ReservedCapacityAvailable"
    if not template.allows_reserved():
        return _condition(kind, "False", "NotAllowed", "the NodePool's requirements exclude capacity-type reserved")
    reservations = {}
    catalog = template.catalog
    for it in catalog.matching(template.requirements):
        for offering in it.offerings:
            if offering.reserved and offering.compatible(template.requirements):
                reservations[offering.reservation.id] = offering.reservation
    if not reservations:
        return _condition(kind, "False", "NoReservations",
                          f"EC2NodeClass {template.pool.node_class} selects no reservation this NodePool can use")
    usage = ", ".join(f"{rid} {ledger.remaining(rid)} of {ledger.capacity(rid)} usable unit(s) free"
                      for rid in sorted(reservations))
    if any(ledger.remaining(rid) > 0 for rid in reservations):
        return _condition(kind, "True", "Available", f"after this plan: {usage}")
    count = waiting() if waiting is not None else None
    if count == 0:
        return _condition(kind, "True", "Available", f"every compatible reservation is used and no pending pod waits for one: {usage}")
    pods = f"{count} pod(s) could use reserved capacity but " if count else ""
    return _condition(kind, "False", "LimitExceeded", f"{pods}every compatible reservation is used: {usage}")


def _condition(kind: str, status: str, reason: str, message: str) -> dict:
    return {"type": kind, "status": status, "reason": reason, "message": message}
