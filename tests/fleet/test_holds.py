"""The fleet ledger's holds on PostgreSQL (reservations/ledger.py): what counts against a
reservation's free units, for which cluster, and until when; and what each cluster's world sees."""

import datetime

import pytest

from fleet.scope import cluster_scope, forget_default
from reservations import ledger
from reservations.models import CapacityReservation, ReservationHold
from scheduling.adapters.ec2.interface import LaunchResult
from scheduling.world import current_world

NOW = datetime.datetime(2026, 11, 25, 12, 0, tzinfo=datetime.timezone.utc)
LAUNCHED = LaunchResult(instance_id="i-0abc")
REFUSED = LaunchResult(error_code="ReservationCapacityExceeded", error_message="full")


@pytest.fixture
def fleet(make_account, make_cluster):
    forget_default()
    account = make_account("111111111111", "ml-prod")
    alpha, beta = make_cluster("alpha", account), make_cluster("beta", account)
    reservation = CapacityReservation.objects.create(
        reservation_id="cr-1", owner_id="111111111111", instance_type="m5.large", availability_zone="us-east-1a",
        total_instance_count=4, available_instance_count=2, region="us-east-1", last_seen=NOW)
    from reservations.models import ReservationVisibility

    ReservationVisibility.objects.get_or_create(reservation=reservation, account=account)
    yield alpha, beta, reservation
    forget_default()


def free(cluster, reservation, now=NOW):
    return ledger.ledger_free(CapacityReservation.objects.fleet().get(pk=reservation.pk), cluster.pk, now)


def hold(cluster, now=NOW):
    with cluster_scope(cluster):
        return ledger.hold_units("cr-1", 1, claim_name="c", now=now)


def world_available(cluster, now=NOW):
    with cluster_scope(cluster):
        [item] = current_world(now, include_pods=False, include_nodes=False)["capacityReservations"]
    return item["AvailableInstanceCount"]


def test_a_hold_counts_for_the_other_clusters_until_its_launch_is_counted(fleet):
    alpha, beta, reservation = fleet
    first, ok = hold(alpha)
    assert ok and first.state == ReservationHold.State.HELD
    assert (free(alpha, reservation), free(beta, reservation)) == (2, 1)  # its own held unit is its to launch
    assert (world_available(alpha), world_available(beta)) == (2, 1)  # beta's engine plans around it
    ledger.settle_hold(first, LAUNCHED, claim_name="alpha-x1", now=NOW + datetime.timedelta(seconds=1))
    later = NOW + datetime.timedelta(seconds=2)
    assert (free(alpha, reservation, later), free(beta, reservation, later)) == (1, 1)  # launched since the sync
    second, ok = hold(beta, later)
    assert ok
    assert hold(alpha, later) == (None, False)  # the last unit is beta's: alpha plans around it
    assert world_available(alpha, later) == 0
    # A read of EC2's count asked for before the launch was answered (a slow sync) does not hold the
    # launched unit: it still counts, whatever the step times say.
    launched_at = ReservationHold.objects.get(pk=first.pk).launched_at
    CapacityReservation.objects.fleet().filter(pk=reservation.pk).update(
        available_instance_count=2, last_seen=later, counted_at=launched_at - datetime.timedelta(milliseconds=1))
    assert free(beta, reservation, later) == 1 and free(alpha, reservation, later) == 0  # 2 read - 1 launched
    # The next read (the sync's or the refresh after the launches) asked after it: the launched unit is in it.
    CapacityReservation.objects.fleet().filter(pk=reservation.pk).update(
        available_instance_count=1, last_seen=later, counted_at=launched_at + datetime.timedelta(milliseconds=1))
    assert free(beta, reservation, later) == 1 and free(alpha, reservation, later) == 0  # not subtracted twice
    ledger.settle_hold(second, REFUSED, now=later)  # EC2 said full: released, and contention
    assert ReservationHold.objects.get(pk=second.pk).state == ReservationHold.State.RELEASED
    assert free(alpha, reservation, later) == 1
    [contention] = reservation.contentions.all()
    assert (contention.cluster, contention.ledger_free, contention.error_code) == (beta, 1, "ReservationCapacityExceeded")


