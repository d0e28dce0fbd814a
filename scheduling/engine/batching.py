"""Karpenter's provisioning batch window (core: pkg/controllers/provisioning/batcher.go): the first
trigger (a pod that became pending, a node that went away) opens a window; it closes after
BATCH_IDLE_DURATION without a new trigger (1 s) or BATCH_MAX_DURATION in all (10 s), and then one
provisioning run plans every pending pod. Pure: the caller passes the time."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class BatchWindow:
    idle_seconds: float = 1.0
    max_seconds: float = 10.0
    opened_at: float | None = None
    last_trigger_at: float | None = None

    def trigger(self, now: float) -> None:
        if self.opened_at is None:
            self.opened_at = now
        self.last_trigger_at = now

    @property
    def open(self) -> bool:
        return self.opened_at is not None

    def due(self, now: float) -> bool:
        """Whether the window has closed and the batch should run now."""
        if self.opened_at is None or self.last_trigger_at is None:
            return False
        return now - self.last_trigger_at >= self.idle_seconds or now - self.opened_at >= self.max_seconds

    def close(self) -> None:
        self.opened_at = self.last_trigger_at = None
