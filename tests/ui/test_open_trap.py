"""The open-reservation trap in the seeded demo fleet: one trap (staging-use1's on-demand c6a.large
beside the open cr-...0003), on the overview with its dollars, on its page with the diff, the YAML to
download and, in control mode, the one confirmed click; the API and the metric say the same."""

import json

import pytest
import yaml
from django.urls import reverse

from fleet.scope import cluster_scope
from reservations import open_trap
from reservations.models import EC2NodeClass
from scheduling.models import AuditEntry, NodePool
from scheduling.queries import on_demand_prices
from tests.support.clusters import use_cluster

pytestmark = pytest.mark.django_db
OPEN_0003 = "cr-0a1b2c3d4e5f60003"


@pytest.fixture
def demo_world(demo_world_for_module, db):
    """Seeded once for the module; each test's writes are rolled back."""


@pytest.fixture
def control(settings):
    settings.KARPWEB_MODE = "control"
    settings.KARPWEB_PROVIDER = "simulated"
    use_cluster(connection="simulated")


def the_trap():
    [trap] = open_trap.find()
    return trap


def test_the_demo_fleet_has_one_trap_whose_dollars_add_up(demo_world):
    trap = the_trap()
    assert (trap.cluster, trap.reservation_id, len(trap.paid_nodes), trap.idle) == ("staging-use1", OPEN_0003, 2, 2)
    price = on_demand_prices(["c6a.large"])[("c6a.large", "us-east-1a")]
    assert trap.dollars_per_hour == pytest.approx(2 * price)
    assert [(p.kind, p.name) for p in trap.patches] == [("EC2NodeClass", "staging"), ("NodePool", "staging-batch")]


@pytest.fixture
def observe(settings):
    settings.KARPWEB_MODE = "observe"


def test_the_overview_and_the_trap_page_show_it(viewer_client, demo_world, observe):
    trap = the_trap()
    overview = viewer_client.get(reverse("scheduling:overview")).content.decode()
    slot = overview.split('id="open-trap-panel"', 1)[1].split("</section>", 1)[0]
    assert f'hx-get="{reverse("reservations:open_trap_panel")}"' in slot and 'hx-trigger="load"' in slot
    panel = viewer_client.get(reverse("reservations:open_trap_panel")).content.decode()
    assert f"${trap.dollars_per_hour:.4f}/h" in panel and OPEN_0003 in panel and reverse("reservations:open_trap") in panel
    page = viewer_client.get(reverse("reservations:open_trap")).content.decode()
    section = page.split(f'id="trap-staging-use1-{OPEN_0003}"', 1)[1]
    assert "+  - reserved" in section and f"+- id: {OPEN_0003}" in section
    assert "observe mode" in section and 'class="apply-fix"' not in section  # the YAML is the answer in observe
    download = viewer_client.get(reverse("reservations:open_trap_yaml", args=["staging-use1", OPEN_0003]))
    assert download.status_code == 200 and "attachment" in download["Content-Disposition"]
    kinds = [d["kind"] for d in yaml.safe_load_all(download.content) if d]
    assert kinds == ["EC2NodeClass", "NodePool"]
    missing = viewer_client.get(reverse("reservations:open_trap_yaml", args=["nowhere", OPEN_0003]))
    assert missing.status_code == 404 and b"nothing to apply" in missing.content


def test_one_confirmed_click_fixes_it_once(operator_client, demo_world, control):
    trap = the_trap()
    page = operator_client.get(reverse("reservations:open_trap")).content.decode()
    assert 'class="apply-fix"' in page
    form = {"cluster": "staging-use1", "reservation": OPEN_0003, "versions": json.dumps(open_trap.versions(trap))}
    unconfirmed = operator_client.post(reverse("reservations:open_trap_fix"), form)
    assert unconfirmed.status_code == 400 and "confirm" in unconfirmed.content.decode()
    stale = operator_client.post(reverse("reservations:open_trap_fix"),
                                 {**form, "confirm": "yes", "versions": json.dumps({"NodePool/staging-batch": "x"})})
    assert stale.status_code == 409
    done = operator_client.post(reverse("reservations:open_trap_fix"), {**form, "confirm": "yes"})
    assert done.status_code == 302
    with cluster_scope("staging-use1"):
        assert {"id": OPEN_0003} in EC2NodeClass.objects.get(name="staging").capacity_reservation_selector_terms
        assert "reserved" in NodePool.objects.get(name="staging-batch").requirements[0]["values"]
    assert AuditEntry.objects.filter(source="ui", changes__has_key="requirements").count() == 1
    assert open_trap.find() == []
    again = operator_client.post(reverse("reservations:open_trap_fix"), {**form, "confirm": "yes"}, follow=True)
    assert "Nothing to do" in again.content.decode()


def test_the_api_lists_the_trap_and_refuses_the_fix_in_observe(operator_client, demo_world, observe):
    trap = the_trap()
    body = operator_client.get("/api/v1/open-reservation-traps/").json()
    assert body["doublePaidDollarsPerHour"] == pytest.approx(trap.dollars_per_hour)
    [listed] = body["traps"]
    assert listed["reservationID"] == OPEN_0003 and listed["unitsPaidTwice"] == 2 and "kind: NodePool" in listed["yaml"]
    assert operator_client.get("/api/v1/open-reservation-traps/", {"cluster": "research-use1"}).json()["traps"] == []
    assert operator_client.get("/api/v1/open-reservation-traps/", {"cluster": "nope"}).status_code == 400
    refused = operator_client.post("/api/v1/open-reservation-traps/fix/", {
        "cluster": "staging-use1", "reservationID": OPEN_0003, "versions": open_trap.versions(trap)},
        content_type="application/json")
    assert refused.status_code == 409 and "observe mode" in refused.json()["mode"][0]


def test_the_metric_names_the_trap(client, demo_world, settings):
    settings.KARPWEB_METRICS_PUBLIC, settings.KARPWEB_METRICS_TOKEN = True, ""
    trap = the_trap()
    scrape = client.get("/metrics").content.decode()
    line = next(line for line in scrape.splitlines() if line.startswith("karpweb_open_reservation_double_paid_dollars_per_hour{"))
    assert f'cluster="staging-use1"' in line and f'reservation="{OPEN_0003}"' in line and 'account="123456789012"' in line
    assert float(line.rsplit(" ", 1)[1]) == pytest.approx(trap.dollars_per_hour)
