"""The EC2NodeClasses list's table is a PlainRowsTable (karpweb/tables.py): its rows, written in one pass
from plain cell values, equal django-tables2's own rendering of the same table, for every kind of cell the
list has (links in a fleet of two clusters that both have a class of one name, no terms, one or several, counts,
the CapacityReservationsReady status given, missing or empty, a sync time or none, escaping)."""

import pytest
from django.utils import timezone

from fleet import scope
from karpweb.tables import short_datetime
from karpweb.views_generic import PAGE_SIZE
from reservations.models import EC2NodeClass
from reservations.tables import EC2NodeClassTable
from reservations.views import NodeClassListView
from tests.factories.reservations import CapacityReservationFactory, EC2NodeClassFactory
from tests.factories.scheduling import NodePoolFactory
from tests.support.plain_rows import HOSTILE, configured, same_rows, same_table, second_cluster, without_cluster
from tests.ui.test_decisions_page import rows

pytestmark = pytest.mark.django_db
READY = "CapacityReservationsReady"


def node_classes():
    synced = timezone.now()
    web = EC2NodeClassFactory(name="web", synced_at=synced, conditions=[{"type": "Ready", "status": "True"},
                                                                        {"type": READY, "status": "True"}])
    web.selected_reservations.add(CapacityReservationFactory(), CapacityReservationFactory())
    NodePoolFactory(name="web-a", node_class=web), NodePoolFactory(name="web-b", node_class=web)
    EC2NodeClassFactory(name="none", capacity_reservation_selector_terms=[], conditions=[{"type": READY, "status": "False"}])
    EC2NodeClassFactory(name="blank-status", conditions=[{"type": READY, "status": ""}])
    EC2NodeClassFactory(name=f"odd {HOSTILE}", capacity_reservation_selector_terms=[{"id": "cr-1"}, {"tags": {"a": "b"}}],
                        conditions=[{"type": READY, "status": HOSTILE}], synced_at=synced)
    with scope.cluster_scope(second_cluster()):  # a class "web" of its own
        EC2NodeClassFactory(name="web")
    for index in range(PAGE_SIZE + 3):
        EC2NodeClassFactory(name=f"c-{index:03}", conditions=[{"type": READY, "status": "True"}] if index % 2 else [])


def table_for(params):
    return configured(EC2NodeClassTable, NodeClassListView, "/nodeclasses/", params)


@pytest.mark.parametrize("params", [{}, {"page": "2"}, {"sort": "-name"}, {"sort": "-pool_count"},
                                    {"sort": "synced_at", "page": "2"}, {"sort": "-reservation_count"}])
def test_plain_rows_are_django_tables2s_rows(db, params):
    node_classes()
    _, table = table_for(params)
    same_rows(table)


def test_the_whole_table_is_django_tables2s_table(db):
    """Header, sort links, rows and pagination, as django-tables2's own template renders them."""
    node_classes()
    request, table = table_for({"sort": "-name", "page": "2"})
    plain = same_table(request, table)
    assert len(rows(plain)) == EC2NodeClass.objects.count() - PAGE_SIZE and '<a href="?sort=name&amp;page=2">' in plain


def test_the_page_shows_each_clusters_links(viewer_client, db):
    node_classes()
    shown = {cells[0]: cells for cells in without_cluster(rows(viewer_client.get("/nodeclasses/", {"per_page": "100"}).content.decode()))}
    home = scope.default_cluster().name
    web = EC2NodeClass.objects.get(name="web", cluster__name=home)
    assert shown[f'<a href="/clusters/{home}/nodeclasses/web/">web</a>'][1:] == ["1", "2", "2", "True",
                                                                                 short_datetime(web.synced_at)]
    assert shown['<a href="/clusters/west/nodeclasses/web/">web</a>'][1:] == ["1", "0", "0", "Unknown", "—"]
    assert shown[f'<a href="/clusters/{home}/nodeclasses/none/">none</a>'][1:5] == ["0", "0", "0", "False"]
    assert shown[f'<a href="/clusters/{home}/nodeclasses/blank-status/">blank-status</a>'][1:5] == ["1", "0", "0", ""]
    odd = next(cells for key, cells in shown.items() if ">odd &lt;b&gt;&amp;&quot;&#x27;</a>" in key)
    assert odd[1] == "2" and odd[4] == "&lt;b&gt;&amp;&quot;&#x27;"
