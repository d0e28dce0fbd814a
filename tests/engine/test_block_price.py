"""The block's own price per unit-hour (scheduling.engine.block_price): upfront fee / (units x hours), from the
first source that knows the fee, and the on-demand list price only when none does."""

from datetime import datetime, timedelta, timezone
from decimal import Decimal

import pytest

from scheduling.engine.block_price import (ENTERED, ESTIMATED, LIST_PRICE, PAID, BlockFees, BlockPriceError,
                                           block_hours, block_unit_price, list_price)

START = datetime(2026, 11, 26, 11, 30, tzinfo=timezone.utc)
END = START + timedelta(hours=53)


def test_a_block_is_worth_its_fee_over_its_unit_hours():
    price = block_unit_price(BlockFees(entered=Decimal("6360")), units=4, start=START, end=END, on_demand=44.70)
    assert price.per_unit_hour == Decimal("6360") / Decimal(212)
    assert price.source == ENTERED
    assert price.idle_cost(2) == Decimal("60.0000")
    assert price.basis == "$6,360.00 / (4 units x 53 h)"


def test_sources_in_order_paid_entered_estimate_list():
    fees = BlockFees(paid=Decimal("2400"), entered=Decimal("4800"), estimated=Decimal("9600"))
    day = dict(units=1, start=START, end=START + timedelta(hours=24), on_demand=44.70)
    assert (block_unit_price(fees, **day).source, block_unit_price(fees, **day).per_unit_hour) == (PAID, Decimal(100))
    no_paid = BlockFees(entered=fees.entered, estimated=fees.estimated)
    assert (block_unit_price(no_paid, **day).source, block_unit_price(no_paid, **day).per_unit_hour) == (ENTERED, Decimal(200))
    only_estimate = BlockFees(estimated=fees.estimated)
    assert block_unit_price(only_estimate, **day).source == ESTIMATED
    assert block_unit_price(only_estimate, **day).per_unit_hour == Decimal(400)
    fallback = block_unit_price(BlockFees(), **day)
    assert (fallback.source, fallback.per_unit_hour) == (LIST_PRICE, Decimal("44.7"))


def test_an_odcr_or_an_unpriced_type_is_said_as_the_list_price():
    assert list_price(0.192).idle_cost(4) == Decimal("0.7680") and list_price(0.192).source == LIST_PRICE
    unknown = list_price(None)
    assert unknown.idle_cost(3) is None and unknown.source == LIST_PRICE


def test_fractional_hours_are_said_to_the_hundredth():
    price = block_unit_price(BlockFees(estimated=Decimal("100")), units=1, start=START,
                             end=START + timedelta(hours=1, minutes=30), on_demand=None)
    assert price.basis == "$100.00 / (1 units x 1.50 h)"
    assert block_hours(START, START + timedelta(minutes=90)) == Decimal("1.5")


@pytest.mark.parametrize("fees, units, end, field", [
    (BlockFees(entered=Decimal("0")), 4, END, "block_fee"),
    (BlockFees(entered=Decimal("-5")), 4, END, "block_fee"),
    (BlockFees(entered=Decimal("100")), 0, END, "total_instance_count"),
    (BlockFees(entered=Decimal("100")), 4, START, "end_date"),
    (BlockFees(entered=Decimal("100")), 4, None, "start_date and end_date"),
])
def test_bad_figures_name_the_field(fees, units, end, field):
    with pytest.raises(BlockPriceError, match=field):
        block_unit_price(fees, units=units, start=START, end=end, on_demand=1.0)


def test_extensions_bought_are_added_to_a_known_fee_not_to_an_estimate():
    # A 48 h block extended by 24 h: its hours are 72, and its price what was paid for all of them.
    extended = dict(units=2, start=START, end=START + timedelta(hours=72), on_demand=44.70)
    entered = block_unit_price(BlockFees(entered=Decimal("4800"), extensions=Decimal("1680")), **extended)
    assert entered.per_unit_hour == Decimal(45) and entered.source == ENTERED
    assert entered.basis == "($4,800.00 + $1,680.00 extensions) / (2 units x 72 h)"
    estimate = block_unit_price(BlockFees(estimated=Decimal("7200"), extensions=Decimal("1680")), **extended)
    assert estimate.per_unit_hour == Decimal(50)  # EC2's quote is for the whole 72 h already
    # Extensions alone price nothing: without the block's own fee, the list price.
    assert block_unit_price(BlockFees(extensions=Decimal("1680")), **extended).source == LIST_PRICE
