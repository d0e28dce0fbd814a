"""#50: the simulated EC2 sells Capacity Blocks too, so the quick start's loop advises one for its waiting
GPU pod (trainer-pending-0: 8 GPUs, a capacity-block selector) as the EC2 step runs, priced as stated in
scheduling/simulated_extensions.py; once the pod is gone, so is the advice."""

import datetime
from decimal import Decimal

import pytest
from django.core.management import call_command

from reservations.models import BuyAdvice
from scheduling.loop import backends, steps
from scheduling.models import CapacityType, Offering, Pod

pytestmark = pytest.mark.django_db
SEEDED = datetime.datetime(2026, 11, 21, 12, tzinfo=datetime.UTC)


def test_the_simulated_loop_advises_a_block_for_the_waiting_gpu_pod(time_machine):
    time_machine.move_to(SEEDED, tick=False)
    call_command("seed_demo", "--one-cluster", now=SEEDED.isoformat())
    BuyAdvice.objects.all().delete()
    later = SEEDED + datetime.timedelta(minutes=5)
    time_machine.move_to(later, tick=False)
    steps.sync_ec2(later)

    advice = list(BuyAdvice.objects.order_by("upfront_fee"))
    assert [a.pods for a in advice] == [["default/trainer-pending-0", "default/trainer-pending-1"]] * 2
    first, week_later = advice
    price = Offering.objects.filter(instance_type__name=first.instance_type, zone=first.availability_zone,
                                    capacity_type=CapacityType.ON_DEMAND, reservation=None).get().price
    assert (first.instance_count, first.hours, first.computed_at) == (2, 24, later)
    assert first.upfront_fee == Decimal(f"{2 * 24 * price:.2f}")
    assert first.start == datetime.datetime(2026, 11, 22, 11, 30, tzinfo=datetime.UTC)
    assert week_later.start - first.start == datetime.timedelta(days=7) and week_later.upfront_fee > first.upfront_fee

    Pod.objects.filter(name__startswith="trainer-pending-").delete()
    steps.sync_ec2(later + datetime.timedelta(minutes=1))
    assert not BuyAdvice.objects.exists()


def test_the_simulated_ec2_sells_the_block_and_the_gang_runs_in_it_at_its_start(time_machine, operator, operator_client,
                                                                                   settings):
    """The quick start can buy too: Approve and Buy on the pod page (control mode, within the spending limit), one
    scheduled block however often it is bought, its id in the approved class's terms, and at its start the loop
    launches the waiting pod into it."""
    from reservations.models import CapacityBlockPurchase, CapacityReservation, EC2NodeClass
    from reservations.purchases import purchase_advice
    from scheduling.models import AuditEntry, Decision, NodeClaim

    settings.KARPWEB_MODE = "control"
    settings.KARPWEB_CAPACITY_BLOCK_SPEND_LIMIT = 100_000
    time_machine.move_to(SEEDED, tick=False)
    call_command("seed_demo", "--one-cluster", now=SEEDED.isoformat())
    steps.sync_ec2(SEEDED + datetime.timedelta(minutes=5))
    advice = BuyAdvice.objects.order_by("upfront_fee").first()
    page = operator_client.get("/pods/default/trainer-pending-0/").content.decode()
    assert f"aws ec2 purchase-capacity-block --capacity-block-offering-id {advice.offering_id}" not in page
    # Several classes' NodePools would take the block: the operator picks the one that selects it.
    assert '<select name="node_class"><option value="batch">batch</option>' in page
    operator_client.post(f"/capacity-blocks/to-buy/{advice.pk}/approve/", {"node_class": "ml"})
    assert CapacityBlockPurchase.objects.get().node_class == "ml"
    assert 'class="buy-purchase"' in operator_client.get("/pods/default/trainer-pending-0/").content.decode()
    bought = purchase_advice(advice.pk, user=operator, source=AuditEntry.Source.API, cloud=backends.cloud)
    again = purchase_advice(advice.pk, user=operator, source=AuditEntry.Source.API, cloud=backends.cloud)
    assert bought.state == again.state == CapacityBlockPurchase.State.PURCHASED and bought.paid_fee == advice.upfront_fee
    block = CapacityReservation.objects.get(reservation_type="capacity-block", state="scheduled")
    assert (block.reservation_id, block.start_date, block.total_instance_count) == (bought.reservation_id, advice.start, 2)
    assert {"id": block.reservation_id} in EC2NodeClass.objects.get(name="ml").capacity_reservation_selector_terms
    assert not any(o["CapacityBlockOfferingId"] == advice.offering_id
                   for o in backends.cloud().capacity_block_offerings(advice.instance_type, 2, 24))  # sold once

    # A day on, the demo's own p5 block (0006) has units free again: kept out of planning, only the new one is left.
    CapacityReservation.objects.filter(reservation_id="cr-0a1b2c3d4e5f60006").update(
        planning_excluded=True, planning_excluded_reason="only the block bought is to take the gang here")
    start = advice.start + datetime.timedelta(minutes=1)
    time_machine.move_to(start, tick=False)
    steps.sync_ec2(start)
    steps.provision(start)
    block.refresh_from_db()
    assert block.state == "active"
    claims = NodeClaim.objects.filter(reservation__reservation_id=block.reservation_id)
    assert {(c.capacity_type, c.instance_type) for c in claims} == {("reserved", advice.instance_type)} and len(claims) == 2
    launched = " ".join(Decision.objects.filter(kind="launch", reason__contains=block.reservation_id).values_list("subject", flat=True))
    assert "trainer-pending-0" in launched and "trainer-pending-1" in launched



def test_the_advice_is_for_the_pods_the_plan_found_no_room_for(time_machine):
    """The demo's trainer gang has two waiting 8-GPU pods and block 0006 one free unit: the provisioning run launches
    the first into it, finds no room for the second, and the next EC2 step advises a block for the second only."""
    time_machine.move_to(SEEDED, tick=False)
    call_command("seed_demo", "--one-cluster", now=SEEDED.isoformat())
    later = SEEDED + datetime.timedelta(minutes=5)
    time_machine.move_to(later, tick=False)
    steps.provision(later)
    steps.sync_ec2(later)
    assert {tuple(a.pods) for a in BuyAdvice.objects.all()} == {("default/trainer-pending-1",)}