def test_a_hold_lapses_after_the_launch_timeout_and_a_counted_launch_holds_nothing(fleet):
    alpha, beta, reservation = fleet
    held, _ = hold(alpha)
    assert free(beta, reservation, NOW + ledger.HOLD_TTL - datetime.timedelta(seconds=1)) == 1
    assert free(beta, reservation, NOW + ledger.HOLD_TTL) == 2  # its launch never came
    assert ledger.settle_counted_holds(NOW + ledger.HOLD_TTL) == 1
    assert ReservationHold.objects.get(pk=held.pk).state == ReservationHold.State.RELEASED
    # A cloud that takes the unit from the reservation's row itself (the simulated world): not counted twice.
    counted, _ = hold(alpha)
    ledger.settle_hold(counted, LAUNCHED, counted=True, now=NOW)
    CapacityReservation.objects.fleet().filter(pk=reservation.pk).update(available_instance_count=1)
    assert ReservationHold.objects.get(pk=counted.pk).state == ReservationHold.State.RELEASED
    assert free(alpha, reservation) == free(beta, reservation) == 1


def unlaunched_claim(cluster, pool_name: str):
    """A claim into cr-1 an earlier run of `cluster` wrote but died before launching (no provider id)."""
    from scheduling.loop import provisioning
    from scheduling.loop.simulated import SimulatedCluster
    from tests.factories.scheduling import NodePoolFactory

    labels = {"karpenter.sh/capacity-type": "reserved", "node.kubernetes.io/instance-type": "m5.large",
              "topology.kubernetes.io/zone": "us-east-1a", "karpenter.k8s.aws/capacity-reservation-id": "cr-1"}
    launch = {"instanceType": "m5.large", "zone": "us-east-1a", "capacityType": "reserved", "reservationID": "cr-1"}
    with cluster_scope(cluster):
        pool = NodePoolFactory(name=pool_name)
        return provisioning.create_claim(SimulatedCluster(), {"nodePool": pool.name, "labels": labels,
                                                              "launch": launch}, pool)


def relaunch(cluster, now):
    from scheduling.loop import provisioning
    from scheduling.loop.simulated import SimulatedCloud, SimulatedCluster

    decisions = []
    with cluster_scope(cluster):
        relaunched = provisioning.relaunch_unlaunched_claims(SimulatedCloud(), SimulatedCluster(), decisions, now)
    return relaunched, decisions


def test_a_relaunch_into_a_reservation_holds_its_unit_so_two_clusters_never_get_the_same_one(fleet):
    from scheduling.models import NodeClaim

    alpha, beta, reservation = fleet
    CapacityReservation.objects.fleet().filter(pk=reservation.pk).update(available_instance_count=1)  # one free unit
    claim = unlaunched_claim(alpha, "alpha-pool")
    beta_hold, ok = hold(beta)  # beta's launch holds the one free unit first
    assert ok
    relaunched, [decision] = relaunch(alpha, NOW)
    assert relaunched == 0 and decision.outcome == "skipped"
    assert "another cluster of the fleet holds the free units of reservation cr-1" in decision.reason
    assert NodeClaim.objects.fleet().get(pk=claim.pk).provider_id == ""  # left for the next run
    assert CapacityReservation.objects.fleet().get(pk=reservation.pk).available_instance_count == 1  # beta's to take
    ledger.settle_hold(beta_hold, None, now=NOW)  # beta's launch raised: its unit is free again
    later = NOW + datetime.timedelta(seconds=10)
    relaunched, [decision] = relaunch(alpha, later)
    assert relaunched == 1 and decision.outcome == "acted"
    assert NodeClaim.objects.fleet().get(pk=claim.pk).provider_id.startswith("aws:///us-east-1a/i-")
    [alpha_hold] = ReservationHold.objects.filter(cluster=alpha)
    assert (alpha_hold.claim_name, alpha_hold.state) == (claim.name, ReservationHold.State.RELEASED)  # counted by the cloud
    assert hold(beta, later) == (None, False)  # the unit went to alpha's relaunch, once


