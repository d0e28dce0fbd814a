"""Checks that a PlainRowsTable (karpweb/tables.py) writes what django-tables2 renders: its rows, and the
whole table (header, sort links, footer, pagination) through django-tables2's own template."""

import re

from django.test import RequestFactory
from django_tables2 import RequestConfig

from fleet import scope
from fleet.models import AwsAccount, Cluster
from karpweb.views_generic import PAGE_SIZE
from tests.ui.test_decisions_page import django_tables2_rows, normalized

HOSTILE = '<b>&"\''  # a name or value that must show escaped wherever it shows


def second_cluster() -> Cluster:
    """A second cluster beside the default one: every Kubernetes-side link then names its cluster."""
    scope.default_cluster()
    account = AwsAccount.objects.create(account_id="222222222222", name="ml-dev")
    return Cluster.objects.create(name="west", account=account, region="us-east-1")


def configured(table_class, view_class, url: str, params: dict, per_page: int = PAGE_SIZE, cluster_column: bool = False):
    """(request, table) as the list view makes them: the view's rows, sorted and paged by the request
    (`cluster_column`: with the Cluster column the all-clusters view shows)."""
    request = RequestFactory().get(url, params)
    table = table_class(view_class().get_queryset())
    if cluster_column:
        table.columns.show("cluster")
    RequestConfig(request, paginate={"per_page": per_page}).configure(table)
    return request, table


def same_rows(table) -> str:
    """The table's plain rows, checked equal to django-tables2's and escaped (nothing of HOSTILE raw)."""
    plain = table.plain_rows()
    assert plain == django_tables2_rows(table) and plain
    assert "<b>" not in plain
    return plain


def same_table(request, table) -> str:
    """The whole table as the page renders it, checked equal to django-tables2's own template's rendering."""
    assert table.template_name == "tables/plain_rows.html"
    plain = table.as_html(request)
    table.template_name = "tables/table.html"
    assert normalized(plain) == normalized(table.as_html(request))
    return plain


def without_cluster(rows: list[list[str]]) -> list[list[str]]:
    """The rows of an all-clusters list without their first cell, checked to be a link to the row's cluster."""
    for cells in rows:
        assert re.fullmatch(r'<a href="/fleet/clusters/[^"/]+/">[^<]+</a>', cells[0]), cells
    return [cells[1:] for cells in rows]
