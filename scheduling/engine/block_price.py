"""What an idle prepaid unit is worth an hour, and where that figure comes from.

A Capacity Block is paid up front: its own price per unit-hour is the upfront fee over (units x the block's
hours), whatever the on-demand list price of its type says. An ODCR bills each unit at the on-demand rate,
used or not, so its idle unit is worth that rate. The fee is taken from the first source that knows it:
the fee karpweb saw paid, the `block_fee` an administrator entered, an estimate from EC2's Capacity Block
offerings for the same type, count and duration; and only when none is known, the on-demand list price
(said as such). Extensions karpweb bought are added to a paid or entered fee (the block's hours include them). Pure Python: no Django, boto3 or kubernetes.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import ROUND_HALF_UP, Decimal

PAID = "fee paid"
ENTERED = "block fee entered"
ESTIMATED = "EC2 offerings estimate"
LIST_PRICE = "on-demand list price"
SOURCES = (PAID, ENTERED, ESTIMATED, LIST_PRICE)  # most trusted first

CENT_OF_A_CENT = Decimal("0.0001")


class BlockPriceError(ValueError):
    """A figure that cannot price a block; the message names the field."""


@dataclass(frozen=True)
class BlockFees:
    """What karpweb knows of a block's upfront fee, in dollars (None: not known from that source)."""

    paid: Decimal | None = None
    entered: Decimal | None = None
    estimated: Decimal | None = None  # for the block's whole duration, extensions included
    extensions: Decimal = Decimal(0)  # what extending it cost: added to a paid or entered fee (the block's hours include them)


@dataclass(frozen=True)
class UnitPrice:
    """An idle unit's worth, $ per unit-hour (None: unknown), its source (one of SOURCES) and the basis of
    the figure in words ("$6,360.00 / (4 units x 53 h)")."""

    per_unit_hour: Decimal | None
    source: str
    basis: str = ""

    def idle_cost(self, idle_units: int) -> Decimal | None:
        """The idle units' worth an hour, rounded once to a hundredth of a cent."""
        if self.per_unit_hour is None:
            return None
        return (self.per_unit_hour * idle_units).quantize(CENT_OF_A_CENT, rounding=ROUND_HALF_UP)


def block_hours(start: datetime, end: datetime) -> Decimal:
    """The hours a block lasts, start to end (what its fee buys)."""
    if start is None or end is None:
        raise BlockPriceError("start_date and end_date: a Capacity Block's price needs both")
    seconds = Decimal(int((end - start).total_seconds()))
    if seconds <= 0:
        raise BlockPriceError(f"end_date: {end.isoformat()} is not after start_date {start.isoformat()}")
    return seconds / Decimal(3600)


def per_unit_hour(fee: Decimal, units: int, hours: Decimal) -> Decimal:
    """The block's own price: upfront fee / (units x hours)."""
    fee = Decimal(str(fee))
    if fee <= 0:
        raise BlockPriceError(f"block_fee: {fee} is not a positive amount of dollars")
    if units <= 0:
        raise BlockPriceError(f"total_instance_count: a block of {units} units has no unit price")
    return fee / (Decimal(units) * hours)


def _hours_text(hours: Decimal) -> str:
    return f"{hours.normalize():f}" if hours == hours.to_integral_value() else f"{hours:.2f}"


def list_price(price: float | Decimal | None) -> UnitPrice:
    """An ODCR's idle unit (or a block whose fee nobody knows): the on-demand list price of its type."""
    if price is None:
        return UnitPrice(None, LIST_PRICE, "no on-demand price known for this type")
    return UnitPrice(Decimal(str(price)), LIST_PRICE)


def block_unit_price(fees: BlockFees, *, units: int, start: datetime | None, end: datetime | None,
                     on_demand: float | Decimal | None) -> UnitPrice:
    """A Capacity Block's idle unit: its own price from the first source that knows the fee, else the list price."""
    extensions = Decimal(str(fees.extensions or 0))
    for source, fee, extended in ((PAID, fees.paid, extensions), (ENTERED, fees.entered, extensions),
                                  (ESTIMATED, fees.estimated, Decimal(0))):
        if fee is None:
            continue
        hours, fee = block_hours(start, end), Decimal(str(fee))
        per_unit_hour(fee, units, hours)  # the fee itself must be a fee (the error names block_fee)
        paid = f"(${fee:,.2f} + ${extended:,.2f} extensions)" if extended else f"${fee:,.2f}"
        return UnitPrice(per_unit_hour(fee + extended, units, hours), source,
                         f"{paid} / ({units} units x {_hours_text(hours)} h)")
    return list_price(on_demand)
