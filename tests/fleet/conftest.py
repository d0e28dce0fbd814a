import pytest

from fleet.models import AwsAccount, Cluster


@pytest.fixture
def make_account(db):
    def make(account_id: str, name: str | None = None, **fields) -> AwsAccount:
        return AwsAccount.objects.create(account_id=account_id, name=name or f"acct-{account_id}", **fields)

    return make


@pytest.fixture
def make_cluster(db, make_account):
    def make(name: str, account: AwsAccount | None = None, region: str = "us-east-1", **fields) -> Cluster:
        account = account or AwsAccount.objects.filter(account_id="111111111111").first() or make_account("111111111111")
        return Cluster.objects.create(name=name, account=account, region=region, **fields)

    return make


@pytest.fixture
def two_clusters(make_cluster, make_account):
    """The cluster the migration made (the default), plus two more in two other accounts."""
    from fleet.scope import default_cluster

    home = default_cluster()
    east = make_cluster("east", make_account("111111111111", "ml-prod"), region="us-east-1")
    west = make_cluster("west", make_account("222222222222", "ml-dev"), region="us-west-2")
    return home, east, west
