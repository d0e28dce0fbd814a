"""Advice that respects commitments and ownership, through the EC2 test server: a committed
reservation gets no shrink or cancel before its commitment ends but a move (to a same-shape
reservation a cluster pays on-demand beside) and a split (to share with an account of the fleet), with
money that adds up from the list price; applying them changes EC2's reservations once, a second apply
does nothing more, a changed destination is refused, observe mode shows the AWS CLI commands; a
reservation shared with us gets no cancel, the source of an interruptible allocation no shrink."""

from datetime import timedelta

import pytest
import time_machine
from django.urls import reverse
from rest_framework.test import APIClient

from fleet.models import AwsAccount, Cluster
from fleet.scope import default_cluster, forget_default
from reservations.models import CapacityReservation, EC2NodeClass, Recommendation, UtilizationHour
from reservations.recommendations import recompute
from scheduling.adapters.ec2.sync import sync_catalogue, sync_reservations
from scheduling.models import Node, NodePool, Pod
from tests.support.ec2_fixtures import *  # noqa: F403 - the EC2 test server and providers
from tests.support.ec2_server import ACCOUNT_ID

pytestmark = pytest.mark.django_db
ZONE = "us-east-1a"
M5 = 0.096  # the bundled on-demand list price of m5.large in us-east-1a
MONTH = 730
OTHER = "222222222222"  # an account of the fleet that does not see the committed reservation
FOREIGN = "999999999999"  # an account outside the fleet that shares a reservation with us


@pytest.fixture(autouse=True)
def _at_the_servers_time(clock):
    """Applying recomputes the evidence at the moment of the apply: the process's clock reads the server's."""
    with time_machine.travel(clock(), tick=False):
        yield


@pytest.fixture(autouse=True)
def _aws(aws_test_credentials, settings, provider, monkeypatch):
    settings.KARPWEB_PROVIDER = "aws"
    settings.KARPWEB_MODE = "control"
    from scheduling.loop import backends

    monkeypatch.setattr(backends, "cloud", lambda: provider)
    # The working cluster's account is the EC2 test server's: its reservations are ours, FOREIGN's are not.
    forget_default()
    AwsAccount.objects.filter(pk=default_cluster().account_id).update(account_id=ACCOUNT_ID)
    forget_default()
    yield
    forget_default()


def history(reservation_id, now, used, peak, total):
    row = CapacityReservation.objects.get(reservation_id=reservation_id)
    UtilizationHour.objects.bulk_create([
        UtilizationHour(reservation=row, hour=now - timedelta(hours=h + 1), samples=60, first_sampled_at=now - timedelta(hours=h + 1),
                        used=used, available=total - used, total=total, share_sum=60 * used / total, share_samples=60,
                        peak_used=peak)
        for h in range(14 * 24)])


def on_demand(cluster, name, pool=None):
    return Node.objects.create(cluster=cluster, name=name, node_pool=pool, instance_type="m5.large", zone=ZONE,
                               capacity_type="on-demand")


@pytest.fixture
def seeded(world, clock, provider):
    """cr-committed: 10 m5.large, 4 committed for 60 days, 2 used, at most 3 in 14 days (the use needs 4:
    6 above the use and the commitment). cr-batch: 4 of the same shape, all used, selected by EC2NodeClass batch of the working
    cluster, which runs 3 more m5.large on-demand. Cluster beta (account OTHER, which does not see
    cr-committed) runs 2 m5.large on-demand."""
    now = clock()
    sync_catalogue(provider, now=now)
    committed = world.add_reservation("m5.large", ZONE, 10, tags={"team": "web"})
    world.set_available(committed, 8)
    world.reservation(committed)["CommitmentInfo"] = {"CommittedInstanceCount": 4,
                                                      "CommitmentEndDate": now + timedelta(days=60)}
    batch = world.add_reservation("m5.large", ZONE, 4, tags={"team": "batch"})
    world.set_available(batch, 0)
    home = default_cluster()
    web = EC2NodeClass.objects.create(name="web", capacity_reservation_selector_terms=[{"tags": {"team": "web"}}])
    batch_class = EC2NodeClass.objects.create(name="batch", capacity_reservation_selector_terms=[{"id": batch}])
    web_pool = NodePool.objects.create(name="web", node_class=web)
    batch_pool = NodePool.objects.create(name="batch", node_class=batch_class)
    assert sync_reservations(provider, now=now).errors == []
    history(committed, now, used=2, peak=3, total=10)
    history(batch, now, used=4, peak=4, total=4)
    busy = Node.objects.create(name="web-1", node_pool=web_pool, instance_type="m5.large", zone=ZONE, capacity_type="reserved",
                               reservation=CapacityReservation.objects.get(reservation_id=committed))
    Pod.objects.create(namespace="web", name="api-1", node=busy, node_name="web-1", phase="Running", owner_kind="ReplicaSet")
    for index in range(3):
        on_demand(home, f"batch-od-{index}", batch_pool)
    beta = Cluster.objects.create(name="beta", account=AwsAccount.objects.create(account_id=OTHER, name="ml-dev"),
                                  region="us-east-1")
    for index in range(2):
        on_demand(beta, f"beta-od-{index}")
    return {"now": now, "committed": committed, "batch": batch}


