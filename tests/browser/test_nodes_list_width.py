"""The nodes list fits a 1280 px laptop (and 1366, 1440): the table is no wider than the window, and its last
columns ("Memory requested", "Ready") are on screen, in the all-clusters view and in one cluster's."""

import pytest
from django.urls import reverse

from tests.browser.test_layout_1440 import HTMX_SETTLED

pytestmark = pytest.mark.browser

# The table's own width, its box's, the window's, and where each header cell ends.
MEASURE = """() => {
  const table = document.querySelector("main table.nodes");
  return {table: table.scrollWidth, box: table.parentElement.clientWidth, window: document.documentElement.clientWidth,
          page: document.documentElement.scrollWidth,
          headers: [...table.querySelectorAll("thead th")].map(th => [th.innerText.trim(), th.getBoundingClientRect().right])};
}"""


@pytest.mark.parametrize("width", [1280, 1366, 1440])
def test_the_nodes_list_fits_the_window(demo, operator_login, live_server, artifacts, width):
    page = operator_login
    page.set_viewport_size({"width": width, "height": 800})
    for query in ("", "?cluster=karpweb-test"):
        page.goto(f"{live_server.url}{reverse('scheduling:nodes')}{query}")
        page.wait_for_function(HTMX_SETTLED)
        page.screenshot(path=artifacts / f"nodes-{width}{query.replace('?cluster=', '-')}.png", full_page=True)
        seen = page.evaluate(MEASURE)
        # Not wider than the window, nor than the box it sits in (which would scroll it sideways).
        assert seen["table"] <= min(seen["window"], seen["box"]) and seen["page"] <= width, (query, seen)
        headers = dict(seen["headers"])
        for last in ("Memory requested", "Ready"):
            assert headers[last] <= seen["window"], (query, last, seen)
