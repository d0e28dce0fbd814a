"""The demo fleet in a real browser: the header's cluster picker narrows every page to one cluster
(and back to all), and the fleet overview shows every account, cluster and shared reservation."""

import pytest
from playwright.sync_api import expect

from scheduling import demo as demo_world

pytestmark = pytest.mark.browser

SHARED = demo_world.reservation_id(demo_world.SHARED_RESERVATION)


def pick(page, label):
    page.hover("#cluster-picker .menu-title")
    page.locator("#cluster-picker .menu-items a", has_text=label).first.click()
    page.wait_for_load_state()


def node_names(page):
    return page.locator("#table table tbody tr td a[href*='/nodes/']").all_inner_texts()


def headers(page):
    return page.locator("#table table thead th").all_inner_texts()


def test_the_picker_switches_the_cluster_every_page_shows(demo, operator_login, live_server, artifacts):
    page = operator_login
    page.goto(f"{live_server.url}/nodes/")
    expect(page.locator("#cluster-picker .menu-title")).to_have_text("all clusters")
    expect(page.locator("h1")).to_contain_text("in all clusters")
    everywhere = node_names(page)
    assert any(name.startswith("ip-10-0-") for name in everywhere) and any(name.startswith("ip-10-2-") for name in everywhere)
    # In all clusters each row says its cluster, linking to the cluster's page (#48).
    assert headers(page)[0].strip() == "Cluster"
    research_row = page.locator("#table table tbody tr", has=page.locator("a", has_text="ip-10-2-")).first
    expect(research_row.locator("td").first.locator("a")).to_have_attribute("href", "/fleet/clusters/research-use1/")

    pick(page, "research-use1")
    assert "cluster=research-use1" in page.url
    expect(page.locator("h1")).to_contain_text("in research-use1")
    expect(page.locator("#cluster-picker .menu-title")).to_have_text("cluster research-use1")
    research = node_names(page)
    assert "Cluster" not in [header.strip() for header in headers(page)]  # one cluster's view: no column
    assert research and all(name.startswith("ip-10-2-") for name in research), research
    page.screenshot(path=artifacts / "fleet-picker-nodes.png", full_page=True)

    # Remembered: another page, reached without the parameter, shows the same cluster.
    page.goto(f"{live_server.url}/pods/")
    expect(page.locator("h1")).to_contain_text("in research-use1")
    pods = page.locator("#table table tbody tr").all_inner_texts()
    # research's own: its notebooks (one still pending) and what runs on its ip-10-2- nodes
    assert pods and all("notebook" in pod or ".ip-10-2-" in f".{pod}" or "\tip-10-2-" in pod for pod in pods), pods

    pick(page, "all clusters")
    expect(page.locator("h1")).to_contain_text("in all clusters")
    pods = page.locator("#table table tbody tr").all_inner_texts()
    assert any("notebook" in pod for pod in pods) and any("staging-api" in pod for pod in pods)
    assert headers(page)[0].strip() == "Cluster"
    page.locator("#table table tbody tr td:first-child a", has_text="research-use1").first.click()
    page.wait_for_url("**/fleet/clusters/research-use1/")


def test_the_fleet_overview(demo, operator_login, live_server, artifacts):
    page = operator_login
    page.hover("nav .menu-title:text('Cluster')")
    page.click("nav a:text('Fleet overview')")
    page.wait_for_url(f"{live_server.url}/fleet/")
    expect(page.locator("h1")).to_contain_text("2 accounts, 3 clusters")
    expect(page.locator("#fleet-clusters table tr[id^=cluster-]")).to_have_count(3)
    shared = page.locator(f"#fleet-{SHARED}")
    expect(shared).to_contain_text("demo-prod")
    expect(shared).to_contain_text("demo-research")
    expect(shared).to_contain_text("research-use1: 2")
    expect(shared).to_contain_text("staging-use1: 2")
    expect(page.locator("#fleet-idle-cost")).to_contain_text("/h")
    page.screenshot(path=artifacts / "fleet-overview.png", full_page=True)
    # A cluster's name opens the overview of that cluster alone.
    page.click("#cluster-staging-use1 a")
    expect(page.locator("h1")).to_contain_text("in staging-use1")
