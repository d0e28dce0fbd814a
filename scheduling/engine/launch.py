"""What a planned node claim launches, and the labels its node will carry.

Finalising (upstream `FinalizeScheduling`): a claim holding a reservation unit is pinned to
`capacity-type In [reserved]` and `capacity-reservation-id In [<its reservation>]`, so it launches
exactly that reservation's instance type and offering (which also makes a capacity block launch
one instance type and one offering). A claim without a unit is pinned away from reserved capacity,
so it can never launch into a unit another claim planned. The launch is reserved before spot
before on-demand, the cheapest offering within that capacity type.
"""

from __future__ import annotations

from dataclasses import dataclass

from .instancetypes import InstanceType, Offering
from .labels import (
    CAPACITY_TYPE, CAPACITY_TYPE_PREFERENCE, HOSTNAME, NODE_NAME_FIELD, NODEPOOL, RESERVATION_ID, RESERVED,
    WELL_KNOWN_LABELS,
)
from .nodeclaim import NodeClaim
from .requirements import NOT_IN, Requirement, Requirements

MAX_INSTANCE_TYPES = 600  # upstream NodeClaimTemplate truncation


@dataclass(slots=True)
class FinalClaim:
    claim: NodeClaim
    requirements: Requirements
    instance_type_options: list[InstanceType]
    instance_type: InstanceType
    offering: Offering
    labels: dict[str, str]

    @property
    def name(self) -> str:
        return self.claim.name


def finalize(claim: NodeClaim) -> FinalClaim:
    """The pinned claim, its options cheapest first, and what it launches. Works from the catalog
    view's price orders and the claim's type mask (no per-claim sorting)."""
    requirements = _pin(claim)
    catalog = claim.template.catalog
    if claim.hold is not None:
        held = _held_launch(claim, requirements)
        if held is not None:
            return held
    view = catalog.view(requirements)
    mask = claim.mask & view.mask
    types = catalog.instance_types
    memo = view.memo
    if len(memo) > 4096:
        memo.clear()
    found = memo.get(mask)
    if found is None:
        # Claims often end with the same types (all those at least so large): answer once per mask.
        bits = format(mask, f"0{len(types)}b")  # bit i is character len - 1 - i
        last = len(types) - 1
        options = [types[index] for _, _, index in view.price_order if bits[last - index] == "1"][:MAX_INSTANCE_TYPES]
        found = memo[mask] = (options, None if claim.hold is not None else _launch(claim, view, mask, types))
    options, launch = found
    instance_type, offering = launch if launch is not None else _launch(claim, view, mask, types)
    labels = node_labels(claim, requirements, instance_type, offering)
    return FinalClaim(claim, requirements, list(options), instance_type, offering, labels)


def _held_launch(claim: NodeClaim, requirements: Requirements) -> FinalClaim | None:
    """A claim holding a unit has one option, the unit's type, and launches the unit: what the view
    of its pinned requirements would give (one type, one offering), without computing that view
    (one per reservation per plan). None if the unit no longer fits the claim (a scheduler bug,
    which the general path reports)."""
    catalog = claim.template.catalog
    hold = claim.hold
    index = catalog.index[hold.reservation.instance_type]
    if not (claim.mask >> index & 1 and hold.available and hold.compatible(requirements)):
        return None
    instance_type = catalog.instance_types[index]
    return FinalClaim(claim, requirements, [instance_type], instance_type, hold,
                      node_labels(claim, requirements, instance_type, hold))


def launch_price(claim: NodeClaim) -> float:
    """What the claim would launch at if it were finalised now."""
    requirements = _pin(claim)
    catalog = claim.template.catalog
    view = catalog.view(requirements)
    return _launch(claim, view, claim.mask & view.mask, catalog.instance_types)[1].price


def _launch(claim: NodeClaim, view, mask: int, types: list[InstanceType]) -> tuple[InstanceType, Offering]:
    """Reserved (the claim's unit) before spot before on-demand, the cheapest offering of that
    capacity type (ties: type name, then zone)."""
    if claim.hold is not None:
        for _, _, _, index, offering in view.offers_by_price.get(RESERVED, ()):
            if offering is claim.hold and mask >> index & 1:
                return types[index], offering
    best = None
    for capacity_type, offers in view.offers_by_price.items():
        if capacity_type == RESERVED:
            continue
        for price, name, zone, index, offering in offers:
            if mask >> index & 1:
                candidate = (CAPACITY_TYPE_PREFERENCE[capacity_type], price, name, zone)
                if best is None or candidate < best[0]:
                    best = (candidate, types[index], offering)
                break
    if best is None:
        raise RuntimeError(f"node claim {claim.name} has no offering left to launch")  # a scheduler bug
    return best[1], best[2]


def _pin(claim: NodeClaim) -> Requirements:
    if claim.hold is not None:
        return claim.requirements.intersect([
            Requirement.single(CAPACITY_TYPE, RESERVED),
            Requirement.single(RESERVATION_ID, claim.hold.reservation.id),
        ])
    return claim.requirements.intersect([Requirement.of(CAPACITY_TYPE, NOT_IN, [RESERVED])])


def _priced_options(instance_types: list[InstanceType], requirements: Requirements) -> list[tuple[InstanceType, list[Offering]]]:
    """Instance types with available compatible offerings, cheapest first (upstream OrderByPrice)."""
    options = []
    for it in instance_types:
        offers = [o for o in it.offerings if o.available and o.compatible(requirements)]
        if offers:
            options.append((it, offers))
    options.sort(key=lambda item: (min(o.price for o in item[1]), item[0].name))
    return options


def _launch_choice(claim: NodeClaim, options: list[tuple[InstanceType, list[Offering]]]) -> tuple[InstanceType, Offering]:
    if claim.hold is not None:
        for it, offers in options:
            if claim.hold in offers:
                return it, claim.hold
    candidates = [(it, o) for it, offers in options for o in offers]
    if not candidates:
        raise RuntimeError(f"node claim {claim.name} has no offering left to launch")  # a scheduler bug
    return min(candidates, key=lambda item: (CAPACITY_TYPE_PREFERENCE[item[1].capacity_type], item[1].price,
                                             item[0].name, item[1].zone))


def node_labels(claim: NodeClaim, requirements: Requirements, it: InstanceType, offering: Offering) -> dict[str, str]:
    """Labels the node will carry: a value for every custom requirement (upstream `Labels()`),
    the nodepool, the instance type's labels, and the offering's zone and capacity type plus,
    only when reserved, the reservation labels."""
    labels: dict[str, str] = {}
    for req in requirements:
        if req.key in WELL_KNOWN_LABELS or req.key in (HOSTNAME, NODE_NAME_FIELD):
            continue
        value = req.any_value()
        if value is not None:
            labels[req.key] = value
    labels[NODEPOOL] = claim.template.name
    labels.update(it.labels)
    labels.update(offering.labels)
    return dict(sorted(labels.items()))
