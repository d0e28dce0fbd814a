"""'Why not reserved?' on pod pages in Chromium: a pending pod and a running one each say where they run (or
would) and in what capacity, naming the reservation or the blocker."""

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.browser


def test_pending_and_running_pods_say_where_and_why(demo, operator_login, live_server, artifacts):
    page = operator_login
    page.goto(f"{live_server.url}/pods/default/worker-pending-1/")
    expect(page.locator("#placement")).to_contain_text("Pending: it would go to a new m7g.large")
    expect(page.locator("#why-not-reserved")).to_contain_text("the pod's own constraints (arch In [arm64]) rule out")
    page.screenshot(path=artifacts / "pod-pending-why-not-reserved.png", full_page=True)

    page.goto(f"{live_server.url}/pods/default/web-0160/")
    expect(page.locator("#placement")).to_contain_text("in on-demand capacity, not in a reservation")
    expect(page.locator("#why-not-reserved")).to_contain_text("A reservation could hold it: cr-0a1b2c3d4e5f60001")
    page.screenshot(path=artifacts / "pod-running-on-demand.png", full_page=True)

    page.goto(f"{live_server.url}/pods/default/web-0000/")
    expect(page.locator("#placement")).to_contain_text("in reserved capacity: reservation cr-0a1b2c3d4e5f60001")
    page.locator("#placement a").click()
    expect(page.locator("h1")).to_contain_text("cr-0a1b2c3d4e5f60001")