def advice():
    return {(r.kind, r.reservation.reservation_id): r for r in Recommendation.objects.select_related("reservation")}


def test_a_committed_reservation_gets_a_move_and_a_split_with_money_that_adds_up(seeded):
    recompute(seeded["now"])
    found = advice()
    committed = seeded["committed"]
    assert ("cancel", committed) not in found and found[("shrink", committed)].target_count == 4  # the alternative
    move, split = found[("move", committed)], found[("split", committed)]
    # Move: cr-batch's cluster pays for 3 m5.large on-demand beside its 0 free units; the 3 moved units cover them.
    assert (move.details["count"], move.details["destination"], move.details["cluster"]) == (3, seeded["batch"], default_cluster().name)
    assert move.savings_per_month == round(3 * M5 * MONTH, 2) == move.details["idleCostPerMonth"]
    assert move.details["stillIdleCostPerMonth"] == 0 and move.details["money"] == "monthly"
    # Split: the other 3, to share with account OTHER, whose cluster beta runs 2 on-demand: 2 covered, 1 stays idle.
    assert (split.details["count"], split.details["shareWith"], split.details["coveredUnits"]) == (3, OTHER, 2)
    assert split.savings_per_month == round(2 * M5 * MONTH, 2)
    assert split.details["idleCostPerMonth"] == round(3 * M5 * MONTH, 2)
    assert split.details["stillIdleCostPerMonth"] == round(round(3 * M5 * MONTH, 2) - round(2 * M5 * MONTH, 2), 2)
    # The six idle units above the commitment and the use: what they cost = what the two save + what stays idle.
    assert round(move.details["idleCostPerMonth"] + split.details["idleCostPerMonth"], 2) == round(
        move.savings_per_month + split.savings_per_month + split.details["stillIdleCostPerMonth"], 2) == round(6 * M5 * MONTH, 2)
    assert "committed until" in move.reason and "for 4 instances" in move.reason


def test_the_reservation_page_shows_the_commitment_and_the_list_adds_move_and_split(seeded, viewer_client):
    recompute(seeded["now"])
    page = viewer_client.get(reverse("reservations:detail", args=[seeded["committed"]])).content.decode()
    until = (seeded["now"] + timedelta(days=60)).strftime("%Y-%m-%d %H:%M")
    assert f"committed until {until} UTC, 4 units" in page
    listing = viewer_client.get(reverse("reservations:recommendations")).content.decode()
    # A move and a split of one reservation add up (5 units covered); the shrink of the same 6 units is the larger choice.
    total = max(round(round(3 * M5 * MONTH, 2) + round(2 * M5 * MONTH, 2), 2), round(6 * M5 * MONTH, 2))
    assert f'<strong id="total-per-month">${total:,.2f}</strong> a month' in listing


def test_a_move_applies_once_and_a_second_apply_changes_nothing(seeded, world, operator_client):
    recompute(seeded["now"])
    move = Recommendation.objects.get(kind="move")
    page = operator_client.get(reverse("reservations:recommendation", args=[move.pk])).content.decode()
    assert f"Moves 3 idle instances from {seeded['committed']} (10 to <strong>7</strong>)" in page
    form = {"computed_at": move.computed_at.isoformat()}
    for _ in range(2):
        assert operator_client.post(reverse("reservations:recommendation_apply", args=[move.pk]), form).status_code == 302
    assert len(world.calls_of("MoveCapacityReservationInstances")) == 1
    assert world.reservation(seeded["committed"])["TotalInstanceCount"] == 7
    assert world.reservation(seeded["batch"])["TotalInstanceCount"] == 7
    assert world.reservation(seeded["batch"])["AvailableInstanceCount"] == 3
    move.refresh_from_db()
    assert move.state == "applied" and move.applied_by == "otto"
    totals = dict(CapacityReservation.objects.values_list("reservation_id", "total_instance_count"))
    assert (totals[seeded["committed"]], totals[seeded["batch"]]) == (7, 7)


