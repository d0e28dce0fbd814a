"""The Reservations and Nodes lists on the demo world: idle prepaid cost, node cost, request bars and their
totals rows (on rows of their own: tests/ui/test_list_money_own_rows.py)."""

import re

from pathlib import Path

import pytest
from django.contrib.staticfiles import finders
from django.urls import reverse

from reservations.models import CapacityReservation
from scheduling.models import InstanceType, Offering

pytestmark = pytest.mark.django_db


@pytest.fixture
def demo_world(demo_world_for_module, db):
    """Every test here builds on the demo world: it is seeded once for the module (tests/conftest.py),
    and each test's own writes are rolled back after it."""


def row_of(page: str, text: str) -> str:
    """The <tr> that holds `text`."""
    rows = [row for row in re.findall(r"<tr>.*?</tr>", page, re.S) if text in row]
    assert len(rows) == 1, f"{text}: {len(rows)} rows"
    return rows[0]


def footer(page: str) -> str:
    return re.search(r"<tfoot.*?</tfoot>", page, re.S).group(0)


def price(instance_type: str, zone: str, capacity_type: str, dollars: float):
    it, _ = InstanceType.objects.get_or_create(name=instance_type, defaults={"cpu_millicores": 2000,
                                                                            "memory_bytes": 8 * 2**30})
    Offering.objects.create(instance_type=it, zone=zone, capacity_type=capacity_type, price=dollars)


def test_reservations_show_idle_prepaid_cost_per_row_and_totals(viewer_client, demo_world):
    page = viewer_client.get(reverse("reservations:list")).content.decode()
    assert "Idle (prepaid $/h, source)" in page
    # 4 idle m5.xlarge at $0.192 list price; 1 idle p5.48xlarge at $55.04 (no fee known for that block).
    list_price = '<span class="muted idle-source">(on-demand list price)</span></td>'
    assert f"<td>$0.7680/h {list_price}" in row_of(page, "cr-0a1b2c3d4e5f60002")
    assert f"<td>$55.04/h {list_price}" in row_of(page, "cr-0a1b2c3d4e5f60006")
    # The trn2 block's 2 idle units at its own price: its entered fee over its unit-hours, not 2 x $44.70.
    assert ('<td>$60.00/h <span class="muted idle-source">(block fee entered: $6,360.00 / (4 units x 53 h))</span></td>'
            in row_of(page, "cr-0a1b2c3d4e5f60007"))
    # The expired one bills nothing more: no idle cost, and it is left out of the totals.
    assert "ended" in row_of(page, "cr-0a1b2c3d4e5f60008") and "$" not in row_of(page, "cr-0a1b2c3d4e5f60008")
    usable = CapacityReservation.objects.usable()
    used, idle, total = (sum(getattr(r, f) for r in usable) for f in
                         ("used_instance_count", "available_instance_count", "total_instance_count"))
    totals = footer(page)
    assert f'id="reservation-totals">{used} / {idle} / {total}<' in totals
    assert f"in {usable.count()} usable reservations (1 ended, not counted)" in totals
    overview = viewer_client.get(reverse("scheduling:overview")).content.decode()
    idle_on_the_overview = re.search(r'<div class="value">(\$[0-9,.]+)/h</div><div class="label">idle prepaid', overview)
    # The overview's figure: one rule for idle cost (over the demo fleet's reservations, $146.40 and up).
    assert f'id="idle-cost-total">{idle_on_the_overview.group(1)}/h<' in totals


def test_reservation_totals_follow_the_filter_not_the_page(viewer_client, demo_world):
    page = viewer_client.get(reverse("reservations:list"), {"instance_type": "m5.xlarge", "per_page": 1}).content.decode()
    # Two m5.xlarge ODCRs (4 and 3 idle) though the page shows one: 7 x $0.192.
    assert 'id="reservation-totals">0 / 7 / 7<' in footer(page)
    assert 'id="idle-cost-total">$1.34/h<' in footer(page)


def test_ids_never_wrap(viewer_client, demo_world):
    page = viewer_client.get(reverse("reservations:list")).content.decode()
    assert '<a class="id" href="/reservations/cr-0a1b2c3d4e5f60001/">cr-0a1b2c3d4e5f60001</a>' in page
    nodes = viewer_client.get(reverse("scheduling:nodes")).content.decode()
    assert re.search(r'<a class="id" href="(/clusters/[^/"]+)?/nodes/[^"]+">ip-10-0-', nodes)
    text = Path(finders.find("css/karpweb.css")).read_text()
    assert re.search(r"\.id\b[^{]*\{[^}]*white-space:\s*nowrap", text)


