"""The NodePools list's table is a PlainRowsTable (karpweb/tables.py): its rows equal django-tables2's own
rendering of the same table (links, the EC2NodeClass found or not, readiness, the mode default, escaping)."""

import pytest
from django.test import RequestFactory
from django_tables2 import RequestConfig

from scheduling.choices import Mode
from scheduling.tables import NodePoolTable
from scheduling.views import NodePoolListView
from tests.factories.reservations import EC2NodeClassFactory
from tests.factories.scheduling import NodeFactory, NodePoolFactory
from tests.ui.test_decisions_page import django_tables2_rows, normalized

pytestmark = pytest.mark.django_db


def pools():
    node_class = EC2NodeClassFactory(name="default")
    web = NodePoolFactory(name="web", weight=10, mode=Mode.CONTROL, node_class=node_class, node_class_ref={"name": "default"})
    NodePoolFactory(name='batch & <b>"x" \'q\'', node_class_ref={"name": "missing <i>"})
    NodePoolFactory(name="idle", consolidation_policy="WhenEmpty")
    for _ in range(3):
        NodeFactory(node_pool=web)


@pytest.mark.parametrize("params", [{}, {"sort": "-name"}, {"sort": "weight"}, {"sort": "-mode"}])
def test_plain_rows_are_django_tables2s_rows(db, params):
    pools()
    table = NodePoolTable(NodePoolListView().get_queryset())
    RequestConfig(RequestFactory().get("/nodepools/", params), paginate={"per_page": 50}).configure(table)
    plain = table.plain_rows()
    assert plain == django_tables2_rows(table) and plain.count("<tr>") == 3 and "<b>" not in plain and "&lt;b&gt;" in plain
    assert 'href="/nodeclasses/default/"' in plain


def test_the_whole_table_is_django_tables2s_table(db):
    pools()
    request = RequestFactory().get("/nodepools/", {"sort": "-name"})
    table = NodePoolTable(NodePoolListView().get_queryset())
    RequestConfig(request, paginate={"per_page": 50}).configure(table)
    assert table.template_name == "tables/plain_rows.html"
    plain = table.as_html(request)
    table.template_name = "tables/table.html"
    assert normalized(plain) == normalized(table.as_html(request))
