"""Lend and reclaim through the loop against the EC2 test server (issue #50): lent units come back in the
first provisioning run that sees a pod that could use them, the borrower gets EC2's warning on the
interruption queue, and the pod is placed into the reservation once the units are back."""

from __future__ import annotations

from datetime import timedelta

import pytest
import time_machine
from django.urls import reverse

from reservations.models import CapacityReservation, Recommendation, UtilizationHour
from reservations.recommendations import recompute
from scheduling.adapters.ec2.client import Caller
from scheduling.adapters.ec2.interruptionqueue import InterruptionQueue
from scheduling.adapters.ec2.sync import sync_catalogue, sync_reservations
from scheduling.engine import interruptions
from scheduling.loop import provisioning
from scheduling.loop.simulated import SimulatedCluster
from scheduling.models import AuditEntry, Decision, NodeClaim, NodePool
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
    assert "pending pods default/first, default/second could use 2 of its 2 lent units (0 free or coming back)" in applied.reason
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


def test_units_on_their_way_back_are_not_reclaimed_twice(world, clock, provider, settings):
    """Every lent unit borrowed: a waiting pod reclaims one; while its borrower has its two minutes, the next runs
    count that unit as coming back and reclaim no other."""
    settings.KARPWEB_MODE = "control"
    reservation = worlds.build(world, provider, clock(), units=3, pods=0)
    reserved_only()
    lent = world.lend(reservation, 3)
    for _ in range(3):
        world.launch_borrower(lent)
    assert sync_reservations(provider, now=clock()).errors == []
    worlds.pending_pod("waiting")
    for seconds in (5, 30, 30):
        clock.advance(seconds=seconds)
        provisioning.provision(provider, SimulatedCluster(), now=clock())
        assert sync_reservations(provider, now=clock()).errors == []
    [call] = world.calls_of("UpdateInterruptibleCapacityReservationAllocation")
    assert int(call.params["TargetInstanceCount"]) == 2
    row = CapacityReservation.objects.get(reservation_id=reservation)
    assert (row.lent_count, row.lent_target, row.reclaiming) == (3, 2, 1)
    clock.advance(minutes=2)
    assert sync_reservations(provider, now=clock()).errors == []
    assert provisioning.provision(provider, SimulatedCluster(), now=clock())["launched"] == 1
    assert len(world.calls_of("UpdateInterruptibleCapacityReservationAllocation")) == 1


def test_two_workers_reclaim_once(world, clock, provider, settings):
    from scheduling.loop.lending import reclaim

    settings.KARPWEB_MODE = "control"
    reservation, _ = lent_world(world, provider, clock)
    seen_by_first, seen_by_second = (CapacityReservation.objects.get(reservation_id=reservation) for _ in range(2))
    assert reclaim(provider, seen_by_first, 1, "a pod", clock(), {}) == 1
    assert reclaim(provider, seen_by_second, 1, "a pod", clock(), {}) == 0  # its claim finds the target moved
    assert len(world.calls_of("UpdateInterruptibleCapacityReservationAllocation")) == 1


def test_observe_mode_reclaims_nothing_and_shows_the_command(world, clock, provider, settings, viewer_client):
    from reservations.recommendation_actions import cli_command

    settings.KARPWEB_MODE = "observe"
    reservation, _ = lent_world(world, provider, clock)
    worlds.pending_pod("first")
    counts = provisioning.provision(provider, SimulatedCluster(), now=clock())
    assert counts["units_reclaimed"] == 0 and not world.calls_of("UpdateInterruptibleCapacityReservationAllocation")
    advice = Recommendation.objects.get(kind=Recommendation.Kind.RECLAIM)
    assert advice.state == Recommendation.State.OPEN and advice.target_count == 1
    provisioning.provision(provider, SimulatedCluster(), now=clock())  # the next run: the same advice, the same row
    assert list(Recommendation.objects.filter(kind=Recommendation.Kind.RECLAIM).values_list("pk", flat=True)) == [advice.pk]
    assert cli_command(advice) == (f"aws ec2 update-interruptible-capacity-reservation-allocation "
                                   f"--capacity-reservation-id {reservation} --target-instance-count 1")
    assert CapacityReservation.objects.get(reservation_id=reservation).lent_target == 2
    page = viewer_client.get(reverse("reservations:recommendation", args=[advice.pk])).content.decode()
    assert 'id="reclaim">Shrinks the interruptible allocation' in page, page


