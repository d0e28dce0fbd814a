"""Every page on the demo world: what it shows, and a query count that does not grow with rows (who may
see it, and the tests that build their own rows: tests/ui/test_views_own_rows.py)."""

import datetime

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from fleet.scope import cluster_scope, default_cluster
from reservations.models import CapacityReservation
from scheduling.models import AuditEntry, InstanceType, Node, NodePool, Pod
from tests.factories.reservations import CapacityReservationFactory, UtilizationSampleFactory
from tests.factories.scheduling import DecisionFactory, NodeClaimFactory, NodeFactory, NodePoolFactory, PodFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def demo_world(demo_world_for_module, db):
    """Every test here builds on the demo world: it is seeded once for the module (tests/conftest.py),
    and each test's own writes are rolled back after it."""


LIST_PAGES = [
    "scheduling:overview", "reservations:list", "reservations:capacity_blocks", "reservations:nodeclasses",
    "scheduling:nodepools", "scheduling:nodes", "scheduling:nodeclaims", "scheduling:pods", "scheduling:decisions",
    "scheduling:whatif", "reservations:unselected", "scheduling:instancetypes",
]


def detail_urls():
    reservation = CapacityReservation.objects.order_by("reservation_id").first()
    node = Node.objects.order_by("name").first()
    pod = Pod.objects.order_by("name").first()
    return [
        reservation.get_absolute_url(), node.get_absolute_url(), node.node_claim.get_absolute_url(),
        node.node_pool.get_absolute_url(), node.node_pool.node_class.get_absolute_url(), pod.get_absolute_url(),
        InstanceType.objects.get(name=node.instance_type).get_absolute_url(),
    ]


@pytest.mark.parametrize("page", LIST_PAGES)
def test_viewer_sees_every_list_page(viewer_client, demo_world, page):
    response = viewer_client.get(reverse(page))
    assert response.status_code == 200


def test_viewer_sees_every_detail_page(viewer_client, demo_world):
    for url in detail_urls():
        assert viewer_client.get(url).status_code == 200, url


def test_overview_shows_totals_idle_cost_and_drains(viewer_client, demo_world):
    # The demo's first cluster (its single-cluster world), as the header's picker chooses it.
    first = default_cluster()
    page = viewer_client.get(reverse("scheduling:overview"), {"cluster": first.name}).content.decode()
    with cluster_scope(first):
        active = list(CapacityReservation.objects.usable())
    used = sum(r.used_instance_count for r in active)
    total = sum(r.total_instance_count for r in active)
    assert f"{used} / {total}" in page
    # The second account's cluster sees only the reservation the first shares with it (m6i.large, 2 idle x $0.096).
    research = viewer_client.get(reverse("scheduling:overview"), {"cluster": "research-use1"}).content.decode()
    assert "$0.1920/h" in research and "in research-use1" in research
    # Idle m5.xlarge (4 x $0.192, and 3 x $0.192 in the unselected one) + m5.large (4 x $0.096) + c6a.large
    # (3 x $0.0765) + p5 (1 x $55.04), the m6i.large its account owns and shares (2 x $0.096), and the committed
    # r6i.large (10 x $0.126: 12 units, 2 used), all at list price; and the trn2 Capacity Block's 2 idle units at
    # the block's own price, its entered fee over its unit-hours ($6,360 / (4 x 53 h) = $30/h each), not 2 x $44.70
    assert "$118.45/h" in page
    assert "$60.00/h block fee entered; $58.45/h on-demand list price" in page
    assert "cr-0a1b2c3d4e5f60005" in page  # the block that ends within the hour
    assert "cr-0a1b2c3d4e5f60002" in page  # idle under 20 % for 24 hours
    assert 'id="utilization-chart"' in page and "utilization-data" in page


