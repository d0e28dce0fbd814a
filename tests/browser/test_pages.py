"""The operator's pages in a real browser: charts drawn, countdowns ticking, the term editor."""

import re

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from playwright.sync_api import expect

from django.urls import reverse

from reservations.models import CapacityReservation, EC2NodeClass
from tests.support.labels import LIST_PAGES, label_problems

from .conftest import each_page

pytestmark = pytest.mark.browser


def test_login_and_overview_chart_is_drawn(demo, operator_login, live_server, artifacts):
    page = operator_login
    expect(page.locator("h1")).to_contain_text("Reserved capacity")
    page.wait_for_selector("#utilization-chart .main-svg", timeout=15000)
    assert page.locator("#utilization-chart .scatterlayer .trace").count() == 2
    page.screenshot(path=artifacts / "overview.png", full_page=True)


def test_capacity_block_countdown_ticks(demo, operator_login, live_server, artifacts):
    page = operator_login
    page.goto(f"{live_server.url}/capacity-blocks/")
    cell = page.locator('tr[data-block="cr-0a1b2c3d4e5f60007"] td.countdown').nth(1)
    first = cell.inner_text()
    expect(cell).not_to_have_text(first, timeout=5000)
    assert page.url.endswith("/capacity-blocks/"), "the countdown must tick without a page load"
    page.screenshot(path=artifacts / "capacity-blocks.png", full_page=True)


def test_edit_selector_terms_invalid_then_valid_preview_save(demo, operator_login, live_server, artifacts):
    page = operator_login
    page.goto(f"{live_server.url}/nodeclasses/default/edit/")
    page.fill("input[name='term-1-id']", "not-a-reservation")
    page.click("button[value=preview]")
    expect(page.locator(".term[data-term='1'] .problem")).to_contain_text(
        'capacityReservationSelectorTerms[1].id: "not-a-reservation" does not match ^cr-[0-9a-z]+$')
    expect(page.locator("button[value=save]")).to_be_disabled()
    page.fill("input[name='term-1-id']", "cr-0a1b2c3d4e5f60006")
    page.click("button[value=preview]")
    expect(page.locator("#preview")).to_contain_text("cr-0a1b2c3d4e5f60006")
    expect(page.locator("#terms-diff")).to_contain_text('+    "id": "cr-0a1b2c3d4e5f60006"')
    page.screenshot(path=artifacts / "selector-term-preview.png", full_page=True)
    page.click("button[value=save]")
    page.wait_for_url(re.compile(r".*/nodeclasses/default/$"))  # /clusters/<cluster>/... in a fleet
    expect(page.locator(".messages")).to_contain_text("Saved the selector terms of default")
    assert EC2NodeClass.objects.get(name="default").capacity_reservation_selector_terms[1] == {"id": "cr-0a1b2c3d4e5f60006"}


def test_concurrent_edit_is_reported(demo, operator_login, live_server, artifacts):
    page = operator_login
    page.goto(f"{live_server.url}/nodeclasses/default/edit/")
    page.click("button[value=add-term]")
    page.fill("input[name='term-2-id']", "cr-0a1b2c3d4e5f60002")
    page.click("button[value=preview]")
    expect(page.locator("#preview")).to_contain_text("cr-0a1b2c3d4e5f60002")
    # Someone else saves first.
    EC2NodeClass.objects.filter(name="default").update(capacity_reservation_selector_terms=[{"tags": {"team": "ops"}}],
                                                        resource_version="7")
    page.click("button[value=save]")
    expect(page.locator("#conflict")).to_contain_text("someone else edited it")
    expect(page.locator("#conflict pre")).to_contain_text('"ops"')
    assert EC2NodeClass.objects.get(name="default").capacity_reservation_selector_terms == [{"tags": {"team": "ops"}}]
    page.screenshot(path=artifacts / "selector-term-conflict.png", full_page=True)


MAIN_PAGES = ["/reservations/", "/reservations/cr-0a1b2c3d4e5f60001/", "/nodepools/web/", "/nodes/", "/decisions/",
              "/what-if/?from=current"]


def test_main_pages_render_in_the_browser(demo, operator_login, live_server, artifacts):
    page = operator_login
    errors = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))

    def renders(path):
        errors.clear()
        page.goto(f"{live_server.url}{path}")
        expect(page.locator("h1")).to_be_visible()
        if path.startswith("/reservations/cr-"):
            page.wait_for_selector("#reservation-chart .main-svg", timeout=15000)
        name = path.strip("/").replace("/", "-").replace("?from=current", "") or "root"
        page.screenshot(path=artifacts / f"{name}.png", full_page=True)
        assert errors == []

    each_page(MAIN_PAGES, renders)


