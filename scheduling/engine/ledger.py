"""The reservation ledger: how many units of each reservation a scheduling run has planned.

It is built once per run from the reserved offerings of every NodePool; when several NodePools
(or EC2NodeClasses) see the same reservation it keeps the smallest capacity any of them reports,
as upstream's ReservationManager does. A host (a node claim of this run) holds at most ONE unit
at a time, in the reservation it will launch into; upstream holds a unit in every compatible
reservation per claim, which is what limits it to one reserved claim per loop (see
`scheduler.py`). The ledger never lets the holders of a reservation outnumber its capacity. Units the
owner lends as interruptible capacity are not in a reservation's available count (EC2 took them out),
so no claim is planned into them; reclaiming them (scheduling/loop/lending.py) gives them back.
"""

from __future__ import annotations

from enum import Enum
from typing import Iterable

from .instancetypes import Offering


class ReservedMode(Enum):
    # Provisioning: a claim never gives up its last reserved option; a pod that would make it
    # do so opens a new claim instead.
    STRICT = "strict"
    # Consolidation simulations: a claim may drop its reservation and fall back to on-demand or
    # spot (upstream's default; strict mode could stalemate drift).
    FALLBACK = "fallback"


class LedgerError(RuntimeError):
    """A unit was asked for that the reservation does not have; a scheduler bug, never input."""


class ReservationLedger:
    def __init__(self) -> None:
        self._capacity: dict[str, int] = {}
        self._remaining: dict[str, int] = {}
        self._holders: dict[str, set[str]] = {}
        self._held_by: dict[str, str] = {}
        self.free_units = 0  # across all reservations
        # Counts units given back. A claim refused because no unit was free may be retried only
        # once this has moved: until then nothing has changed for it.
        self.releases = 0
        # id(catalog view) -> its types with a free unit, kept up to date as units are taken and
        # given back (free_type_mask): asked for every claim a pod walks past.
        self._free_types: dict[int, _FreeTypes] = {}

    @classmethod
    def from_offerings(cls, offerings: Iterable[Offering]) -> "ReservationLedger":
        ledger = cls()
        for offering in offerings:
            if offering.reservation is not None:
                ledger.register(offering.reservation.id, offering.capacity if offering.available else 0)
        return ledger

    def register(self, reservation_id: str, capacity: int) -> None:
        """Record a reservation's capacity as one NodePool sees it; the minimum wins."""
        known = self._capacity.get(reservation_id)
        capacity = max(0, capacity if known is None else min(known, capacity))
        self._capacity[reservation_id] = capacity
        holders = self._holders.setdefault(reservation_id, set())
        remaining = capacity - len(holders)
        self.free_units += remaining - self._remaining.get(reservation_id, 0)
        self._remaining[reservation_id] = remaining
        self._free_types = {}  # capacities changed: free_type_mask starts again

    def capacity(self, reservation_id: str) -> int:
        return self._capacity.get(reservation_id, 0)

    def planned(self, reservation_id: str) -> int:
        return len(self._holders.get(reservation_id, ()))

    def remaining(self, reservation_id: str) -> int:
        return self._remaining.get(reservation_id, 0)

    def any_free(self) -> bool:
        return self.free_units > 0

    def free_type_mask(self, view) -> int:
        """The instance types (a bitmask over the view's catalog) with a free unit among a catalog
        view's reserved offerings."""
        tracked = self._free_types.get(id(view))
        if tracked is None or tracked.view is not view:
            tracked = self._free_types[id(view)] = _FreeTypes(view, self._remaining)
        return tracked.mask

    def _became(self, reservation_id: str, free: bool) -> None:
        """A reservation's last unit was taken (free=False) or its first given back."""
        for tracked in self._free_types.values():
            tracked.change(reservation_id, 1 if free else -1)

    def held_by(self, host: str) -> str | None:
        return self._held_by.get(host)

    def can_reserve(self, host: str, reservation_id: str) -> bool:
        return self._remaining.get(reservation_id, 0) > 0 or self._held_by.get(host) == reservation_id

    def reserve(self, host: str, reservation_id: str) -> None:
        """Hold one unit for `host`, giving back the unit it held elsewhere, if any."""
        current = self._held_by.get(host)
        if current == reservation_id:
            return
        if self.remaining(reservation_id) <= 0:
            raise LedgerError(f"reservation {reservation_id} has no unit left for {host}")
        if current is not None:
            self.release(host)
        self._holders[reservation_id].add(host)
        self._held_by[host] = reservation_id
        self._remaining[reservation_id] -= 1
        self.free_units -= 1
        if self._remaining[reservation_id] == 0:
            self._became(reservation_id, free=False)

    def release(self, host: str) -> None:
        current = self._held_by.pop(host, None)
        if current is not None:
            self._holders[current].discard(host)
            self._remaining[current] += 1
            self.free_units += 1
            self.releases += 1
            if self._remaining[current] == 1:
                self._became(current, free=True)

    def copy(self) -> "ReservationLedger":
        """An independent ledger with the same capacities and holders (consolidation simulations)."""
        other = ReservationLedger()
        other._capacity = dict(self._capacity)
        other._remaining = dict(self._remaining)
        other._holders = {rid: set(hosts) for rid, hosts in self._holders.items()}
        other._held_by = dict(self._held_by)
        other.free_units = self.free_units
        other.releases = self.releases
        return other

    def reservation_ids(self) -> list[str]:
        return sorted(self._capacity)


class _FreeTypes:
    """One catalog view's types with a free unit: per type, how many of its reserved offerings
    have a unit left (a type has one offering per reservation of it the view admits)."""

    __slots__ = ("view", "mask", "_free_offers", "_indexes")

    def __init__(self, view, remaining: dict[str, int]):
        self.view = view  # kept so that its id is never reused while tracked
        self.mask = 0
        self._free_offers: dict[int, int] = {}
        self._indexes: dict[str, list[int]] = {}  # reservation id -> the type indexes it offers
        for index, offers in view.reserved_at.items():
            free = 0
            for offering in offers:
                self._indexes.setdefault(offering.reservation.id, []).append(index)
                free += remaining.get(offering.reservation.id, 0) > 0
            self._free_offers[index] = free
            if free:
                self.mask |= 1 << index

    def change(self, reservation_id: str, delta: int) -> None:
        for index in self._indexes.get(reservation_id, ()):
            free = self._free_offers[index] = self._free_offers[index] + delta
            if free:
                self.mask |= 1 << index
            else:
                self.mask &= ~(1 << index)