# --- the lend recommendation, applied through EC2 ------------------------------------------------

def idle_history(reservation_id, now, total, used=0.0, peak=0.0, hours=8 * 24):
    row = CapacityReservation.objects.get(reservation_id=reservation_id)
    UtilizationHour.objects.bulk_create([
        UtilizationHour(reservation=row, hour=now - timedelta(hours=h + 1), samples=60, first_sampled_at=now - timedelta(hours=h + 1),
                        used=used, available=total - used, total=total, share_sum=60 * used / total, share_samples=60,
                        peak_used=peak)
        for h in range(hours)])


@pytest.fixture
def idle(world, clock, provider, settings, monkeypatch):
    """An ODCR of 6 with no end date, idle for 8 days (the peak 1), and one with an end date."""
    from scheduling.loop import backends

    settings.KARPWEB_PROVIDER, settings.KARPWEB_MODE = "aws", "control"
    monkeypatch.setattr(backends, "cloud", lambda: provider)
    now = clock()
    sync_catalogue(provider, now=now)
    lendable = world.add_reservation("m5.large", worlds.ZONE, 6, tags={"team": "ml"})
    ending = world.add_reservation("m5.large", worlds.ZONE, 6, end=now + timedelta(days=60))
    assert sync_reservations(provider, now=now).errors == []
    idle_history(lendable, now, 6, used=0.5, peak=1)
    idle_history(ending, now, 6)
    with time_machine.travel(now, tick=False):
        yield {"now": now, "lendable": lendable, "ending": ending}


def test_idle_units_with_no_end_date_are_advised_to_be_lent_and_lent_once(idle, world, operator_client):
    recompute(idle["now"])
    [rec] = Recommendation.objects.filter(kind=Recommendation.Kind.LEND)
    assert rec.reservation.reservation_id == idle["lendable"]  # the one with an end date cannot lend
    assert rec.details["count"] == 6 - 1 - 1 and rec.details["money"] == "warning" and rec.savings_per_month == 0
    assert "nothing karpweb can count" in rec.details["moneyBasis"]
    form = {"computed_at": rec.computed_at.isoformat()}
    for _ in range(2):  # two clicks: lent once
        assert operator_client.post(reverse("reservations:recommendation_apply", args=[rec.pk]), form).status_code == 302
    [call] = world.calls_of("CreateInterruptibleCapacityReservationAllocation")
    assert int(call.params["InstanceCount"]) == 4 and call.params["ClientToken"].startswith(f"karpweb-lend-{rec.pk}-")
    assert world.reservation(idle["lendable"])["InterruptibleCapacityAllocation"]["InstanceCount"] == 4
    row = CapacityReservation.objects.get(reservation_id=idle["lendable"])
    assert (row.lent_count, row.available_instance_count, row.used_instance_count) == (4, 2, 0)
    entry = AuditEntry.objects.get(object_id=str(row.pk))
    assert entry.changes["lent_count"] == [0, 4] and entry.actor == "otto"
    # Lending: no second lend, and no shrink or cancel that would reclaim a borrower's units.
    recompute(idle["now"] + timedelta(minutes=5))
    assert not Recommendation.objects.filter(reservation=row, state=Recommendation.State.OPEN).exists()


