"""A move recommendation as an operator meets it in the demo, in Chromium: found through the list's kind filter; in
observe mode its page gives the exact AWS CLI command and no Apply button; in control mode the page is the
confirmation (from how many to how many, on both reservations), one click applies it, and both reservations'
pages show the new counts."""

import pytest
from playwright.sync_api import expect

from reservations.models import CapacityReservation, Recommendation
from scheduling.models import AuditEntry

pytestmark = pytest.mark.browser


def counts(page, live_server, reservation_id):
    """The reservation page's "Used / available / total"."""
    page.goto(f"{live_server.url}/reservations/{reservation_id}/")
    return page.locator("xpath=//dt[normalize-space()='Used / available / total']/following-sibling::dd[1]")


def test_a_move_shows_its_command_in_observe_mode_and_applies_once_in_control(demo, operator_login, live_server, settings,
                                                                              artifacts):
    page = operator_login
    rec = Recommendation.objects.get(kind="move")
    source, destination, count = rec.reservation.reservation_id, rec.details["destination"], rec.details["count"]
    assert (rec.seen_total, rec.details["destinationSeenTotal"], count) == (12, 2, 3)

    settings.KARPWEB_MODE = "observe"
    page.goto(f"{live_server.url}/recommendations/")
    page.get_by_label("move units", exact=True).check()  # the list's kind filter knows the kind; htmx reloads the table
    page.wait_for_url("**kind=move**")
    rows = page.locator("#table tbody tr")
    expect(rows).to_have_count(1)
    rows.get_by_role("link", name="move units").click()
    page.wait_for_url(f"{live_server.url}/recommendations/{rec.pk}/")
    expect(page.locator("#cli")).to_have_text(
        f"aws ec2 move-capacity-reservation-instances --source-capacity-reservation-id {source} "
        f"--destination-capacity-reservation-id {destination} --instance-count 3")
    expect(page.locator("#apply")).to_contain_text("karpweb only observes")
    expect(page.locator("#apply-button")).to_have_count(0)
    page.screenshot(path=artifacts / "recommendation-move-observe.png", full_page=True)

    settings.KARPWEB_MODE = "control"
    page.reload()
    expect(page.locator("#relocation")).to_contain_text(
        f"Moves 3 idle instances from {source} (12 to 9) to {destination} (2 to 5), which cluster staging-use1 uses")
    expect(page.locator("#apply-button")).to_contain_text("saves $275.94 a month")
    expect(page.locator("#cli")).to_have_count(0)
    page.click("#apply-button")
    expect(page.locator(".messages")).to_contain_text("Applied.")
    expect(page.locator("#reason").locator("xpath=..")).to_contain_text("applied by olga")
    expect(page.locator("#apply-button")).to_have_count(0)
    page.screenshot(path=artifacts / "recommendation-move-applied.png", full_page=True)

    # Moved once: 3 units left the committed reservation and arrived in the full one; each change audited once.
    # The source holds 12 with 8 committed (the demo's 0012): the move takes 3 of the 4 units above the commitment.
    expect(counts(page, live_server, source)).to_contain_text("2 / 7 / 9")
    expect(counts(page, live_server, destination)).to_contain_text("2 / 3 / 5")
    for reservation_id, after in ((source, (9, 7)), (destination, (5, 3))):
        reservation = CapacityReservation.objects.fleet().get(reservation_id=reservation_id)
        assert (reservation.total_instance_count, reservation.available_instance_count) == after
        assert AuditEntry.objects.filter(object_id=str(reservation.pk), actor="olga", content_type__model="capacityreservation").count() == 1
    assert Recommendation.objects.get(pk=rec.pk).state == "applied"
