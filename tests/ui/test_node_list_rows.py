"""The node list's table is a PlainRowsTable (karpweb/tables.py): its rows, written in one pass from plain
cell values, equal django-tables2's own rendering of the same table, for every kind of cell the list has
(links, a missing pool or reservation, empty values, prices, prepaid, the bars, ready or not, escaping)."""

import datetime
import re

import pytest
from django.test import RequestFactory
from django.utils import timezone
from django_tables2 import RequestConfig

from karpweb.views_generic import PAGE_SIZE
from scheduling.models import CapacityType, Node
from scheduling.tables import NodeTable
from scheduling.views import NodeListView
from tests.factories.reservations import CapacityReservationFactory
from tests.factories.scheduling import NodeFactory, NodePoolFactory, PodFactory
from tests.ui.test_decisions_page import django_tables2_rows, normalized, rows
from tests.ui.test_list_money_and_use import price

pytestmark = pytest.mark.django_db
SCRIPT = '<script>alert("x")</script> & \'quoted\''


def nodes():
    price("m5.large", "us-east-1a", CapacityType.ON_DEMAND, 0.096)
    price("m5.large", "us-east-1a", CapacityType.SPOT, 0.0412)
    reservation = CapacityReservationFactory(reservation_id="cr-0rows")
    pool, odd_pool = NodePoolFactory(name="web"), NodePoolFactory(name="a & <i>\"q'")
    now = timezone.now()
    made = [
        NodeFactory(name="od-1", node_pool=pool, created_at=now - datetime.timedelta(days=3, hours=5)),
        NodeFactory(name="spot-1", node_pool=pool, capacity_type=CapacityType.SPOT, ready=False),
        NodeFactory(name="res-1", node_pool=odd_pool, capacity_type=CapacityType.RESERVED, reservation=reservation,
                    reservation_label="cr-0rows", created_at=now - datetime.timedelta(minutes=4)),
        NodeFactory(name="label-only", node_pool=None, reservation_label=SCRIPT, instance_type="", zone="",
                    capacity_type="", allocatable_cpu_millicores=0, allocatable_memory_bytes=0),
        NodeFactory(name="x9-1 & <b>", node_pool=pool, instance_type="x9.huge"),
    ]
    PodFactory(node=made[0], node_name="od-1", cpu_request_millicores=2500, memory_request_bytes=2**30)
    PodFactory(node=made[0], node_name="od-1", phase="Succeeded", cpu_request_millicores=4000)
    for index in range(PAGE_SIZE + 3):
        NodeFactory(name=f"n-{index:03}", node_pool=pool, ready=bool(index % 2))
    return made


def table_for(params):
    request = RequestFactory().get("/nodes/", params)
    table = NodeTable(NodeListView().get_queryset())
    RequestConfig(request, paginate={"per_page": PAGE_SIZE}).configure(table)
    return request, table


@pytest.mark.parametrize("params", [{}, {"page": "2"}, {"sort": "-name"}, {"sort": "created_at"},
                                    {"sort": "reservation_label", "page": "2"}])
def test_plain_rows_are_django_tables2s_rows(db, params):
    nodes()
    _, table = table_for(params)
    plain = table.plain_rows()
    assert plain == django_tables2_rows(table) and plain
    assert "alert(" not in plain.replace("alert(&quot;", "")  # escaped wherever it shows


def test_the_whole_table_is_django_tables2s_table(db):
    """Header, sort links, rows, the totals footer and pagination, as django-tables2's own template renders them."""
    nodes()
    request, table = table_for({"sort": "-name", "page": "2"})
    assert table.template_name == "tables/plain_rows.html"
    plain = table.as_html(request)
    table.template_name = "tables/table.html"
    assert normalized(plain) == normalized(table.as_html(request))
    assert len(rows(plain)) == Node.objects.count() - PAGE_SIZE and 'id="node-totals">' in plain
    assert '<a href="?sort=name&amp;page=2">' in plain


def test_the_page_shows_the_rows(viewer_client, db):
    nodes()
    page = viewer_client.get("/nodes/", {"sort": "name"}).content.decode()
    first = rows(page)[0]
    assert re.fullmatch(r'<a class="id" href="[^"]+/label-only/">label-only</a>', first[0])
    assert first[1] == "—" and first[5] == "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#x27;quoted&#x27;"
