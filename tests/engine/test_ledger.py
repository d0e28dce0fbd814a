import pytest
from hypothesis import given, settings
from hypothesis import strategies as st


from scheduling.engine.catalog import CatalogView
from scheduling.engine.instancetypes import Offering
from scheduling.engine.ledger import LedgerError, ReservationLedger
from scheduling.engine.reservations import CapacityReservation
from tests.support.properties import examples


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


# The types with a free unit, kept up to date as units are taken and given back -----------------

_RESERVATIONS = [("cr-0", 0, 1), ("cr-1", 0, 2), ("cr-2", 1, 1), ("cr-3", 2, 3), ("cr-4", 3, 0)]  # id, type, units


def _view(reservation_ids):
    """A catalog view whose type i has the reserved offerings of the reservations of type i."""
    at = {}
    for rid, index, units in _RESERVATIONS:
        if rid in reservation_ids:
            reservation = CapacityReservation(rid, f"type-{index}", "a", units, units)
            at[index] = at.get(index, ()) + (Offering.create("reserved", "a", 0, reservation=reservation),)
    return CatalogView(frozenset(), frozenset(), {}, {}, reserved_at=at)


def _expected(ledger, view):
    return sum(1 << index for index, offers in view.reserved_at.items()
               if any(ledger.remaining(o.reservation.id) > 0 for o in offers))


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["reserve", "release", "new-view"]), st.integers(0, 5),
                          st.sampled_from([r[0] for r in _RESERVATIONS])), max_size=40))
def test_free_type_mask_follows_every_unit_taken_and_given_back(steps):
    ledger = ReservationLedger()
    for rid, _, units in _RESERVATIONS:
        ledger.register(rid, units)
    views = [_view({r[0] for r in _RESERVATIONS}), _view({"cr-1", "cr-3"})]
    assert ledger.free_type_mask(views[0]) == 0b0111  # type 3's only reservation has no unit
    for action, host, rid in steps:
        if action == "reserve" and ledger.can_reserve(f"claim-{host}", rid):
            ledger.reserve(f"claim-{host}", rid)
        elif action == "release":
            ledger.release(f"claim-{host}")
        elif action == "new-view":
            views.append(_view({rid, "cr-2"}))
        for view in views:
            assert ledger.free_type_mask(view) == _expected(ledger, view)
    copied = ledger.copy()
    copied.release("claim-0")
    assert ledger.free_type_mask(views[0]) == _expected(ledger, views[0])  # a copy's changes stay its own
    assert copied.free_type_mask(views[0]) == _expected(copied, views[0])
