"""Advice across the fleet (reservations/recommendations.py with the fleet ledger): no shrink below
what the whole fleet uses, no cancel of a reservation another account sees through our share or
uses, cancel and modify only where one of our accounts owns it, and *select* names the cluster whose
on-demand nodes could use an idle unit (a cluster whose account sees the reservation)."""

import datetime

import pytest

from fleet.scope import forget_default
from reservations.models import (CapacityReservation, EC2NodeClass, Recommendation, ReservationUse, ReservationVisibility,
                                 UtilizationHour)
from reservations.recommendations import recompute
from scheduling.models import Node, NodePool

NOW = datetime.datetime(2026, 11, 25, 12, 0, tzinfo=datetime.timezone.utc)
OURS, OURS_TOO, OUTSIDE = "111111111111", "222222222222", "333333333333"
ZONE = "us-east-1a"


def reservation(rid: str, owner: str, total: int, used: int, peak: int) -> CapacityReservation:
    r = CapacityReservation.objects.create(reservation_id=rid, owner_id=owner, instance_type="m5.large",
                                           availability_zone=ZONE, total_instance_count=total,
                                           available_instance_count=total - used, region="us-east-1")
    UtilizationHour.objects.bulk_create([
        UtilizationHour(reservation=r, hour=NOW - datetime.timedelta(hours=h + 1), samples=60,
                        first_sampled_at=NOW - datetime.timedelta(hours=h + 1), used=used, available=total - used,
                        total=total, share_sum=60 * used / total, share_samples=60, peak_used=peak)
        for h in range(14 * 24)])
    return r


def on_demand_node(cluster, name: str) -> Node:
    nc = EC2NodeClass.objects.fleet().get_or_create(cluster=cluster, name="web")[0]
    pool = NodePool.objects.fleet().get_or_create(cluster=cluster, name="web", defaults={"node_class": nc})[0]
    return Node.objects.create(cluster=cluster, name=name, node_pool=pool, instance_type="m5.large", zone=ZONE,
                               capacity_type="on-demand")


@pytest.fixture
def fleet(make_account, make_cluster):
    forget_default()
    ours, ours_too = make_account(OURS, "ml-prod"), make_account(OURS_TOO, "ml-dev")
    alpha, beta = make_cluster("alpha", ours), make_cluster("beta", ours_too)
    yield ours, ours_too, alpha, beta
    forget_default()


def advice() -> dict:
    return {(r.kind, r.reservation.reservation_id): r for r in Recommendation.objects.select_related("reservation")}


def test_advice_follows_the_whole_fleet(fleet):
    ours, ours_too, alpha, beta = fleet
    plain = reservation("cr-plain", OURS, total=10, used=1, peak=1)  # ours, idle, nobody else: cancel
    shared = reservation("cr-shared", OURS, total=10, used=1, peak=1)  # ours, shared with ml-dev
    ReservationVisibility.objects.create(reservation=shared, account=ours_too, shared=True)
    used_outside = reservation("cr-used", OURS, total=10, used=1, peak=2)  # another account uses 6 of it now
    ReservationUse.objects.create(reservation=used_outside, sampled_at=NOW, total=10, used=7,
                                  clusters={"alpha": 1}, other_accounts={OUTSIDE: 6})
    foreign = reservation("cr-foreign", OUTSIDE, total=10, used=1, peak=1)  # shared with us by its owner
    ReservationVisibility.objects.create(reservation=foreign, account=ours, shared=True)
    for r in (plain, shared, used_outside, foreign):
        r.refresh_from_db()
    assert plain.owner_account == ours and foreign.owner_account is None
    # On-demand m5.large beside them: two in beta (whose account sees only cr-shared), one in alpha.
    on_demand_node(alpha, "alpha-od-1")
    on_demand_node(beta, "beta-od-1")
    on_demand_node(beta, "beta-od-2")

    recompute(NOW)
    found = advice()

    assert ("cancel", "cr-plain") in found
    assert ("cancel", "cr-shared") not in found  # another account of ours sees it through our share
    assert ("cancel", "cr-used") not in found  # another account uses it
    assert found[("shrink", "cr-used")].target_count == 7  # never below the fleet's 7, though our peak was 2
    assert not {kind for kind, rid in found if rid == "cr-foreign" and kind in ("cancel", "shrink")}  # not ours
    # Select names the cluster that could use an idle unit: alpha for cr-plain (beta's account does
    # not see it), beta for cr-shared (more on-demand nodes there, and its account sees it).
    assert found[("select", "cr-plain")].details["cluster"] == "alpha"
    assert "in cluster alpha" in found[("select", "cr-plain")].reason
    assert found[("select", "cr-plain")].details["nodes"] == ["alpha-od-1"]
    assert found[("select", "cr-shared")].details["cluster"] == "beta"
    assert found[("select", "cr-shared")].details["nodes"] == ["alpha-od-1", "beta-od-1", "beta-od-2"]


@pytest.mark.django_db
def test_each_account_and_region_recomputes_its_advice_every_hour(two_clusters):
    """One "done this hour" marker for the whole fleet skipped every account's EC2 step after the first."""
    from django.core.cache import cache

    from fleet.scope import cluster_scope
    from reservations.recommendations import hour_key, recompute_hourly

    _home, east, west = two_clusters
    now = datetime.datetime(2026, 11, 28, 10, 20, tzinfo=datetime.UTC)
    for cluster in (east, west):
        with cluster_scope(cluster):
            cache.delete(hour_key())
    with cluster_scope(east):
        assert "recommendations" in recompute_hourly(now)
        assert recompute_hourly(now + datetime.timedelta(minutes=5)) == {}  # once an hour for this account
    with cluster_scope(west):
        assert "recommendations" in recompute_hourly(now + datetime.timedelta(minutes=10))
    with cluster_scope(east):
        assert "recommendations" in recompute_hourly(now + datetime.timedelta(hours=1))
