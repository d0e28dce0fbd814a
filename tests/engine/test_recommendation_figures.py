"""Issue #47: advice whose figures stay right. Every basis multiplies out to the figure shown (one
rounding, in Decimal); an extension is advice only before the drain, while its nodes are there, and is
"not advised" when it costs more than the work it protects; a split or move never goes below the
committed count."""

import datetime
import re
from decimal import ROUND_HALF_UP, Decimal

from hypothesis import given, settings, strategies as st

from scheduling.engine.recommendations import ExtensionOffering
from tests.engine.test_recommendations import NOW, committed_odcr, destination, hours, kinds, odcr, recommend
from tests.support.properties import examples


def block(**changes):
    """The demo's 0005: two p4d nodes at $5.672/h whose pods started 3 h ago (and a few seconds more)."""
    facts = dict(reservation_type="capacity-block", total=2, used_now=2, price_per_hour=5.672, block_nodes=2,
                 drain_at=NOW + datetime.timedelta(hours=2),
                 unfinished_work=(("default/trainer-0100", NOW - datetime.timedelta(hours=3, seconds=32)),),
                 extension_offerings=(ExtensionOffering("cbe-24", 24, 272.26), ExtensionOffering("cbe-48", 48, 544.51)))
    facts.update(changes)
    return odcr("cr-cb", **facts)


def extension(facts, now=NOW):
    return next((r for r in recommend([facts], now) if r.kind == "extend"), None)


def multiplied_out(basis: str) -> Decimal:
    """The product a basis states, e.g. "2 nodes x 3.0 h x $5.6720/h" or "3 idle m5.xlarge x $0.1920/h ... x 730 h"."""
    factors = re.findall(r"(?:^|: |; )(?:the work lost is )?([\d.]+) [^x]*?x \$?([\d.,]+)(?:/h| h)[^x]*?x \$?([\d.,]+)", basis)
    a, b, c = factors[0]
    return (Decimal(a) * Decimal(b.replace(",", "")) * Decimal(c.replace(",", ""))).quantize(Decimal("0.01"), ROUND_HALF_UP)


def test_the_extension_basis_multiplies_out_to_the_loss_shown():
    rec = extension(block())
    # 2 nodes x 3.0 h x $5.6720/h is $34.03: the figure is that product, not 2 x 3.0089 h x 5.672 = $34.13.
    assert "2 nodes x 3.0 h x $5.6720/h" in rec.details["moneyBasis"]
    assert rec.details["lostWork"] == 34.03 and "about $34.03" in rec.reason


@settings(max_examples=examples(200), deadline=None)
@given(units=st.integers(1, 40), price=st.decimals("0.001", "120", places=5), seconds=st.integers(0, 200_000),
       nodes=st.integers(1, 8))
def test_every_basis_multiplies_out_to_its_figure(units, price, seconds, nodes):
    started = NOW - datetime.timedelta(seconds=seconds)
    found = kinds(recommend([
        odcr("cr-s", total=units + 1, used_now=0, hours=hours(14, 0, total=units + 1, peak=0), price_per_hour=float(price)),
        block(price_per_hour=float(price), block_nodes=nodes, unfinished_work=(("ml/p", started),))], NOW))
    shrink, extend = found[("shrink", "cr-s")], found[("extend", "cr-cb")]
    assert multiplied_out(shrink.details["moneyBasis"]) == Decimal(str(shrink.savings_per_month))
    assert multiplied_out(extend.details["moneyBasis"]) == Decimal(str(extend.details["lostWork"]))


def test_no_extension_once_the_block_drained_or_its_nodes_are_gone():
    assert extension(block()) is not None
    # Nine minutes after the drain: the nodes are gone and the work already lost; nothing to protect.
    assert extension(block(), NOW + datetime.timedelta(hours=2, minutes=9)) is None
    assert extension(block(block_nodes=0)) is None


def test_an_extension_costing_more_than_the_work_it_protects_is_not_advised():
    dear = extension(block())  # $272.26 against $34.03 of work
    assert dear.details["advised"] is False and "Not advised: the cheapest extension costs 8.0 times" in dear.reason
    cheap = extension(block(extension_offerings=(ExtensionOffering("cbe-24", 24, 30.0),)))
    assert cheap.details["advised"] is True and "Not advised" not in cheap.reason


def test_a_split_or_move_never_leaves_a_reservation_below_its_committed_count():
    # The demo's 0012 as the issue found it: 8 units, all 8 committed, the use needs 4, a same-shape reservation
    # whose cluster runs 3 on-demand beside it: nothing may leave it while the commitment runs.
    source = committed_odcr("cr-src", total=8, committed_count=8)
    assert [r.kind for r in recommend([source, destination()], NOW) if r.reservation_id == "cr-src"] == []
    # 12 units committed to 8: only the 4 above the commitment go (3 moved, 1 split), leaving exactly 8.
    found = kinds(recommend([committed_odcr("cr-src", total=12, committed_count=8), destination(cluster_demand=(("beta", 3),))], NOW))
    assert (found[("move", "cr-src")].details["count"], found[("split", "cr-src")].details["count"]) == (3, 1)
    assert found[("shrink", "cr-src")].target_count == 8  # the alternative: stop paying for the same 4
