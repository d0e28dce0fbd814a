"""#48: the overview, node and reservation pages refresh themselves (static/js/refresh.js through
htmx), keeping the operator's filter and scroll position, and say when they last refreshed; at the
widths an operator's laptop shows them (1280 and 1440 px)."""

import re

import pytest

from tests.factories.reservations import CapacityReservationFactory
from tests.factories.scheduling import NodeFactory, NodePoolFactory

pytestmark = pytest.mark.browser

HTMX_SETTLED = "() => !document.querySelector('.htmx-request, .htmx-swapping, .htmx-settling')"


@pytest.fixture
def fast_refresh(settings):
    settings.KARPWEB_PAGE_REFRESH_SECONDS = 2  # the live server runs in this process: it serves 2 s


def last_refreshed(page) -> str:
    """When the page says it last refreshed: to the second in <time datetime>; its text to the minute,
    as every page writes a time."""
    stamp = page.locator("#refreshed time")
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2} UTC", stamp.inner_text())
    return stamp.get_attribute("datetime")


def refreshed_after(page, before: str) -> str:
    page.wait_for_function("(before) => document.querySelector('#refreshed time').dateTime !== before", arg=before,
                           timeout=15000)
    page.wait_for_function(HTMX_SETTLED)
    return last_refreshed(page)


def filter_by(page, field: str, value: str):
    page.fill(f"form.filters input[name={field}]", value)
    page.press(f"form.filters input[name={field}]", "Enter")
    page.wait_for_url(f"**{field}={value}*")
    page.wait_for_function(HTMX_SETTLED)


@pytest.mark.parametrize("width", [1280, 1440])
def test_the_node_list_refreshes_with_its_filter_and_scroll(operator_login, live_server, fast_refresh, artifacts, width):
    pool = NodePoolFactory(name="web")
    for index in range(45):
        NodeFactory(name=f"web-{index:02}.test.internal", node_pool=pool)
        NodeFactory(name=f"batch-{index:02}.test.internal", node_pool=pool)
    page = operator_login
    page.set_viewport_size({"width": width, "height": 700})
    page.goto(f"{live_server.url}/nodes/")
    filter_by(page, "q", "web-")
    assert page.locator("#table tbody tr").count() == 45
    page.evaluate("window.scrollTo(0, 600)")
    before = last_refreshed(page)
    NodeFactory(name="web-new.test.internal", node_pool=pool)  # what the next refresh must show
    NodeFactory(name="batch-new.test.internal", node_pool=pool)

    after = refreshed_after(page, before)

    assert after > before  # ISO 8601 times in UTC (the server's first, the browser's next) compare as text
    rows = page.locator("#table tbody tr td:first-child").all_inner_texts()
    assert "web-new.test.internal" in rows and not [r for r in rows if r.startswith("batch-")]
    assert page.input_value("form.filters input[name=q]") == "web-"
    assert page.evaluate("window.scrollY") == 600
    assert "q=web-" in page.url
    page.screenshot(path=artifacts / f"self-refresh-nodes-{width}.png")


def test_the_reservation_list_and_the_overview_refresh(operator_login, live_server, fast_refresh):
    CapacityReservationFactory(reservation_id="cr-0refresh1", instance_type="p5.48xlarge")
    CapacityReservationFactory(reservation_id="cr-0refresh2", instance_type="m5.large")
    page = operator_login
    page.set_viewport_size({"width": 1440, "height": 900})
    page.goto(f"{live_server.url}/reservations/")
    filter_by(page, "instance_type", "p5.48xlarge")
    before = last_refreshed(page)
    CapacityReservationFactory(reservation_id="cr-0refresh3", instance_type="p5.48xlarge")
    refreshed_after(page, before)
    table = page.locator("#table").inner_text()
    assert "cr-0refresh3" in table and "cr-0refresh1" in table and "cr-0refresh2" not in table
    assert page.input_value("form.filters input[name=instance_type]") == "p5.48xlarge"

    page.goto(f"{live_server.url}/")
    page.wait_for_function(HTMX_SETTLED)
    before = last_refreshed(page)
    refreshed_after(page, before)
    assert page.locator("#overview-stats").inner_text().strip()  # the stats swapped in, not emptied
