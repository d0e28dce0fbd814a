"""The clusters list's table is a PlainRowsTable (karpweb/tables.py): its rows equal django-tables2's own
rendering of the same table (links, choice labels, the "global" mode default, the default flag, escaping)."""

import pytest
from django.test import RequestFactory
from django_tables2 import RequestConfig

from fleet.models import AwsAccount, Cluster
from fleet.tables import ClusterTable
from fleet.views import ClusterListView
from scheduling.choices import Mode
from tests.ui.test_decisions_page import django_tables2_rows, normalized, rows

pytestmark = pytest.mark.django_db


def clusters():
    ml = AwsAccount.objects.create(account_id="222222222222", name='ml & <b>"dev"</b>', regions=["us-east-1"])
    other = AwsAccount.objects.create(account_id="333333333333", name="other")
    Cluster.objects.create(name="alpha", account=ml, region="us-east-1", mode=Mode.CONTROL, karpenter=Cluster.Karpenter.ABSENT)
    Cluster.objects.create(name="beta", account=ml, region="", connection=Cluster.Connection.KUBECONFIG,
                           kubeconfig="/etc/kube", shard="gpu")
    Cluster.objects.create(name="gamma", account=other, region="eu-west-1", mode=Mode.OBSERVE,
                           karpenter=Cluster.Karpenter.PRESENT)


@pytest.mark.parametrize("params", [{}, {"sort": "-name"}, {"sort": "account"}, {"sort": "-node_count"}])
def test_plain_rows_are_django_tables2s_rows(db, params):
    clusters()
    table = ClusterTable(ClusterListView().get_queryset())
    RequestConfig(RequestFactory().get("/fleet/clusters/", params), paginate={"per_page": 50}).configure(table)
    plain = table.plain_rows()
    assert plain == django_tables2_rows(table) and len(rows(f"<tbody>{plain}</tbody>")) == Cluster.objects.count()
    assert "<b>" not in plain


def test_the_whole_table_is_django_tables2s_table(db):
    clusters()
    request = RequestFactory().get("/fleet/clusters/", {"sort": "-name"})
    table = ClusterTable(ClusterListView().get_queryset())
    RequestConfig(request, paginate={"per_page": 50}).configure(table)
    assert table.template_name == "tables/plain_rows.html"
    plain = table.as_html(request)
    table.template_name = "tables/table.html"
    assert normalized(plain) == normalized(table.as_html(request))
    assert '<a href="/fleet/clusters/alpha/">alpha</a>' in plain and '<a href="/fleet/accounts/333333333333/">' in plain
