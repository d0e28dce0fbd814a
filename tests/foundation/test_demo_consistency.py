"""The demo world does not contradict itself: what seed_demo writes, and what the loop's first pass over it
records, agree on when each reservation lived, who launched each NodeClaim, and how full each reservation was."""

import datetime

import pytest
from django.core.management import call_command
from django.utils import timezone

from reservations.models import CapacityReservation, Recommendation, UtilizationHour, UtilizationSample
from scheduling.claim_hashes import PROVISIONER_LABEL
from scheduling.loop import steps
from scheduling.loop.karpenter_audit import audit_launches
from scheduling.models import Decision, KarpenterLaunch, Mode, Node, NodeClaim
from scheduling.modes import control_refusal, global_mode

pytestmark = pytest.mark.django_db

# Decisions that put capacity into a reservation: they need it alive. (Drains, demotions and drift take nodes
# out of one, after it ended too.)
USES_A_RESERVATION = {Decision.Kind.LAUNCH, Decision.Kind.BIND, Decision.Kind.CONSOLIDATE_REPLACE}


@pytest.fixture
def demo_and_first_pass():
    """The demo world, seeded now, and the loop's first pass over it (what a worker runs when it starts)."""
    call_command("seed_demo")
    now = timezone.now()
    steps.sync_kubernetes(now)
    steps.provision(now)
    steps.lifecycle(now)
    return now


def life(reservation, now=None) -> tuple[datetime.datetime, datetime.datetime]:
    """From its start to its end, or to this moment (the loop's pass wrote after `now`) while it lasts."""
    moment = timezone.now()
    return reservation.start_date, min(reservation.end_date or moment, moment)


def test_every_node_and_claim_in_a_reservation_was_launched_while_it_lived(demo_and_first_pass):
    now = demo_and_first_pass
    checked = 0
    for model in (Node, NodeClaim):
        for row in model.objects.filter(reservation__isnull=False).select_related("reservation"):
            start, end = life(row.reservation, now)
            assert start <= row.created_at <= end, (
                f"{model.__name__} {row.name} created {row.created_at} outside {row.reservation.reservation_id}'s life "
                f"({start} to {end})")
            checked += 1
    assert checked >= 16


def test_decisions_audit_and_recommendations_fall_within_the_reservations_life(demo_and_first_pass):
    now = demo_and_first_pass
    reservations = {r.pk: r for r in CapacityReservation.objects.all()}
    decisions = Decision.objects.filter(reservation__isnull=False, kind__in=USES_A_RESERVATION)
    for decision in decisions:
        start, end = life(reservations[decision.reservation_id], now)
        assert start <= decision.created_at <= end, f"{decision.kind} {decision.subject}: {decision.reason}"
    for launch in KarpenterLaunch.objects.filter(reservation__isnull=False):
        start, end = life(reservations[launch.reservation_id], now)
        assert start <= launch.launched_at <= end, launch.reason
    recommendations = Recommendation.objects.select_related("reservation")
    assert recommendations.exists()
    for rec in recommendations:
        assert rec.reservation.is_usable(rec.computed_at), f"{rec.kind} for {rec.reservation.reservation_id}, which had ended"
        assert rec.reservation.start_date <= rec.computed_at


def test_nodeclaims_say_who_launched_them_as_the_mode_has_it(demo_and_first_pass, viewer_client):
    """The demo runs in control mode with no Karpenter: karpweb launched every NodeClaim, so none is
    judged as Karpenter's, and each claim's page says karpweb launched it."""
    assert global_mode() == Mode.CONTROL and not control_refusal()
    claims = list(NodeClaim.objects.all())
    assert claims and all(claim.labels.get(PROVISIONER_LABEL) == "karpweb" for claim in claims)
    audit_launches(demo_and_first_pass)
    assert not KarpenterLaunch.objects.exists(), "the Karpenter audit judged karpweb's own claims as Karpenter's"
    # Launched as the simulated EC2 launches from the classes as seeded: the first pass finds nothing drifted
    # (karpweb acts on its own claims' drift, so a seeded image of no release would replace nodes at once).
    drifted = list(Decision.objects.filter(kind=Decision.Kind.DRIFT).values_list("reason", flat=True))
    assert drifted == []
    page = viewer_client.get(claims[0].get_absolute_url()).content.decode()
    assert "Launched by</dt><dd>karpweb" in page and "Karpenter's" not in page


def test_utilization_history_stays_within_each_reservation(demo_and_first_pass):
    now = demo_and_first_pass
    reservations = {r.pk: r for r in CapacityReservation.objects.all()}
    for sample in UtilizationSample.objects.all():
        reservation = reservations[sample.reservation_id]
        assert 0 <= sample.used <= sample.total == reservation.total_instance_count
        assert sample.used + sample.available == sample.total
        start, end = life(reservation, now)
        assert start <= sample.sampled_at <= max(end, now if reservation.is_usable(now) else end), (
            f"{reservation.reservation_id} sampled at {sample.sampled_at}, outside its life")
    for hour in UtilizationHour.objects.all():
        assert 0 <= hour.used <= (hour.peak_used if hour.peak_used is not None else hour.used) <= hour.total
    # Nodes that ran in a reservation at a sample's time never outnumber the units the sample saw used.
    nodes = list(Node.objects.filter(reservation__isnull=False).values_list("reservation_id", "created_at"))
    for sample in UtilizationSample.objects.filter(sampled_at__lte=now - datetime.timedelta(minutes=1)):
        running = sum(1 for rid, created in nodes if rid == sample.reservation_id and created <= sample.sampled_at)
        assert running <= sample.used, (
            f"{reservations[sample.reservation_id].reservation_id} at {sample.sampled_at}: {running} nodes, {sample.used} used")
