"""The simulated EC2 (the demo's provider) starts a future-dated reservation at its start, as EC2 does:
scheduled until then, active with every unit free from it; the waiting states EC2 decides (assessing,
delayed, ...) stay until EC2 moves them (issue #37)."""

import datetime

import pytest
from django.utils import timezone

from reservations.models import CapacityReservation
from scheduling.loop import simulated
from tests.factories.reservations import CapacityReservationFactory

pytestmark = pytest.mark.django_db


def test_the_simulated_ec2_starts_a_scheduled_reservation_at_its_start():
    now = timezone.now()
    start = now + datetime.timedelta(days=2)
    scheduled = CapacityReservationFactory(reservation_id="cr-0future0000000001", state="scheduled", start_date=start,
                                           total_instance_count=3, available_instance_count=0)
    assessing = CapacityReservationFactory(reservation_id="cr-0future0000000002", state="assessing", start_date=start)
    assert simulated.tick_ec2(now)["reservations_started"] == 0
    assert CapacityReservation.objects.get(pk=scheduled.pk).state == "scheduled"
    counts = simulated.tick_ec2(start)
    assert counts["reservations_started"] == 1
    started = CapacityReservation.objects.get(pk=scheduled.pk)
    assert (started.state, started.available_instance_count) == ("active", 3)
    assert CapacityReservation.objects.get(pk=assessing.pk).state == "assessing"
