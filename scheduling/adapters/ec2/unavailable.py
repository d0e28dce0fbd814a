"""The unavailable-offerings ("ICE") cache for on-demand and spot pools.

An on-demand or spot launch that fails with an unfulfillable-capacity code marks its
(instance type, zone, capacity type) unavailable for three minutes (upstream
``UnavailableOfferingsTTL``). Reserved offerings never go here: a full reservation is zeroed in
:class:`~.reservations.ReservationAvailability` until the next sync instead.

Given a shared ``store`` (the loop passes Django's cache: Redis in production), the marks of one
account and region live there under one key, so that every worker launching for that account sees
the pools another worker found empty; without one (a provider on its own, its tests) they live in
this object. Two workers marking at the same moment may lose one mark: the launch that meets the
empty pool again marks it again.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

UNAVAILABLE_OFFERINGS_TTL = timedelta(minutes=3)

Pool = tuple[str, str, str]  # (instance type, zone, capacity type)


@dataclass(frozen=True)
class UnavailableEntry:
    reason: str
    fleet_id: str | None
    until: datetime


class UnavailableMarks:
    """The marks as they were read once: what a catalogue or a launch plan asks for every pool."""

    def __init__(self, entries: dict[Pool, UnavailableEntry], now: datetime) -> None:
        self._entries = {pool: entry for pool, entry in entries.items() if entry.until > now}

    def entry(self, instance_type: str, zone: str, capacity_type: str) -> UnavailableEntry | None:
        return self._entries.get((instance_type, zone, capacity_type))

    def is_unavailable(self, instance_type: str, zone: str, capacity_type: str) -> bool:
        return (instance_type, zone, capacity_type) in self._entries

    def keys(self) -> list[Pool]:
        return sorted(self._entries)


class UnavailableOfferings:
    def __init__(self, clock: Callable[[], datetime], ttl: timedelta = UNAVAILABLE_OFFERINGS_TTL,
                 store: Any = None, key: str = "") -> None:
        self._clock = clock
        self._ttl = ttl
        self._store, self._key = store, f"karpweb:unavailable-offerings:{key}"
        self._entries: dict[Pool, UnavailableEntry] = {}
        self._lock = threading.Lock()

    def _read(self) -> dict[Pool, UnavailableEntry]:
        if self._store is None:
            return self._entries
        return dict(self._store.get(self._key) or {})

    def mark(self, instance_type: str, zone: str, capacity_type: str, reason: str, fleet_id: str | None = None) -> None:
        if capacity_type == "reserved":
            raise ValueError("reserved offerings are tracked per reservation, not in the ICE cache")
        with self._lock:
            now = self._clock()
            entries = {pool: e for pool, e in self._read().items() if e.until > now}
            entries[(instance_type, zone, capacity_type)] = UnavailableEntry(reason, fleet_id, now + self._ttl)
            if self._store is None:
                self._entries = entries
            else:
                self._store.set(self._key, entries, self._ttl.total_seconds())

    def snapshot(self) -> UnavailableMarks:
        """Every live mark, read once (one read of the shared store)."""
        with self._lock:
            return UnavailableMarks(self._read(), self._clock())

    def is_unavailable(self, instance_type: str, zone: str, capacity_type: str) -> bool:
        return self.snapshot().is_unavailable(instance_type, zone, capacity_type)

    def entry(self, instance_type: str, zone: str, capacity_type: str) -> UnavailableEntry | None:
        return self.snapshot().entry(instance_type, zone, capacity_type)

    def keys(self) -> list[Pool]:
        return self.snapshot().keys()
