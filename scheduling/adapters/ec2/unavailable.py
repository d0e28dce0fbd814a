"""The unavailable-offerings ("ICE") cache for on-demand and spot pools.

An on-demand or spot launch that fails with an unfulfillable-capacity code marks its
(instance type, zone, capacity type) unavailable for three minutes (upstream
``UnavailableOfferingsTTL``). Reserved offerings never go here: a full reservation is zeroed in
:class:`~.reservations.ReservationAvailability` until the next sync instead.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

UNAVAILABLE_OFFERINGS_TTL = timedelta(minutes=3)


@dataclass(frozen=True)
class UnavailableEntry:
    reason: str
    fleet_id: str | None
    until: datetime


class UnavailableOfferings:
    def __init__(self, clock: Callable[[], datetime], ttl: timedelta = UNAVAILABLE_OFFERINGS_TTL) -> None:
        self._clock = clock
        self._ttl = ttl
        self._entries: dict[tuple[str, str, str], UnavailableEntry] = {}
        self._lock = threading.Lock()

    def mark(self, instance_type: str, zone: str, capacity_type: str, reason: str, fleet_id: str | None = None) -> None:
        if capacity_type == "reserved":
            raise ValueError("reserved offerings are tracked per reservation, not in the ICE cache")
        with self._lock:
            self._entries[(instance_type, zone, capacity_type)] = UnavailableEntry(
                reason, fleet_id, self._clock() + self._ttl
            )

    def is_unavailable(self, instance_type: str, zone: str, capacity_type: str) -> bool:
        return self.entry(instance_type, zone, capacity_type) is not None

    def entry(self, instance_type: str, zone: str, capacity_type: str) -> UnavailableEntry | None:
        with self._lock:
            entry = self._entries.get((instance_type, zone, capacity_type))
            if entry is None:
                return None
            if entry.until <= self._clock():
                del self._entries[(instance_type, zone, capacity_type)]
                return None
            return entry

    def keys(self) -> list[tuple[str, str, str]]:
        now = self._clock()
        with self._lock:
            return sorted(k for k, e in self._entries.items() if e.until > now)