def test_observe_mode_shows_the_lend_command(idle, settings, operator_client, world):
    from reservations.recommendation_actions import cli_command

    settings.KARPWEB_MODE = "observe"
    recompute(idle["now"])
    rec = Recommendation.objects.get(kind=Recommendation.Kind.LEND)
    page = operator_client.get(reverse("reservations:recommendation", args=[rec.pk])).content.decode()
    assert cli_command(rec).startswith(f"aws ec2 create-interruptible-capacity-reservation-allocation "
                                       f"--capacity-reservation-id {idle['lendable']} --instance-count 4 --client-token ")
    assert "create-interruptible-capacity-reservation-allocation" in page
    assert 'id="lend">Lends 4 idle instances of' in page and "nothing karpweb can count" in page
    refused = operator_client.post(reverse("reservations:recommendation_apply", args=[rec.pk]),
                                   {"computed_at": rec.computed_at.isoformat()})
    assert refused.status_code == 409 and not world.calls_of("CreateInterruptibleCapacityReservationAllocation")


def test_lent_units_come_back_before_a_forecast_peak(idle, world, provider, clock):
    from scheduling.loop.lending import reclaim_before_peaks

    provider.lend_reservation_units(idle["lendable"], 4, client_token="lend-peak")
    assert sync_reservations(provider, now=clock()).errors == []
    row = CapacityReservation.objects.get(reservation_id=idle["lendable"])
    assert reclaim_before_peaks(provider, idle["now"]) == {"units_reclaimed_for_peaks": 0}  # the history's peak is 1
    # Every day at this hour the fleet used 5 of the 6: the next hour's forecast needs 3 of the 4 lent units.
    for day in range(1, 8):
        UtilizationHour.objects.filter(reservation=row, hour=idle["now"] - timedelta(days=day)).update(peak_used=5)
    assert reclaim_before_peaks(provider, idle["now"]) == {"units_reclaimed_for_peaks": 3}
    [call] = world.calls_of("UpdateInterruptibleCapacityReservationAllocation")
    assert int(call.params["TargetInstanceCount"]) == 1
    assert "the forecast" in Recommendation.objects.get(kind=Recommendation.Kind.RECLAIM).reason


def test_the_page_the_api_and_the_ledger_show_lent_units(world, clock, provider, settings, viewer_client):
    from reservations import ledger

    settings.KARPWEB_MODE = "control"
    reservation, _ = lent_world(world, provider, clock)
    with time_machine.travel(clock(), tick=False):
        ledger.record_use({"123456789012": provider}, clock())
        row = CapacityReservation.objects.get(reservation_id=reservation)
        use = row.uses.get()
        assert (use.used, use.unknown, use.lent) == (0, 0, 2)  # lent: neither the fleet's nor unknown
        page = viewer_client.get(reverse("reservations:detail", args=[reservation])).content.decode()
        assert f"<strong>2</strong> unit(s) lent as interruptible capacity to <code>{row.lent_to}</code>, active" in page
        assert "not counted as idle" in page
        listing = viewer_client.get(reverse("reservations:list")).content.decode()
        assert ">lends 2</span>" in listing
        overview = viewer_client.get(reverse("scheduling:overview")).content.decode()
        assert 'id="lent-not-idle">(2 more lent as interruptible capacity: not idle, not counted)' in overview
        lent_page = viewer_client.get(reverse("reservations:detail", args=[row.lent_to])).content.decode()
        assert f'id="lent-by"><a href="{reverse("reservations:detail", args=[reservation])}">{reservation}</a>' in lent_page
        answer = viewer_client.get(f"/api/v1/capacity-reservations/{reservation}/").json()
        assert (answer["lentInstanceCount"], answer["lentTargetInstanceCount"], answer["lentTo"], answer["lentStatus"],
                answer["usedInstanceCount"], answer["availableInstanceCount"]) == (2, 2, row.lent_to, "active", 0, 0)
        assert viewer_client.get(f"/api/v1/capacity-reservations/{row.lent_to}/").json()["interruptionSourceID"] == reservation
        assert viewer_client.get(f"/api/v1/capacity-reservations/{reservation}/uses/").json()["results"][0]["lent"] == 2
