"""The open-reservation trap as an operator meets it in the demo fleet, in Chromium: the overview's panel
(loaded after the page) with the dollars paid twice, the trap's page with the diff and the YAML, and the
one confirmed click that fixes it."""

import pytest
from playwright.sync_api import expect

from reservations import open_trap

pytestmark = pytest.mark.browser


def test_the_trap_from_the_overview_to_its_fix(demo, operator_login, live_server, artifacts):
    [trap] = open_trap.find()
    page = operator_login
    page.goto(f"{live_server.url}/")
    panel = page.locator("#open-trap-panel[data-loaded]")
    expect(panel).to_contain_text(f"${trap.dollars_per_hour:.4f}/h")
    expect(panel).to_contain_text(trap.reservation_id)
    page.screenshot(path=artifacts / "open-trap-overview.png", full_page=True)
    panel.get_by_role("link", name="The trap and its fix").click()
    section = page.locator(f"#trap-{trap.cluster}-{trap.reservation_id}")
    expect(section.locator(".double-paid")).to_have_text(f"${trap.dollars_per_hour:.4f}/h")
    expect(section.locator("pre.diff")).to_contain_text("+  - reserved")
    assert "kind: EC2NodeClass" in section.locator("textarea.fix-yaml").input_value()
    page.screenshot(path=artifacts / "open-trap-page.png", full_page=True)
    section.get_by_role("checkbox").check()
    section.get_by_role("button", name="Apply the fix").click()
    expect(page.locator(".messages")).to_contain_text("Applied: EC2NodeClass/staging, NodePool/staging-batch")
    expect(page.locator("#no-open-trap")).to_be_visible()
    page.goto(f"{live_server.url}/")
    expect(page.locator("#open-trap-panel[data-loaded]")).to_contain_text("No open reservation is paid twice")
    assert open_trap.find() == []
