"""``ReservedInstances``: the account's active zonal Reserved Instances (DescribeReservedInstances).

A zonal RI (``Scope`` "Availability Zone") pays for up to ``InstanceCount`` on-demand instances of its
type in its zone: the engine treats its units as a finite offering at no marginal cost
(scheduling/engine/commitments.py). Regional RIs (``Scope`` "Region") are left out: their discount floats
to whichever matching instance runs in the region, so no placement can count on it, and their figure
stays the list price (docs/console.md, "Which price each figure uses").

One provider for this concern, with its own cache (an hour: RIs change when someone buys or one
ends). Without permission (UnauthorizedOperation) the answer says so, and every price stays the list
price: the overview shows why.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from .client import UNAUTHORIZED_CODES, Caller
from .interface import CloudAPIError

COMMITMENTS_TTL = timedelta(hours=1)
ZONAL_SCOPE = "Availability Zone"
KEPT_FIELDS = ("ReservedInstancesId", "InstanceType", "AvailabilityZone", "InstanceCount", "Scope", "State",
               "OfferingClass", "OfferingType", "ProductDescription", "InstanceTenancy", "End")


@dataclass(frozen=True)
class Reading:
    """What one read of a commitment API found: its items, or why it could not read them."""

    items: list[dict[str, Any]] = field(default_factory=list)
    refused: str = ""  # "no permission to read ...": list prices, and the overview says why


def refusal(exc: CloudAPIError, action: str, what: str) -> str:
    return f"no permission to read {what} ({action}: {exc.code})"


class ReservedInstances:
    def __init__(self, ec2: Any, call: Caller, clock: Callable[[], datetime]) -> None:
        self._ec2, self._call, self._clock = ec2, call, clock
        self._cached: tuple[datetime, Reading] | None = None
        self._lock = threading.Lock()
        self.api_calls = 0

    def zonal(self) -> Reading:
        """The active zonal RIs, as DescribeReservedInstances writes them (the fields the engine reads)."""
        now = self._clock()
        with self._lock:
            if self._cached is not None and now - self._cached[0] < COMMITMENTS_TTL:
                return self._cached[1]
        reading = self._describe()
        with self._lock:
            self._cached = (now, reading)
        return reading

    def _describe(self) -> Reading:
        self.api_calls += 1
        try:
            answer = self._call(self._ec2, "describe_reserved_instances",
                                Filters=[{"Name": "state", "Values": ["active"]},
                                         {"Name": "scope", "Values": [ZONAL_SCOPE]}])
        except CloudAPIError as exc:
            if exc.code in UNAUTHORIZED_CODES:
                return Reading(refused=refusal(exc, "ec2:DescribeReservedInstances", "Reserved Instances"))
            raise
        items = [{key: _plain(ri[key]) for key in KEPT_FIELDS if key in ri} for ri in answer.get("ReservedInstances") or []]
        return Reading([ri for ri in items if ri.get("Scope") == ZONAL_SCOPE and ri.get("State") == "active"
                        and ri.get("ProductDescription", "Linux/UNIX").startswith("Linux/UNIX")
                        and ri.get("InstanceTenancy", "default") == "default"])


def _plain(value: Any) -> Any:
    return value.isoformat() if isinstance(value, datetime) else value
