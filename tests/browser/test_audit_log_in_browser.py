"""The audit log as a fleet administrator meets it in Chromium: a token an operator makes on its page
shows up in the log, found by filtering on the operator's name, with the address it came from; an
operator finds no Audit log in its menu and is refused the page."""

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from playwright.sync_api import expect

from .conftest import PASSWORD

pytestmark = pytest.mark.browser


def sign_in(page, live_server, username):
    page.goto(f"{live_server.url}/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_server.url}/")


def test_a_token_made_by_an_operator_is_in_the_administrators_audit_log(transactional_db, live_server, page,
                                                                         artifacts):
    users = get_user_model().objects
    users.create_user("ozzy", "ozzy@example.com", PASSWORD).groups.add(Group.objects.get_or_create(name="operator")[0])
    users.create_user("faye", "faye@example.com", PASSWORD).groups.add(
        Group.objects.get_or_create(name="fleet-admin")[0])

    sign_in(page, live_server, "ozzy")
    page.goto(f"{live_server.url}/account/api-tokens/")
    page.check("#token-read-only")
    page.click("#make-token")
    expect(page.locator("#new-key")).to_be_visible()
    assert page.locator("a", has_text="Audit log").count() == 0
    refused = page.goto(f"{live_server.url}/audit/")
    assert refused.status == 403

    page.context.clear_cookies()
    sign_in(page, live_server, "faye")
    page.goto(f"{live_server.url}/")
    page.get_by_role("button", name="Activity").hover()
    page.get_by_role("link", name="Audit log").click()
    page.wait_for_url("**/audit/")
    page.fill("input[name=user]", "ozzy")
    page.click("form.filters button[type=submit]")
    page.wait_for_url("**user=ozzy**")
    row = page.locator("#table tbody tr").first
    expect(row).to_contain_text("API token")
    expect(row).to_contain_text("read_only: None -> True")
    expect(row).to_contain_text("ip_address: None -> 127.0.0.1")
    expect(page.locator("#table tbody tr")).to_have_count(2)  # and ozzy's sign-in before it
    expect(page.locator("#table tbody tr").nth(1)).to_contain_text("signed in")
    expect(row).to_contain_text("page")  # made on the tokens page
    page.screenshot(path=artifacts / "audit-log.png", full_page=True)
