"""Capacity Reservation groups (resource groups of ODCRs): how karpweb stores a group term on a
real EC2NodeClass, and when a launch targets the group rather than one reservation.

Karpenter's CRD knows no `resourceGroupARN` in `capacityReservationSelectorTerms` (the API server
would prune it, leaving an empty, invalid term), so on a cluster the group terms live in the
annotation `karpweb.io/capacity-reservation-groups`: a JSON list of group ARNs. karpweb's own
model keeps them as ordinary terms (`{"resourceGroupARN": ...}`); `split_terms` and `merge_terms`
convert between the two.

A launch into a member of a group the EC2NodeClass selects targets the group
(`CapacityReservationTarget.CapacityReservationResourceGroupArn`) when the group holds several
usable reservations of the same instance type, zone and kind: EC2 then picks one with room, so a
count that is a few seconds stale cannot fail the launch while a sibling has a free unit.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Iterable, Mapping

from .reservations import CapacityReservation

GROUPS_ANNOTATION = "karpweb.io/capacity-reservation-groups"
GROUP_FIELD = "resourceGroupARN"


def is_group_term(term: object) -> bool:
    return isinstance(term, dict) and term.get(GROUP_FIELD) is not None


def split_terms(terms: Iterable[object] | None) -> tuple[list, list[str]]:
    """(the terms Karpenter's CRD can hold, the group ARNs for the annotation)."""
    spec, arns = [], []
    for term in terms or []:
        if is_group_term(term) and len(term) == 1:
            if term[GROUP_FIELD] not in arns:
                arns.append(term[GROUP_FIELD])
        else:
            spec.append(term)
    return spec, arns


def annotation_value(arns: list[str]) -> str | None:
    """The annotation for these ARNs; None (remove it) when there are none."""
    return json.dumps(arns) if arns else None


def parse_annotation(value: object) -> tuple[list[str], str | None]:
    """The ARNs an annotation value names, and a problem in words (None when it is well formed)."""
    if value is None or value == "":
        return [], None
    try:
        arns = json.loads(value) if isinstance(value, str) else value
    except ValueError:
        return [], "expected a JSON list of resource group ARNs"
    if not isinstance(arns, list) or not all(isinstance(arn, str) for arn in arns):
        return [], "expected a JSON list of resource group ARNs"
    return list(dict.fromkeys(arns)), None


def merge_terms(spec_terms: object, annotations: Mapping[str, object] | None) -> object:
    """The terms karpweb evaluates: the spec's, then one group term per annotated ARN. A spec
    that is not a list is returned as is (the selector validation names the problem); a malformed
    annotation adds nothing (`parse_annotation` says why)."""
    arns, _problem = parse_annotation((annotations or {}).get(GROUPS_ANNOTATION))
    if not arns:
        return spec_terms
    if spec_terms is None:
        spec_terms = []
    if not isinstance(spec_terms, list):
        return spec_terms
    present = {term.get(GROUP_FIELD) for term in spec_terms if is_group_term(term)}
    return list(spec_terms) + [{GROUP_FIELD: arn} for arn in arns if arn not in present]


def group_arns(terms: object) -> list[str]:
    """The group ARNs a list of terms names, in order."""
    if not isinstance(terms, list):
        return []
    return list(dict.fromkeys(term[GROUP_FIELD] for term in terms if is_group_term(term) and isinstance(term[GROUP_FIELD], str)))


def _same_pool(a: CapacityReservation, b: CapacityReservation) -> bool:
    return (a.instance_type, a.zone, a.reservation_type, a.interruptible) == (b.instance_type, b.zone, b.reservation_type, b.interruptible)


def group_target(reservation: CapacityReservation, arns: Iterable[str], groups: Mapping[str, frozenset[str]],
                 reservations: Mapping[str, CapacityReservation], now: datetime) -> str | None:
    """The group a launch into `reservation` should target, or None to target the reservation.

    Only groups in `arns` (those the EC2NodeClass selects) count, and only when the group holds at
    least two usable reservations like this one (type, zone, kind); capacity blocks are never
    targeted through a group (CreateFleet takes exactly one block)."""
    if reservation.is_capacity_block:
        return None
    for arn in sorted(set(arns)):
        members = groups.get(arn, frozenset())
        if reservation.id not in members:
            continue
        peers = [reservations[m] for m in members if m in reservations]
        if sum(1 for p in peers if p.is_selectable(now) and _same_pool(p, reservation)) >= 2:
            return arn
    return None
