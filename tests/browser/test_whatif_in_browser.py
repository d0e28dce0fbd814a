"""What-if as an operator meets it in Chromium: the form opens by default, a reservation is picked
from the list and resized, and the result compares the idle prepaid capacity and shows where each
pod goes."""

import re

import pytest
from playwright.sync_api import expect

from fleet.scope import default_cluster

pytestmark = pytest.mark.browser

RESIZED = "cr-0a1b2c3d4e5f60001"  # the demo's m5.large ODCR: 10 units, 6 used


def test_the_form_with_pickers_gives_idle_dollars_and_placements(demo, operator_login, live_server, artifacts):
    page = operator_login
    page.locator("nav .menu", has_text="Tools").hover()  # the navigation's Tools group opens on hover
    page.locator("nav .menu", has_text="Tools").get_by_role("link", name="What-if").click()
    # The demo is a fleet of three clusters shown all at once: a world is one cluster's, so the page asks for one.
    expect(page.locator("#choose-cluster")).to_be_visible()
    page.locator("#choose-cluster").get_by_role("link", name=default_cluster().name).click()
    expect(page.locator("#choose-cluster")).to_have_count(0)
    expect(page.locator("#tab-edit")).to_have_attribute("aria-current", "page")
    expect(page.locator("fieldset.group > legend")).to_have_text(["Capacity changes", "Workload changes", "What to compare", "When"])

    page.select_option("#id_count_id", RESIZED)
    page.fill("#id_count", "6")
    page.select_option("#id_pool", "general")
    page.check("input[name=pool_capacity_types][value=on-demand]")
    page.click("#edits button[type=submit]")

    idle = page.locator("#idle-prepaid td")
    expect(idle).to_have_count(2)
    before, after = idle.all_inner_texts()
    assert re.fullmatch(r"\$[\d,]+\.\d\d/h", before) and re.fullmatch(r"\$[\d,]+\.\d\d/h", after)
    assert float(before[1:-2].replace(",", "")) - float(after[1:-2].replace(",", "")) == pytest.approx(0.38, abs=0.011)
    expect(page.locator("#paid-cost td").first).to_have_text(re.compile(r"^(\$[\d,]+\.\d\d|\$0\.\d{4}|< \$0\.0001)/h$"))  # EC2's price precision
    table = page.locator("#placements table")
    expect(table).to_be_visible()
    expect(table.locator("tbody tr", has_text="default/trainer-pending-0")).to_contain_text("cr-0a1b2c3d4e5f60006")
    expect(page.locator("#placements h2")).to_contain_text(re.compile(r"\(\d+ pods, \d+ placed differently\)"))
    # The picks stay on the page, for the next change.
    expect(page.locator("#id_count_id")).to_have_value(RESIZED)
    page.screenshot(path=artifacts / "whatif-before-after.png", full_page=True)

    page.click("#tab-paste")
    expect(page.locator("textarea[name=world]")).to_be_visible()
