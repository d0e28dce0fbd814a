"""docs/overview.png, the README's picture of karpweb, is taken here from the demo world.

Every run takes it again: into the run's artifacts, and into docs/overview.png itself only with
KARPWEB_UPDATE_SCREENSHOT=1 (a test run changes no tracked file; CONTRIBUTING.md). The test judges the
page, not the picture's bytes (countdowns and chart times change from run to run): only a page that
shows what the README says it shows is photographed."""

import os
import struct
from pathlib import Path

import pytest
from playwright.sync_api import expect

from reservations.models import CapacityReservation
from scheduling import tasks
from scheduling.models import Decision, TaskRun

pytestmark = pytest.mark.browser

SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "overview.png"
WIDTH, HEIGHT = 1280, 900
# What a worker does in its first minute after `./karpweb.sh run`: every step once, in order.
# The demo is a fleet: each beat task dispatches one cluster_step per cluster (or per account and region).
FIRST_MINUTE = ("sync_catalogue", "sync_ec2", "sync_kubernetes", "provision", "lifecycle")


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    return struct.unpack(">II", data[16:24])  # the IHDR chunk: width, height


def test_the_overview_is_what_the_readme_shows_and_its_screenshot_is_current(demo, operator_login, live_server,
                                                                             artifacts):
    for step in FIRST_MINUTE:  # run here, in this process (apply), as the workers would
        for cluster in tasks.targets(step):
            tasks.cluster_step.apply(args=(step, cluster.pk)).get()
    assert set(TaskRun.objects.values_list("status", flat=True)) == {TaskRun.Status.SUCCEEDED}
    page = operator_login
    page.set_viewport_size({"width": WIDTH, "height": HEIGHT})
    page.goto(f"{live_server.url}/")
    expect(page.locator("h1")).to_contain_text("Reserved capacity")
    # The utilization chart, drawn in the browser: used and total reserved instances.
    page.wait_for_selector("#utilization-chart .main-svg", timeout=15000)
    assert page.locator("#utilization-chart .scatterlayer .trace").count() == 2
    # The demo's capacity block that ends within the hour is listed with its drain countdown.
    block = CapacityReservation.objects.filter(reservation_type="capacity-block", state="active").order_by("end_date").first()
    assert block is not None, "seed_demo writes an active capacity block"
    expect(page.locator("section.card", has_text="Next capacity-block drains")).to_contain_text(block.reservation_id)
    # The simulated world starts in control mode (the README says so), and the loop's latest
    # decision is listed in words.
    expect(page.locator(".card.stat", has_text="global mode")).to_contain_text("control")
    latest = Decision.objects.first()  # newest first
    assert latest is not None, "the first minute's steps decide something on the demo world"
    expect(page.locator("section.card", has_text="Recent decisions")).to_contain_text(latest.subject)
    expect(page.locator("#loop-health")).not_to_contain_text("has not run yet")

    taken = SCREENSHOT if os.environ.get("KARPWEB_UPDATE_SCREENSHOT") == "1" else artifacts / "overview.png"
    data = page.screenshot(path=taken, full_page=True)  # the chart is below the first screen
    width, height = png_size(data)
    assert width == WIDTH and height >= HEIGHT
    assert taken.read_bytes() == data
