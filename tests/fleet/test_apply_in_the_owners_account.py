"""A recommendation is applied in the account that owns its reservation: in the all-clusters view (no
scope) or from another account's cluster, the ModifyCapacityReservation goes out with the owner's
credentials (its role, through STS), not the default cluster's, whose account could not change it."""

from datetime import timedelta

import pytest
import time_machine
from moto.ec2.models import ec2_backends
from rest_framework.test import APIClient

from fleet.models import AwsAccount, Cluster
from fleet.scope import cluster_scope
from reservations.models import CapacityReservation, Recommendation, UtilizationHour
from reservations.recommendations import recompute
from scheduling.adapters.ec2.sync import sync_catalogue, sync_reservations
from scheduling.loop import backends
from tests.support.clusters import use_cluster
from tests.support.ec2_fixtures import *  # noqa: F403 - the EC2 test server (moto, with its STS)
from tests.support.ec2_server import EC2TestServer

OWNER = "333333333333"
ZONE = "us-east-1a"
pytestmark = pytest.mark.django_db


@pytest.fixture
def two_accounts(settings, ec2_endpoint, aws_test_credentials, world, clock):
    """Home (no role: karpweb's own credentials) holds the default cluster; ml-prod owns a reservation
    of 10 m5.large with 3 used for two weeks: a shrink to 5 in ml-prod's account."""
    settings.KARPWEB_PROVIDER = "aws"
    settings.KARPWEB_MODE = "control"
    settings.KARPWEB_EC2_ENDPOINT_URL = ec2_endpoint
    settings.KARPWEB_AWS_REGION = "us-east-1"
    settings.KARPWEB_PRICING_SOURCE = "bundled"
    backends.forget()
    theirs = EC2TestServer(account_id=OWNER)  # that account's backend on the same server
    dev = use_cluster(region="us-east-1")  # the default cluster, in karpweb's own account (no role)
    owner = AwsAccount.objects.create(account_id=OWNER, name="ml-prod", regions=["us-east-1"],
                                      role_arn=f"arn:aws:iam::{OWNER}:role/karpweb")
    prod = Cluster.objects.create(name="prod", account=owner, region="us-east-1")
    reservation_id = theirs.add_reservation("m5.large", ZONE, 10)
    theirs.set_available(reservation_id, 7)
    now = clock()
    with cluster_scope(prod):
        sync_catalogue(backends.cloud(), now=now)
        assert sync_reservations(backends.cloud(), now=now).errors == []
    row = CapacityReservation.objects.fleet().get(reservation_id=reservation_id)
    UtilizationHour.objects.bulk_create([
        UtilizationHour(reservation=row, hour=now - timedelta(hours=h + 1), samples=60, first_sampled_at=now - timedelta(hours=h + 1),
                        used=3, available=7, total=10, share_sum=18, share_samples=60, peak_used=4)
        for h in range(14 * 24)])
    with time_machine.travel(now, tick=False):
        recompute(now)
        yield {"theirs": theirs, "reservation": reservation_id, "dev": dev, "prod": prod, "now": now}
    ec2_backends[OWNER].reset()
    backends.forget()


def test_the_provider_for_a_reservation_is_its_owners(two_accounts, ec2_endpoint):
    row = CapacityReservation.objects.fleet().get(reservation_id=two_accounts["reservation"])
    assert row.owner_account.account_id == OWNER
    for scope in (None, two_accounts["dev"]):
        if scope is None:
            cloud = backends.cloud_for_reservation(row)
        else:
            with cluster_scope(scope):
                cloud = backends.cloud_for_reservation(row)
        assert [r["CapacityReservationId"] for r in cloud.reservations_by_id([row.reservation_id])] == [row.reservation_id]
        with cluster_scope(two_accounts["prod"]):
            assert cloud is backends.cloud(), "the owner's cluster's provider, cached as the loop's"


def test_a_shrink_applied_from_the_all_clusters_view_acts_in_the_owners_account(two_accounts, operator):
    rec = Recommendation.objects.get(kind="shrink", reservation__reservation_id=two_accounts["reservation"])
    api = APIClient()
    api.force_authenticate(operator)
    response = api.post(f"/api/v1/recommendations/{rec.pk}/apply/", {"computedAt": rec.computed_at.isoformat()},
                        format="json")
    assert response.status_code == 200, response.json()
    assert response.json()["state"] == "applied"
    assert two_accounts["theirs"].reservation(two_accounts["reservation"])["TotalInstanceCount"] == rec.target_count


def test_lent_units_are_reclaimed_in_the_owners_account(two_accounts, clock):
    """#50: a pod of the default cluster reclaims ml-prod's lent units: the call goes out as ml-prod (the default
    cluster's own account could not change its reservation)."""
    from scheduling.loop.lending import reclaim

    theirs, rid = two_accounts["theirs"], two_accounts["reservation"]
    theirs.lend(rid, 4)
    with cluster_scope(two_accounts["prod"]):
        assert sync_reservations(backends.cloud(), now=clock()).errors == []
    row = CapacityReservation.objects.fleet().get(reservation_id=rid)
    assert row.lent_target == 4
    with cluster_scope(two_accounts["dev"]), time_machine.travel(clock(), tick=False):
        assert reclaim(backends.cloud(), row, 2, "a pod of dev", clock(), {}) == 2
    assert theirs.reservation(rid)["InterruptibleCapacityAllocation"]["TargetInstanceCount"] == 2
    assert Recommendation.objects.get(kind=Recommendation.Kind.RECLAIM).state == Recommendation.State.APPLIED
