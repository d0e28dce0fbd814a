"""A NodePool pointed at an EC2NodeClass that does not exist, as an operator meets it in Chromium: not
Ready, with the reason, on its page, the NodePools list and the overview; and a pool over its limits."""

import pytest
from playwright.sync_api import expect

from scheduling.models import NodePool

pytestmark = pytest.mark.browser


def test_a_missing_class_pool_is_not_ready_everywhere(demo, operator_login, live_server, artifacts):
    NodePool.objects.filter(name="web").update(
        node_class_ref={"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "gone"}, limits={"cpu": "2"})
    page = operator_login

    page.goto(f"{live_server.url}/nodepools/web/")
    expect(page.locator("#pool-ready")).to_have_text("not Ready")
    expect(page.locator("#pool-not-ready")).to_contain_text("NodeClassReady=False: NodeClassNotFound")
    expect(page.locator("#pool-limits-exceeded")).to_contain_text("of 2 CPU")
    expect(page.get_by_text("its EC2NodeClass gone does not exist, so it reaches no reservation")).to_be_visible()
    page.screenshot(path=artifacts / "nodepool-missing-class.png", full_page=True)

    page.goto(f"{live_server.url}/nodepools/")
    row = page.locator("tr", has=page.locator('a[href$="/nodepools/web/"]'))
    expect(row).to_contain_text("gone (not found)")
    expect(row).to_contain_text("NodeClassReady=False")
    expect(row.locator(".over-limits")).to_contain_text("of 2 CPU")
    page.screenshot(path=artifacts / "nodepools-missing-class.png", full_page=True)

    page.goto(f"{live_server.url}/")
    expect(page.locator("#pools-not-ready")).to_contain_text("web is not Ready: NodeClassReady=False: NodeClassNotFound")
    expect(page.locator("#pools-over-limits")).to_contain_text("web is over its limits")
    expect(page.get_by_text("Every NodePool is Ready")).to_have_count(0)
    page.screenshot(path=artifacts / "overview-pool-not-ready.png", full_page=True)
