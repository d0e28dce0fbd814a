"""The demo world does not contradict itself: what seed_demo writes, and what the loop's first pass over it
records, agree on when each reservation lived, who launched each NodeClaim, and how full each reservation was;
the demo fleet's clusters run only in reservations their accounts see; and the committed reservation's move and
split point at what the fleet really runs, before and after that pass."""

import datetime

import pytest
from django.core.management import call_command
from django.utils import timezone

from fleet.models import AwsAccount, Cluster
from fleet.scope import cluster_scope, unscoped
from reservations.models import CapacityReservation, Recommendation, ReservationVisibility, UtilizationHour, UtilizationSample
from reservations.recommendations import recompute
from scheduling import demo
from scheduling.claim_hashes import PROVISIONER_LABEL
from scheduling.loop import steps
from scheduling.loop.karpenter_audit import audit_launches
from scheduling.models import Decision, KarpenterLaunch, Mode, Node, NodeClaim, NodePool, Pod
from scheduling.modes import control_refusal, global_mode
from scheduling.simulated_extensions import extension_offerings
from tests.support.module_rows import rolled_back_at_the_end

pytestmark = pytest.mark.django_db

# Decisions that put capacity into a reservation: they need it alive. (Drains, demotions and drift take nodes
# out of one, after it ended too.)
USES_A_RESERVATION = {Decision.Kind.LAUNCH, Decision.Kind.BIND, Decision.Kind.CONSOLIDATE_REPLACE}


def seed_and_first_pass():
    """The demo world, seeded now, and the loop's first pass over each of its clusters (what a worker runs
    when it starts), each in its cluster's scope."""
    call_command("seed_demo")
    now = timezone.now()
    for cluster in Cluster.objects.order_by("name"):
        with cluster_scope(cluster):
            steps.sync_kubernetes(now)
            steps.provision(now)
            steps.lifecycle(now)
    return now


@pytest.fixture(scope="module")
def demo_and_first_pass_for_module(django_db_setup, django_db_blocker):
    """Seeded and passed over once for the module (tests/support/module_rows.py): every test reads it,
    and what a test writes (a second seed, a recompute) is rolled back after it."""
    with rolled_back_at_the_end(django_db_blocker, seed_and_first_pass) as now:
        yield now


@pytest.fixture
def demo_and_first_pass(demo_and_first_pass_for_module, db):
    return demo_and_first_pass_for_module


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


def test_the_demo_is_a_fleet_of_three_clusters_in_two_accounts(demo_and_first_pass):
    clusters = {c.name: c.account.account_id for c in Cluster.objects.select_related("account")}
    assert len(clusters) == 3 and set(clusters.values()) == {demo.ACCOUNT, demo.SECOND_ACCOUNT}
    assert sorted(clusters.values()).count(demo.ACCOUNT) == 2
    assert set(AwsAccount.objects.values_list("account_id", flat=True)) == {demo.ACCOUNT, demo.SECOND_ACCOUNT}
    # Every cluster runs something of its own, and no name is used by two clusters.
    for model in (Node, NodeClaim):
        names = list(model.objects.fleet().values_list("name", flat=True))
        assert len(names) == len(set(names)), f"a {model.__name__} name is used by two clusters"
        assert set(model.objects.fleet().values_list("cluster__name", flat=True)) == set(clusters)


def test_each_clusters_nodes_run_only_in_reservations_its_account_sees(demo_and_first_pass):
    checked = 0
    for cluster in Cluster.objects.select_related("account"):
        visible = set(CapacityReservation.objects.fleet().filter(
            visibilities__account=cluster.account).values_list("pk", flat=True))
        with cluster_scope(cluster):
            assert set(CapacityReservation.objects.values_list("pk", flat=True)) == visible
            for model in (Node, NodeClaim):
                for row in model.objects.filter(reservation__isnull=False):
                    assert row.cluster_id == cluster.pk
                    assert row.reservation_id in visible, (
                        f"{model.__name__} {row.name} of {cluster.name} runs in {row.reservation.reservation_id}, "
                        f"which {cluster.account} does not see")
                    checked += 1
    assert checked >= 20


def test_the_shared_reservation_is_owned_by_one_account_and_used_by_two_clusters(demo_and_first_pass):
    shared = CapacityReservation.objects.fleet().get(reservation_id=demo.reservation_id(demo.SHARED_RESERVATION))
    seen = {(v.account.account_id, v.shared) for v in ReservationVisibility.objects.filter(reservation=shared)}
    assert seen == {(demo.ACCOUNT, False), (demo.SECOND_ACCOUNT, True)}
    assert shared.owner_account.account_id == demo.ACCOUNT == shared.owner_id
    users = Node.objects.fleet().filter(reservation=shared).values_list("cluster__account__account_id", "cluster__name")
    assert {account for account, _ in users} == {demo.ACCOUNT, demo.SECOND_ACCOUNT}
    assert len({name for _, name in users}) == 2
    # EC2's count of its used units is every cluster's nodes in it together.
    assert shared.used_instance_count == len(users)
    # The second account's cluster sees no other reservation of the first account's.
    research = Cluster.objects.get(account__account_id=demo.SECOND_ACCOUNT)
    with cluster_scope(research):
        assert list(CapacityReservation.objects.values_list("reservation_id", flat=True)) == [shared.reservation_id]


