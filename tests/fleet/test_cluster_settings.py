"""Each cluster's own join settings and interruption queue (fleet.Cluster: endpoint, CA bundle,
Service CIDR, interruption queue): set through the API and the admin with errors naming the field,
and used by its loop (the EC2 test server: moto's EKS and SQS); blank ones are discovered, or, in
the default cluster, the KARPWEB_CLUSTER_* settings and KARPWEB_INTERRUPTION_QUEUE as before."""

import base64

import boto3
import pytest
from django.urls import reverse

from fleet.models import AwsAccount, Cluster
from fleet.scope import cluster_scope, default_cluster
from scheduling.loop import backends
from tests.fleet.test_account_credentials import aws  # noqa: F401 - moto's EC2, STS, EKS and SQS, the loop on AWS
from tests.support.ec2_fixtures import *  # noqa: F403 - the EC2 test server

CA = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nprod\n-----END CERTIFICATE-----\n").decode()


@pytest.mark.django_db
@pytest.mark.parametrize("field, value, says", [
    ("caBundle", "not base64!", "is not base64"),
    ("caBundle", base64.b64encode(b"hello").decode(), "decodes to no PEM certificate"),
    ("serviceCIDR", "10.100.0.1/16", "is not a CIDR block"),
    ("serviceCIDR", "ten/16", "is not a CIDR block"),
    ("interruptionQueue", "no spaces please", "is neither an SQS queue name"),
    ("endpoint", "ftp://api.example", "is not an API server URL"),
])
def test_the_api_names_the_join_field_it_refuses(as_fleet_admin, make_account, field, value, says):
    make_account("111111111111")
    response = as_fleet_admin.post("/api/v1/clusters/", {"name": "prod", "account": "111111111111", field: value},
                                format="json")
    assert response.status_code == 400
    assert list(response.json()) == [field] and says in response.json()[field][0], response.json()


@pytest.mark.django_db
def test_the_api_and_the_admin_keep_a_clusters_own_join_settings(as_fleet_admin, admin_user_client, make_account):
    make_account("111111111111")
    body = {"name": "prod", "account": "111111111111", "endpoint": "https://prod.example", "caBundle": CA,
            "serviceCIDR": "10.7.0.0/16", "interruptionQueue": "prod-interruptions"}
    created = as_fleet_admin.post("/api/v1/clusters/", body, format="json")
    assert created.status_code == 201, created.json()
    assert {key: created.json()[key] for key in body if key not in ("name", "account")} == {
        "endpoint": "https://prod.example", "caBundle": CA, "serviceCIDR": "10.7.0.0/16",
        "interruptionQueue": "prod-interruptions"}
    prod = Cluster.objects.get(name="prod")
    url = reverse("admin:fleet_cluster_change", args=[prod.pk])
    page = admin_user_client.get(url)
    form = page.context["adminform"].form
    data = {name: form.initial.get(name) or "" for name in form.fields}
    data.update(account=prod.account_id, service_cidr="10.7.0.0/33")
    refused = admin_user_client.post(url, data)
    assert refused.status_code == 200 and list(refused.context["adminform"].form.errors) == ["service_cidr"]


@pytest.mark.django_db
def test_the_loop_joins_nodes_with_the_clusters_own_values_and_the_default_with_the_settings(aws, settings):
    home = AwsAccount.objects.create(account_id="123456789012", name="home")
    prod = Cluster.objects.create(name="prod", account=home, region="us-east-1", endpoint="https://prod.example",
                                  ca_bundle=CA, service_cidr="10.7.0.0/16")
    assert backends.join_info(prod) == {"name": "prod", "endpoint": "https://prod.example", "ca": CA,
                                        "cidr": "10.7.0.0/16", "version": ""}  # the version from DescribeCluster
    bare = Cluster.objects.create(name="bare", account=home, region="us-east-1")
    assert backends.join_info(bare) == {"name": "bare", "endpoint": "", "ca": "", "cidr": "", "version": ""}
    home_cluster = default_cluster()
    assert backends.join_info(home_cluster)["ca"] == settings.KARPWEB_CLUSTER_CA_BUNDLE
    assert backends.join_info(home_cluster)["cidr"] == settings.KARPWEB_CLUSTER_CIDR
    eks = boto3.client("eks", region_name="us-east-1", endpoint_url=settings.KARPWEB_EC2_ENDPOINT_URL)
    eks.create_cluster(name="prod", version="1.31", roleArn="arn:aws:iam::123456789012:role/eks-prod",
                       resourcesVpcConfig={"subnetIds": []}, kubernetesNetworkConfig={"serviceIpv4Cidr": "172.20.0.0/16"})
    with cluster_scope(prod):
        info = backends.cloud()._resolution_providers()["cluster"].get()
    assert (info.endpoint, info.ca_bundle, info.service_cidr, info.version) == (
        "https://prod.example", CA, "10.7.0.0/16", "1.31")  # its row's values; EKS only for what it lacks


@pytest.mark.django_db
def test_each_cluster_reads_its_own_interruption_queue(aws, settings):
    sqs = boto3.client("sqs", region_name="us-east-1", endpoint_url=settings.KARPWEB_EC2_ENDPOINT_URL)
    for name in ("prod-interruptions", "home-interruptions"):
        sqs.create_queue(QueueName=name)
    settings.KARPWEB_INTERRUPTION_QUEUE = "home-interruptions"
    home = AwsAccount.objects.create(account_id="123456789012", name="home")
    prod = Cluster.objects.create(name="prod", account=home, region="us-east-1", interruption_queue="prod-interruptions")
    bare = Cluster.objects.create(name="bare", account=home, region="us-east-1")
    prod_url = sqs.get_queue_url(QueueName="prod-interruptions")["QueueUrl"]
    sqs.send_message(QueueUrl=prod_url, MessageBody='{"detail-type": "EC2 Spot Instance Interruption Warning"}')
    with cluster_scope(prod):
        queue = backends.interruption_queue()
        assert queue.url == prod_url
        [message] = queue.receive()
        assert "Spot Instance Interruption" in message.body
    with cluster_scope(bare):
        assert backends.interruption_queue() is None  # no queue of its own, and not the default
    with cluster_scope(default_cluster()):
        assert backends.interruption_queue().url.endswith("/home-interruptions")  # the setting, as before the fleet
