"""The Karpenter audit's comparison, pure: a NodeClaim karpweb did not create, against the
reservations its EC2NodeClass selects as the last EC2 sync before the claim saw them. Did Karpenter
launch paid capacity while a compatible reserved unit sat free?

Compatible: the same instance type and zone, a reservation the claim's EC2NodeClass selects, a
NodePool whose requirements admit the reserved offering's labels, and pods (those that landed on the
claim's node) whose nodeSelector and required node affinity would have accepted the same node in
the reservation: its labels with the reserved offering's capacity type and reservation labels. Free: the unit was available at
the last sync before the claim appeared, less the reserved launches made since that sync (a unit
taken meanwhile was not there to use; a unit freed after that sync was not known to be free, so it
is not counted as missed).
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass

from scheduling.engine import labels as L
from scheduling.engine.commitments import LIST, at_basis, basis_words
from scheduling.engine.requirements import Requirement, RequirementError, Requirements

MISSED = "missed-reservation"
USED = "used-reservation"
NO_FREE_UNIT = "no-free-unit"
NOT_COMPATIBLE = "no-compatible-reservation"
DISRUPTED = "reserved-node-disrupted"
OUTCOMES = (MISSED, USED, NO_FREE_UNIT, NOT_COMPATIBLE, DISRUPTED)
PAID = ("on-demand", "spot")


@dataclass(frozen=True)
class PodNeeds:
    """A pod on the claim's node: its required node selection, as the engine reads it (nodeSelector
    AND each required node-affinity term; any one term will do)."""

    key: str  # namespace/name
    alternatives: tuple[Requirements, ...]


@dataclass(frozen=True)
class Launch:
    claim: str
    node_pool: str
    node_class: str
    instance_type: str
    zone: str
    capacity_type: str
    created_at: datetime.datetime
    pool_requirements: tuple[dict, ...] = ()
    reservation_id: str = ""  # what a reserved launch used
    node_labels: tuple[tuple[str, str], ...] = ()  # the registered node's (the claim's until then)
    pods: tuple[PodNeeds, ...] = ()
    pods_note: str = ""  # why the pods were not checked, in words ("" when they were)


@dataclass(frozen=True)
class Candidate:
    """A reservation the claim's EC2NodeClass selects, as the last sync before the claim saw it."""

    reservation_id: str
    instance_type: str
    zone: str
    reservation_type: str  # default | capacity-block
    free_at_sync: int
    sync_at: datetime.datetime | None  # None: no sync before the claim appeared
    taken_since_sync: int = 0
    interruptible: bool = False


@dataclass(frozen=True)
class Verdict:
    outcome: str
    reason: str
    reservation_id: str = ""
    sync_at: datetime.datetime | None = None
    free_units: int = 0


