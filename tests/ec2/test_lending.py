"""Lend and reclaim through the loop against the EC2 test server (issue #50): lent units come back in the
first provisioning run that sees a pod that could use them, the borrower gets EC2's warning on the
interruption queue, and the pod is placed into the reservation once the units are back."""

from __future__ import annotations

import pytest

from reservations.models import CapacityReservation, Recommendation
from scheduling.adapters.ec2.client import Caller
from scheduling.adapters.ec2.interruptionqueue import InterruptionQueue
from scheduling.adapters.ec2.sync import sync_reservations
from scheduling.engine import interruptions
from scheduling.loop import provisioning
from scheduling.loop.simulated import SimulatedCluster
from scheduling.models import Decision, NodeClaim, NodePool
from tests.faults import worlds

pytestmark = pytest.mark.django_db
QUEUE = "karpweb-lending-interruptions"


@pytest.fixture
def queue(world, boto_session, ec2_endpoint, config):
    """The interruption queue, as EventBridge's rule for EC2's events delivers to it."""
    sqs = boto_session.client("sqs", region_name="us-east-1", endpoint_url=ec2_endpoint)
    sqs.purge_queue(QueueUrl=sqs.create_queue(QueueName=QUEUE)["QueueUrl"])
    world.deliver_events_to(QUEUE)
    return InterruptionQueue(sqs, Caller(config), QUEUE, wait_seconds=0)


def reserved_only():
    """Pods may run only in the reservation: one that cannot wait for the units would go on-demand."""
    pool = NodePool.objects.get()
    pool.requirements = [r if r["key"] != "karpenter.sh/capacity-type" else {**r, "values": ["reserved"]}
                         for r in pool.requirements]
    pool.save()


def lent_world(world, provider, clock):
    """A reservation of 2 lending both units; a borrower runs on one of them."""
    reservation = worlds.build(world, provider, clock(), units=2, pods=0)
    reserved_only()
    provider.lend_reservation_units(reservation, 2, client_token="lend-test")
    lent = world.reservation(reservation)["InterruptibleCapacityAllocation"]["InterruptibleCapacityReservationId"]
    borrower = world.launch_borrower(lent)
    assert sync_reservations(provider, now=clock()).errors == []
    row = CapacityReservation.objects.get(reservation_id=reservation)
    assert (row.lent_count, row.lent_to, row.available_instance_count, row.used_instance_count) == (2, lent, 0, 0)
    return reservation, borrower


def test_a_pending_pod_reclaims_lent_units_in_the_first_run_and_is_placed_once_they_are_back(
        world, clock, provider, queue, settings):
    settings.KARPWEB_MODE = "control"
    reservation, borrower = lent_world(world, provider, clock)
    cluster = SimulatedCluster()
    worlds.pending_pod("first")
    worlds.pending_pod("second")

    clock.advance(seconds=5)
    first = provisioning.provision(provider, cluster, now=clock())

    # The first run that sees the pods reclaims both units; the free one is back at once and used at once.
    [call] = world.calls_of("UpdateInterruptibleCapacityReservationAllocation")
    assert call.params["CapacityReservationId"] == reservation and int(call.params["TargetInstanceCount"]) == 0
    assert (first["units_reclaimed"], first["launched"]) == (2, 1)
    assert NodeClaim.objects.get().reservation_label == reservation
    applied = Recommendation.objects.get(kind=Recommendation.Kind.RECLAIM)
    assert applied.state == Recommendation.State.APPLIED and applied.target_count == 0
    assert "pending pods default/first, default/second could use 2 of its 2 lent units" in applied.reason
    assert Decision.objects.get(subject=f"reservation {reservation}").outcome == Decision.Outcome.ACTED
    # The borrower's warning reached the interruption queue, read as Karpenter reads it.
    [message] = queue.receive()
    meaning = interruptions.parse(message.body)
    assert (meaning.kind, meaning.instance_ids) == (interruptions.RESERVATION_INTERRUPTED, (borrower,))

    # A later run asks nothing again (the claim moved the mirror's target) and launches nothing paid.
    clock.advance(seconds=30)
    again = provisioning.provision(provider, cluster, now=clock())
    assert len(world.calls_of("UpdateInterruptibleCapacityReservationAllocation")) == 1
    assert again["launched"] == 0 and NodeClaim.objects.count() == 1

    # EC2 terminates the borrower two minutes after its warning; the unit is back and the pod goes into it.
    clock.advance(minutes=2)
    assert sync_reservations(provider, now=clock()).errors == []
    assert world.instance(borrower).state == "terminated"
    row = CapacityReservation.objects.get(reservation_id=reservation)
    assert (row.lent_count, row.available_instance_count) == (0, 1)
    last = provisioning.provision(provider, cluster, now=clock())
    assert last["launched"] == 1
    assert set(NodeClaim.objects.values_list("reservation_label", flat=True)) == {reservation}
    assert world.reservation(reservation)["AvailableInstanceCount"] == 0


def test_two_workers_reclaim_once(world, clock, provider, settings):
    from reservations.lending import reclaim

    settings.KARPWEB_MODE = "control"
    reservation, _ = lent_world(world, provider, clock)
    seen_by_first, seen_by_second = (CapacityReservation.objects.get(reservation_id=reservation) for _ in range(2))
    assert reclaim(provider, seen_by_first, 1, "a pod", clock(), {}) == 1
    assert reclaim(provider, seen_by_second, 1, "a pod", clock(), {}) == 0  # its claim finds the target moved
    assert len(world.calls_of("UpdateInterruptibleCapacityReservationAllocation")) == 1


def test_observe_mode_reclaims_nothing_and_shows_the_command(world, clock, provider, settings):
    from reservations.recommendation_actions import cli_command

    settings.KARPWEB_MODE = "observe"
    reservation, _ = lent_world(world, provider, clock)
    worlds.pending_pod("first")
    counts = provisioning.provision(provider, SimulatedCluster(), now=clock())
    assert counts["units_reclaimed"] == 0 and not world.calls_of("UpdateInterruptibleCapacityReservationAllocation")
    advice = Recommendation.objects.get(kind=Recommendation.Kind.RECLAIM)
    assert advice.state == Recommendation.State.OPEN and advice.target_count == 1
    assert cli_command(advice) == (f"aws ec2 update-interruptible-capacity-reservation-allocation "
                                   f"--capacity-reservation-id {reservation} --target-instance-count 1")
    assert CapacityReservation.objects.get(reservation_id=reservation).lent_target == 2
