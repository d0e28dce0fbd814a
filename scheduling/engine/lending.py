"""Lending idle reserved units as interruptible capacity, and taking them back. Pure: hourly use in,
what to lend or reclaim out.

* ``lend``: an active ODCR the fleet owns with no end date (EC2 lends only from those), neither a
  Capacity Block nor itself interruptible, lending nothing yet, whose units stayed idle for the idle
  window (``Policy.lend_idle_hours``) and whose forecast says they stay idle: the forecast is the
  highest use in the idle window and, on each of the past ``lend_forecast_days`` days, in the hours of
  the day the next window covers (the same hours a day or a week ago). It lends
  ``total - max(forecast, used now, fleet use) - margin`` units, never more than are free now.
  Money: nothing karpweb can count. The owner keeps paying for the reservation whether its units are
  lent or idle, and what a borrower pays (or the owner's organization saves) is not known to karpweb:
  the figure is 0 and its money is ``warning``; what the lent units cost a month is said for context.
* ``reclaim``: units a pending pod of the fleet could use (the plan placed it in the reservation once
  the lent units are counted back) come back at once, and so do units the forecast says the fleet uses
  within the next hour beyond what is not lent.
"""

from __future__ import annotations

import datetime
import math
from dataclasses import dataclass

HOUR = datetime.timedelta(hours=1)


@dataclass(frozen=True)
class UseHour:
    start: datetime.datetime
    high: float  # the most units the fleet used in that hour


def hours_between(hours: tuple[UseHour, ...], start: datetime.datetime, end: datetime.datetime) -> list[UseHour]:
    return [h for h in hours if start <= h.start < end]


def idle_window(hours: tuple[UseHour, ...], now: datetime.datetime, idle_hours: int, coverage: float) -> list[UseHour] | None:
    """The idle window's hours, or None when too few of them have samples to say anything."""
    found = hours_between(hours, now - idle_hours * HOUR, now)
    return found if len(found) >= coverage * idle_hours else None


def forecast_peak(hours: tuple[UseHour, ...], now: datetime.datetime, ahead: datetime.timedelta, days: int) -> float:
    """The most units used in the hours of the day from now to now + `ahead`, on each of the past `days` days."""
    peak = 0.0
    for day in range(1, days + 1):
        start = now - datetime.timedelta(days=day)
        peak = max([peak] + [h.high for h in hours_between(hours, start, start + ahead)])
    return peak


def lend_count(*, total: int, free_now: int, used_now: int, fleet_used: int, hours: tuple[UseHour, ...],
               now: datetime.datetime, idle_hours: int, forecast_days: int, margin: int, coverage: float = 0.9
               ) -> tuple[int, int] | None:
    """(units to lend, the forecast peak they leave room for), or None without enough history or nothing idle."""
    window = idle_window(hours, now, idle_hours, coverage)
    if window is None:
        return None
    ahead = datetime.timedelta(hours=idle_hours)
    peak = math.ceil(max([h.high for h in window] + [forecast_peak(hours, now, ahead, forecast_days)]) - 1e-9)
    count = min(free_now, total - max(peak, used_now, fleet_used) - margin)
    return (count, peak) if count >= 1 else None


def reclaim_for_plan(lent: int, planned_into: int, free_now: int) -> int:
    """Units to reclaim so that what the plan put into the reservation fits: beyond its free units, at most what is lent."""
    return max(min(planned_into - free_now, lent), 0)


def reclaim_for_forecast(*, total: int, lent: int, hours: tuple[UseHour, ...], now: datetime.datetime, days: int) -> tuple[int, int]:
    """(units to reclaim, the forecast peak of the next hour): what the fleet is forecast to use within the next
    hour beyond the units not lent."""
    peak = math.ceil(forecast_peak(hours, now, HOUR, days) - 1e-9)
    return max(min(peak - (total - lent), lent), 0), peak
