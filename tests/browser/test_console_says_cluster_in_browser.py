"""#48 in Chromium at 1280 px on the demo fleet: headings that read as English in both views, a future
reservation's page whose "will use it" and "selecting it" agree, the fleet overview's Karpenter column saying
what was found, and an account's page listing its reservations with links."""

import pytest
from playwright.sync_api import expect

from scheduling import demo as demo_world

pytestmark = pytest.mark.browser

SHARED = demo_world.reservation_id(demo_world.SHARED_RESERVATION)
FUTURE = demo_world.reservation_id(demo_world.FUTURE_RESERVATION)


def test_the_console_pages_agree_and_say_their_cluster(demo, operator_login, live_server, artifacts):
    page = operator_login
    page.set_viewport_size({"width": 1280, "height": 900})

    page.goto(f"{live_server.url}/fleet/clusters/")
    expect(page.locator("h1")).to_have_text("Clusters")  # not "Clusters in all clusters"
    page.goto(f"{live_server.url}/nodepools/")
    page.locator("#table tbody tr", has_text="research-use1").locator("a[href*='/nodepools/']").first.click()
    expect(page.locator("h1")).to_contain_text("in research-use1")
    expect(page.locator("h1")).not_to_contain_text("all clusters")

    page.goto(f"{live_server.url}/reservations/{FUTURE}/")
    will_use = page.locator("#upcoming-use p").first
    expect(will_use).to_contain_text("NodePools that will use it:")
    pools = will_use.locator("a").all_inner_texts()
    assert pools, will_use.inner_text()
    selecting = page.locator("section.card", has=page.locator("h2#selecting"))
    expect(selecting).not_to_contain_text("No EC2NodeClass")
    assert selecting.locator("a").count() >= 1
    page.screenshot(path=artifacts / "future-reservation-agrees-1280.png", full_page=True)

    page.goto(f"{live_server.url}/fleet/")
    for row in page.locator("#fleet-clusters table tr[id^=cluster-]").all():
        karpenter = row.locator("td").nth(4).inner_text()
        assert "not checked yet" not in karpenter and karpenter.strip(), karpenter

    page.goto(f"{live_server.url}/fleet/accounts/{demo_world.SECOND_ACCOUNT}/")
    page.click("a[href='#account-shared']")
    shared = page.locator("#account-shared")
    expect(shared).to_contain_text(SHARED)
    expect(shared).to_contain_text("demo-prod")
    page.screenshot(path=artifacts / "account-reservations-1280.png", full_page=True)
    shared.locator(f"a:text('{SHARED}')").click()
    page.wait_for_url(f"**/reservations/{SHARED}/")
