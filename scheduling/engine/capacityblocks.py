"""Capacity Block timing, in one place: the offerings, the EC2NodeClass status, the UI countdowns,
the consolidator and the EC2 status all read it from here.

EC2 begins terminating the instances of a Capacity Block 30 minutes before its end, 60 minutes for
an UltraServer block. Draining starts 10 minutes before that, so that workloads can leave
gracefully: 40 minutes before the end, 70 for an UltraServer block. Upstream Karpenter uses 40 for
every block, which starts draining an UltraServer block 10 minutes after EC2 began terminating it.
From the drain time on a block is "expiring": nothing new launches into it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

TERMINATION_LEAD = timedelta(minutes=30)
ULTRASERVER_TERMINATION_LEAD = timedelta(minutes=60)
DRAIN_AHEAD_OF_TERMINATION = timedelta(minutes=10)


@dataclass(frozen=True, slots=True)
class CapacityBlockTiming:
    end: datetime
    ultraserver: bool
    termination_at: datetime  # EC2 starts terminating instances
    drain_at: datetime  # karpweb starts draining nodes; the block counts as expiring from here

    def is_expiring(self, now: datetime) -> bool:
        return now >= self.drain_at

    def seconds_until_drain(self, now: datetime) -> float:
        return (self.drain_at - now).total_seconds()


def capacity_block_timing(end: datetime, ultraserver: bool = False) -> CapacityBlockTiming:
    termination_lead = ULTRASERVER_TERMINATION_LEAD if ultraserver else TERMINATION_LEAD
    termination_at = end - termination_lead
    return CapacityBlockTiming(
        end=end,
        ultraserver=ultraserver,
        termination_at=termination_at,
        drain_at=termination_at - DRAIN_AHEAD_OF_TERMINATION,
    )


def drain_lead(ultraserver: bool = False) -> timedelta:
    """How long before its end a block starts draining: 40 minutes, or 70 for an UltraServer."""
    end = datetime(2000, 1, 1)
    return end - capacity_block_timing(end, ultraserver).drain_at
