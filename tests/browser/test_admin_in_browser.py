"""The admin as a staff member meets it in Chromium: a reservation's page shows EC2's fields read-only
under the note that the next sync overwrites them, and the one override karpweb owns; the list's
columns wrap instead of being cut off."""

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import expect

from reservations.models import CapacityReservation
from scheduling.models import AuditEntry

from .conftest import PASSWORD, each_page

pytestmark = pytest.mark.browser

RESERVATION = "cr-0a1b2c3d4e5f60001"


@pytest.fixture
def staff_login(demo, live_server, page):
    get_user_model().objects.create_superuser("ada", "ada@example.com", PASSWORD)
    page.goto(f"{live_server.url}/login/")
    page.fill("input[name=username]", "ada")
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_server.url}/")
    return page


def test_a_reservation_is_read_only_but_for_the_planning_override(staff_login, live_server, artifacts):
    page = staff_login
    page.goto(f"{live_server.url}/admin/reservations/capacityreservation/")
    table = page.locator("#result_list")
    expect(table).to_be_visible()
    # Every column fits the window: the table is no wider than its container.
    widths = page.evaluate("[...document.querySelectorAll('#changelist .results')].map(e => [e.scrollWidth, e.clientWidth])")
    assert widths and all(scroll <= client for scroll, client in widths), widths
    expect(table.locator(".field-reservation_id").first).to_have_text(RESERVATION)
    page.screenshot(path=artifacts / "admin-reservations.png", full_page=True)

    page.get_by_role("link", name=RESERVATION).click()
    notes = page.locator("fieldset .description")
    expect(notes.first).to_contain_text("karpweb's own settings")
    expect(notes).to_have_count(5)  # the override, then the four groups of EC2's fields
    for index in range(1, 5):
        expect(notes.nth(index)).to_contain_text("Mirrored from EC2: the next sync overwrites any change made here")
    assert page.locator("input[name=total_instance_count], input[name=available_instance_count]").count() == 0
    page.check("#id_planning_excluded")
    page.click("input[name=_continue]")
    expect(page.locator(".errorlist").first).to_contain_text("required to keep karpweb from planning")
    page.fill("#id_planning_excluded_reason", "held for the quarter-end batch")
    page.click("input[name=_continue]")
    expect(page.locator(".messagelist")).to_contain_text("was changed successfully")
    expect(page.locator(".field-planning_excluded_by")).to_contain_text("ada")
    page.screenshot(path=artifacts / "admin-reservation-override.png", full_page=True)
    assert CapacityReservation.objects.get(reservation_id=RESERVATION).planning_excluded
    assert AuditEntry.objects.filter(actor="ada", changes__has_key="planning_excluded").count() == 1

    page.goto(f"{live_server.url}/reservations/{RESERVATION}/")
    expect(page.locator("#planning-override")).to_contain_text("held for the quarter-end batch")


LISTS = ["scheduling/decision", "scheduling/auditentry", "scheduling/nodeclaim", "scheduling/node", "scheduling/pod",
         "scheduling/nodepool", "scheduling/karpenterlaunch", "scheduling/taskrun", "scheduling/offering",
         "reservations/ec2nodeclass", "reservations/recommendation"]


def test_the_change_lists_fit_the_window(staff_login, live_server, artifacts):
    page = staff_login
    page.set_viewport_size({"width": 1280, "height": 900})

    def fits(path):
        page.goto(f"{live_server.url}/admin/{path}/")
        expect(page.locator("#changelist")).to_be_visible()
        widths = page.evaluate("[...document.querySelectorAll('#changelist .results')].map(e => [e.scrollWidth, e.clientWidth])")
        page.screenshot(path=artifacts / f"admin-{path.replace('/', '-')}.png", full_page=True)
        assert all(scroll <= client for scroll, client in widths), widths

    each_page(LISTS, fits)
