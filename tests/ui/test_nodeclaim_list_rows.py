"""The NodeClaims list's table is a PlainRowsTable (karpweb/tables.py): its rows, written in one pass from
plain cell values, equal django-tables2's own rendering of the same table, for every kind of cell the list
has (links to the claim, its pool, its reservation and its node in a fleet of two clusters whose pools and
nodes share names; a missing pool, a label without a known reservation, empty values, escaping)."""

import datetime
import re

import pytest
from django.utils import timezone

from fleet import scope
from karpweb.views_generic import PAGE_SIZE
from scheduling.models import CapacityType, NodeClaim
from scheduling.tables import NodeClaimTable
from scheduling.views import NodeClaimListView
from tests.factories.reservations import CapacityReservationFactory
from tests.factories.scheduling import NodeClaimFactory, NodePoolFactory
from tests.support.plain_rows import HOSTILE, configured, same_rows, same_table, second_cluster, without_cluster
from tests.ui.test_decisions_page import rows

pytestmark = pytest.mark.django_db


def claims():
    reservation = CapacityReservationFactory(reservation_id="cr-0rows")
    now = timezone.now()
    pool, odd_pool = NodePoolFactory(name="web"), NodePoolFactory(name=f"a & {HOSTILE}")
    NodeClaimFactory(name="od-1", node_pool=pool, node_name="node-a", created_at=now - datetime.timedelta(days=3, hours=5))
    NodeClaimFactory(name="res-1", node_pool=odd_pool, capacity_type=CapacityType.RESERVED, reservation=reservation,
                     reservation_label="cr-0rows", node_name=f"node {HOSTILE}", created_at=now - datetime.timedelta(minutes=4))
    NodeClaimFactory(name="res-2", node_pool=pool, capacity_type=CapacityType.RESERVED, reservation=reservation,
                     reservation_label="cr-0rows")
    NodeClaimFactory(name="label-only", node_pool=None, reservation_label=HOSTILE, instance_type="", zone="",
                     capacity_type="", created_at=None)
    NodeClaimFactory(name=f"x9-1 {HOSTILE}", node_pool=pool, capacity_type=CapacityType.SPOT, instance_type="x9.huge")
    with scope.cluster_scope(second_cluster()):  # a pool "web" and a node "node-a" of its own
        NodeClaimFactory(name="west-1", node_pool=NodePoolFactory(name="web"), node_name="node-a")
    for index in range(PAGE_SIZE + 3):
        NodeClaimFactory(name=f"n-{index:03}", node_pool=pool, node_name=f"n-{index:03}" if index % 2 else "")


def table_for(params):
    return configured(NodeClaimTable, NodeClaimListView, "/nodeclaims/", params)


@pytest.mark.parametrize("params", [{}, {"page": "2"}, {"sort": "-name"}, {"sort": "created_at"},
                                    {"sort": "reservation_label", "page": "2"}, {"sort": "-node_name"}])
def test_plain_rows_are_django_tables2s_rows(db, params):
    claims()
    _, table = table_for(params)
    same_rows(table)


def test_the_whole_table_is_django_tables2s_table(db):
    """Header, sort links, rows and pagination, as django-tables2's own template renders them."""
    claims()
    request, table = table_for({"sort": "-name", "page": "2"})
    plain = same_table(request, table)
    assert len(rows(plain)) == NodeClaim.objects.count() - PAGE_SIZE and '<a href="?sort=name&amp;page=2">' in plain


def test_the_page_shows_each_clusters_links(viewer_client, db):
    claims()
    shown = {cells[0]: cells for cells in without_cluster(rows(viewer_client.get("/nodeclaims/", {"sort": "name", "per_page": "100"})
                                               .content.decode()))}
    home = scope.default_cluster().name
    assert shown['<a href="/clusters/west/nodeclaims/west-1/">west-1</a>'][1:7:5] == [
        '<a href="/clusters/west/nodepools/web/">web</a>', '<a href="/clusters/west/nodes/node-a/">node-a</a>']
    od = shown[f'<a href="/clusters/{home}/nodeclaims/od-1/">od-1</a>']
    assert od[1] == f'<a href="/clusters/{home}/nodepools/web/">web</a>' and od[7] == "3\xa0days"
    label_only = shown[f'<a href="/clusters/{home}/nodeclaims/label-only/">label-only</a>']
    assert label_only[1:] == ["—", "—", "—", "—", "&lt;b&gt;&amp;&quot;&#x27;", "—", "—"]
    assert re.fullmatch(r'<a href="/reservations/cr-0rows/">cr-0rows</a>',
                        shown[f'<a href="/clusters/{home}/nodeclaims/res-1/">res-1</a>'][5])
