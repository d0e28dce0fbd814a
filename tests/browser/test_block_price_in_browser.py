"""#47 (13) in a real browser, on the demo: the trn2 Capacity Block 0007's idle units are valued at the block's
own price (its entered fee of $6,360 over 4 units x 53 h: $30 a unit-hour), not the $44.70 on-demand list price,
with the source beside the figure on the overview, the fleet overview and the reservation's page; an ODCR's
idle units stay at their on-demand rate, said as such."""

import pytest
from playwright.sync_api import expect

from django.urls import reverse

from fleet.scope import default_cluster
from scheduling import demo as demo_world

pytestmark = pytest.mark.browser

BLOCK = demo_world.reservation_id("0007")
ODCR = demo_world.reservation_id("0002")
BLOCK_FIGURE = "$60.00/h (block fee entered: $6,360.00 / (4 units x 53 h))"


def test_idle_block_units_at_the_blocks_own_price_with_their_source(demo, operator_login, live_server, artifacts):
    page = operator_login
    page.goto(f"{live_server.url}{reverse('scheduling:overview')}?cluster={default_cluster().name}")
    idle = page.locator(".card.stat", has_text="idle prepaid capacity")
    expect(idle).to_contain_text("$118.45/h")  # was $147.85/h with the block's 2 idle units at 2 x $44.70
    expect(idle).to_contain_text("$60.00/h block fee entered; $58.45/h on-demand list price")

    page.goto(live_server.url + reverse("fleet_overview"))
    expect(page.locator(f"#fleet-{BLOCK}")).to_contain_text(BLOCK_FIGURE)

    page.goto(live_server.url + reverse("reservations:detail", args=[BLOCK]))
    expect(page.locator("#idle-value")).to_have_text(BLOCK_FIGURE)
    page.screenshot(path=artifacts / "block-price-reservation.png", full_page=True)
    page.goto(live_server.url + reverse("reservations:detail", args=[ODCR]))
    expect(page.locator("#idle-value")).to_have_text("$0.7680/h (on-demand list price)")