def test_seeding_twice_gives_the_same_fleet(demo_and_first_pass):
    before = {model.__name__: model.objects.fleet().count() for model in (Node, NodeClaim, Pod, NodePool)}
    clusters = sorted(Cluster.objects.values_list("name", "account__account_id"))
    visibilities = ReservationVisibility.objects.count()
    call_command("seed_demo")
    assert sorted(Cluster.objects.values_list("name", "account__account_id")) == clusters
    assert ReservationVisibility.objects.count() == visibilities
    after = {model.__name__: model.objects.fleet().count() for model in (Node, NodeClaim, Pod, NodePool)}
    assert after["NodePool"] == before["NodePool"]


def shape(reservation) -> tuple:
    """What MoveCapacityReservationInstances asks to be equal (and one owner, an active ODCR)."""
    return (reservation.owner_id, reservation.instance_type, reservation.instance_platform, reservation.availability_zone,
            reservation.tenancy, reservation.placement_group_arn, reservation.end_date, reservation.reservation_type,
            reservation.state)


def on_demand(cluster_name, reservation) -> int:
    return Node.objects.fleet().filter(cluster__name=cluster_name, capacity_type="on-demand",
                                       instance_type=reservation.instance_type, zone=reservation.availability_zone).count()


def assert_move_and_split_match_the_fleet(source, destination, now):
    """The committed source gets a move and a split, never a cancel or a shrink; the move goes to the destination,
    which the named cluster selects while it pays for at least that many on-demand nodes of its shape; the split
    goes to an account that does not see the source and pays for on-demand nodes of its shape; the money adds up."""
    recs = {r.kind: r for r in Recommendation.objects.filter(reservation=source, state="open")}
    # The shrink to the committed count is the alternative that stops paying for the same units (one choice).
    assert set(recs) == {"move", "split", "shrink"}, {kind: r.reason for kind, r in recs.items()}
    assert recs["shrink"].target_count == source.committed_instance_count
    move, split = recs["move"], recs["split"]
    assert move.details["destination"] == destination.reservation_id
    assert move.details["destinationSeenTotal"] == destination.total_instance_count
    assert set(destination.node_classes.values_list("cluster__name", flat=True)) == {move.details["cluster"]}
    assert on_demand(move.details["cluster"], destination) - destination.available_instance_count >= move.details["count"] > 0
    account = split.details["shareWith"]
    assert not ReservationVisibility.objects.filter(reservation=source, account__account_id=account).exists()
    paid = sum(on_demand(c.name, source) for c in Cluster.objects.filter(account__account_id=account))
    assert paid >= split.details["coveredUnits"] > 0
    # Both take the units above the commitment (and above what the use needs): no more, no less.
    assert move.details["count"] + split.details["count"] == move.details["idleUnits"] == \
        source.total_instance_count - source.committed_instance_count
    assert move.details["count"] <= source.available_instance_count
    for rec in (move, split):
        assert rec.details["idleCostPerMonth"] == pytest.approx(rec.savings_per_month + rec.details["stillIdleCostPerMonth"])
        assert rec.is_monthly and rec.reservation.is_committed(now)


def test_the_committed_reservation_moves_and_splits_to_where_the_fleet_pays_on_demand(demo_and_first_pass):
    now = demo_and_first_pass
    source, destination = (CapacityReservation.objects.fleet().get(reservation_id=demo.reservation_id(suffix))
                           for suffix in (demo.COMMITTED_SOURCE, demo.MOVE_DESTINATION))
    assert source.is_committed(now) and (source.committed_instance_count, source.total_instance_count) == (8, 12)
    assert shape(source) == shape(destination) and source.reservation_type == "default" and source.state == "active"
    # As seeded (seed_demo computed them) ...
    assert_move_and_split_match_the_fleet(source, destination, now)
    # ... and as the loop's next recompute has them after its first pass: that pass moved no node into, or out
    # of, either reservation, and consolidation kept the on-demand nodes the two meet.
    source.refresh_from_db()
    destination.refresh_from_db()
    assert (source.used_instance_count, destination.used_instance_count, destination.available_instance_count) == (2, 2, 0)
    with unscoped():
        recompute(timezone.now(), extension_offerings=extension_offerings)
    assert_move_and_split_match_the_fleet(source, destination, now)
