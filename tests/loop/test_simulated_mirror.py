"""#47 (11), the quick start's world: the simulated EC2 keeps its reservations in the mirror's rows, and its
launches and terminations change their counts between syncs. After each run of the loop's EC2 step a
reservation's total, available, used, capacity allocations and "last seen" agree, as the admin shows them."""

import datetime
import re

import pytest
from django.core.management import call_command

from reservations.models import CapacityReservation
from scheduling.loop import backends, steps
from scheduling.models import SimulatedInstance

pytestmark = pytest.mark.django_db
SEEDED = datetime.datetime(2026, 11, 21, 12, tzinfo=datetime.UTC)
WEB_ODCR = "cr-0a1b2c3d4e5f60001"  # 10 units, 6 used as seeded


def test_the_simulated_ec2_sync_keeps_counts_allocations_and_last_seen_agreeing(time_machine, admin_user_client):
    time_machine.move_to(SEEDED, tick=False)
    call_command("seed_demo", now=SEEDED.isoformat())
    running = list(SimulatedInstance.objects.filter(reservation_id=WEB_ODCR, state="running")
                   .order_by("instance_id").values_list("instance_id", flat=True))
    assert len(running) == 6
    later = SEEDED + datetime.timedelta(minutes=5)
    time_machine.move_to(later, tick=False)
    backends.cloud().terminate(running[:4])  # consolidation took four nodes out of it
    steps.sync_ec2(later)

    for row in CapacityReservation.objects.fleet().filter(state__in=("active", "scheduled")):
        assert row.capacity_allocations == ([{"AllocationType": "used", "Count": row.used_instance_count}]
                                            if row.used_instance_count else []), row.reservation_id
        assert row.last_seen == later, row.reservation_id
    web = CapacityReservation.objects.get(reservation_id=WEB_ODCR)
    assert (web.total_instance_count, web.available_instance_count, web.used_instance_count) == (10, 8, 2)
    page = admin_user_client.get(f"/admin/reservations/capacityreservation/{web.pk}/change/").content.decode()
    for label, value in (("Total", "10"), ("Available", "8"), ("Used", "2"), ("Capacity allocations", "used: 2"),
                         ("Last seen \\(UTC\\)", "2026-11-21 12:05:00Z")):
        assert re.search(rf"{label}:</label>\s*<div class=\"readonly\">{value}</div>", page), label
