"""What a reservation's idle units are worth an hour, and from which source (the one place that says it).

An ODCR's idle unit bills its on-demand rate. A Capacity Block was paid up front: its idle unit is worth the
block's own price per unit-hour (scheduling/engine/block_price.py) from the fee karpweb saw paid, the
`block_fee` an administrator entered (CapacityBlockFee, in the admin) or EC2's offerings estimate (which the
EC2 sync asks for: `refresh_estimates`); only when none is known, the on-demand list price, said as such.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from decimal import Decimal

from django.db.models import F

from reservations.models import CapacityBlockFee, CapacityReservation
from scheduling.engine.block_price import (SOURCES, BlockFees, BlockPriceError, UnitPrice, block_hours,
                                           block_unit_price, list_price)

log = logging.getLogger(__name__)

FEES_ATTRIBUTE = "_block_fees"  # a reservation's BlockFees, loaded once for a page's rows (attach_fees)


@dataclass(frozen=True)
class IdleValue:
    """A reservation's idle units' worth an hour ($, None: unknown) and the unit price it comes from."""

    cost: float | None
    unit: UnitPrice

    @property
    def source(self) -> str:
        return self.unit.source


def whole_hours(reservation) -> int | None:
    """A block's duration in whole hours (what DescribeCapacityBlockOfferings is asked for); None without dates."""
    if reservation.start_date is None or reservation.end_date is None:
        return None
    try:
        return int(block_hours(reservation.start_date, reservation.end_date).to_integral_value())
    except BlockPriceError:
        return None


def _fees_from_row(row: CapacityBlockFee | None, reservation) -> BlockFees:
    if row is None:
        return BlockFees()
    # An estimate asked for another duration (the block was extended since) prices nothing.
    estimate = row.estimated_fee if row.estimated_hours == whole_hours(reservation) else None
    return BlockFees(paid=row.paid_fee, entered=row.block_fee, estimated=estimate, extensions=row.extensions_paid)


def fees_by_reservation(reservations) -> dict[str, BlockFees]:
    """{reservation id: BlockFees} of the Capacity Blocks among these reservations: one query, none without a block."""
    blocks = [r for r in reservations if r.is_capacity_block]
    if not blocks:
        return {}
    rows = {row.reservation_id: row for row in
            CapacityBlockFee.objects.filter(reservation_id__in=[r.reservation_id for r in blocks])}
    return {r.reservation_id: _fees_from_row(rows.get(r.reservation_id), r) for r in blocks}


def attach_fees(reservations) -> None:
    """Loads the fees of the Capacity Blocks among these reservations at once (no query per row later)."""
    known = fees_by_reservation(reservations)
    for reservation in reservations:
        if reservation.reservation_id in known:
            setattr(reservation, FEES_ATTRIBUTE, known[reservation.reservation_id])


def fees_of(reservation, known: dict[str, BlockFees] | None = None) -> BlockFees:
    """A block's fees: from `known` (fees_by_reservation of a page's rows), attached, or read now."""
    if known is not None and reservation.reservation_id in known:
        return known[reservation.reservation_id]
    if not hasattr(reservation, FEES_ATTRIBUTE):
        attach_fees([reservation])
    return getattr(reservation, FEES_ATTRIBUTE)


def on_demand_rate(reservation, prices: dict[tuple[str, str], float]) -> float | None:
    """The on-demand list price of the reservation's type in its zone (the type's lowest elsewhere); None if unknown."""
    price = prices.get((reservation.instance_type, reservation.availability_zone))
    if price is None:
        same_type = [p for (name, _zone), p in prices.items() if name == reservation.instance_type]
        price = min(same_type) if same_type else None
    return price


def unit_price(reservation, prices: dict[tuple[str, str], float], known: dict[str, BlockFees] | None = None) -> UnitPrice:
    """What one idle unit is worth an hour: an ODCR's on-demand rate, a Capacity Block's own price."""
    rate = on_demand_rate(reservation, prices)
    if not reservation.is_capacity_block:
        return list_price(rate)
    try:
        return block_unit_price(fees_of(reservation, known), units=reservation.total_instance_count,
                                start=reservation.start_date, end=reservation.end_date, on_demand=rate)
    except BlockPriceError as error:  # a mirrored block without dates: say it at list price rather than fail a page
        log.warning("Capacity Block %s priced at list price: %s", reservation.reservation_id, error)
        return list_price(rate)


def idle_value(reservation, prices: dict[tuple[str, str], float], now=None,
               known: dict[str, BlockFees] | None = None) -> IdleValue:
    """The idle units' worth an hour (prepaid: billed used or not); 0 once it is no longer usable (it bills
    nothing more). `known`: the blocks' fees already read (fees_by_reservation)."""
    unit = unit_price(reservation, prices, known)
    if not reservation.is_usable(now):
        return IdleValue(0.0, unit)
    cost = unit.idle_cost(reservation.available_instance_count)
    return IdleValue(None if cost is None else float(cost), unit)


def idle_by_source(values) -> list[tuple[str, float]]:
    """[(source, $/h)] of these IdleValues with some idle worth, most trusted source first."""
    totals: dict[str, float] = {}
    for value in values:
        if value.cost:
            totals[value.source] = totals.get(value.source, 0.0) + value.cost
    return [(source, totals[source]) for source in SOURCES if source in totals]


def refresh_estimates(estimate, now) -> dict:
    """Asks EC2 (``estimate(instance_type, count, hours)``: the cloud's lowest DescribeCapacityBlockOfferings fee,
    or None) for the usable Capacity Blocks whose fee karpweb does not know, once per block duration."""
    asked = 0
    blocks = CapacityReservation.objects.usable(now).filter(reservation_type=CapacityReservation.ReservationType.CAPACITY_BLOCK)
    known = {row.reservation_id: row for row in CapacityBlockFee.objects.filter(
        reservation_id__in=blocks.values("reservation_id"))}
    for block in blocks:
        row, hours = known.get(block.reservation_id), whole_hours(block)
        if hours is None or (row is not None and (row.paid_fee or row.block_fee or row.estimated_hours == hours)):
            continue  # a fee known, or this duration already asked
        fee = estimate(block.instance_type, block.total_instance_count, hours)
        asked += 1
        CapacityBlockFee.objects.update_or_create(reservation_id=block.reservation_id, defaults=dict(
            estimated_fee=None if fee is None else Decimal(str(fee)).quantize(Decimal("0.01")),
            estimated_hours=hours, estimated_at=now))
    return {"block_fee_estimates": asked}


def record_extension_paid(reservation_id: str, upfront_fee) -> None:
    """Adds what karpweb paid to extend a block (PurchaseCapacityBlockExtension's UpfrontFee) to its fees: its hours
    now include the extension. Atomic (F expression): two purchases recorded at once both count."""
    if upfront_fee in (None, ""):
        return
    fee = Decimal(str(upfront_fee)).quantize(Decimal("0.01"))
    row, _created = CapacityBlockFee.objects.get_or_create(reservation_id=reservation_id)
    CapacityBlockFee.objects.filter(pk=row.pk).update(extensions_paid=F("extensions_paid") + fee)
