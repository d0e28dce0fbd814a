"""Reservation discovery (DescribeCapacityReservations) and the in-memory available counts.

Discovery follows upstream (aws/karpenter-provider-aws
`pkg/providers/capacityreservation/provider.go`): one query per selector term, an ``id``
query by id with no ``MaxResults``, the others by filters with ``MaxResults=1000`` over all pages;
results cached per query for one minute, unioned, de-duplicated by id, past-end ones dropped;
``InvalidCapacityReservationId.NotFound`` is an empty answer. A provider-wide lock spans a whole
``list`` call so that concurrent callers never issue the same query twice.

Availability follows upstream's `availabilityCache` (same repository,
`.../capacityreservation/types.go`): every EC2 answer (cache miss) overwrites the count of the
reservations
it returned, a launch decrements, ``mark_unavailable`` zeroes until the next sync, an unknown id
has 0. Entries live 24 hours. Where karpweb differs: given a shared ``store`` (the loop passes
Django's cache, Redis in production) the counts live there, so a worker that never ran the
account's sync sees what the one that did saw; and given a ``fallback`` (the loop's: the mirror's
count less the ledger's launches since it was read), an id the store does not know is asked of it
and the answer kept, rather than taken as 0: a cold or new worker launches into a reservation
EC2 and the ledger show free.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

from .client import UNAUTHORIZED_CODES, Caller
from .interface import CloudAPIError
from .selectors import ReservationQuery, parse, queries_from_terms

log = logging.getLogger(__name__)

QUERY_CACHE_TTL = timedelta(minutes=1)
AVAILABILITY_TTL = timedelta(hours=24)
NOT_FOUND = "InvalidCapacityReservationId.NotFound"
MAX_PAGES = 1000
GROUP_PAGE_SIZE = 50  # ListGroupResources' largest page
# States the inventory lists: usable now or soon (a purchased capacity block is "scheduled").
INVENTORY_STATES = ("active", "scheduled", "pending", "payment-pending", "assessing", "delayed")  # a guard: EC2 never pages this far, a repeating token must not loop forever

# UltraServer instance types, used only when DescribeCapacityBlocks is not allowed.
ULTRASERVER_TYPE_PREFIXES = ("p6e-gb200.", "trn2u.", "u-p6e-gb200")

Clock = Callable[[], datetime]


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


class ReservationAvailability:
    """How many instances each reservation can still take: in the shared ``store`` when there is one
    (keyed by reservation id: EC2's ids are unique across accounts), else as far as this process knows."""

    def __init__(self, clock: Clock = utcnow, store: Any = None,
                 fallback: Callable[[str], int | None] | None = None) -> None:
        self._clock = clock
        self._store = store
        self._fallback = fallback
        self._counts: dict[str, tuple[int, datetime]] = {}
        self._lock = threading.Lock()

    @staticmethod
    def _key(reservation_id: str) -> str:
        return f"karpweb:reservation-available:{reservation_id}"

    def _read(self, reservation_id: str) -> int | None:
        if self._store is not None:
            return self._store.get(self._key(reservation_id))
        entry = self._counts.get(reservation_id)
        return None if entry is None or entry[1] <= self._clock() else entry[0]

    def _set(self, reservation_id: str, count: int) -> None:
        if self._store is not None:
            self._store.set(self._key(reservation_id), max(0, count), AVAILABILITY_TTL.total_seconds())
        else:
            self._counts[reservation_id] = (max(0, count), self._clock() + AVAILABILITY_TTL)

    def sync(self, counts: Mapping[str, int]) -> None:
        with self._lock:
            for reservation_id, count in counts.items():
                self._set(reservation_id, count)

    def get(self, reservation_id: str) -> int:
        with self._lock:
            count = self._read(reservation_id)
            if count is None and self._fallback is not None:
                count = self._fallback(reservation_id)
                if count is not None:
                    self._set(reservation_id, count)
            return 0 if count is None else count

    def mark_launched(self, reservation_id: str) -> None:
        with self._lock:
            count = self._read(reservation_id)
            if count is not None:
                self._set(reservation_id, count - 1)

    def mark_terminated(self, reservation_id: str) -> None:
        with self._lock:
            count = self._read(reservation_id)
            if count is not None:
                self._set(reservation_id, count + 1)

    def mark_unavailable(self, *reservation_ids: str) -> None:
        with self._lock:
            for reservation_id in reservation_ids:
                self._set(reservation_id, 0)


class ReservationDiscovery:
    """Turns selector terms into DescribeCapacityReservations calls, with the one-minute cache."""

    def __init__(
        self,
        ec2: Any,
        call: Caller,
        availability: ReservationAvailability,
        clock: Clock = utcnow,
        resource_groups: Any = None,
    ) -> None:
        self._ec2 = ec2
        self._resource_groups = resource_groups
        self._call = call
        self._availability = availability
        self._clock = clock
        self._cache: dict[ReservationQuery, tuple[datetime, list[dict[str, Any]]]] = {}
        self._lock = threading.Lock()
        self.api_calls = 0  # DescribeCapacityReservations calls made (for tests and metrics)

    def invalidate(self) -> None:
        with self._lock:
            self._cache.clear()

    def list(self, terms: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        queries = queries_from_terms(parse(terms))
        with self._lock:
            now = self._clock()
            found: dict[str, dict[str, Any]] = {}
            for query in queries:
                for reservation in self._cached(query, now):
                    rid = reservation["CapacityReservationId"]
                    if rid not in found:
                        found[rid] = dict(reservation)
                    elif reservation.get("ResourceGroupArns"):
                        groups = set(found[rid].get("ResourceGroupArns", ())) | set(reservation["ResourceGroupArns"])
                        found[rid]["ResourceGroupArns"] = sorted(groups)
            return [r for r in found.values() if r.get("EndDate") is None or _aware(r["EndDate"]) > now]

    def inventory(self, states: Sequence[str] = INVENTORY_STATES) -> list[dict[str, Any]]:
        """Every reservation the account owns or has shared with it in these states (not cached):
        the console's view of all prepaid capacity, selected by a class or idle. Syncs counts."""
        with self._lock:
            reservations = self._pages({"Filters": [{"Name": "state", "Values": list(states)}], "MaxResults": 1000})
            self._annotate_ultraserver(reservations)
            self._availability.sync(
                {r["CapacityReservationId"]: int(r.get("AvailableInstanceCount") or 0) for r in reservations if r.get("State") == "active"}
            )
            return reservations

    def by_ids(self, reservation_ids: Sequence[str]) -> list[dict[str, Any]]:
        """These reservations in any state (e.g. to learn that one expired or was cancelled); ids EC2
        no longer knows are left out."""
        found: list[dict[str, Any]] = []
        ids = sorted(set(reservation_ids))
        for start in range(0, len(ids), 100):
            chunk = ids[start : start + 100]
            try:
                found.extend(self._pages({"CapacityReservationIds": chunk}, not_found_is_empty=False))
            except CloudAPIError as exc:
                if exc.code != NOT_FOUND:
                    raise
                for rid in chunk:
                    found.extend(self._pages({"CapacityReservationIds": [rid]}))
        self._annotate_ultraserver(found)
        return found

    def usage(self, reservation_id: str) -> dict[str, int]:
        """GetCapacityReservationUsage (read-only, the owner's view): units used per account, the
        owner's and those it shares the reservation with. Not cached: the ledger reads it once a sync."""
        answer = self._call(self._ec2, "get_capacity_reservation_usage", CapacityReservationId=reservation_id)
        usages: dict[str, int] = {}
        while True:
            for item in answer.get("InstanceUsages") or []:
                account = item.get("AccountId") or ""
                usages[account] = usages.get(account, 0) + int(item.get("UsedInstanceCount") or 0)
            token = answer.get("NextToken")
            if not token:
                return usages
            answer = self._call(self._ec2, "get_capacity_reservation_usage", CapacityReservationId=reservation_id,
                                NextToken=token)

    def _cached(self, query: ReservationQuery, now: datetime) -> list[dict[str, Any]]:
        entry = self._cache.get(query)
        if entry is not None and entry[0] > now:
            return entry[1]
        reservations = self._describe(query)
        self._annotate_ultraserver(reservations)
        self._availability.sync(
            {r["CapacityReservationId"]: int(r.get("AvailableInstanceCount") or 0) for r in reservations}
        )
        self._cache[query] = (now + QUERY_CACHE_TTL, reservations)
        return reservations

    def _describe(self, query: ReservationQuery) -> list[dict[str, Any]]:
        if query.resource_group_arn:
            ids = self._group_members(query.resource_group_arn)
            if not ids:
                return []
            try:
                found = self._pages(query.request(ids), not_found_is_empty=False)
            except CloudAPIError as exc:
                if exc.code != NOT_FOUND:
                    raise
                # A member the group still lists no longer exists: ask for each one alone.
                found = [r for rid in ids for r in self._pages(query.request([rid]))]
            for r in found:
                r["ResourceGroupArns"] = [query.resource_group_arn]
            return found
        return self._pages(query.request())

    def group_members(self, group_arn: str) -> list[str]:
        """Reservation ids in a capacity reservation group, every page (not cached)."""
        return self._group_members(group_arn)

    def _group_members(self, group_arn: str) -> list[str]:
        """Reservation ids in a capacity reservation group (resource-groups ListGroupResources)."""
        if self._resource_groups is None:
            raise CloudAPIError("NoResourceGroupsClient", "resourceGroupARN terms need a resource-groups client", "ListGroupResources")
        params: dict[str, Any] = {
            "Group": group_arn,
            "Filters": [{"Name": "resource-type", "Values": ["AWS::EC2::CapacityReservation"]}],
            "MaxResults": GROUP_PAGE_SIZE,
        }
        ids: list[str] = []
        seen: set[str] = set()
        while True:
            try:
                page = self._call(self._resource_groups, "list_group_resources", **params)
            except CloudAPIError as exc:
                if exc.code == "NotFoundException":
                    return []
                raise
            for item in page.get("Resources", []):
                arn = (item.get("Identifier") or {}).get("ResourceArn", "")
                if ":capacity-reservation/" in arn:
                    ids.append(arn.rsplit("/", 1)[-1])
            token = page.get("NextToken")
            if not token or token in seen:
                return sorted(set(ids))
            seen.add(token)
            params["NextToken"] = token

    def _pages(self, params: dict[str, Any], not_found_is_empty: bool = True) -> list[dict[str, Any]]:
        reservations: list[dict[str, Any]] = []
        seen_tokens: set[str] = set()
        for _ in range(MAX_PAGES):
            try:
                self.api_calls += 1
                page = self._call(self._ec2, "describe_capacity_reservations", **params)
            except CloudAPIError as exc:
                if exc.code == NOT_FOUND and not_found_is_empty:
                    # Upstream: the id does not exist, the answer is empty. Returning (rather than
                    # continuing a paginator) is what keeps this from looping forever.
                    return []
                raise
            reservations.extend(page.get("CapacityReservations", []))
            token = page.get("NextToken")
            if not token or token in seen_tokens:
                break
            seen_tokens.add(token)
            params = {**params, "NextToken": token}
        return reservations

    def _annotate_ultraserver(self, reservations: list[dict[str, Any]]) -> None:
        """Add ``UltraserverType`` to capacity blocks; EC2 reports it on the block, not the reservation."""
        block_ids = sorted(
            {r["CapacityBlockId"] for r in reservations if r.get("ReservationType") == "capacity-block" and r.get("CapacityBlockId")}
        )
        types: dict[str, str] = {}
        if block_ids:
            try:
                answer = self._call(self._ec2, "describe_capacity_blocks", CapacityBlockIds=block_ids)
                types = {b["CapacityBlockId"]: b.get("UltraserverType") or "" for b in answer.get("CapacityBlocks", [])}
            except CloudAPIError as exc:
                level = logging.INFO if exc.code in UNAUTHORIZED_CODES else logging.WARNING
                log.log(level, "DescribeCapacityBlocks failed (%s); UltraServers recognised by instance type", exc.code)
                types = {
                    r["CapacityBlockId"]: r["InstanceType"]
                    for r in reservations
                    if r.get("CapacityBlockId") and r["InstanceType"].startswith(ULTRASERVER_TYPE_PREFIXES)
                }
        for r in reservations:
            ultraserver = types.get(r.get("CapacityBlockId") or "")
            if ultraserver:
                r["UltraserverType"] = ultraserver


def _aware(value: datetime) -> datetime:
    return value if value.tzinfo else value.replace(tzinfo=timezone.utc)
