"""``CapacityBlockOfferings``: what EC2 asks today for a Capacity Block of a type, count and duration.

karpweb never learns what a block it did not buy cost (DescribeCapacityReservations carries no fee), so the
lowest upfront fee DescribeCapacityBlockOfferings quotes for the same instance type, count and duration stands
in as an estimate of it (reservations/block_fees.py, "EC2 offerings estimate"). One provider for this concern,
with its own cache: offerings change slowly, and every EC2 sync would otherwise ask again for every block.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from .client import Caller
from .interface import CloudAPIError

log = logging.getLogger(__name__)

OFFERINGS_TTL = timedelta(hours=1)

Shape = tuple[str, int, int, str, int]  # (instance type, instance count, hours, UltraServer type, UltraServer count)


class CapacityBlockOfferings:
    def __init__(self, ec2: Any, call: Caller, clock: Callable[[], datetime]) -> None:
        self._ec2, self._call, self._clock = ec2, call, clock
        self._cache: dict[Shape, tuple[datetime, list[dict]]] = {}
        self._lock = threading.Lock()
        self.api_calls = 0  # DescribeCapacityBlockOfferings calls made (for tests)

    def lowest_fee(self, instance_type: str, instance_count: int, hours: int) -> float | None:
        """The lowest upfront fee ($) EC2 quotes for this shape, None when it offers none (or refuses the shape:
        EC2 sells blocks of 1-14 days, or whole weeks up to 182 days, and says so in an error)."""
        fees = [float(o["UpfrontFee"]) for o in self.offerings(instance_type, instance_count, hours) if o.get("UpfrontFee")]
        return min(fees, default=None)

    def offerings(self, instance_type: str, instance_count: int, hours: int, *, ultraserver_type: str = "",
                  ultraserver_count: int = 0, fresh: bool = False) -> list[dict]:
        """EC2's offerings for this shape as it writes them (every page), [] when it has none or refuses it. An
        UltraServer shape asks for `ultraserver_count` UltraServers of `ultraserver_type` (EC2 answers their
        instance type and count). `fresh`: ask EC2 now (a purchase re-checks that its offering is still sold)."""
        shape, now = (instance_type, instance_count, hours, ultraserver_type, ultraserver_count), self._clock()
        with self._lock:
            cached = self._cache.get(shape)
            if cached is not None and now - cached[0] < OFFERINGS_TTL and not fresh:
                return cached[1]
        found = self._describe(shape)
        with self._lock:
            self._cache[shape] = (now, found)
        return found

    def forget(self) -> None:
        """After a purchase: the offering bought is no longer sold."""
        with self._lock:
            self._cache.clear()

    def _describe(self, shape: Shape) -> list[dict]:
        instance_type, instance_count, hours, ultraserver_type, ultraserver_count = shape
        found, token = [], None
        try:
            while True:
                params: dict[str, Any] = {"CapacityDurationHours": hours}
                if ultraserver_type:
                    params.update(UltraserverType=ultraserver_type, UltraserverCount=ultraserver_count)
                else:
                    params.update(InstanceType=instance_type, InstanceCount=instance_count)
                if token:
                    params["NextToken"] = token
                self.api_calls += 1
                answer = self._call(self._ec2, "describe_capacity_block_offerings", **params)
                found += answer.get("CapacityBlockOfferings") or []
                token = answer.get("NextToken")
                if not token:
                    break
        except CloudAPIError as error:
            log.info("No Capacity Block offering for %s x%d for %d h: %s", instance_type, instance_count, hours, error)
            return []
        return found
