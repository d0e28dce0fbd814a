"""Bad accounts and clusters are refused with an error naming the field: the model, the admin."""

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from fleet.models import AwsAccount, Cluster, shard_queue

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("field, value, words", [
    ("account_id", "12345", '"12345" is not an AWS account ID'),
    ("role_arn", "arn:aws:iam::123:user/x", "is not an IAM role ARN"),
    ("regions", ["us-east-1", "mars-1"], 'entry 2: "mars-1" is not an AWS region name'),
    ("regions", "us-east-1", "a list of region names is expected"),
    ("regions", ["us-east-1", "us-east-1"], "a region is named twice"),
])
def test_an_account_names_the_field_it_refuses(field, value, words):
    account = AwsAccount(**{"account_id": "123456789012", "name": "ok", field: value})
    with pytest.raises(ValidationError) as refused:
        account.full_clean()
    assert list(refused.value.message_dict) == [field]
    assert words in refused.value.message_dict[field][0]


@pytest.mark.parametrize("fields, field, words", [
    ({"name": "Prod_EU"}, "name", "is not a DNS label"),
    ({"name": "x" * 64}, "name", ""),
    ({"region": "useast1"}, "region", '"useast1" is not an AWS region name'),
    ({"shard": "EU West"}, "shard", "is not a shard name"),
    ({"connection": "kubeconfig"}, "kubeconfig", "a path or a Secret reference is required"),
    ({"connection": "eks", "region": ""}, "region", "an EKS cluster needs its region"),
    ({"mode": "act"}, "mode", ""),
])
def test_a_cluster_names_the_field_it_refuses(make_account, fields, field, words):
    cluster = Cluster(**{"name": "prod", "account": make_account("123456789012"), "region": "us-east-1", **fields})
    with pytest.raises(ValidationError) as refused:
        cluster.full_clean()
    assert field in refused.value.message_dict
    assert words in " ".join(refused.value.message_dict[field])


def test_a_good_cluster_passes_and_says_its_queue(make_account):
    cluster = Cluster(name="prod-eu", account=make_account("123456789012"), region="eu-west-1", shard="eu",
                      connection="kubeconfig", kubeconfig="secret:karpweb/prod-eu")
    cluster.full_clean()
    assert cluster.queue == "karpweb-shard-eu"
    assert shard_queue("default") == "celery"  # the queue every worker consumes today


def test_the_admin_form_names_the_field(admin_user_client):
    response = admin_user_client.post(reverse("admin:fleet_awsaccount_add"), {
        "account_id": "not-digits", "name": "x", "role_arn": "", "external_id": "", "regions": "[\"us-east-1\"]",
        "clusters-TOTAL_FORMS": "0", "clusters-INITIAL_FORMS": "0"})
    assert response.status_code == 200
    form = response.context["adminform"].form
    assert list(form.errors) == ["account_id"]
    assert not AwsAccount.objects.filter(name="x").exists()