def test_overview_partial_for_htmx(viewer_client, demo_world):
    response = viewer_client.get(reverse("scheduling:overview"), HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    assert b"<html" not in response.content and b"idle reserved instances" in response.content
    assert "chart" not in response.context  # the refresh does not read the hourly roll-up


def test_reservation_list_filters(viewer_client, demo_world):
    url = reverse("reservations:list")
    page = viewer_client.get(url, {"reservation_type": "capacity-block"}).content.decode()
    assert "cr-0a1b2c3d4e5f60005" in page and "cr-0a1b2c3d4e5f60001" not in page
    page = viewer_client.get(url, {"tag": "team=batch"}).content.decode()
    assert "cr-0a1b2c3d4e5f60003" in page and "cr-0a1b2c3d4e5f60005" not in page
    page = viewer_client.get(url, {"tag": "team"}).content.decode()
    assert "cr-0a1b2c3d4e5f60003" in page and "cr-0a1b2c3d4e5f60005" in page
    page = viewer_client.get(url, {"availability_zone": "us-east-1c", "state": ["active"]}).content.decode()
    assert "cr-0a1b2c3d4e5f60004" in page and "cr-0a1b2c3d4e5f60008" not in page
    page = viewer_client.get(url, {"instance_type": "m5.large", "owner_id": "123456789012"}).content.decode()
    assert "cr-0a1b2c3d4e5f60001" in page and "cr-0a1b2c3d4e5f60002" not in page


def test_bad_filter_value_is_reported_not_crashed(viewer_client, demo_world):
    response = viewer_client.get(reverse("reservations:list"), {"state": "melted"})
    assert response.status_code == 200
    assert "state" in response.content.decode() and "melted" in response.content.decode()


def test_reservation_detail_chart_nodes_and_low_use_flag(viewer_client, demo_world):
    idle = viewer_client.get(reverse("reservations:detail", args=["cr-0a1b2c3d4e5f60002"])).content.decode()
    assert "under 20 % for 24 hours" in idle and "reservation-data" in idle
    busy = viewer_client.get(reverse("reservations:detail", args=["cr-0a1b2c3d4e5f60001"])).content.decode()
    assert "under 20 % for 24 hours" not in busy
    assert busy.count("/nodes/ip-") == 6
    assert "/nodeclasses/default/" in busy


def test_nodepool_detail_and_mode_change_by_operator(operator_client, operator, demo_world):
    url = reverse("scheduling:nodepool", args=["web"])
    page = operator_client.get(url).content.decode()
    assert "Change mode" in page and "cr-0a1b2c3d4e5f60001" in page and "reserved: 9" in page  # 6 m5.large, 1 r5.large, 2 r6i.large
    response = operator_client.post(reverse("scheduling:nodepool_mode", args=["web"]), {"mode": "control"})
    assert response.status_code == 302
    assert NodePool.objects.get(name="web").mode == "control"
    entry = AuditEntry.objects.get()
    assert (entry.actor, entry.source, entry.changes) == ("otto", "ui", {"mode": ["", "control"]})


def test_mode_change_rejects_bad_value_and_viewers(client, viewer, operator, demo_world):
    url = reverse("scheduling:nodepool_mode", args=["web"])
    client.force_login(viewer)
    assert client.post(url, {"mode": "control"}).status_code == 403
    assert "Change mode" not in client.get(reverse("scheduling:nodepool", args=["web"])).content.decode()
    client.force_login(operator)
    response = client.post(url, {"mode": "chaos"}, follow=True)
    assert 'mode: "chaos" is not one of' in [str(m) for m in response.context["messages"]][0]
    assert NodePool.objects.get(name="web").mode == ""
    assert not AuditEntry.objects.exists()


def grow_world(extra):
    pool = NodePoolFactory(name="grow")
    for index in range(extra):
        reservation = CapacityReservationFactory(capacity_block=True, end_date=timezone.now() + datetime.timedelta(hours=3))
        UtilizationSampleFactory(reservation=reservation)
        node = NodeFactory(node_pool=pool, reservation=reservation, reservation_label=reservation.reservation_id,
                           node_claim=NodeClaimFactory(node_pool=pool, reservation=reservation))
        PodFactory(node=node, node_name=node.name)
        DecisionFactory(node_pool=pool)


def query_count(client, url):
    with CaptureQueriesContext(connection) as captured:
        assert client.get(url).status_code == 200
    return len(captured)


@pytest.mark.parametrize("page", LIST_PAGES)
def test_query_count_does_not_grow_with_rows(viewer_client, demo_world, page):
    url = reverse(page)
    grow_world(2)
    before = query_count(viewer_client, url)
    grow_world(15)
    after = query_count(viewer_client, url)
    assert after == before, f"{url}: {before} queries with few rows, {after} with more"
    # The overview also counts the reservation doctor's findings for its panel: one query more; and asks
    # whether a NodePool has no running totals yet (scheduling/totals.py: only then is the SQL given the
    # live count's subqueries, whose cost estimate alone can make PostgreSQL compile the query): one more.
    # A viewer's role bindings (fleet/access.py: may it operate some cluster?): one more on every page. The idle
    # figure reads the Capacity Blocks' fees (reservations/block_fees.py): one more on the overview; and the prices
    # line reads the account's commitments (reservations/commitments.py): one more.
    assert before <= (17 if page == "scheduling:overview" else 13), f"{url} takes {before} queries"


def test_detail_query_counts_do_not_grow(viewer_client, demo_world):
    urls = detail_urls()
    before = [query_count(viewer_client, url) for url in urls]
    grow_world(5)
    reservation = CapacityReservation.objects.get(reservation_id="cr-0a1b2c3d4e5f60001")
    for _ in range(5):
        NodeFactory(reservation=reservation, node_pool=NodePool.objects.get(name="web"))
    after = [query_count(viewer_client, url) for url in urls]
    assert after == before


def test_instance_types_show_the_labels_nodepools_are_written_against(viewer_client, demo_world):
    page = viewer_client.get(reverse("scheduling:instancetypes")).content.decode()
    assert "p5.48xlarge" in page and "nvidia.com/gpu 8, vpc.amazonaws.com/efa 32" in page
    filtered = viewer_client.get(reverse("scheduling:instancetypes"),
                                 {"label": "karpenter.k8s.aws/instance-category=c"}).content.decode()
    assert "c6a.large" in filtered and "m5.large" not in filtered
    bad = viewer_client.get(reverse("scheduling:instancetypes"), {"label": "no-equals-sign"})
    assert bad.status_code == 200 and "is not key=value" in bad.content.decode()
    detail = viewer_client.get(reverse("scheduling:instancetype", args=["p5.48xlarge"])).content.decode()
    for text in ("karpenter.k8s.aws/instance-gpu-memory=81920", "karpenter.k8s.aws/instance-local-nvme=30400",
                 "vpc.amazonaws.com/efa: 32", "nvidia.com/gpu: 8", "Max pods</dt><dd>100 "):
        assert text in detail, text


def test_demo_nodes_carry_every_label_of_their_type(viewer_client, demo_world):
    node = Node.objects.filter(instance_type="trn2.48xlarge").first()
    page = viewer_client.get(node.get_absolute_url()).content.decode()
    assert "karpenter.k8s.aws/instance-accelerator-name=trainium2" in page
    assert "karpenter.k8s.aws/instance-category=trn" in page
