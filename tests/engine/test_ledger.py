import pytest

from scheduling.engine.instancetypes import Offering
from scheduling.engine.ledger import LedgerError, ReservationLedger
from scheduling.engine.reservations import CapacityReservation


def test_minimum_capacity_wins_when_several_nodepools_see_a_reservation():
    ledger = ReservationLedger()
    ledger.register("cr-1", 5)
    ledger.register("cr-1", 3)
    ledger.register("cr-1", 4)
    assert ledger.capacity("cr-1") == 3


def test_from_offerings_counts_unavailable_offerings_as_empty():
    full = CapacityReservation("cr-full", "m5.large", "a", 0, 2)
    free = CapacityReservation("cr-free", "m5.large", "a", 2, 2)
    ledger = ReservationLedger.from_offerings([
        Offering.create("reserved", "a", 0, reservation=free),
        Offering.create("reserved", "a", 0, available=False, reservation=full),
        Offering.create("on-demand", "a", 0.1),
    ])
    assert ledger.reservation_ids() == ["cr-free", "cr-full"]
    assert ledger.capacity("cr-full") == 0 and ledger.capacity("cr-free") == 2


def test_one_unit_per_host_and_never_more_holders_than_capacity():
    ledger = ReservationLedger()
    ledger.register("cr-a", 1)
    ledger.register("cr-b", 2)
    ledger.reserve("claim-1", "cr-a")
    assert ledger.can_reserve("claim-1", "cr-a")  # idempotent for its holder
    assert not ledger.can_reserve("claim-2", "cr-a")
    with pytest.raises(LedgerError):
        ledger.reserve("claim-2", "cr-a")
    ledger.reserve("claim-1", "cr-b")  # a swap gives cr-a back
    assert ledger.held_by("claim-1") == "cr-b"
    assert ledger.remaining("cr-a") == 1 and ledger.remaining("cr-b") == 1
    ledger.reserve("claim-2", "cr-a")
    ledger.release("claim-1")
    ledger.release("claim-1")  # releasing twice is harmless
    assert ledger.planned("cr-b") == 0 and ledger.planned("cr-a") == 1
    assert not ledger.can_reserve("claim-3", "cr-unknown")