def test_a_split_records_the_new_reservation_and_says_how_to_share_it(seeded, world, operator):
    recompute(seeded["now"])
    split = Recommendation.objects.get(kind="split")
    api = APIClient()
    api.force_authenticate(operator)
    url = f"/api/v1/recommendations/{split.pk}/apply/"
    applied = api.post(url, {"computedAt": split.computed_at.isoformat()}, format="json")
    assert applied.status_code == 200, applied.json()
    new_id = applied.json()["details"]["newReservationId"]
    assert world.reservation(new_id)["TotalInstanceCount"] == 3 and world.reservation(new_id)["InstanceType"] == "m5.large"
    assert world.reservation(seeded["committed"])["TotalInstanceCount"] == 7
    arn = f"arn:aws:ec2:us-east-1:{ACCOUNT_ID}:capacity-reservation/{new_id}"
    assert applied.json()["awsRamShare"] == (f"aws ram create-resource-share --name karpweb-{new_id}-split "
                                             f"--resource-arns {arn} --principals {OTHER}")
    again = api.post(url, {"computedAt": split.computed_at.isoformat()}, format="json")
    assert again.status_code == 200 and len(world.calls_of("CreateCapacityReservationBySplitting")) == 1


def test_a_changed_destination_is_refused_and_ec2_refuses_a_capacity_block(seeded, world, provider, operator_client):
    recompute(seeded["now"])
    move = Recommendation.objects.get(kind="move")
    provider.modify_reservation(seeded["batch"], instance_count=6)  # grown in the console since
    refused = operator_client.post(reverse("reservations:recommendation_apply", args=[move.pk]),
                                   {"computed_at": move.computed_at.isoformat()})
    assert refused.status_code == 409 and f"the destination {seeded['batch']} changed since this was computed" in refused.content.decode()
    assert world.calls_of("MoveCapacityReservationInstances") == []
    block = world.add_capacity_block("m5.large", ZONE, 2, start=seeded["now"] - timedelta(hours=1),
                                     end=seeded["now"] + timedelta(days=1))
    from scheduling.adapters.ec2.interface import CloudAPIError

    with pytest.raises(CloudAPIError) as cannot:
        provider.split_reservation(block, 1, client_token="t-1")
    assert cannot.value.code == "UnsupportedOperation"
    with pytest.raises(CloudAPIError) as too_many:
        provider.split_reservation(seeded["committed"], 9, client_token="t-2")  # 8 available
    assert too_many.value.code == "InvalidParameterValue"


def test_observe_mode_shows_the_split_and_move_commands(seeded, settings, operator_client, world):
    settings.KARPWEB_MODE = "observe"
    recompute(seeded["now"])
    move, split = Recommendation.objects.get(kind="move"), Recommendation.objects.get(kind="split")
    page = operator_client.get(reverse("reservations:recommendation", args=[move.pk])).content.decode()
    assert (f"aws ec2 move-capacity-reservation-instances --source-capacity-reservation-id {seeded['committed']} "
            f"--destination-capacity-reservation-id {seeded['batch']} --instance-count 3") in page
    page = operator_client.get(reverse("reservations:recommendation", args=[split.pk])).content.decode()
    assert (f"aws ec2 create-capacity-reservation-by-splitting --source-capacity-reservation-id {seeded['committed']} "
            "--instance-count 3") in page and "aws ram create-resource-share" in page
    refused = operator_client.post(reverse("reservations:recommendation_apply", args=[split.pk]),
                                   {"computed_at": split.computed_at.isoformat()})
    assert refused.status_code == 409 and "karpweb is in observe mode" in refused.content.decode()
    assert world.calls_of("CreateCapacityReservationBySplitting") == []


def test_a_shared_to_us_reservation_gets_no_cancel_and_an_interruptible_source_no_shrink(world, clock, provider):
    now = clock()
    sync_catalogue(provider, now=now)
    foreign = world.add_reservation("m5.large", ZONE, 6, owner_id=FOREIGN)  # shared with us: idle, nobody selects it
    world.set_available(foreign, 6)
    lender = world.add_reservation("m5.large", ZONE, 10)  # ours, lends 2 units as interruptible capacity
    world.set_available(lender, 7)
    world.reservation(lender)["InterruptibleCapacityAllocation"] = {"InstanceCount": 2, "TargetInstanceCount": 2,
                                                                    "Status": "active"}
    plain = world.add_reservation("m5.large", ZONE, 6)  # ours, idle: the control, cancelled
    world.set_available(plain, 6)
    assert sync_reservations(provider, now=now).errors == []
    history(foreign, now, used=0, peak=0, total=6)
    history(lender, now, used=1, peak=1, total=10)
    history(plain, now, used=0, peak=0, total=6)
    recompute(now)
    found = advice()
    assert ("cancel", plain) in found
    assert not {kind for kind, rid in found if rid in (foreign, lender) and kind in ("cancel", "shrink", "split", "move")}
    assert CapacityReservation.objects.get(reservation_id=lender).lends_interruptible_capacity