# The filter labels and column headers as the browser lays them out: the text of each filter's own
# label or legend (without the options inside it), and each visible column header.
READ_LABELS = """() => {
  const own = (el) => Array.from(el.childNodes).filter((n) => n.nodeType === Node.TEXT_NODE)
      .map((n) => n.textContent).join(" ").trim();
  const filters = Array.from(document.querySelectorAll("form.filters > label")).map(own)
      .concat(Array.from(document.querySelectorAll("form.filters > fieldset > legend")).map((l) => l.innerText.trim()));
  const headers = Array.from(document.querySelectorAll("#table thead th")).map((th) => th.innerText.trim());
  const unknown = Array.from(document.querySelectorAll("form.filters option")).some((o) => o.textContent === "Unknown");
  return {filters, headers, unknown};
}"""


def test_every_list_page_reads_in_words(demo, operator_login, live_server, artifacts):
    page = operator_login
    # The audit log is a fleet administrator's list: olga is one too here.
    get_user_model().objects.get(username="olga").groups.add(Group.objects.get_or_create(name="fleet-admin")[0])
    errors = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))

    def reads_in_words(page_name):
        errors.clear()
        page.goto(f"{live_server.url}{reverse(page_name)}")
        expect(page.locator("h1")).to_be_visible()
        seen = page.evaluate(READ_LABELS)
        page.screenshot(path=artifacts / f"list-{page_name.replace(':', '-')}.png", full_page=True)
        assert seen["filters"] and label_problems(seen["filters"]) == []
        assert seen["headers"] and label_problems(seen["headers"]) == []
        assert not seen["unknown"] and errors == []

    each_page(LIST_PAGES, reads_in_words)


def test_the_state_filter_shows_every_choice_and_what_is_chosen(demo, operator_login, live_server, artifacts):
    page = operator_login
    page.goto(f"{live_server.url}/reservations/")
    boxes = page.locator("fieldset.choices input[name=state]")
    assert boxes.count() == len(CapacityReservation.State.values)
    for index in range(boxes.count()):
        expect(boxes.nth(index)).to_be_visible()
    page.get_by_label("Expired", exact=True).check()  # htmx reloads the table on change
    page.wait_for_url("**state=expired**")
    expect(page.locator("#table tbody tr")).to_have_count(CapacityReservation.objects.filter(state="expired").count())
    expect(page.get_by_label("Expired", exact=True)).to_be_checked()
    page.screenshot(path=artifacts / "reservations-state-filter.png", full_page=True)


def test_decisions_filter_sort_and_page(operator_login, live_server, artifacts):
    """The decisions table (written by PlainRowsTable): a kind filter swaps the table in through htmx,
    a header link sorts, the pagination link turns the page, a reason with markup shows as text."""
    from scheduling.models import Decision
    from tests.factories.scheduling import DecisionFactory, NodePoolFactory

    pool = NodePoolFactory(name="web")
    for index in range(55):
        DecisionFactory(kind=Decision.Kind.DRAIN, subject=f"node n-{index:02d}", node_pool=pool)
    DecisionFactory(kind=Decision.Kind.LAUNCH, subject="pod default/web-7", reason="<b>not bold</b>")
    page = operator_login
    page.goto(f"{live_server.url}/decisions/")
    rows = page.locator("#table tbody tr")
    expect(rows).to_have_count(50)
    page.get_by_label("launch a node", exact=True).check()  # htmx reloads the table on change
    page.wait_for_url("**kind=launch**")
    expect(rows).to_have_count(1)
    expect(rows.first.locator("td").nth(5)).to_have_text("<b>not bold</b>")
    page.get_by_label("launch a node", exact=True).uncheck()
    page.get_by_label("capacity-block drain", exact=True).check()
    page.wait_for_url("**kind=drain**")
    page.locator("#table thead a", has_text="Subject").click()
    page.wait_for_url("**sort=subject**")
    expect(rows.first.locator("td").nth(4)).to_have_text("node n-00")
    expect(rows.first.locator("td").nth(6).locator("a")).to_have_attribute("href", re.compile(r"^(/clusters/[^/]+)?/nodepools/web/$"))
    page.locator(".pagination a", has_text="2").first.click()
    page.wait_for_url("**page=2**")
    expect(rows).to_have_count(5)
    expect(rows.first.locator("td").nth(4)).to_have_text("node n-50")
    page.screenshot(path=artifacts / "decisions-sorted-page-2.png", full_page=True)
