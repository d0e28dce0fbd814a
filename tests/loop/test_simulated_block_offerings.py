"""#50: the simulated EC2 sells Capacity Blocks too, so the quick start's loop advises one for its waiting
GPU pod (trainer-pending-0: 8 GPUs, a capacity-block selector) as the EC2 step runs, priced as stated in
scheduling/simulated_extensions.py; once the pod is gone, so is the advice."""

import datetime
from decimal import Decimal

import pytest
from django.core.management import call_command

from reservations.models import BuyAdvice
from scheduling.loop import steps
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
