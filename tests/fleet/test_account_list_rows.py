"""The AWS accounts list's table is a PlainRowsTable (karpweb/tables.py): its rows equal django-tables2's own
rendering of the same table (the account link, a role or karpweb's own credentials, no region or several,
cluster counts, escaping)."""

import pytest

from fleet.models import AwsAccount, Cluster
from fleet.tables import AwsAccountTable
from fleet.views import AwsAccountListView
from tests.support.plain_rows import HOSTILE, configured, same_rows, same_table
from tests.ui.test_decisions_page import rows

pytestmark = pytest.mark.django_db


def accounts():
    ml = AwsAccount.objects.create(account_id="222222222222", name=f"ml {HOSTILE}", regions=["us-east-1", "eu-west-1"],
                                   role_arn="arn:aws:iam::222222222222:role/karpweb-reader")
    AwsAccount.objects.create(account_id="333333333333", name="other", regions=[])
    AwsAccount.objects.create(account_id="444444444444", name="one-region", regions=["us-west-2"])
    Cluster.objects.create(name="alpha", account=ml, region="us-east-1")
    Cluster.objects.create(name="beta", account=ml, region="eu-west-1")


def table_for(params):
    return configured(AwsAccountTable, AwsAccountListView, "/fleet/accounts/", params, per_page=50)


@pytest.mark.parametrize("params", [{}, {"sort": "-name"}, {"sort": "role_arn"}, {"sort": "-cluster_count"}])
def test_plain_rows_are_django_tables2s_rows(db, params):
    accounts()
    _, table = table_for(params)
    assert len(rows(f"<tbody>{same_rows(table)}</tbody>")) == AwsAccount.objects.count()


def test_the_whole_table_is_django_tables2s_table(db):
    accounts()
    request, table = table_for({"sort": "-name"})
    plain = same_table(request, table)
    shown = {cells[1]: cells for cells in rows(plain)}
    assert shown["222222222222"] == ['<a href="/fleet/accounts/222222222222/">ml &lt;b&gt;&amp;&quot;&#x27;</a>', "222222222222",
                                     "arn:aws:iam::222222222222:role/karpweb-reader", "us-east-1, eu-west-1", "2"]
    assert shown["333333333333"][2:] == ["karpweb&#x27;s own credentials", "—", "0"]