def judge(launch: Launch, candidates: list[Candidate]) -> Verdict:
    what = (f"NodeClaim {launch.claim} ({launch.capacity_type} {launch.instance_type} in {launch.zone}, "
            f"NodePool {launch.node_pool or '—'})")
    if launch.capacity_type == "reserved":
        return Verdict(USED, f"{what} runs in reservation {launch.reservation_id or '(unknown)'}",
                       launch.reservation_id)
    matching = [c for c in candidates if c.instance_type == launch.instance_type and c.zone == launch.zone]
    if not matching:
        return Verdict(NOT_COMPATIBLE, f"{what}: EC2NodeClass {launch.node_class or '—'} selects no reservation of "
                                       f"{launch.instance_type} in {launch.zone}")
    blocked = {c.reservation_id: pool_refuses(launch.pool_requirements, c) for c in matching}
    admitted = [c for c in matching if not blocked[c.reservation_id]]
    if not admitted:
        first = matching[0]
        return Verdict(NOT_COMPATIBLE, f"{what}: reservation {first.reservation_id} matches, but the NodePool's "
                                       f"requirement {blocked[first.reservation_id]} rules it out", first.reservation_id)
    refused = {c.reservation_id: pods_refuse(dict(launch.node_labels), launch.pods, c) for c in admitted}
    wanted = [c for c in admitted if not refused[c.reservation_id]]
    if not wanted:
        first = admitted[0]
        return Verdict(NOT_COMPATIBLE, f"{what}: reservation {first.reservation_id} matches, but "
                                       f"{refused[first.reservation_id]}", first.reservation_id)
    admitted = wanted
    known = [c for c in admitted if c.sync_at is not None]
    free = sorted((c for c in known if c.free_at_sync - c.taken_since_sync > 0),
                  key=lambda c: (-(c.free_at_sync - c.taken_since_sync), c.reservation_id))
    if free:
        best = free[0]
        units = best.free_at_sync - best.taken_since_sync
        since = f" ({best.taken_since_sync} taken by reserved launches since)" if best.taken_since_sync else ""
        return Verdict(MISSED, f"{what} was launched while reservation {best.reservation_id} "
                               f"({best.reservation_type}, selected by EC2NodeClass {launch.node_class}) had "
                               f"{best.free_at_sync} free unit{'s' if best.free_at_sync != 1 else ''} at the EC2 sync of "
                               f"{best.sync_at:%Y-%m-%d %H:%M:%S} UTC{since}; NodePool {launch.node_pool} admits reserved "
                               f"capacity{_pods_words(launch)}", best.reservation_id, best.sync_at, units)
    if not known:
        return Verdict(NO_FREE_UNIT, f"{what}: no EC2 sync before it appeared, so no unit was known to be free",
                       admitted[0].reservation_id)
    last = max(known, key=lambda c: c.sync_at)
    return Verdict(NO_FREE_UNIT, f"{what}: reservation {last.reservation_id} had no free unit at the EC2 sync of "
                                 f"{last.sync_at:%Y-%m-%d %H:%M:%S} UTC before it appeared", last.reservation_id, last.sync_at)


def judge_disruption(claim: str, reservation_id: str, instance_type: str, zone: str, reservation_active: bool,
                     paid_nodes: list[tuple[str, float | None]], at: datetime.datetime) -> Verdict | None:
    """A reserved NodeClaim went away while its reservation was still active and paid nodes of the
    same type and zone, under an EC2NodeClass that selects it, kept running: the unit it freed could
    have held one of them. None when that is not so (an expiring block, no paid node to move).
    `paid_nodes` are only those that could have moved: their NodePool and their pods admit the
    reservation (`movable`)."""
    if not reservation_active or not paid_nodes:
        return None
    names = ", ".join(name for name, _ in paid_nodes[:5]) + (f" and {len(paid_nodes) - 5} more" if len(paid_nodes) > 5 else "")
    price = min((p for _, p in paid_nodes if p is not None), default=None)
    cost = f"; the cheapest costs ${price:.4f}/h at list price" if price is not None else ""
    return Verdict(DISRUPTED, f"reserved NodeClaim {claim} in {reservation_id} went away at {at:%Y-%m-%d %H:%M:%S} UTC "
                              f"while the reservation was active and paid node{'s' if len(paid_nodes) > 1 else ''} "
                              f"{names} ({instance_type} in {zone}, under an EC2NodeClass that selects it) kept "
                              f"running{cost}", reservation_id)


def reserved_labels(candidate: Candidate) -> dict[str, str]:
    """The labels a node in this reservation carries that a paid node of the same type does not."""
    return {
        L.CAPACITY_TYPE: L.RESERVED, L.INSTANCE_TYPE: candidate.instance_type, L.ZONE: candidate.zone,
        L.RESERVATION_ID: candidate.reservation_id,
        L.RESERVATION_TYPE: candidate.reservation_type,
        L.RESERVATION_INTERRUPTIBLE: str(candidate.interruptible).lower(),
    }


def pods_refuse(node_labels: dict[str, str], pods: tuple[PodNeeds, ...] | list[PodNeeds], candidate: Candidate) -> str:
    """The first pod that would not have run on the same node in this reservation, and the
    requirement that says so, in words; "" if every pod would have. A pod none of whose terms match
    the node it runs on (labels changed since it landed) tells nothing and is passed over."""
    reserved = {**node_labels, **reserved_labels(candidate)}
    for pod in pods:
        if not pod.alternatives or not any(term.matches_labels(node_labels) for term in pod.alternatives):
            continue
        if any(term.matches_labels(reserved) for term in pod.alternatives):
            continue
        needs = [term.first_mismatch(reserved) for term in pod.alternatives]
        words = " or ".join(dict.fromkeys(str(req) for req in needs if req is not None))
        return f"its pod {pod.key} requires {words}"
    return ""


