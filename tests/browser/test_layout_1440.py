"""Every main page at 1440 x 900, as an operator's laptop shows it: nothing wider than the window, and
nothing wider than the card it sits in (a long condition message or an ARN wraps; a wide table scrolls
inside its own box instead of pushing the page). Each page's screenshot goes to test-artifacts/."""

import pytest
from django.urls import reverse

from reservations.models import CapacityReservation, EC2NodeClass, Recommendation
from scheduling.models import NodeClaim, NodePool, Pod

pytestmark = pytest.mark.browser

WIDTH, HEIGHT = 1440, 900

# Every box wider than the window, and every element that sticks out of its card, with its text to say which.
OVERFLOW = """() => {
  const name = (el) => el.tagName.toLowerCase() + (el.id ? "#" + el.id : "") +
      (el.className && typeof el.className === "string" ? "." + el.className.trim().split(/\\s+/).join(".") : "");
  const cards = [];
  for (const card of document.querySelectorAll("main .card, main #table")) {
    const box = card.getBoundingClientRect();
    if (card.scrollWidth > card.clientWidth + 1) {
      cards.push(name(card) + " holds content " + (card.scrollWidth - card.clientWidth) + "px wider than itself");
    }
    for (const el of card.querySelectorAll("*")) {
      const r = el.getBoundingClientRect();
      if (r.width && r.right > box.right + 1) {
        cards.push(name(el) + " in " + name(card) + " ends " + Math.round(r.right - box.right) + "px right of it: " +
                   (el.innerText || "").slice(0, 60));
        break;
      }
    }
  }
  return {scrollWidth: document.documentElement.scrollWidth, cards};
}"""


# htmx marks an element while its request is in flight and while its answer is swapped in and settles:
# a page's panels loaded on "load" (the overview's upcoming reservations, the open-reservation trap) are
# in place once none is marked. Waiting for the network to be idle instead costs half a second a page.
HTMX_SETTLED = "() => !document.querySelector('.htmx-request, .htmx-swapping, .htmx-settling')"


def main_pages():
    claim = NodeClaim.objects.order_by("name").first()
    return [
        reverse(name) for name in (
            "scheduling:overview", "reservations:list", "reservations:usage", "reservations:capacity_blocks", "reservations:unselected",
            "reservations:recommendations", "scheduling:instancetypes", "scheduling:nodepools", "reservations:nodeclasses",
            "scheduling:nodeclaims", "scheduling:nodes", "scheduling:pods", "scheduling:decisions",
            "scheduling:karpenter_audit", "scheduling:whatif", "api_tokens")
    ] + [
        CapacityReservation.objects.get(reservation_id="cr-0a1b2c3d4e5f60006").get_absolute_url(),
        Recommendation.objects.order_by("pk").first().get_absolute_url(),
        NodePool.objects.get(name="gpu-reserved").get_absolute_url(),
        EC2NodeClass.objects.get(name="default").get_absolute_url(),
        reverse("reservations:nodeclass_edit", args=["default"]),
        claim.get_absolute_url(), claim.node.get_absolute_url(),
        Pod.objects.filter(node=None).order_by("name").first().get_absolute_url(),
    ]


def test_no_page_is_wider_than_1440_pixels_or_its_cards(demo, operator_login, live_server, artifacts):
    page = operator_login
    page.set_viewport_size({"width": WIDTH, "height": HEIGHT})
    problems = {}
    for path in main_pages():
        page.goto(f"{live_server.url}{path}")
        page.wait_for_function(HTMX_SETTLED)
        seen = page.evaluate(OVERFLOW)
        name = path.strip("/").replace("/", "-") or "overview"
        page.screenshot(path=artifacts / f"layout-1440-{name}.png", full_page=True)
        found = ([f"the page is {seen['scrollWidth']}px wide"] if seen["scrollWidth"] > WIDTH else []) + seen["cards"]
        if found:
            problems[path] = found
    assert problems == {}


def test_the_navigation_opens_a_group_on_hover(demo, operator_login, live_server, artifacts):
    page = operator_login
    page.set_viewport_size({"width": WIDTH, "height": HEIGHT})
    page.goto(f"{live_server.url}/")
    nodes = page.locator("nav .menu", has_text="Cluster").get_by_role("link", name="Nodes", exact=True)
    assert not nodes.is_visible()
    page.locator("nav .menu-title", has_text="Cluster").hover()
    nodes.wait_for(state="visible")
    page.screenshot(path=artifacts / "navigation-cluster-menu.png")
    nodes.click()
    page.wait_for_url(f"{live_server.url}/nodes/")


def test_chart_axes_write_times_as_the_pages_do(demo, operator_login, live_server):
    import re

    page = operator_login
    page.goto(f"{live_server.url}{CapacityReservation.objects.get(reservation_id='cr-0a1b2c3d4e5f60001').get_absolute_url()}")
    # "attached", not "visible": Plotly draws a tick it then hides when its label would
    # overlap a neighbour, and which tick that is depends on the hour the test runs.
    page.wait_for_selector("#reservation-chart .xtick text", state="attached", timeout=15000)
    ticks = page.locator("#reservation-chart .xtick text").all_text_contents()
    assert ticks and all(re.fullmatch(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}", tick) for tick in ticks), ticks
