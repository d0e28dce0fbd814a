from datetime import datetime, timedelta, timezone

import pytest

from scheduling.engine.capacityblocks import capacity_block_timing, drain_lead
from scheduling.engine.reservations import CapacityReservation

END = datetime(2026, 11, 21, 13, 0, tzinfo=timezone.utc)


def test_timing_of_an_instance_block():
    timing = capacity_block_timing(END)
    assert timing.termination_at == END - timedelta(minutes=30)
    assert timing.drain_at == END - timedelta(minutes=40)
    assert drain_lead() == timedelta(minutes=40)


def test_timing_of_an_ultraserver_block():
    timing = capacity_block_timing(END, ultraserver=True)
    assert timing.termination_at == END - timedelta(minutes=60)
    assert timing.drain_at == END - timedelta(minutes=70)
    assert drain_lead(ultraserver=True) == timedelta(minutes=70)


@pytest.mark.parametrize("ultraserver, minutes_before_end, expiring", [
    (False, 41, False), (False, 40, True), (False, 39, True),
    (True, 71, False), (True, 70, True), (True, 41, True),
])
def test_expiring_exactly_at_drain_time(ultraserver, minutes_before_end, expiring):
    block = CapacityReservation("cr-1", "p5.48xlarge", "us-east-1a", 2, 2, reservation_type="capacity-block",
                                end=END, ultraserver_type="u-p6e-gb200x72" if ultraserver else "")
    now = END - timedelta(minutes=minutes_before_end)
    assert block.timing.is_expiring(now) is expiring
    assert block.status_state(now) == ("expiring" if expiring else "active")
    assert (block.unavailable_reason(now) is not None) is expiring


def test_default_reservations_never_expire_early():
    odcr = CapacityReservation("cr-1", "m5.large", "us-east-1a", 1, 1, end=END)
    assert odcr.timing is None
    assert odcr.status_state(END - timedelta(minutes=1)) == "active"
    assert odcr.unavailable_reason(END - timedelta(minutes=1)) is None
    assert odcr.unavailable_reason(END) == "reservation cr-1 ended at 2026-11-21T13:00:00Z"
