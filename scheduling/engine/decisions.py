"""A Plan as DECISIONS.json (../shared/simulate-contract.md).

`disruptions` and `demotions` are left empty here; `disruption.lifecycle_decisions` fills them
(consolidation, capacity-block expiry, demotion, drift) and `simulate` puts them in.
"""

from __future__ import annotations

from .explain import failure_reason
from .launch import FinalClaim
from .ledger import ReservationLedger
from .nodeclaim import PoolTemplate
from .planning import Plan


def decisions(plan: Plan) -> dict:
    results = plan.results
    pool_count = len(plan.templates)
    failures = [(f.pod.key, failure_reason(f, pool_count), f.deferred) for f in results.failures]
    return {
        "nodeClaims": [node_claim(claim) for claim in plan.claims],
        "bindings": [{"pod": pod, "node": node} for pod, node in sorted(results.bindings.items())],
        "unschedulable": [{"pod": pod, "reason": reason} for pod, reason, deferred in sorted(failures) if not deferred],
        "deferred": [{"pod": pod, "reason": reason} for pod, reason, deferred in sorted(failures) if deferred],
        "disruptions": [],
        "demotions": [],
        "nodeClasses": [plan.node_classes[nc.name].status(plan.world.now) for nc in sorted(plan.world.node_classes, key=lambda n: n.name)],
        "nodePools": [node_pool(t, plan) for t in sorted(plan.templates, key=lambda t: t.name)],
    }


def node_claim(claim: FinalClaim) -> dict:
    offering = claim.offering
    launch = {"instanceType": claim.instance_type.name, "zone": offering.zone, "capacityType": offering.capacity_type}
    if offering.reservation is not None:
        launch["reservationID"] = offering.reservation.id
        launch["reservationType"] = offering.reservation.reservation_type
    launch["price"] = offering.price
    return {
        "name": claim.name,
        "nodePool": claim.claim.template.name,
        "pods": [pod.key for pod in claim.claim.pods],
        "instanceTypeOptions": [it.name for it in claim.instance_type_options],
        "launch": launch,
        "labels": claim.labels,
    }


def node_pool(template: PoolTemplate, plan: Plan) -> dict:
    conditions = []
    if template.problem is not None:
        conditions.append(_condition("NodeClassReady", "False", "NodeClassNotReady", template.problem))
    elif plan.world.reserved_capacity:
        conditions.append(reserved_capacity_condition(template, plan.results.ledger))
    return {"name": template.name, "conditions": conditions}


def reserved_capacity_condition(template: PoolTemplate, ledger: ReservationLedger) -> dict:
    """`ReservedCapacityAvailable` (seed 001's condition): after this plan, is there a free unit
    in a reservation this NodePool can launch into?"""
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
    return _condition(kind, "False", "LimitExceeded", f"every compatible reservation is used: {usage}")


def _condition(kind: str, status: str, reason: str, message: str) -> dict:
    return {"type": kind, "status": status, "reason": reason, "message": message}
