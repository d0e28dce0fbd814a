"""The first account and cluster an install gets (fleet/defaults.py): the migration and an empty
database follow the same rules."""

from types import SimpleNamespace

import pytest

from fleet.defaults import account_fields, cluster_fields, cluster_name


@pytest.mark.parametrize("configured, name", [("", "default"), ("Prod_EU", "prod-eu"), ("--", "default"),
                                              ("a" * 80, "a" * 63), ("ml.prod", "ml-prod")])
def test_the_cluster_is_named_after_the_setting_as_a_dns_label(configured, name):
    assert cluster_name(configured) == name


def test_the_account_is_the_owner_most_reservations_carry():
    settings = SimpleNamespace(KARPWEB_AWS_REGION="eu-west-1")
    owners = ["222222222222", "111111111111", "222222222222", "", "not-an-id"]
    assert account_fields(settings, owners) == {"account_id": "222222222222", "name": "222222222222",
                                                "regions": ["eu-west-1"]}
    assert account_fields(settings, ["333333333333", "111111111111"])["account_id"] == "111111111111"  # a tie: lowest
    assert account_fields(settings, [])["account_id"] == "000000000000"
    assert account_fields(settings, [])["name"] == "default"


@pytest.mark.parametrize("cluster, kubeconfig, connection", [
    ("simulated", "/k", "simulated"), ("kubernetes", "", "in-cluster"), ("kubernetes", "/k", "kubeconfig")])
def test_the_connection_follows_karpweb_cluster_and_kubeconfig(cluster, kubeconfig, connection):
    settings = SimpleNamespace(KARPWEB_CLUSTER=cluster, KARPWEB_KUBECONFIG=kubeconfig, KARPWEB_CLUSTER_NAME="",
                               KARPWEB_AWS_REGION="us-east-1", KARPWEB_CLUSTER_ENDPOINT="", KARPWEB_KARPENTER="present")
    fields = cluster_fields(settings)
    assert (fields["connection"], fields["kubeconfig"] or "") == (connection, kubeconfig if connection == "kubeconfig" else "")
    assert (fields["mode"], fields["karpenter"], fields["shard"], fields["is_default"]) == ("", "present", "default", True)
