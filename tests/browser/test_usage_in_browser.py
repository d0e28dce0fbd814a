"""#48: the usage page in Chromium at 1280 and 1440 px: both charts drawn (used and idle; used per
cluster, one trace per cluster), the range switched with its radio buttons, nothing wider than the window."""

import datetime

import pytest
from django.utils import timezone

from reservations.models import UtilizationHour, hour_of
from tests.factories.reservations import CapacityReservationFactory

pytestmark = pytest.mark.browser
HOUR = datetime.timedelta(hours=1)


@pytest.mark.parametrize("width", [1280, 1440])
def test_the_usage_charts_and_range(operator_login, live_server, artifacts, width):
    reservation = CapacityReservationFactory(reservation_id="cr-0usagebrowser", total_instance_count=4)
    for hours, clusters in ((2, {"alpha": 2, "beta": 1}), (5 * 24, {"alpha": 1})):
        at = hour_of(timezone.now()) - hours * HOUR
        UtilizationHour.objects.create(reservation=reservation, hour=at, samples=120, first_sampled_at=at, used=3,
                                       available=1, total=4, share_sum=90, share_samples=120, clusters=clusters)
    page = operator_login
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(f"{live_server.url}/reservations/usage/")
    page.wait_for_selector("#cluster-chart .legend", state="attached", timeout=15000)
    legend = page.locator("#cluster-chart .legendtext").all_text_contents()
    assert sorted(legend) == ["alpha", "beta", "no cluster of the fleet"]  # plotly lists a stack top first
    page.check("input[name=range][value='7d']")
    page.click("#usage-range button[type=submit]")
    page.wait_for_url("**range=7d*")
    page.wait_for_selector("#usage-chart .xtick", state="attached", timeout=15000)
    assert "hourly means over 5 days" in page.locator("#usage-window").inner_text()
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    page.screenshot(path=artifacts / f"usage-{width}.png", full_page=True)
