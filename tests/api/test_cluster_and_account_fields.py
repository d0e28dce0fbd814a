"""Every API object that belongs to a cluster says which, and in which AWS account (#48): `cluster` and
`account` fields, not only the cluster inside `url`. On the demo fleet, whose clusters are in two accounts."""

import pytest
from rest_framework.test import APIClient

from fleet.models import Cluster

pytestmark = pytest.mark.django_db

# Collections whose every object belongs to one cluster.
CLUSTER_SIDE = ("nodepools", "nodeclaims", "nodes", "pods", "ec2nodeclasses", "decisions", "karpenter-launches")


@pytest.fixture
def api(viewer):
    client = APIClient()
    client.force_authenticate(viewer)
    return client


def test_every_cluster_side_object_says_its_cluster_and_account(demo_world, api):
    from django.utils import timezone

    from scheduling.models import KarpenterLaunch
    from tests.factories.scheduling import DecisionFactory

    accounts = dict(Cluster.objects.values_list("name", "account__account_id"))
    for name in accounts:  # the demo has no decisions or Karpenter launches: one each
        cluster = Cluster.objects.get(name=name)
        DecisionFactory(cluster=cluster)
        KarpenterLaunch.objects.create(cluster=cluster, claim_name="default-x1", instance_type="m5.large", zone="us-east-1a",
                                       capacity_type="on-demand", launched_at=timezone.now(),
                                       outcome=KarpenterLaunch.Outcome.NO_FREE_UNIT, reason="none free")
    assert len(set(accounts.values())) > 1
    for collection in CLUSTER_SIDE:
        body = api.get(f"/api/v1/{collection}/", {"page_size": 1000}).json()
        objects = body["results"] if isinstance(body, dict) else body
        assert objects, collection
        seen = set()
        for item in objects:
            assert item["cluster"] in accounts and item["account"] == accounts[item["cluster"]], (collection, item)
            if "url" in item and len(accounts) > 1:
                assert f"cluster={item['cluster']}" in item["url"] or f"/{item['cluster']}/" in item["url"], item["url"]
            seen.add(item["cluster"])
        assert len(seen) > 1, (collection, seen)


def test_a_reservation_says_its_account(demo_world, api):
    body = api.get("/api/v1/capacity-reservations/").json()
    for item in body["results"]:
        assert item["account"] == item["ownerID"] and len(item["account"]) == 12
