"""The fleet overview (/fleet/, fleet/overview.py) on the demo fleet: every account and cluster,
the shared reservation with its owner, the account it is shared with and its nodes by cluster, the
fleet's idle prepaid cost, whatever cluster the header shows, in a number of queries that does not
grow with the fleet."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from fleet.models import AwsAccount, Cluster
from fleet.scope import cluster_scope
from reservations.models import CapacityReservation, Recommendation
from scheduling import demo
from scheduling.queries import capacity_totals, on_demand_prices
from scheduling.templatetags.karpweb import per_hour
from tests.factories.scheduling import NodeFactory, PodFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def demo_world(demo_world_for_module, db):
    """Every test here reads the demo fleet: the demo world is seeded once for the module (tests/conftest.py), and
    each test's own writes are rolled back after it."""
URL = reverse("fleet_overview")


def test_the_fleet_overview_shows_every_account_cluster_and_shared_reservation(viewer_client, demo_world):
    page = viewer_client.get(URL).content.decode()
    assert "2 accounts, 3 clusters" in page
    for cluster in Cluster.objects.all():
        assert f'id="cluster-{cluster.name}"' in page
    for account in AwsAccount.objects.all():
        assert f'id="account-{account.account_id}"' in page
    shared = demo.reservation_id(demo.SHARED_RESERVATION)
    row = page.split(f'id="fleet-{shared}"', 1)[1].split("</tr>", 1)[0]
    assert "demo-prod" in row and "demo-research" in row and "4 / 6" in row
    # $/h at EC2's price precision, as on every list: two idle m5.large units at $0.096.
    assert "research-use1: 2" in row and "staging-use1: 2" in row and '<td>$0.1920/h <span class="muted idle-source">(on-demand list price)</span></td>' in row
    # The fleet's idle prepaid cost is the one money helper's, over every usable reservation.
    usable = list(CapacityReservation.objects.usable())
    totals = capacity_totals(usable, on_demand_prices({r.instance_type for r in usable}))
    assert f'id="fleet-idle-cost">{per_hour(totals["idle_cost"])}<' in page
    # Recommendations: monthly savings ranked; one-off extensions counted apart.
    monthly = [rec for rec in Recommendation.objects.filter(state="open") if rec.is_monthly]
    assert monthly and all(rec.money_text in page for rec in monthly[:3])
    # The demo's three extensions cost more than the work they protect: not advised, so not counted here (#47).
    assert "Capacity Block extension" not in page


def test_each_cluster_row_counts_its_own_nodes_and_pending_pods(viewer_client, demo_world):
    page = viewer_client.get(URL).content.decode()
    for cluster in Cluster.objects.all():
        with cluster_scope(cluster):
            from scheduling.models import Node, Pod

            nodes, pending = Node.objects.count(), Pod.objects.filter(node_name="", phase="Pending").count()
        row = page.split(f'id="cluster-{cluster.name}"', 1)[1].split("</tr>", 1)[0]
        assert f"<td>{nodes}</td>\n    <td>{pending}</td>" in row, (cluster.name, row)


def test_the_fleet_overview_reads_the_whole_fleet_whatever_cluster_is_chosen(viewer_client, demo_world):
    everything = viewer_client.get(URL).content.decode()
    chosen = viewer_client.get(URL, {"cluster": "research-use1"}).content.decode()
    assert "cluster research-use1" in chosen  # the header says what the other pages show
    for cluster in Cluster.objects.all():
        assert f'id="cluster-{cluster.name}"' in chosen
    assert everything.count('id="fleet-cr-') == chosen.count('id="fleet-cr-') == CapacityReservation.objects.usable().count()


def query_count(client):
    with CaptureQueriesContext(connection) as captured:
        assert client.get(URL).status_code == 200
    return len(captured)


def test_its_queries_do_not_grow_with_the_fleet(viewer_client, demo_world, make_account):
    before = query_count(viewer_client)
    account = make_account("333333333333", "more")
    for index in range(3):
        cluster = Cluster.objects.create(name=f"more-{index}", account=account, region="us-east-1")
        with cluster_scope(cluster):
            PodFactory(node=NodeFactory(), phase="Running")
    query_count(viewer_client)  # the process reads its list of clusters again once
    assert query_count(viewer_client) == before
    assert before <= 16, before


def test_the_reservations_most_idle_cost_first_the_rest_linked(viewer_client, demo_world, monkeypatch):
    from fleet import overview

    monkeypatch.setattr(overview, "RESERVATIONS_SHOWN", 3)
    page = viewer_client.get(URL).content.decode()
    shown = [chunk.split('"', 1)[0] for chunk in page.split('id="fleet-cr-')[1:]]
    # trn2 (2 idle at the block's own $30.00 a unit-hour), p5 (1 x $55.04), then the committed r6i.large ODCR (10 x $0.126)
    assert shown == ["0a1b2c3d4e5f60007", "0a1b2c3d4e5f60006", "0a1b2c3d4e5f60012"]
    more = CapacityReservation.objects.usable().count() - 3
    assert f"And {more} more" in page and "/reservations/?cluster=all" in page
