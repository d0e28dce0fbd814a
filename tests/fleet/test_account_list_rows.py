"""The AWS accounts list's table is a PlainRowsTable (karpweb/tables.py): its rows equal django-tables2's own
rendering of the same table (the account link, a role or karpweb's own credentials, no region or several,
cluster counts, escaping)."""

import pytest
from django.test import RequestFactory
from django_tables2 import RequestConfig

from fleet.models import AwsAccount, Cluster
from fleet.tables import AwsAccountTable
from fleet.views import AwsAccountListView
from tests.ui.test_decisions_page import django_tables2_rows, normalized, rows

pytestmark = pytest.mark.django_db
HOSTILE = '<b>&"\''


def accounts():
    ml = AwsAccount.objects.create(account_id="222222222222", name=f"ml {HOSTILE}", regions=["us-east-1", "eu-west-1"],
                                   role_arn="arn:aws:iam::222222222222:role/karpweb-reader")
    AwsAccount.objects.create(account_id="333333333333", name="other", regions=[])
    AwsAccount.objects.create(account_id="444444444444", name="one-region", regions=["us-west-2"])
    Cluster.objects.create(name="alpha", account=ml, region="us-east-1")
    Cluster.objects.create(name="beta", account=ml, region="eu-west-1")


def table_for(params):
    request = RequestFactory().get("/fleet/accounts/", params)
    table = AwsAccountTable(AwsAccountListView().get_queryset())
    RequestConfig(request, paginate={"per_page": 50}).configure(table)
    return request, table


@pytest.mark.parametrize("params", [{}, {"sort": "-name"}, {"sort": "role_arn"}, {"sort": "-cluster_count"}])
def test_plain_rows_are_django_tables2s_rows(db, params):
    accounts()
    _, table = table_for(params)
    plain = table.plain_rows()
    assert plain == django_tables2_rows(table) and len(rows(f"<tbody>{plain}</tbody>")) == AwsAccount.objects.count()
    assert "<b>" not in plain


def test_the_whole_table_is_django_tables2s_table(db):
    accounts()
    request, table = table_for({"sort": "-name"})
    assert table.template_name == "tables/plain_rows.html"
    plain = table.as_html(request)
    table.template_name = "tables/table.html"
    assert normalized(plain) == normalized(table.as_html(request))
    shown = {cells[1]: cells for cells in rows(plain)}
    assert shown["222222222222"] == ['<a href="/fleet/accounts/222222222222/">ml &lt;b&gt;&amp;&quot;&#x27;</a>', "222222222222",
                                     "arn:aws:iam::222222222222:role/karpweb-reader", "us-east-1, eu-west-1", "2"]
    assert shown["333333333333"][2:] == ["karpweb&#x27;s own credentials", "—", "0"]