def _pods_words(launch: Launch) -> str:
    if launch.pods_note:
        return f"; {launch.pods_note}"
    count = len(launch.pods)
    return f", and its {count} pod{'s' if count != 1 else ''} would have run there" if count else ""


def pool_refuses(requirements: tuple[dict, ...], candidate: Candidate) -> str:
    """The NodePool requirement that rules out this reservation's offering, in words; "" if none."""
    offering = reserved_labels(candidate)
    for entry in requirements:
        key = entry.get("key")
        if key not in offering:
            continue
        try:
            requirement = Requirement.of(key, entry.get("operator", ""), entry.get("values") or [])
        except RequirementError:
            continue  # the world's own validation reports a bad requirement
        if not requirement.has(offering[key]):
            return f"{key} {entry.get('operator')} {', '.join(entry.get('values') or [])}".strip()
    return ""


def movable(candidate: Candidate, pool_requirements: tuple[dict, ...], node_labels: dict[str, str],
            pods: tuple[PodNeeds, ...] | list[PodNeeds]) -> bool:
    """Could a paid node (its NodePool's requirements, its labels, its pods) have run in this
    reservation instead?"""
    return not pool_refuses(pool_requirements, candidate) and not pods_refuse(node_labels, pods, candidate)


def hours_overlapping(start: datetime.datetime, end: datetime.datetime,
                      idle_hours: list[tuple[datetime.datetime, float]]) -> float:
    """Hours of [start, end) that fall in an hour whose mean free count was at least one unit."""
    total = 0.0
    for hour, mean_free in idle_hours:
        if mean_free < 1:
            continue
        overlap = min(end, hour + datetime.timedelta(hours=1)) - max(start, hour)
        total += max(0.0, overlap.total_seconds() / 3600)
    return total


@dataclass(frozen=True)
class Placement:
    """Where the pods of one plan actually went: one of Karpenter's NodeClaims, as audited."""

    claim: str
    instance_type: str
    capacity_type: str
    reservation_id: str
    price_per_hour: float | None
    price_basis: str = LIST


def compare_plan(plan: dict, placements: list[Placement]) -> dict:
    """karpweb's plan for some pods (a DECISIONS.json nodeClaim's `launch`) beside the claims Karpenter
    launched for the same pods: whether they agree, and what Karpenter's choice costs more per hour
    at each side's price (list, a Savings Plan rate or a zonal RI's $0: the words say which; a reserved unit
    counts as prepaid: nothing more)."""
    if not placements:
        return {"same": None, "extra_per_hour": None, "words": "Karpenter has not launched for these pods (yet)"}
    planned = (plan.get("instanceType"), plan.get("capacityType"), plan.get("reservationID") or "")
    same = all((p.instance_type, p.capacity_type, p.reservation_id) == planned for p in placements)
    actual = sum(0.0 if p.capacity_type == "reserved" else (p.price_per_hour or 0.0) for p in placements)
    price = plan.get("price")
    planned_price = price if isinstance(price, (int, float)) and plan.get("capacityType") != "reserved" else 0.0
    extra = actual - planned_price
    if same:
        words = "Karpenter did the same"
    elif plan.get("capacityType") == "reserved" and any(p.capacity_type != "reserved" for p in placements):
        words = f"karpweb would have used reservation {plan.get('reservationID')}; Karpenter paid ${extra:.4f}/h more"
    else:
        priced = _priced_at(plan.get("priceBasis") or LIST, [p.price_basis for p in placements if p.capacity_type != "reserved"])
        words = f"Karpenter chose differently ({'+' if extra >= 0 else '-'}${abs(extra):.4f}/h {priced})"
    return {"same": same, "extra_per_hour": extra, "words": words}


def _priced_at(planned: str, paid: list[str]) -> str:
    """Which prices a comparison uses: "at list price" when both sides are at list, else each side's basis."""
    paid = sorted(set(paid)) or [LIST]
    if planned == LIST and paid == [LIST]:
        return at_basis(LIST)
    return f"karpweb's plan at its {basis_words(planned)}, Karpenter's at {', '.join(basis_words(b) for b in paid)}"