def test_a_relaunch_of_a_claim_already_running_needs_no_unit(fleet):
    from scheduling.loop import provisioning
    from scheduling.loop.simulated import SimulatedCloud, SimulatedCluster
    from scheduling.models import NodeClaim

    alpha, beta, reservation = fleet
    CapacityReservation.objects.fleet().filter(pk=reservation.pk).update(available_instance_count=1)
    claim = unlaunched_claim(alpha, "alpha-pool")
    with cluster_scope(alpha):
        SimulatedCloud().launch(provisioning.LaunchRequest(  # the first launch went through; its run died after it
            nodeclaim_name=claim.name, nodeclass_name="", image_id="", tags={},
            offerings=[provisioning.LaunchOffering(instance_type="m5.large", zone="us-east-1a", capacity_type="reserved",
                                                   price=0.0, reservation_id="cr-1")]))
    hold(beta)  # nothing is free for anyone now, by the ledger: the instance is alpha's already
    relaunched, [decision] = relaunch(alpha, NOW)
    assert relaunched == 1 and decision.outcome == "acted"
    assert NodeClaim.objects.fleet().get(pk=claim.pk).provider_id != ""
    assert not ReservationHold.objects.filter(cluster=alpha).exists()


def test_a_replacement_into_a_reservation_holds_its_unit_and_waits_when_another_cluster_holds_it(fleet):
    """Consolidation and drift launch a replacement before draining: into a reservation, it takes a
    ledger hold as a first launch does; while another cluster holds the last free unit, nothing is
    launched or drained and the disruption waits for the next pass."""
    from scheduling.loop import disruption
    from scheduling.loop.simulated import SimulatedCloud, SimulatedCluster
    from scheduling.models import NodeClaim
    from tests.factories.scheduling import NodePoolFactory

    alpha, beta, reservation = fleet
    CapacityReservation.objects.fleet().filter(pk=reservation.pk).update(available_instance_count=1)
    labels = {"karpenter.sh/capacity-type": "reserved", "node.kubernetes.io/instance-type": "m5.large",
              "topology.kubernetes.io/zone": "us-east-1a", "karpenter.k8s.aws/capacity-reservation-id": "cr-1"}
    replacement = {"labels": labels, "launch": {"instanceType": "m5.large", "zone": "us-east-1a",
                                                "capacityType": "reserved", "reservationID": "cr-1"}}
    plan = {"action": "replace", "replacement": replacement}
    beta_hold, ok = hold(beta)
    assert ok
    with cluster_scope(alpha):
        pools = {"alpha-pool": NodePoolFactory(name="alpha-pool")}
        plan["replacement"]["nodePool"] = "alpha-pool"
        outcome, why = disruption._replace_and_drain(SimulatedCloud(), SimulatedCluster(), plan, [], pools, NOW)
        assert outcome == "skipped" and "holds the free units of reservation cr-1" in why
        assert not NodeClaim.objects.exists()  # nothing launched, nothing drained
        ledger.settle_hold(beta_hold, None, now=NOW)  # beta's launch failed: the unit is free again
        outcome, why = disruption._replace_and_drain(SimulatedCloud(), SimulatedCluster(), plan, [], pools, NOW)
        assert (outcome, why) == ("acted", "")
        [claim] = NodeClaim.objects.all()
        assert claim.provider_id.startswith("aws:///us-east-1a/i-")
    [alpha_hold] = ReservationHold.objects.filter(cluster=alpha)
    assert alpha_hold.claim_name == claim.name
    assert hold(beta, NOW + datetime.timedelta(seconds=10)) == (None, False)  # the unit went to alpha, once
