"""Each account of the fleet works in EC2 as itself: with a role_arn, karpweb assumes it through STS
(the EC2 test server is moto, whose STS issues keys that act in the role's account) and reads that
account's reservations; without one, karpweb's own credentials read its own."""

import boto3
import pytest
from moto.ec2.models import ec2_backends

from fleet.models import AwsAccount, Cluster
from fleet.scope import cluster_scope
from scheduling.loop import backends
from tests.support.ec2_fixtures import *  # noqa: F403 - the EC2 test server (moto, with its STS)
from tests.support.ec2_server import EC2TestServer

import datetime as dt  # noqa: E402 - after the star import, whose `datetime` is the class

ROLE_ACCOUNT = "333333333333"


@pytest.fixture
def aws(settings, ec2_endpoint, aws_test_credentials, world):
    settings.KARPWEB_PROVIDER = "aws"
    settings.KARPWEB_EC2_ENDPOINT_URL = ec2_endpoint
    settings.KARPWEB_AWS_REGION = "us-east-1"
    settings.KARPWEB_PRICING_SOURCE = "bundled"
    backends.forget()
    their_world = EC2TestServer(account_id=ROLE_ACCOUNT)  # a handle on that account's backend, same server
    yield their_world
    ec2_backends[ROLE_ACCOUNT].reset()
    backends.forget()


def caller_account(client, ec2_endpoint) -> str:
    """The account the client's credentials act in, as STS says."""
    frozen = client._request_signer._credentials.get_frozen_credentials()
    sts = boto3.client("sts", region_name="us-east-1", endpoint_url=ec2_endpoint, aws_access_key_id=frozen.access_key,
                       aws_secret_access_key=frozen.secret_key, aws_session_token=frozen.token)
    return sts.get_caller_identity()["Account"]


@pytest.mark.django_db
def test_an_account_with_a_role_reads_its_own_world_through_sts(aws, world, ec2_endpoint):
    ours = world.add_reservation("m5.large", "us-east-1a", 2)
    theirs = aws.add_reservation("m5.xlarge", "us-east-1b", 3)
    account = AwsAccount.objects.create(account_id=ROLE_ACCOUNT, name="ml-prod", external_id="karpweb-ext",
                                        role_arn=f"arn:aws:iam::{ROLE_ACCOUNT}:role/karpweb-reader", regions=["us-east-1"])
    prod = Cluster.objects.create(name="prod", account=account, region="us-east-1")
    home = AwsAccount.objects.create(account_id="123456789012", name="home")
    dev = Cluster.objects.create(name="dev", account=home, region="us-east-1")

    with cluster_scope(prod):
        cloud = backends.cloud()
        assert backends.cloud() is cloud, "one provider per cluster per process"
        assert [r["CapacityReservationId"] for r in cloud.inventory()] == [theirs]
        assert caller_account(cloud.ec2, ec2_endpoint) == ROLE_ACCOUNT
    with cluster_scope(dev):  # no role: karpweb's own credentials, its own account's world
        assert [r["CapacityReservationId"] for r in backends.cloud().inventory()] == [ours]


@pytest.mark.django_db
def test_assumed_credentials_are_refreshed_before_they_expire(aws, ec2_endpoint):
    account = AwsAccount.objects.create(account_id=ROLE_ACCOUNT, name="ml-prod",
                                        role_arn=f"arn:aws:iam::{ROLE_ACCOUNT}:role/karpweb-reader")
    prod = Cluster.objects.create(name="prod", account=account, region="us-east-1")
    with cluster_scope(prod):
        credentials = backends.cloud().ec2._request_signer._credentials
    first = credentials.get_frozen_credentials().access_key
    assert credentials.get_frozen_credentials().access_key == first, "kept while valid"
    # Ten minutes before expiry (botocore refreshes 15 minutes ahead): the next request gets new ones.
    credentials._expiry_time = dt.datetime.now(dt.timezone.utc) + dt.timedelta(minutes=10)
    assert credentials.get_frozen_credentials().access_key != first
    assert credentials._expiry_time > dt.datetime.now(dt.timezone.utc) + dt.timedelta(minutes=30)


@pytest.mark.django_db
def test_an_eks_token_is_a_presigned_caller_identity_naming_the_cluster(aws, ec2_endpoint):
    """The token EKS's authenticator takes: the presigned STS GetCallerIdentity URL, signed with the
    account's (assumed) credentials and over the x-k8s-aws-id header that names the cluster."""
    import base64
    import urllib.parse

    from scheduling.adapters.ec2.client import assumed_role_session
    from scheduling.adapters.kube.eks import CLUSTER_ID_HEADER, TOKEN_PREFIX, eks_token

    session = assumed_role_session(f"arn:aws:iam::{ROLE_ACCOUNT}:role/karpweb-reader", region="us-east-1",
                                   sts_endpoint_url=ec2_endpoint)
    token = eks_token(session, "prod", "us-east-1", ec2_endpoint)
    assert token.startswith(TOKEN_PREFIX)
    encoded = token.removeprefix(TOKEN_PREFIX)
    url = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode()
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)
    assert query["Action"] == ["GetCallerIdentity"] and CLUSTER_ID_HEADER in query["X-Amz-SignedHeaders"][0]
    assert urllib.parse.urlsplit(url).netloc == urllib.parse.urlsplit(ec2_endpoint).netloc  # the STS endpoint given
    assert query["X-Amz-Credential"][0].startswith(session.get_credentials().get_frozen_credentials().access_key)


@pytest.mark.django_db
def test_the_external_id_karpweb_made_reaches_sts_as_shown_once(aws, ec2_endpoint, as_fleet_admin):
    """An account added through the API: karpweb makes its external ID, shows it once, and sends that
    value in AssumeRole (moto's STS keeps what each AssumeRole asked, in this process)."""
    from moto.sts.models import sts_backends

    made = as_fleet_admin.post("/api/v1/accounts/", {
        "accountID": ROLE_ACCOUNT, "name": "ml-prod", "roleARN": f"arn:aws:iam::{ROLE_ACCOUNT}:role/karpweb-reader",
        "regions": ["us-east-1"]}, format="json")
    assert made.status_code == 201, made.json()
    shown = made.json()["externalID"]
    account = AwsAccount.objects.get(account_id=ROLE_ACCOUNT)
    prod = Cluster.objects.create(name="prod", account=account, region="us-east-1")
    with cluster_scope(prod):
        assert caller_account(backends.cloud().ec2, ec2_endpoint) == ROLE_ACCOUNT
    asked = [role.external_id for backend in sts_backends.values() for region in backend.values()
             for role in region.assumed_roles if role.role_arn.endswith(":role/karpweb-reader")]
    assert shown.startswith("karpweb-") and shown in asked
