"""'Why not reserved?' on pod pages in Chromium: a pending pod and a running one each say where they run (or
would) and in what capacity, naming the reservation or the blocker."""

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from fleet.scope import default_cluster
from scheduling.loop import steps
from scheduling.loop.runs import scope_for
from scheduling.models import Decision

pytestmark = pytest.mark.browser


def test_pending_and_running_pods_say_where_and_why(demo, operator_login, live_server, artifacts):
    page = operator_login
    page.goto(f"{live_server.url}/pods/default/worker-pending-1/")
    expect(page.locator("#placement")).to_contain_text("Pending: it would go to a new m7g.large")
    expect(page.locator("#why-not-reserved")).to_contain_text("the pod's own constraints (arch In [arm64]) rule out")
    page.screenshot(path=artifacts / "pod-pending-why-not-reserved.png", full_page=True)

    page.goto(f"{live_server.url}/pods/default/web-0160/")
    expect(page.locator("#placement")).to_contain_text("in on-demand capacity, not in a reservation")
    expect(page.locator("#why-not-reserved")).to_contain_text("A reservation could hold it: cr-0a1b2c3d4e5f60001")
    page.screenshot(path=artifacts / "pod-running-on-demand.png", full_page=True)

    page.goto(f"{live_server.url}/pods/default/web-0000/")
    expect(page.locator("#placement")).to_contain_text("in reserved capacity: reservation cr-0a1b2c3d4e5f60001")
    page.locator("#placement a").click()
    expect(page.locator("h1")).to_contain_text("cr-0a1b2c3d4e5f60001")


def test_a_pod_evicted_by_consolidation_lists_the_decision(demo, operator_login, live_server, artifacts, settings):
    """Issue #47 finding 15: a pod evicted by consolidation said "no decision names this pod". One
    lifecycle pass of the loop in control mode consolidates the demo's on-demand nodes into the
    reservations' free room; the first evicted pod's page names that decision."""
    settings.KARPWEB_MODE = "control"
    with scope_for(default_cluster()):
        now = timezone.now()
        steps.sync_kubernetes(now)
        steps.provision(now)
        steps.lifecycle(now)
        decision = Decision.objects.filter(kind=Decision.Kind.CONSOLIDATE_DELETE, outcome="acted",
                                           objects_involved__has_key="pods").order_by("created_at").first()
    assert decision is not None
    namespace, name = decision.objects_involved["pods"][0].split("/")
    page = operator_login
    page.goto(f"{live_server.url}/pods/{namespace}/{name}/")
    listed = page.locator("section", has_text="Decisions about this pod")
    expect(listed).to_contain_text(decision.reason)
    expect(listed).not_to_contain_text("no decision names this pod")
    page.screenshot(path=artifacts / "pod-evicted-by-consolidation.png", full_page=True)
