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
    assert [a.pods for a in advice] == [["default/trainer-pending-0"]] * 2
    first, week_later = advice
    price = Offering.objects.filter(instance_type__name=first.instance_type, zone=first.availability_zone,
                                    capacity_type=CapacityType.ON_DEMAND, reservation=None).get().price
    assert (first.instance_count, first.hours, first.computed_at) == (1, 24, later)
    assert first.upfront_fee == Decimal(f"{24 * price:.2f}")
    assert first.start == datetime.datetime(2026, 11, 22, 11, 30, tzinfo=datetime.UTC)
    assert week_later.start - first.start == datetime.timedelta(days=7) and week_later.upfront_fee > first.upfront_fee

    Pod.objects.filter(name="trainer-pending-0").delete()
    steps.sync_ec2(later + datetime.timedelta(minutes=1))
    assert not BuyAdvice.objects.exists()


def test_the_simulated_ec2_quotes_blocks_but_sells_none(time_machine, operator, operator_client, settings):
    """Its pod page shows the AWS CLI command and no Buy button; a purchase asked for anyway is refused, naming why."""
    from reservations.models import CapacityBlockPurchase
    from reservations.purchases import PurchaseRefused, purchase_advice
    from scheduling.models import AuditEntry

    settings.KARPWEB_MODE = "control"
    time_machine.move_to(SEEDED, tick=False)
    call_command("seed_demo", "--one-cluster", now=SEEDED.isoformat())
    steps.sync_ec2(SEEDED + datetime.timedelta(minutes=5))
    advice = BuyAdvice.objects.order_by("upfront_fee").first()
    page = operator_client.get("/pods/default/trainer-pending-0/").content.decode()
    assert "the simulated EC2 quotes Capacity Blocks but sells none" in page and 'class="buy-purchase"' not in page
    assert f"aws ec2 purchase-capacity-block --capacity-block-offering-id {advice.offering_id}" in page
    # Several classes' NodePools would take the block: the operator picks the one that selects it.
    assert '<select name="node_class"><option value="batch">batch</option>' in page
    operator_client.post(f"/capacity-blocks/to-buy/{advice.pk}/approve/", {"node_class": "ml"})
    assert CapacityBlockPurchase.objects.get().node_class == "ml"
    settings.KARPWEB_CAPACITY_BLOCK_SPEND_LIMIT = 100_000
    with pytest.raises(PurchaseRefused) as refused:
        purchase_advice(advice.pk, user=operator, source=AuditEntry.Source.API, cloud=backends.cloud)
    assert refused.value.field == "cloud"
