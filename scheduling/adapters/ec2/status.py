"""EC2NodeClass ``status.capacityReservations`` and the ``CapacityReservationsReady`` condition.

The engine decides (``scheduling.engine.selectors.resolve_node_class``): per-term validation,
which reservations the terms select, the status entries sorted by id with ``expiring`` capacity
blocks (40 minutes before the end, 70 for UltraServers: ``scheduling.engine.capacityblocks``), and
the condition reasons ``CapacityReservationsReady``, ``NoSelectorTerms``, ``InvalidSelectorTerms``,
``NoReservationsFound``. This module feeds it EC2's answers and adds the two reasons only an API
call can give: ``Unauthorized`` (UnauthorizedOperation / AccessDenied) and ``APIError``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from scheduling.engine.capacityblocks import capacity_block_timing
from scheduling.engine.reservations import CapacityReservation
from scheduling.engine.selectors import (
    CONDITION_TYPE,
    NodeClassReservations,
    parse_terms,
    resolve_node_class,
)
from scheduling.engine.timeutil import parse_time

from .client import UNAUTHORIZED_CODES
from .interface import CloudAPIError, SelectorTermsError

POLL_PERIOD = timedelta(minutes=1)
REASON_UNAUTHORIZED = "Unauthorized"
REASON_API_ERROR = "APIError"


def to_engine(reservation: Mapping[str, Any], available_count: int | None = None) -> CapacityReservation:
    """An EC2 ``CapacityReservation`` dict (plus ``UltraserverType``) as the engine's dataclass."""
    end, start = reservation.get("EndDate"), reservation.get("StartDate")
    return CapacityReservation(
        id=reservation["CapacityReservationId"],
        instance_type=reservation["InstanceType"],
        zone=reservation["AvailabilityZone"],
        available_count=int(
            reservation.get("AvailableInstanceCount") or 0 if available_count is None else available_count
        ),
        total_count=int(reservation.get("TotalInstanceCount") or 0),
        owner_id=reservation.get("OwnerId", ""),
        state=reservation.get("State", "active"),
        instance_match_criteria=reservation.get("InstanceMatchCriteria", ""),
        reservation_type=reservation.get("ReservationType") or "default",
        end=parse_time(end) if end else None,
        start=parse_time(start) if start else None,
        tags={t["Key"]: t["Value"] for t in reservation.get("Tags") or []},
        interruptible=bool(reservation.get("Interruptible")),
        ultraserver_type=reservation.get("UltraserverType") or "",
    )


@dataclass
class ReservationStatus:
    """What one EC2NodeClass's terms give, plus the EC2 answers behind it."""

    result: NodeClassReservations
    reservations: list[dict[str, Any]] = field(default_factory=list)
    requeue_after: timedelta = POLL_PERIOD
    now: datetime | None = None

    @property
    def condition(self) -> dict[str, Any] | None:
        return self.result.condition

    @property
    def capacity_reservations(self) -> list[dict[str, Any]]:
        assert self.now is not None
        return [r.status_entry(self.now) for r in self.result.reservations]

    @property
    def selected_ids(self) -> list[str]:
        return [r.id for r in self.result.reservations]


def build_status(
    name: str,
    raw_terms: Sequence[Mapping[str, Any]] | None,
    discover: Callable[[Sequence[Mapping[str, Any]]], list[dict[str, Any]]],
    now: datetime,
    *,
    enabled: bool = True,
) -> ReservationStatus:
    """Discover the reservations the terms select and let the engine build status and condition."""
    terms, problems = parse_terms(list(raw_terms) if raw_terms is not None else None)
    if not enabled or problems or not terms:
        return ReservationStatus(resolve_node_class(name, raw_terms, [], now, enabled=enabled), now=now)
    try:
        reservations = discover(raw_terms)
    except SelectorTermsError:  # validated above; kept for discovery functions that validate differently
        return ReservationStatus(resolve_node_class(name, raw_terms, [], now), now=now)
    except CloudAPIError as exc:
        result = NodeClassReservations(name)
        if exc.code in UNAUTHORIZED_CODES:
            reason = REASON_UNAUTHORIZED
            message = f"{exc.operation or 'DescribeCapacityReservations'} is not allowed ({exc.code}): {exc.message}"
        else:
            reason, message = REASON_API_ERROR, f"{exc.operation}: {exc.code}: {exc.message}"
        result.condition = {"type": CONDITION_TYPE, "status": "False", "reason": reason, "message": message}
        return ReservationStatus(result, now=now)
    groups = {
        arn: frozenset(r["CapacityReservationId"] for r in reservations if arn in r.get("ResourceGroupArns", ()))
        for arn in {a for r in reservations for a in r.get("ResourceGroupArns", ())}
    }
    result = resolve_node_class(name, raw_terms, [to_engine(r) for r in reservations], now, groups)
    chosen = set(r.id for r in result.reservations)
    return ReservationStatus(
        result,
        [r for r in reservations if r["CapacityReservationId"] in chosen],
        requeue_after(reservations, now),
        now,
    )


def requeue_after(reservations: Sequence[Mapping[str, Any]], now: datetime) -> timedelta:
    """The poll period, or sooner when a capacity block's drain start or any end falls within it."""
    soonest = POLL_PERIOD
    for r in reservations:
        if not r.get("EndDate"):
            continue
        end = parse_time(r["EndDate"])
        moments = [end]
        if (r.get("ReservationType") or "default") == "capacity-block":
            moments.append(capacity_block_timing(end, bool(r.get("UltraserverType"))).drain_at)
        for moment in moments:
            if now < moment < now + soonest:
                soonest = moment - now
    return soonest
