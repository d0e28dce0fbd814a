"""An EKS cluster's bearer token goes only where AWS says the cluster is: the endpoint and CA that
DescribeCluster gives (moto's EKS on the EC2 test server, its answer pointed at the real
kube-apiserver), https:// only. A row whose endpoint or CA differs from AWS's is refused on save,
naming both; a listener at the row's endpoint never sees a request."""

import base64
import socket
import threading

import pytest
from django.core.exceptions import ValidationError
from kubernetes.client import CoreV1Api
from kubernetes.client.exceptions import ApiException
from moto.eks.models import eks_backends

from fleet.models import AwsAccount, Cluster
from scheduling.adapters.ec2.client import account_session, cluster_ec2_config
from scheduling.adapters.kube.config import ClusterConfigError
from scheduling.adapters.kube.eks import eks_api_client
from tests.fleet.test_account_credentials import aws  # noqa: F401 - moto's EC2, STS and EKS, the loop on AWS
from tests.kube.conftest import kube_server  # noqa: F401 - the real kube-apiserver (one per session)
from tests.support.ec2_fixtures import *  # noqa: F403 - the EC2 test server

pytestmark = pytest.mark.django_db
OWN_ACCOUNT = "123456789012"  # the test credentials' account


class Listener:
    """A TCP listener on loopback that counts the connections it is offered (a would-be token thief)."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while not self.stopped.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.connections += 1
            conn.close()

    def close(self):
        self.stopped.set()
        self.thread.join()
        self.sock.close()


@pytest.fixture
def listener():
    made = Listener()
    yield made
    made.close()


@pytest.fixture
def eks_cluster(aws, boto_session, config, kube_server):  # noqa: F811 - aws is the imported fixture
    """EKS cluster "prod" whose DescribeCluster answer names the kube-apiserver and its CA."""
    eks = boto_session.client("eks", region_name="us-east-1", endpoint_url=config.eks_endpoint_url)
    if "prod" not in eks.list_clusters()["clusters"]:
        eks.create_cluster(name="prod", roleArn=f"arn:aws:iam::{OWN_ACCOUNT}:role/eks",
                           resourcesVpcConfig={"subnetIds": []})
    described = eks_backends[OWN_ACCOUNT]["us-east-1"].clusters["prod"]
    ca = base64.b64encode(open(kube_server.pki["ca"], "rb").read()).decode()
    described.endpoint, described.certificate_authority = kube_server.host, {"data": ca}
    account = AwsAccount.objects.create(account_id=OWN_ACCOUNT, name="own", regions=["us-east-1"])
    yield Cluster(name="prod", account=account, region="us-east-1", connection=Cluster.Connection.EKS), described, ca
    eks.delete_cluster(name="prod")


def test_the_token_goes_to_the_endpoint_aws_describes(eks_cluster, kube_server, listener):
    cluster, _, _ = eks_cluster
    cluster.endpoint = f"https://127.0.0.1:{listener.port}"
    cluster.save()  # as a row saved before the rule was: the connection still asks AWS
    session = account_session(cluster.account, cluster_ec2_config(cluster))
    client = eks_api_client(session, "prod", "us-east-1", eks_endpoint_url=cluster_ec2_config(cluster).eks_endpoint_url)
    assert client.configuration.host == kube_server.host
    with pytest.raises(ApiException) as answer:  # the real kube-apiserver refuses a token it cannot check
        CoreV1Api(client).list_namespace()
    assert answer.value.status == 401 and '"kind":"Status"' in answer.value.body.replace(" ", "")
    assert listener.connections == 0


def test_a_row_endpoint_or_ca_other_than_aws_is_refused_naming_both(eks_cluster, kube_server, listener,
                                                                    as_fleet_admin):
    cluster, _, ca = eks_cluster
    cluster.endpoint = f"https://127.0.0.1:{listener.port}"
    with pytest.raises(ValidationError) as refused:
        cluster.full_clean()
    words = refused.value.message_dict["endpoint"][0]
    assert cluster.endpoint in words and kube_server.host in words
    cluster.endpoint, cluster.ca_bundle = kube_server.host, ca
    cluster.full_clean()  # AWS's own values are taken
    cluster.save()
    other_ca = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nother\n-----END CERTIFICATE-----\n").decode()
    answer = as_fleet_admin.patch("/api/v1/clusters/prod/", {"caBundle": other_ca}, format="json")
    assert answer.status_code == 400 and "is not the certificate authority AWS gives" in answer.json()["caBundle"][0]
    assert listener.connections == 0


def test_an_http_endpoint_from_aws_is_refused_too(eks_cluster, listener):
    cluster, described, _ = eks_cluster
    described.endpoint = f"http://127.0.0.1:{listener.port}"
    session = account_session(cluster.account, cluster_ec2_config(cluster))
    with pytest.raises(ClusterConfigError, match="must start with https://"):
        eks_api_client(session, "prod", "us-east-1", eks_endpoint_url=cluster_ec2_config(cluster).eks_endpoint_url)
    assert listener.connections == 0
