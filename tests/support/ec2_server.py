"""An EC2 endpoint for the tests: moto's EC2 server plus the capacity-reservation APIs it lacks.

moto 5.2.5 serves instances, launch templates, instance types and offerings over real HTTP, but has
no capacity-reservation API at all (create/describe/cancel answer HTTP 500), drops a RunInstances
capacity-reservation target, treats ``MarketType=capacity-block`` as spot, and ignores the
``ClientToken`` of CreateFleet. This module adds those parts to moto's EC2 response class and
backend, *in this process*, and then starts a :class:`moto.server.ThreadedMotoServer` on
127.0.0.1 and a free port. moto builds responses from botocore's service model, so each added
action only returns a dict shaped like the EC2 API and boto3 parses the answer as from AWS.

What the server adds (see ``docs/ec2.md`` for the full list):

* ``CreateCapacityReservation`` (tags, instance match criteria, end date, client token; future-dated:
  ``StartDate`` with ``CommitmentDuration`` and ``DeliveryPreference`` gives a ``scheduled`` reservation
  with ``CommitmentInfo`` that turns ``active`` at its start on the server clock),
  ``DescribeCapacityReservations`` (ids with ``InvalidCapacityReservationId.NotFound``; filters
  ``state``, ``owner-id``, ``instance-type``, ``availability-zone``, ``instance-platform``,
  ``tenancy``, ``end-date-type``, ``instance-match-criteria``, ``reservation-type``, ``tag:KEY``,
  ``tag-key``; ``MaxResults``/``NextToken`` pages; ``MaxResults`` together with ids is refused),
  ``CancelCapacityReservation``, ``DescribeCapacityBlocks`` (for ``UltraserverType``).
* ``GetCapacityReservationUsage`` (the owner's view: units per account) and AWS RAM sharing between
  accounts (``EC2TestServer.share``): a second account (credentials from STS AssumeRole into a role of
  that account) sees the shared reservation and launches into the owner's units.
* Capacity blocks, created with :meth:`EC2TestServer.add_capacity_block` (EC2 sells them through an
  offering/purchase flow that tests don't need). Their state follows the server clock:
  ``scheduled`` before the start, ``active`` until the end, then ``expired``; EC2 terminates their
  instances 30 minutes (60 for UltraServers) before the end and so does this server.
* Reservation-aware ``RunInstances`` and instant ``CreateFleet``: ``CapacityReservationSpecification``
  (request or launch template) with preference ``capacity-reservations-only`` + target id or target
  Capacity Reservation group (``CapacityReservationResourceGroupArn``: the first member of that type
  and zone with room), ``open`` (the EC2 default: matching open reservations are used first) or ``none``;
  ``InstanceMarketOptions.MarketType=capacity-block`` gives ``InstanceLifecycle=capacity-block``.
  A launch decrements ``AvailableInstanceCount``; a full reservation answers
  ``ReservationCapacityExceeded`` (RunInstances: an HTTP 400 error; CreateFleet instant: an entry in
  the ``Errors`` list). ``TerminateInstances`` gives the unit back. CreateFleet honours
  ``ClientToken``: the same token returns the same fleet and instances.
* ``DescribeInstances`` shows ``CapacityReservationId``, ``CapacityReservationSpecification``,
  ``InstanceLifecycle`` and supports the ``capacity-reservation-id`` and ``instance-lifecycle`` filters.
* ``DescribeSpotPriceHistory`` answers from the prices set with :meth:`EC2TestServer.set_spot_price`
  (newest first, empty when none are set) instead of moto's fixed fake price for every type.
* resource-groups ``ListGroupResources`` for Capacity Reservation groups registered with
  :meth:`EC2TestServer.add_reservation_group` (moto does not implement it), in pages of
  ``MaxResults`` (at most 50) with ``NextToken``; its calls are in the call log too.
* A fault injector (:class:`FaultInjector`): the next N calls of an action answer an EC2 error
  (``RequestLimitExceeded`` with HTTP 503 as EC2 does, ``InternalError`` with 500, ...), or an
  instant CreateFleet reports an error code for every pool in its ``Errors`` list, or the answer
  to the next N calls is held back for a while after the action took effect (a slow EC2: the
  caller can be killed between the launch and its answer).
* A call log (:attr:`EC2TestServer.calls`) of every EC2 action with its parsed parameters.
* ``CreateCapacityReservationBySplitting`` and ``MoveCapacityReservationInstances`` with EC2's
  validations (their own block below).
* ``CreateInterruptibleCapacityReservationAllocation`` and ``UpdateInterruptibleCapacityReservationAllocation``
  (lend and reclaim, with the two-minute interruption warning on an SQS queue): ``ec2_server_lending.py``.

Everything here is test support, not product code.
"""

from __future__ import annotations

import copy
import fnmatch
import hashlib
import json
import logging
import secrets
import threading
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

from moto.core.parse import default_timestamp_parser as parse_timestamp
from moto.core.responses import ActionResult
from moto.ec2 import utils as moto_ec2_utils
from moto.ec2.exceptions import EC2ClientError
from moto.ec2.models import amis as moto_amis
from moto.ec2.models import ec2_backends
from moto.ec2.models.amis import Ami
from moto.ec2.models.instances import Instance
from moto.ec2.responses import EC2Response
from moto.resourcegroups import urls as resourcegroups_urls
from moto.resourcegroups.responses import ResourceGroupsResponse
from moto.server import ThreadedMotoServer
from moto.ssm.models import Parameter as SSMParameter
from moto.ssm.models import ssm_backends

from tests.support.ports import free_port

ACCOUNT_ID = "123456789012"  # moto's default account
EKS_AMI_OWNER = "602401143452"
CAPACITY_BLOCK_HOUR_PRICE = 31.464  # $ per instance-hour the test server asks for a block extension  # the account that publishes the EKS-optimized images
DEFAULT_REGION = "us-east-1"

# EC2 terminates capacity-block instances this long before the block ends.
CAPACITY_BLOCK_TERMINATION_LEAD = timedelta(minutes=30)
ULTRASERVER_TERMINATION_LEAD = timedelta(minutes=60)

_LOCK = threading.RLock()  # the server is threaded; reservation counts change under this lock


# --------------------------------------------------------------------------------------------
# Server clock, call log, faults
# --------------------------------------------------------------------------------------------


class ServerClock:
    """The time the server lives in: real time plus an offset, or a fixed instant."""

    def __init__(self) -> None:
        self._fixed: datetime | None = None
        self._offset = timedelta(0)

    def now(self) -> datetime:
        if self._fixed is not None:
            return self._fixed
        return datetime.now(timezone.utc) + self._offset

    def set(self, when: datetime | None) -> None:
        """Freeze the clock at ``when`` (aware datetime), or return to real time with ``None``."""
        self._fixed = when
        self._offset = timedelta(0)

    def advance(self, delta: timedelta) -> None:
        if self._fixed is not None:
            self._fixed += delta
        else:
            self._offset += delta


CLOCK = ServerClock()


@dataclass
class Call:
    action: str
    params: dict[str, Any]


@dataclass
class _Fault:
    action: str
    code: str
    status: int
    message: str
    remaining: int
    in_fleet_errors: bool = False
    skip: int = 0  # calls of the action answered normally before this fault starts


@dataclass
class _Delay:
    action: str
    seconds: float
    remaining: int


class FaultInjector:
    """Makes the next N calls of an action fail like EC2 does.

    ``inject("CreateFleet", "RequestLimitExceeded", count=2)`` answers the next two CreateFleet
    calls with HTTP 503 ``RequestLimitExceeded``. ``fleet_error(code, count)`` instead lets the next
    instant CreateFleet calls succeed at the HTTP level and report ``code`` for every pool in the
    response's ``Errors`` list, as EC2 does for capacity errors.
    """

    DEFAULT_STATUS = {
        "RequestLimitExceeded": 503,
        "Throttling": 400,
        "InternalError": 500,
        "ServiceUnavailable": 503,
        "Unavailable": 503,
        "UnauthorizedOperation": 403,
    }

    def __init__(self) -> None:
        self._faults: deque[_Fault] = deque()
        self._delays: deque[_Delay] = deque()
        self._released = threading.Event()
        self._lock = threading.Lock()
        self.held: list[str] = []  # actions whose answer is (or was) held back, in order

    def inject(
        self,
        action: str,
        code: str = "RequestLimitExceeded",
        *,
        count: int = 1,
        status: int | None = None,
        message: str | None = None,
        after: int = 0,
    ) -> None:
        """``after``: let that many calls of ``action`` through first (a fault in the middle of a run)."""
        with self._lock:
            self._faults.append(
                _Fault(
                    action=action,
                    code=code,
                    status=status or self.DEFAULT_STATUS.get(code, 400),
                    message=message or f"{code} (injected by the test server)",
                    remaining=count,
                    skip=after,
                )
            )

    def throttle(self, action: str, count: int = 1) -> None:
        self.inject(action, "RequestLimitExceeded", count=count)

    def fleet_error(self, code: str, *, count: int = 1, message: str | None = None) -> None:
        with self._lock:
            self._faults.append(
                _Fault(
                    action="CreateFleet",
                    code=code,
                    status=200,
                    message=message or f"{code} (injected by the test server)",
                    remaining=count,
                    in_fleet_errors=True,
                )
            )

    def delay(self, action: str, seconds: float, *, count: int = 1) -> None:
        """Hold back the answer to the next ``count`` calls of ``action`` for ``seconds`` after the
        action took effect (instances launched, units taken). :meth:`release` lets them go early."""
        with self._lock:
            self._released.clear()
            self._delays.append(_Delay(action=action, seconds=seconds, remaining=count))

    def take_delay(self, action: str) -> float | None:
        with self._lock:
            for delay in self._delays:
                if delay.action == action:
                    delay.remaining -= 1
                    if delay.remaining <= 0:
                        self._delays.remove(delay)
                    self.held.append(action)
                    return delay.seconds
        return None

    def hold(self, seconds: float) -> None:
        """Wait ``seconds`` or until :meth:`release` (called by the server thread answering)."""
        self._released.wait(seconds)

    def release(self) -> None:
        """Answer every held-back call now."""
        self._released.set()

    def clear(self) -> None:
        with self._lock:
            self._faults.clear()
            self._delays.clear()
            self.held.clear()
        self._released.set()

    def pending(self) -> int:
        with self._lock:
            return sum(f.remaining for f in self._faults)

    def take(self, action: str, *, in_fleet_errors: bool = False) -> _Fault | None:
        with self._lock:
            for fault in self._faults:
                if fault.action == action and fault.in_fleet_errors == in_fleet_errors:
                    if fault.skip > 0:
                        fault.skip -= 1
                        return None
                    fault.remaining -= 1
                    if fault.remaining <= 0:
                        self._faults.remove(fault)
                    return fault
        return None


FAULTS = FaultInjector()
CALLS: list[Call] = []


def _aware(value: Any) -> datetime | None:
    """moto parses timestamps into naive UTC datetimes (or leaves strings); make them aware."""
    if value is None or value == "":
        return None
    if isinstance(value, str):
        value = datetime.fromisoformat(value.replace("Z", "+00:00"))
    return value if value.tzinfo else value.replace(tzinfo=timezone.utc)


def _error_body(code: str, message: str) -> str:
    return (
        '<?xml version="1.0" encoding="UTF-8"?>'
        f"<Response><Errors><Error><Code>{code}</Code><Message>{message}</Message></Error></Errors>"
        f"<RequestID>{secrets.token_hex(16)}</RequestID></Response>"
    )


# --------------------------------------------------------------------------------------------
# Reservation state, kept on moto's backend object so that moto's reset clears it too
# --------------------------------------------------------------------------------------------


@dataclass
class _CapacityState:
    reservations: dict[str, dict[str, Any]] = field(default_factory=dict)  # EC2-shaped dicts
    members: dict[str, set[str]] = field(default_factory=dict)  # reservation id -> instance ids
    capacity_blocks: dict[str, dict[str, Any]] = field(default_factory=dict)
    ultraserver: dict[str, str] = field(default_factory=dict)  # reservation id -> UltraserverType
    reservation_tokens: dict[str, str] = field(default_factory=dict)
    fleet_tokens: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)
    insufficient: set[tuple[str, str, str]] = field(default_factory=set)  # type, zone, market
    spot_prices: list[dict[str, Any]] = field(default_factory=list)
    extension_offerings: dict[str, tuple[str, int, str]] = field(default_factory=dict)  # id -> (block, hours, fee)
    extensions: list[dict[str, Any]] = field(default_factory=list)  # PurchaseCapacityBlockExtension history


def _backend(account_id: str = ACCOUNT_ID, region: str = DEFAULT_REGION) -> Any:
    return ec2_backends[account_id][region]


# AWS RAM shares: reservation id -> the accounts it is shared with (its owner's backend keeps it).
SHARES: dict[str, set[str]] = {}


def _shared_with(backend: Any) -> dict[str, dict[str, Any]]:
    """The reservations other accounts share with this backend's account (the owner's dicts: a
    launch from here takes the owner's units)."""
    found = {}
    for rid, accounts in SHARES.items():
        if backend.account_id not in accounts:
            continue
        for account_id in list(ec2_backends.keys()):
            other = ec2_backends[account_id][backend.region_name]
            r = _state(other).reservations.get(rid) if other is not backend else None
            if r is not None:
                found[rid] = r
    return found


def _state(backend: Any) -> _CapacityState:
    st = backend.__dict__.get("_karpweb_capacity")
    if st is None:
        st = backend.__dict__["_karpweb_capacity"] = _CapacityState()
    return st


def _zone_id(backend: Any, zone: str) -> str | None:
    for zones in backend.zones.values():
        for z in zones:
            if z.name == zone:
                return z.zone_id
    return None


def _check_zone(backend: Any, zone: str) -> None:
    if _zone_id(backend, zone) is None:
        raise EC2ClientError(
            "InvalidParameterValue", f"Invalid availability zone: [{zone}]"
        )


def _new_reservation(
    backend: Any,
    *,
    instance_type: str,
    zone: str,
    count: int,
    owner_id: str,
    platform: str = "Linux/UNIX",
    tenancy: str = "default",
    match: str = "open",
    end: datetime | None = None,
    start: datetime | None = None,
    tags: dict[str, str] | None = None,
    reservation_type: str = "default",
    capacity_block_id: str | None = None,
    interruptible: bool = False,
    ebs_optimized: bool = False,
) -> dict[str, Any]:
    _check_zone(backend, zone)
    if count < 1:
        raise EC2ClientError("InvalidParameterValue", "InstanceCount must be at least 1")
    now = CLOCK.now()
    rid = "cr-" + secrets.token_hex(9)[:17]
    reservation = {
        "CapacityReservationId": rid,
        "OwnerId": owner_id,
        "CapacityReservationArn": f"arn:aws:ec2:{backend.region_name}:{owner_id}:capacity-reservation/{rid}",
        "AvailabilityZoneId": _zone_id(backend, zone),
        "InstanceType": instance_type,
        "InstancePlatform": platform,
        "AvailabilityZone": zone,
        "Tenancy": tenancy,
        "TotalInstanceCount": count,
        "AvailableInstanceCount": count,
        "EbsOptimized": ebs_optimized,
        "EphemeralStorage": False,
        "State": "active",
        "StartDate": start or now,
        "EndDate": end,
        "EndDateType": "limited" if end else "unlimited",
        "InstanceMatchCriteria": match,
        "CreateDate": now,
        "Tags": [{"Key": k, "Value": v} for k, v in (tags or {}).items()],
        "ReservationType": reservation_type,
        "DeliveryPreference": "fixed",
        "Interruptible": interruptible,
    }
    if capacity_block_id:
        reservation["CapacityBlockId"] = capacity_block_id
    if start is not None and start > now:
        reservation["State"] = "scheduled"
    st = _state(backend)
    st.reservations[rid] = reservation
    st.members[rid] = set()
    return reservation


def _new_capacity_block(backend: Any, instance_type: str, zone: str, count: int, *, start: datetime, end: datetime,
                        ultraserver_type: str | None = None, tags: dict[str, str] | None = None) -> dict[str, Any]:
    """A Capacity Block's reservation (``capacity-block``, targeted, with an end date) and its DescribeCapacityBlocks
    record, as EC2 makes them when one is bought."""
    with _LOCK:
        block_id = "cb-" + secrets.token_hex(9)[:17]
        r = _new_reservation(backend, instance_type=instance_type, zone=zone, count=count, owner_id=backend.account_id,
                             match="targeted", start=start, end=end, tags=tags, reservation_type="capacity-block",
                             capacity_block_id=block_id)
        st = _state(backend)
        rid = r["CapacityReservationId"]
        block: dict[str, Any] = {"CapacityBlockId": block_id, "AvailabilityZone": zone,
                                 "AvailabilityZoneId": r["AvailabilityZoneId"], "CapacityReservationIds": [rid],
                                 "StartDate": start, "EndDate": end, "CreateDate": CLOCK.now(), "State": r["State"],
                                 "Tags": r["Tags"]}
        if ultraserver_type:
            block["UltraserverType"] = ultraserver_type
            st.ultraserver[rid] = ultraserver_type
        st.capacity_blocks[block_id] = block
        return r


def _release_members(backend: Any, st: _CapacityState, rid: str, *, terminate: bool) -> None:
    """A reservation ended: its instances leave it (ODCR) or are terminated (capacity block)."""
    for instance_id in sorted(st.members.get(rid, set())):
        instance = backend.get_instance_by_id(instance_id)
        if instance is None or instance.state == "terminated":
            continue
        if terminate:
            instance.terminate()
        else:
            instance.capacity_reservation_id = None
    st.members[rid] = set()


def _refresh(backend: Any) -> None:
    """Move reservations along the server clock: scheduled -> active -> expired."""
    st = _state(backend)
    now = CLOCK.now()
    with _LOCK:
        for rid, r in st.reservations.items():
            if r["State"] == "scheduled" and r["StartDate"] <= now:
                r["State"] = "active"
            if r["State"] not in ("active", "scheduled"):
                continue
            end = r.get("EndDate")
            if end is None:
                continue
            if r["ReservationType"] == "capacity-block":
                lead = (
                    ULTRASERVER_TERMINATION_LEAD
                    if st.ultraserver.get(rid)
                    else CAPACITY_BLOCK_TERMINATION_LEAD
                )
                if now >= end - lead:
                    _release_members(backend, st, rid, terminate=True)
            if now >= end:
                r["State"] = "expired"
                r["AvailableInstanceCount"] = 0
                _release_members(backend, st, rid, terminate=r["ReservationType"] == "capacity-block")
        for cb in st.capacity_blocks.values():
            states = {st.reservations[i]["State"] for i in cb["CapacityReservationIds"]}
            cb["State"] = states.pop() if len(states) == 1 else cb["State"]


def _end_reservation(backend: Any, rid: str, state: str) -> dict[str, Any]:
    st = _state(backend)
    with _LOCK:
        r = st.reservations.get(rid)
        if r is None:
            raise EC2ClientError(
                "InvalidCapacityReservationId.NotFound",
                f"The capacity reservation ID '{rid}' does not exist",
            )
        r["State"] = state
        r["AvailableInstanceCount"] = 0
        _release_members(backend, st, rid, terminate=r["ReservationType"] == "capacity-block")
        return r


# --------------------------------------------------------------------------------------------
# Future-dated Capacity Reservations (issue #37): StartDate, CommitmentDuration, DeliveryPreference
# --------------------------------------------------------------------------------------------

# EC2's bounds: a commitment of at least 14 days; "fixed" delivers every unit at the start.
MIN_COMMITMENT_SECONDS = 14 * 24 * 3600
DELIVERY_PREFERENCES = ("fixed", "incremental")


def _check_future_dated(start: Any, duration: Any, delivery: Any) -> None:
    """CreateCapacityReservation's rules for a future-dated request, checked before anything is stored."""
    if delivery and delivery not in DELIVERY_PREFERENCES:
        raise EC2ClientError("InvalidParameterValue", f"DeliveryPreference must be one of {', '.join(DELIVERY_PREFERENCES)}")
    if duration is not None and not start:
        raise EC2ClientError("InvalidParameterCombination", "CommitmentDuration requires StartDate")
    when = _aware(start) if start else None
    if when is None:
        return
    if when <= CLOCK.now():
        raise EC2ClientError("InvalidParameterValue", "StartDate must be in the future")
    if duration is None:
        raise EC2ClientError("MissingParameter", "CommitmentDuration is required for a future-dated Capacity Reservation")
    if int(duration) < MIN_COMMITMENT_SECONDS:
        raise EC2ClientError("InvalidParameterValue", f"CommitmentDuration must be at least {MIN_COMMITMENT_SECONDS} seconds")


def _future_dated(r: dict[str, Any], start: Any, duration: Any, delivery: Any) -> None:
    """A future-dated reservation: scheduled until its start (moved on by ``_refresh`` along the server
    clock), with its commitment (CommitmentInfo: the units asked for, until start + duration) and its
    delivery preference. No unit is in use before the start, so all of them are available from it."""
    if duration is None:
        return
    when = _aware(start)
    r["State"] = "scheduled"
    r["DeliveryPreference"] = delivery or "fixed"
    r["CommitmentInfo"] = {"CommittedInstanceCount": r["TotalInstanceCount"],
                           "CommitmentEndDate": when + timedelta(seconds=int(duration))}


# --------------------------------------------------------------------------------------------
# Admission: which reservation, if any, an instance launch uses
# --------------------------------------------------------------------------------------------


@dataclass
class _Placement:
    preference: str  # open | none | capacity-reservations-only
    target_id: str | None
    market_type: str | None  # spot | capacity-block | None
    target_group: str | None = None  # CapacityReservationResourceGroupArn


def _placement_from(spec: dict[str, Any], market: dict[str, Any]) -> _Placement:
    target = spec.get("CapacityReservationTarget") or {}
    preference = spec.get("CapacityReservationPreference") or ("capacity-reservations-only" if target else "open")
    return _Placement(preference, target.get("CapacityReservationId"), (market or {}).get("MarketType"),
                      target.get("CapacityReservationResourceGroupArn"))


def _admit_group(backend: Any, instance_type: str, zone: str, placement: _Placement, count: int) -> dict[str, Any]:
    """A launch targeting a Capacity Reservation group: the first member in the group's order that
    is an active ODCR of this type and zone with room (EC2 picks one; which one is not specified)."""
    st = _state(backend)
    if placement.preference == "none":
        raise EC2ClientError(
            "InvalidParameterCombination", "A capacity reservation target cannot be combined with the preference 'none'"
        )
    if placement.target_group not in RESOURCE_GROUPS:
        raise EC2ClientError("InvalidParameterValue", f"The resource group {placement.target_group} does not exist")
    if placement.market_type in ("capacity-block", "spot"):
        raise EC2ClientError("InvalidParameterCombination", "Capacity Reservation groups hold On-Demand Capacity Reservations only")
    for rid in RESOURCE_GROUPS[placement.target_group]:
        r = st.reservations.get(rid)
        if (
            r is not None
            and r["State"] == "active"
            and r["ReservationType"] == "default"
            and r["InstanceType"] == instance_type
            and r["AvailabilityZone"] == zone
            and r["AvailableInstanceCount"] >= count
        ):
            r["AvailableInstanceCount"] -= count
            return r
    raise EC2ClientError(
        "ReservationCapacityExceeded",
        f"There is insufficient capacity in the Capacity Reservation group {placement.target_group} "
        f"for {instance_type} in {zone}",
    )


def _admit(
    backend: Any, instance_type: str, zone: str, placement: _Placement, count: int = 1
) -> dict[str, Any] | None:
    """Take ``count`` units for a launch; return the reservation used, or raise the EC2 error."""
    st = _state(backend)
    _refresh(backend)
    if placement.target_group and not placement.target_id:
        return _admit_group(backend, instance_type, zone, placement, count)
    if placement.target_id:
        if placement.preference == "none":
            raise EC2ClientError(
                "InvalidParameterCombination",
                "A capacity reservation target cannot be combined with the preference 'none'",
            )
        r = st.reservations.get(placement.target_id) or _shared_with(backend).get(placement.target_id)
        if r is None:
            raise EC2ClientError(
                "InvalidCapacityReservationId.NotFound",
                f"The capacity reservation ID '{placement.target_id}' does not exist",
            )
        if r["State"] != "active":
            raise EC2ClientError(
                "InvalidParameterValue",
                f"Capacity Reservation {r['CapacityReservationId']} is not active (state {r['State']})",
            )
        if r["InstanceType"] != instance_type or r["AvailabilityZone"] != zone:
            raise EC2ClientError(
                "InvalidParameterCombination",
                f"Capacity Reservation {r['CapacityReservationId']} is for {r['InstanceType']} in "
                f"{r['AvailabilityZone']}, not {instance_type} in {zone}",
            )
        is_block = r["ReservationType"] == "capacity-block"
        if is_block != (placement.market_type == "capacity-block"):
            raise EC2ClientError(
                "InvalidParameterCombination",
                "Capacity Blocks are launched with MarketType capacity-block and only into a Capacity Block",
            )
        if bool(r.get("Interruptible")) != (placement.market_type == "interruptible-capacity-reservation"):
            raise EC2ClientError(
                "InvalidParameterCombination",
                "Interruptible Capacity Reservations are launched with MarketType interruptible-capacity-reservation",
            )
        if r["AvailableInstanceCount"] < count:
            raise EC2ClientError(
                "ReservationCapacityExceeded",
                f"There is insufficient capacity in the Capacity Reservation {r['CapacityReservationId']}",
            )
        r["AvailableInstanceCount"] -= count
        return r
    if placement.market_type in ("capacity-block", "interruptible-capacity-reservation"):
        raise EC2ClientError(
            "InvalidParameterCombination", f"MarketType {placement.market_type} needs a capacity reservation target"
        )
    if placement.preference in ("open", "capacity-reservations-only") and placement.market_type != "spot":
        for r in st.reservations.values():
            if (
                r["State"] == "active"
                and r["InstanceMatchCriteria"] == "open"
                and r["ReservationType"] == "default"
                and r["OwnerId"] == backend.account_id
                and r["InstanceType"] == instance_type
                and r["AvailabilityZone"] == zone
                and r["AvailableInstanceCount"] >= count
            ):
                r["AvailableInstanceCount"] -= count
                return r
        if placement.preference == "capacity-reservations-only":
            raise EC2ClientError(
                "ReservationCapacityExceeded", "There is no matching open Capacity Reservation with free capacity"
            )
    market = "spot" if placement.market_type == "spot" else "on-demand"
    if (instance_type, zone, market) in st.insufficient:
        raise EC2ClientError(
            "InsufficientInstanceCapacity",
            f"We currently do not have sufficient {instance_type} capacity in the Availability Zone "
            f"you requested ({zone}).",
        )
    return None


def _give_back(r: dict[str, Any] | None, count: int) -> None:
    if r is not None and r["State"] == "active":
        r["AvailableInstanceCount"] = min(r["TotalInstanceCount"], r["AvailableInstanceCount"] + count)


def _annotate(backend: Any, instance: Instance, r: dict[str, Any] | None, placement: _Placement) -> None:
    spec: dict[str, Any] = {"CapacityReservationPreference": placement.preference}
    if placement.target_id:
        spec["CapacityReservationTarget"] = {"CapacityReservationId": placement.target_id}
    elif placement.target_group:
        spec["CapacityReservationTarget"] = {"CapacityReservationResourceGroupArn": placement.target_group}
    instance.capacity_reservation_specification = spec
    instance.capacity_reservation_id = r["CapacityReservationId"] if r else None
    if placement.market_type == "capacity-block":
        instance.lifecycle = "capacity-block"
        instance.capacity_block_id = r.get("CapacityBlockId") if r else None
    elif placement.market_type == "interruptible-capacity-reservation":
        instance.lifecycle = "interruptible-capacity-reservation"
    elif placement.market_type == "spot":
        instance.lifecycle = "spot"
        instance.spot_instance_request_id = "sir-" + secrets.token_hex(4)
    else:
        instance.lifecycle = None
    if r is not None:
        _state(backend).members.setdefault(r["CapacityReservationId"], set()).add(instance.id)


def _zone_for(backend: Any, subnet_id: str | None, zone: str | None) -> str:
    if subnet_id:
        return backend.get_subnet(subnet_id).availability_zone
    return zone or backend.region_name + "a"


# --------------------------------------------------------------------------------------------
# Patches on moto's Instance model and EC2 response class
# --------------------------------------------------------------------------------------------

Instance.capacity_reservation_id = None
Instance.capacity_reservation_specification = {"CapacityReservationPreference": "open"}
Instance.capacity_block_id = None
Instance.spot_instance_request_id = None

_original_terminate = Instance.terminate


def _terminate(self: Instance) -> Any:
    if self.state != "terminated" and self.capacity_reservation_id:
        st = _state(self.ec2_backend)
        with _LOCK:
            r = st.reservations.get(self.capacity_reservation_id)
            _give_back(r, 1)
            st.members.get(self.capacity_reservation_id, set()).discard(self.id)
    return _original_terminate(self)


Instance.terminate = _terminate

moto_ec2_utils.filter_dict_attribute_mapping.setdefault("capacity-reservation-id", "capacity_reservation_id")
moto_ec2_utils.filter_dict_attribute_mapping.setdefault("instance-lifecycle", "lifecycle")


_RESERVATION_FILTERS = {
    "state": "State",
    "owner-id": "OwnerId",
    "instance-type": "InstanceType",
    "availability-zone": "AvailabilityZone",
    "instance-platform": "InstancePlatform",
    "tenancy": "Tenancy",
    "end-date-type": "EndDateType",
    "instance-match-criteria": "InstanceMatchCriteria",
    "reservation-type": "ReservationType",
}


def _matches(r: dict[str, Any], name: str, values: list[str]) -> bool:
    tags = {t["Key"]: t["Value"] for t in r["Tags"]}
    if name in _RESERVATION_FILTERS:
        return str(r.get(_RESERVATION_FILTERS[name])) in values
    if name == "tag-key":
        return any(fnmatch.fnmatchcase(k, v) for k in tags for v in values)
    if name.startswith("tag:"):
        key = name[4:]
        return key in tags and any(fnmatch.fnmatchcase(tags[key], v) for v in values)
    raise EC2ClientError("InvalidParameterValue", f"The filter '{name}' is invalid")


_SPOT_FILTERS = {
    "instance-type": "InstanceType",
    "availability-zone": "AvailabilityZone",
    "product-description": "ProductDescription",
}


class _CapacityReservationActions(EC2Response):
    """The added actions; their methods are copied onto moto's EC2Response below."""

    def create_capacity_reservation(self) -> ActionResult:
        self.error_on_dryrun()
        backend = self.ec2_backend
        st = _state(backend)
        token = self._get_param("ClientToken")
        with _LOCK:
            if token and token in st.reservation_tokens:
                return ActionResult({"CapacityReservation": st.reservations[st.reservation_tokens[token]]})
            end = _aware(self._get_param("EndDate"))
            end_type = self._get_param("EndDateType") or ("limited" if end else "unlimited")
            if end_type == "limited" and not end:
                raise EC2ClientError("InvalidParameterValue", "EndDate is required when EndDateType is limited")
            if end is not None and end <= CLOCK.now():
                raise EC2ClientError("InvalidParameterValue", "EndDate must be in the future")
            _check_future_dated(self._get_param("StartDate"), self._get_param("CommitmentDuration"),
                                self._get_param("DeliveryPreference"))
            zone = self._get_param("AvailabilityZone")
            if not zone and self._get_param("AvailabilityZoneId"):
                zone_id = self._get_param("AvailabilityZoneId")
                zone = next(z.name for zs in backend.zones.values() for z in zs if z.zone_id == zone_id)
            tags = self._parse_tag_specification().get("capacity-reservation", {})
            r = _new_reservation(
                backend,
                instance_type=self._get_param("InstanceType"),
                zone=zone,
                count=int(self._get_param("InstanceCount")),
                owner_id=self.current_account,
                platform=self._get_param("InstancePlatform"),
                tenancy=self._get_param("Tenancy") or "default",
                match=self._get_param("InstanceMatchCriteria") or "open",
                end=end,
                start=_aware(self._get_param("StartDate")),
                tags=tags,
                ebs_optimized=bool(self._get_param("EbsOptimized")),
            )
            _future_dated(r, self._get_param("StartDate"), self._get_param("CommitmentDuration"),
                          self._get_param("DeliveryPreference"))
            if token:
                st.reservation_tokens[token] = r["CapacityReservationId"]
            return ActionResult({"CapacityReservation": r})

    def describe_capacity_reservations(self) -> ActionResult:
        self.error_on_dryrun()
        backend = self.ec2_backend
        st = _state(backend)
        ids = self._get_param("CapacityReservationIds", [])
        max_results = self._get_param("MaxResults")
        if ids and max_results is not None:
            raise EC2ClientError(
                "InvalidParameterCombination",
                "The parameter capacityReservationIdSet cannot be used with the parameter maxResults",
            )
        if max_results is not None and not 1 <= int(max_results) <= 1000:
            raise EC2ClientError("InvalidParameterValue", "MaxResults must be between 1 and 1000")
        _refresh(backend)
        with _LOCK:
            visible = {**_shared_with(backend), **st.reservations}
            if ids:
                missing = [i for i in ids if i not in visible]
                if missing:
                    raise EC2ClientError(
                        "InvalidCapacityReservationId.NotFound",
                        f"The capacity reservation ID '{missing[0]}' does not exist",
                    )
                found = [visible[i] for i in ids]
            else:
                found = list(visible.values())
            for name, values in self._filters_from_querystring().items():
                found = [r for r in found if _matches(r, name, values)]
            found = sorted(found, key=lambda r: (r["CreateDate"], r["CapacityReservationId"]))
            start = int(self._get_param("NextToken") or 0)
            stop = len(found) if max_results is None else start + int(max_results)
            answered = copy.deepcopy(found[start:stop])
            for r in answered:  # what running instances use, as EC2 counts it when it answers
                used = r["TotalInstanceCount"] - r["AvailableInstanceCount"]
                r["CapacityAllocations"] = [{"AllocationType": "used", "Count": used}] if used > 0 else []
            result: dict[str, Any] = {"CapacityReservations": answered}
            if stop < len(found):
                result["NextToken"] = str(stop)
            return ActionResult(result)

    def get_capacity_reservation_usage(self) -> ActionResult:
        """EC2's answer to the owner: the reservation's counts and, per account that runs instances in
        it (the owner's and those it is shared with), how many. Another account gets
        InvalidCapacityReservationId.NotFound, as it cannot read the owner's usage."""
        self.error_on_dryrun()
        backend = self.ec2_backend
        rid = self._get_param("CapacityReservationId")
        _refresh(backend)
        with _LOCK:
            r = _state(backend).reservations.get(rid)
            if r is None:
                raise EC2ClientError("InvalidCapacityReservationId.NotFound",
                                     f"The capacity reservation ID '{rid}' does not exist")
            usages = []
            for account_id in sorted(ec2_backends.keys()):
                other = ec2_backends[account_id][backend.region_name]
                running = [i for i in _state(other).members.get(rid, set())
                           if (inst := other.get_instance_by_id(i)) is not None and inst.state not in ("terminated",)]
                if running:
                    usages.append({"AccountId": account_id, "UsedInstanceCount": len(running)})
            return ActionResult({
                "CapacityReservationId": rid, "InstanceType": r["InstanceType"],
                "TotalInstanceCount": r["TotalInstanceCount"], "AvailableInstanceCount": r["AvailableInstanceCount"],
                "State": r["State"], "InstanceUsages": usages,
            })

    def cancel_capacity_reservation(self) -> ActionResult:
        self.error_on_dryrun()
        rid = self._get_param("CapacityReservationId")
        r = _state(self.ec2_backend).reservations.get(rid)
        if r is not None and r["ReservationType"] == "capacity-block":
            raise EC2ClientError("InvalidParameterValue", "Capacity Blocks cannot be cancelled")
        if r is not None and r["State"] not in ("active", "scheduled"):
            raise EC2ClientError("InvalidParameterValue", f"Capacity Reservation {rid} is {r['State']}")
        _end_reservation(self.ec2_backend, rid, "cancelled")
        return ActionResult({"Return": True})

    def modify_capacity_reservation(self) -> ActionResult:
        """EC2's rules: an ODCR only, active, never fewer instances than run in it, an end in the future."""
        self.error_on_dryrun()
        rid = self._get_param("CapacityReservationId")
        r = _state(self.ec2_backend).reservations.get(rid)
        if r is None:
            raise EC2ClientError("InvalidCapacityReservationId.NotFound", f"The capacity reservation ID '{rid}' does not exist")
        if r["ReservationType"] == "capacity-block":
            raise EC2ClientError("InvalidParameterValue", "Capacity Blocks cannot be modified")
        if r["State"] != "active":
            raise EC2ClientError("IncorrectState", f"Capacity Reservation {rid} is {r['State']}")
        count = self._get_param("InstanceCount")
        if count is not None:
            count = int(count)
            used = r["TotalInstanceCount"] - r["AvailableInstanceCount"]
            if count < used:
                raise EC2ClientError("InvalidParameterValue",
                                     f"The instance count {count} is below the {used} instances running in {rid}")
            r["AvailableInstanceCount"] += count - r["TotalInstanceCount"]
            r["TotalInstanceCount"] = count
        end = self._get_param("EndDate")
        if end is not None:
            end_at = _aware(end)
            if end_at <= CLOCK.now():
                raise EC2ClientError("InvalidParameterValue", "The end date must be in the future")
            r["EndDate"], r["EndDateType"] = end_at, "limited"
        elif self._get_param("EndDateType") == "unlimited":
            r["EndDate"], r["EndDateType"] = None, "unlimited"
        return ActionResult({"Return": True})

    def describe_capacity_block_extension_offerings(self) -> ActionResult:
        """Offerings for an active block more than an hour before its end (EC2's window), 1, 2 or 7 days."""
        self.error_on_dryrun()
        st = _state(self.ec2_backend)
        rid = self._get_param("CapacityReservationId")
        r = st.reservations.get(rid)
        if r is None or r["ReservationType"] != "capacity-block":
            raise EC2ClientError("InvalidCapacityReservationId.NotFound", f"The capacity block ID '{rid}' does not exist")
        _refresh(self.ec2_backend)
        offers = []
        if r["State"] == "active" and r["EndDate"] - CLOCK.now() > timedelta(hours=1):
            wanted = self._get_param("CapacityBlockExtensionDurationHours")
            for hours in (24, 48, 168):
                if wanted and int(wanted) != hours:
                    continue
                seed = f"{rid}/{hours}/{r['EndDate'].isoformat()}"
                offer_id = f"cbe-{hashlib.sha256(seed.encode()).hexdigest()[:17]}"
                fee = hours * r["TotalInstanceCount"] * CAPACITY_BLOCK_HOUR_PRICE
                offers.append({"CapacityBlockExtensionOfferingId": offer_id, "InstanceType": r["InstanceType"],
                               "InstanceCount": r["TotalInstanceCount"], "AvailabilityZone": r["AvailabilityZone"],
                               "StartDate": r["EndDate"], "CapacityBlockExtensionStartDate": r["EndDate"],
                               "CapacityBlockExtensionEndDate": r["EndDate"] + timedelta(hours=hours),
                               "CapacityBlockExtensionDurationHours": hours, "UpfrontFee": f"{fee:.2f}",
                               "CurrencyCode": "USD", "Tenancy": "default"})
                st.extension_offerings[offer_id] = (rid, hours, f"{fee:.2f}")
        return ActionResult({"CapacityBlockExtensionOfferings": offers})

    def purchase_capacity_block_extension(self) -> ActionResult:
        """The block ends later; the payment is pending for a minute of server time, then succeeds."""
        self.error_on_dryrun()
        st = _state(self.ec2_backend)
        offer_id, rid = self._get_param("CapacityBlockExtensionOfferingId"), self._get_param("CapacityReservationId")
        offer = st.extension_offerings.get(offer_id)
        if offer is None or offer[0] != rid:
            raise EC2ClientError("InvalidParameterValue", f"The offering {offer_id} is not an extension of {rid}")
        r = st.reservations[rid]
        _refresh(self.ec2_backend)
        if r["State"] != "active" or r["EndDate"] - CLOCK.now() <= timedelta(hours=1):
            raise EC2ClientError("InvalidParameterValue", f"Capacity Block {rid} can no longer be extended")
        hours, fee = offer[1], offer[2]
        start = r["EndDate"]
        r["EndDate"] = start + timedelta(hours=hours)
        del st.extension_offerings[offer_id]  # an offering is bought once
        record = {"CapacityReservationId": rid, "InstanceType": r["InstanceType"], "InstanceCount": r["TotalInstanceCount"],
                  "AvailabilityZone": r["AvailabilityZone"], "CapacityBlockExtensionOfferingId": offer_id,
                  "CapacityBlockExtensionDurationHours": hours, "CapacityBlockExtensionStatus": "payment-pending",
                  "CapacityBlockExtensionPurchaseDate": CLOCK.now(), "CapacityBlockExtensionStartDate": start,
                  "CapacityBlockExtensionEndDate": r["EndDate"], "UpfrontFee": fee, "CurrencyCode": "USD"}
        st.extensions.append(record)
        return ActionResult({"CapacityBlockExtensions": [record]})

    def describe_capacity_block_extension_history(self) -> ActionResult:
        self.error_on_dryrun()
        st = _state(self.ec2_backend)
        ids = self._get_param("CapacityReservationIds", [])
        for record in st.extensions:
            if record["CapacityBlockExtensionStatus"] == "payment-pending" and \
                    CLOCK.now() - record["CapacityBlockExtensionPurchaseDate"] >= timedelta(minutes=1):
                record["CapacityBlockExtensionStatus"] = "payment-succeeded"
        return ActionResult({"CapacityBlockExtensions": [r for r in st.extensions if not ids or r["CapacityReservationId"] in ids]})

    def describe_capacity_blocks(self) -> ActionResult:
        self.error_on_dryrun()
        st = _state(self.ec2_backend)
        _refresh(self.ec2_backend)
        ids = self._get_param("CapacityBlockIds", [])
        blocks = [b for b in st.capacity_blocks.values() if not ids or b["CapacityBlockId"] in ids]
        return ActionResult({"CapacityBlocks": copy.deepcopy(blocks)})

    def describe_spot_price_history(self) -> ActionResult:
        st = _state(self.ec2_backend)
        types = set(self._get_param("InstanceTypes", []))
        products = set(self._get_param("ProductDescriptions", []))
        zone = self._get_param("AvailabilityZone")
        filters = {_SPOT_FILTERS[k]: set(v) for k, v in self._filters_from_querystring().items() if k in _SPOT_FILTERS}
        rows = [
            p
            for p in st.spot_prices
            if (not types or p["InstanceType"] in types)
            and (not products or p["ProductDescription"] in products)
            and (not zone or p["AvailabilityZone"] == zone)
            and all(p[key] in values for key, values in filters.items())
        ]
        rows.sort(key=lambda p: p["Timestamp"], reverse=True)
        start = int(self._get_param("NextToken") or 0)
        max_results = int(self._get_param("MaxResults") or 1000)
        result: dict[str, Any] = {"SpotPriceHistory": rows[start : start + max_results]}
        if start + max_results < len(rows):
            result["NextToken"] = str(start + max_results)
        return ActionResult(result)

    def run_instances(self) -> ActionResult:
        backend = self.ec2_backend
        spec = self._get_param("CapacityReservationSpecification") or {}
        market = self._get_param("InstanceMarketOptions") or {}
        lt_arg = self._get_param("LaunchTemplate") or {}
        if lt_arg:
            data = backend._get_template_from_args(lt_arg).data
            spec = spec or data.get("CapacityReservationSpecification") or {}
            market = market or data.get("InstanceMarketOptions") or {}
            instance_type = self._get_param("InstanceType") or data.get("InstanceType", "m1.small")
        else:
            instance_type = self._get_param("InstanceType", "m1.small")
        placement = _placement_from(spec, market)
        zone = _zone_for(backend, self._get_param("SubnetId"), self._get_param("Placement.AvailabilityZone"))
        count = int(self._get_param("MinCount", if_none="1"))
        with _LOCK:
            r = _admit(backend, instance_type, zone, placement, count)
            try:
                result = _original_run_instances(self)
            except Exception:
                _give_back(r, count)
                raise
            for instance in result.result.instances:
                _annotate(backend, instance, r, placement)
        return result

    def create_fleet(self) -> ActionResult:
        if self._get_param("Type") != "instant":
            return _original_create_fleet(self)
        self.error_on_dryrun()
        backend = self.ec2_backend
        st = _state(backend)
        token = self._get_param("ClientToken")
        fingerprint = hashlib.sha256(
            json.dumps({k: v for k, v in self.querystring.items() if k != "ClientToken"}, sort_keys=True, default=str).encode()
        ).hexdigest()
        with _LOCK:
            if token and token in st.fleet_tokens:
                seen_fingerprint, seen = st.fleet_tokens[token]
                if seen_fingerprint != fingerprint:
                    raise EC2ClientError(
                        "IdempotentParameterMismatch",
                        "The client token has already been used with different parameters",
                    )
                return ActionResult(copy.deepcopy(seen))
            result = _instant_fleet(self, backend)
            if token:
                st.fleet_tokens[token] = (fingerprint, copy.deepcopy(result))
            return ActionResult(result)


def _instant_fleet(resp: EC2Response, backend: Any) -> dict[str, Any]:
    """An instant fleet: try the pools in priority order until the target capacity is launched."""
    target = resp._get_param("TargetCapacitySpecification") or {}
    total = int(target.get("TotalTargetCapacity", 1))
    default_type = target.get("DefaultTargetCapacityType") or "on-demand"
    tag_specs = resp._get_param("TagSpecifications", [])
    instance_tags = moto_ec2_utils.convert_tag_spec(tag_specs).get("instance", {})
    fleet_id = moto_ec2_utils.random_fleet_id()

    pools = []
    for config in resp._get_param("LaunchTemplateConfigs", []):
        lt_spec = dict(config["LaunchTemplateSpecification"])
        lt_arg = {k: v for k, v in lt_spec.items() if k in ("LaunchTemplateId", "LaunchTemplateName", "Version")}
        if "LaunchTemplateId" in lt_arg and not backend.describe_launch_templates(template_ids=[lt_arg["LaunchTemplateId"]]):
            # EC2's answer for a deleted template (moto's own would be a 500).
            raise EC2ClientError("InvalidLaunchTemplateId.NotFound",
                                 f"The specified launch template, with template ID {lt_arg['LaunchTemplateId']}, does not exist.")
        version = backend._get_template_from_args(lt_arg)
        lt_spec["LaunchTemplateId"] = version.template.id
        lt_spec["Version"] = str(version.number)
        for override in config.get("Overrides") or [{}]:
            data = dict(version.data)
            data.update({k: v for k, v in override.items() if k != "Priority"})
            pools.append((float(override.get("Priority", 0) or 0), len(pools), lt_spec, override, data))
    pools.sort(key=lambda p: (p[0], p[1]))

    lifecycle = {"spot": "spot", "capacity-block": "capacity-block"}.get(default_type, "on-demand")
    injected = FAULTS.take("CreateFleet", in_fleet_errors=True)
    instances: list[dict[str, Any]] = []
    errors: list[dict[str, Any]] = []
    launched = 0
    for _, _, lt_spec, override, data in pools:
        if launched >= total:
            break
        lt_and_overrides = {"LaunchTemplateSpecification": lt_spec, "Overrides": override}
        market = dict(data.get("InstanceMarketOptions") or {})
        if default_type == "spot":
            market["MarketType"] = "spot"
        elif default_type == "capacity-block" and not market:
            market["MarketType"] = "capacity-block"
        placement = _placement_from(data.get("CapacityReservationSpecification") or {}, market)
        instance_type = data.get("InstanceType")
        try:
            if injected is not None:
                raise EC2ClientError(injected.code, injected.message)
            zone = _zone_for(backend, data.get("SubnetId"), data.get("AvailabilityZone")
                             or (data.get("Placement") or {}).get("AvailabilityZone"))
            r = _admit(backend, instance_type, zone, placement)
        except EC2ClientError as err:
            errors.append({"LaunchTemplateAndOverrides": lt_and_overrides, "Lifecycle": lifecycle,
                           "ErrorCode": err.code, "ErrorMessage": err.message})
            continue
        reservation = backend.run_instances(
            data.get("ImageId"),
            1,
            data.get("UserData"),
            [],
            instance_type=instance_type,
            is_instance_type_default=False,
            placement=None if data.get("SubnetId") else zone,
            subnet_id=data.get("SubnetId"),
            region_name=backend.region_name,
            security_group_ids=data.get("SecurityGroupIds") or [
                group for nic in data.get("NetworkInterfaces") or [] for group in nic.get("Groups") or []],
            tags={"instance": instance_tags},
            launch_template={"LaunchTemplateId": lt_spec["LaunchTemplateId"], "Version": lt_spec["Version"]},
            client_token=resp._get_param("ClientToken"),
        )
        instance = reservation.instances[0]
        instance.add_tags({"aws:ec2:fleet-id": fleet_id})
        _annotate(backend, instance, r, placement)
        launched += 1
        instances.append({"LaunchTemplateAndOverrides": lt_and_overrides, "Lifecycle": lifecycle,
                          "InstanceIds": [instance.id], "InstanceType": instance_type})
    return {"FleetId": fleet_id, "Errors": errors, "Instances": instances}


_original_run_instances = EC2Response.run_instances
_original_create_fleet = EC2Response.create_fleet
_original_call_action = EC2Response.call_action

for _name in (
    "create_capacity_reservation",
    "describe_capacity_reservations",
    "get_capacity_reservation_usage",
    "cancel_capacity_reservation",
    "modify_capacity_reservation",
    "describe_capacity_block_extension_offerings",
    "purchase_capacity_block_extension",
    "describe_capacity_block_extension_history",
    "describe_capacity_blocks",
    "describe_spot_price_history",
    "run_instances",
    "create_fleet",
):
    setattr(EC2Response, _name, _CapacityReservationActions.__dict__[_name])


def _call_action(self: EC2Response) -> Any:
    action = self._get_action()
    CALLS.append(Call(action, copy.deepcopy(dict(self._get_params()))))
    fault = FAULTS.take(action)
    if fault is not None:
        return fault.status, {"Content-Type": "text/xml", "status": fault.status}, _error_body(fault.code, fault.message)
    _refresh(self.ec2_backend)  # time moved on: start, expire, terminate as EC2 would have
    answer = _original_call_action(self)
    held = FAULTS.take_delay(action)
    if held is not None:
        FAULTS.hold(held)  # the action took effect; its answer comes late (or never reaches the caller)
    return answer


EC2Response.call_action = _call_action

# Capacity Reservation groups: group ARN -> reservation ids. moto's resource-groups service does
# not implement ListGroupResources; this answers it for the groups the tests register.
RESOURCE_GROUPS: dict[str, list[str]] = {}


def _list_group_resources(self: ResourceGroupsResponse) -> Any:
    group = self._get_param("Group") or self._get_param("GroupName")
    if group not in RESOURCE_GROUPS:
        return 404, {"x-amzn-ErrorType": "NotFoundException"}, json.dumps({"Message": f"Cannot find group {group}"})
    region, account = self.region, self.current_account
    CALLS.append(Call("ListGroupResources", {key: self._get_param(key) for key in ("Group", "MaxResults", "NextToken")}))
    resources = [
        {"Identifier": {"ResourceArn": f"arn:aws:ec2:{region}:{account}:capacity-reservation/{rid}",
                        "ResourceType": "AWS::EC2::CapacityReservation"}}
        for rid in RESOURCE_GROUPS[group]
    ]
    # Pages of MaxResults (at most 50, as the API), NextToken an opaque offset.
    start = int(self._get_param("NextToken") or 0)
    size = min(int(self._get_param("MaxResults") or 50), 50)
    page = resources[start : start + size]
    answer: dict[str, Any] = {"Resources": page, "ResourceIdentifiers": [r["Identifier"] for r in page]}
    if start + size < len(resources):
        answer["NextToken"] = str(start + size)
    return json.dumps(answer)


ResourceGroupsResponse.list_group_resources = _list_group_resources
resourcegroups_urls.url_paths["{0}/list-group-resources$"] = ResourceGroupsResponse.dispatch


# --------------------------------------------------------------------------------------------
# Splitting and moving capacity (CreateCapacityReservationBySplitting, MoveCapacityReservationInstances)
# --------------------------------------------------------------------------------------------
# EC2's rules: the source (and a move's destination) active and owned by the caller's account, never
# a Capacity Block; only available units (1..AvailableInstanceCount; a split leaves at least one);
# a move's two reservations of one instance type, platform, zone, tenancy, placement group and end
# time. A split's new reservation copies the source but its tags (TagSpecifications give them) and
# its commitment; a move that empties an unused source cancels it. ClientToken makes a retry return
# the first answer.

def _relocation_tokens(backend: Any) -> dict[str, dict[str, Any]]:
    return backend.__dict__.setdefault("_karpweb_relocation_tokens", {})


def _own_active(resp: EC2Response, rid: str, role: str) -> dict[str, Any]:
    backend = resp.ec2_backend
    r = _state(backend).reservations.get(rid)
    if (r is None and rid in _shared_with(backend)) or (r is not None and r["OwnerId"] != resp.current_account):
        raise EC2ClientError("InvalidParameterValue",
                             f"The {role} Capacity Reservation {rid} is not owned by your account {resp.current_account}")
    if r is None:
        raise EC2ClientError("InvalidCapacityReservationId.NotFound", f"The capacity reservation ID '{rid}' does not exist")
    if r["ReservationType"] == "capacity-block":
        raise EC2ClientError("UnsupportedOperation", f"Capacity Block {rid} cannot be split or moved")
    if r["State"] != "active":
        raise EC2ClientError("IncorrectState", f"The {role} Capacity Reservation {rid} is {r['State']}, not active")
    return r


def _relocated_count(resp: EC2Response, source: dict[str, Any], most: int) -> int:
    raw = resp._get_param("InstanceCount")
    count = int(raw) if raw is not None else 0
    if not 1 <= count <= most:
        raise EC2ClientError("InvalidParameterValue",
                             f"InstanceCount {count} must be between 1 and {most} (the available instances of "
                             f"{source['CapacityReservationId']}{' less one' if most < source['AvailableInstanceCount'] else ''})")
    return count


_SHAPE = {"InstanceType": "instance type", "InstancePlatform": "platform", "AvailabilityZone": "Availability Zone",
          "Tenancy": "tenancy", "PlacementGroupArn": "placement group", "EndDate": "end time",
          "EndDateType": "end time"}


class _RelocationActions(EC2Response):
    def create_capacity_reservation_by_splitting(self) -> ActionResult:
        self.error_on_dryrun()
        backend, token = self.ec2_backend, self._get_param("ClientToken")
        with _LOCK:
            if token and ("split", token) in _relocation_tokens(backend):
                return ActionResult(copy.deepcopy(_relocation_tokens(backend)[("split", token)]))
            source = _own_active(self, self._get_param("SourceCapacityReservationId"), "source")
            count = _relocated_count(self, source, min(source["AvailableInstanceCount"], source["TotalInstanceCount"] - 1))
            new = copy.deepcopy(source)
            for key in ("CommitmentInfo", "CapacityAllocations", "CapacityReservationFleetId"):
                new.pop(key, None)
            rid = "cr-" + secrets.token_hex(9)[:17]
            new.update(CapacityReservationId=rid, CapacityReservationArn=source["CapacityReservationArn"].rsplit("/", 1)[0] + "/" + rid,
                       TotalInstanceCount=count, AvailableInstanceCount=count, CreateDate=CLOCK.now(),
                       Tags=[{"Key": k, "Value": v} for k, v in
                             self._parse_tag_specification().get("capacity-reservation", {}).items()])
            source["TotalInstanceCount"] -= count
            source["AvailableInstanceCount"] -= count
            st = _state(backend)
            st.reservations[rid], st.members[rid] = new, set()
            answer = {"SourceCapacityReservation": copy.deepcopy(source), "DestinationCapacityReservation": copy.deepcopy(new),
                      "InstanceCount": count}
            if token:
                _relocation_tokens(backend)[("split", token)] = answer
            return ActionResult(answer)

    def move_capacity_reservation_instances(self) -> ActionResult:
        self.error_on_dryrun()
        backend, token = self.ec2_backend, self._get_param("ClientToken")
        with _LOCK:
            if token and ("move", token) in _relocation_tokens(backend):
                return ActionResult(copy.deepcopy(_relocation_tokens(backend)[("move", token)]))
            source = _own_active(self, self._get_param("SourceCapacityReservationId"), "source")
            destination = _own_active(self, self._get_param("DestinationCapacityReservationId"), "destination")
            if source is destination:
                raise EC2ClientError("InvalidParameterValue", "The source and destination Capacity Reservations are the same")
            for key, words in _SHAPE.items():
                if source.get(key) != destination.get(key):
                    raise EC2ClientError("InvalidParameterValue",
                                         f"The destination Capacity Reservation must have the source's {words} "
                                         f"({source.get(key)}, not {destination.get(key)})")
            count = _relocated_count(self, source, source["AvailableInstanceCount"])
            source["TotalInstanceCount"] -= count
            source["AvailableInstanceCount"] -= count
            destination["TotalInstanceCount"] += count
            destination["AvailableInstanceCount"] += count
            if source["TotalInstanceCount"] == 0:
                source["State"] = "cancelled"  # all of it moved and nothing ran in it: EC2 cancels it
            answer = {"SourceCapacityReservation": copy.deepcopy(source),
                      "DestinationCapacityReservation": copy.deepcopy(destination), "InstanceCount": count}
            if token:
                _relocation_tokens(backend)[("move", token)] = answer
            return ActionResult(answer)


for _name in ("create_capacity_reservation_by_splitting", "move_capacity_reservation_instances"):
    setattr(EC2Response, _name, _RelocationActions.__dict__[_name])


# --------------------------------------------------------------------------------------------
# The reservation doctor's AWS calls moto 5.2.5 lacks: AWS RAM invitations and IAM policy simulation
# --------------------------------------------------------------------------------------------
# RAM: GetResourceShareInvitations, ListPendingInvitationResources, AcceptResourceShareInvitation
# for invitations made with EC2TestServer.invite (a share outside AWS Organizations: the receiving
# account sees the reservation only once it accepts). IAM: SimulatePrincipalPolicy over the role's
# inline and attached managed policies (an explicit Deny wins, then an Allow, else implicitDeny;
# Action and NotAction with wildcards; resources are not evaluated), refused with AccessDenied while
# EC2TestServer.refuse_simulation is on.

INVITATIONS: dict[str, dict[str, Any]] = {}  # invitation ARN -> invitation (status PENDING / ACCEPTED)
SIMULATION: dict[str, bool] = {"refused": False}


def _ram_body(self: Any) -> dict[str, Any]:
    try:
        return json.loads(self.body or "{}")
    except ValueError:
        return {}


def _invitation_view(inv: dict[str, Any]) -> dict[str, Any]:
    return {key: inv[key] for key in ("resourceShareInvitationArn", "resourceShareName", "resourceShareArn",
                                      "senderAccountId", "receiverAccountId", "status", "invitationTimestamp")}


def _get_resource_share_invitations(self: Any) -> Any:
    body = _ram_body(self)
    CALLS.append(Call("GetResourceShareInvitations", body))
    fault = FAULTS.take("GetResourceShareInvitations")
    if fault is not None:
        return fault.status, {"x-amzn-ErrorType": fault.code, "status": fault.status}, json.dumps({"message": fault.message})
    wanted = set(body.get("resourceShareInvitationArns") or [])
    found = [_invitation_view(inv) for arn, inv in sorted(INVITATIONS.items())
             if inv["receiverAccountId"] == self.current_account and (not wanted or arn in wanted)]
    return json.dumps({"resourceShareInvitations": found}, default=str)


def _list_pending_invitation_resources(self: Any) -> Any:
    body = _ram_body(self)
    CALLS.append(Call("ListPendingInvitationResources", body))
    inv = INVITATIONS.get(body.get("resourceShareInvitationArn") or "")
    if inv is None or inv["receiverAccountId"] != self.current_account:
        return 400, {"x-amzn-ErrorType": "UnknownResourceException", "status": 400}, json.dumps({"message": "no such invitation"})
    region = self.region
    resources = [{"arn": f"arn:aws:ec2:{region}:{inv['senderAccountId']}:capacity-reservation/{rid}",
                  "type": "ec2:CapacityReservation", "resourceShareArn": inv["resourceShareArn"],
                  "status": "AVAILABLE"} for rid in inv["reservationIds"]]
    return json.dumps({"resources": resources})


def _accept_resource_share_invitation(self: Any) -> Any:
    body = _ram_body(self)
    CALLS.append(Call("AcceptResourceShareInvitation", body))
    inv = INVITATIONS.get(body.get("resourceShareInvitationArn") or "")
    if inv is None or inv["receiverAccountId"] != self.current_account:
        return 400, {"x-amzn-ErrorType": "UnknownResourceException", "status": 400}, json.dumps({"message": "no such invitation"})
    with _LOCK:
        inv["status"] = "ACCEPTED"
        for rid in inv["reservationIds"]:
            SHARES.setdefault(rid, set()).add(inv["receiverAccountId"])
    return json.dumps({"resourceShareInvitation": _invitation_view(inv)}, default=str)


def _statements(document: Any) -> list[dict[str, Any]]:
    doc = json.loads(document) if isinstance(document, str) else document
    statements = doc.get("Statement") or []
    return [statements] if isinstance(statements, dict) else list(statements)


def _names(value: Any) -> list[str]:
    return [value] if isinstance(value, str) else list(value or [])


def _statement_covers(statement: dict[str, Any], action: str) -> bool:
    def hit(patterns: list[str]) -> bool:
        return any(fnmatch.fnmatchcase(action.lower(), p.lower()) for p in patterns)

    if "NotAction" in statement:
        return not hit(_names(statement["NotAction"]))
    return hit(_names(statement.get("Action")))


def _simulate_principal_policy(self: Any) -> Any:
    source = self._get_param("PolicySourceArn")
    actions = list(self._get_param("ActionNames") or [])
    CALLS.append(Call("SimulatePrincipalPolicy", {"PolicySourceArn": source, "ActionNames": actions}))
    if SIMULATION["refused"]:
        body = ('<ErrorResponse xmlns="https://iam.amazonaws.com/doc/2010-05-08/"><Error><Type>Sender</Type>'
                "<Code>AccessDenied</Code><Message>User is not authorized to perform: iam:SimulatePrincipalPolicy"
                f"</Message></Error><RequestId>{secrets.token_hex(16)}</RequestId></ErrorResponse>")
        return 403, {"Content-Type": "text/xml", "status": 403}, body
    role = self.backend.get_role_by_arn(source)
    documents = list(role.policies.values())
    for policy in role.managed_policies.values():
        documents += [v.document for v in policy.versions if v.is_default]
    statements = [st for doc in documents for st in _statements(doc)]
    results = []
    for action in actions:
        covering = [st for st in statements if _statement_covers(st, action)]
        decision = ("explicitDeny" if any(st.get("Effect") == "Deny" for st in covering)
                    else "allowed" if any(st.get("Effect") == "Allow" for st in covering) else "implicitDeny")
        results.append({"EvalActionName": action, "EvalResourceName": "*", "EvalDecision": decision})
    return ActionResult({"EvaluationResults": results, "IsTruncated": False})


def _install_doctor_handlers() -> None:
    from moto.iam.responses import IamResponse
    from moto.ram import urls as ram_urls
    from moto.ram.responses import ResourceAccessManagerResponse

    ResourceAccessManagerResponse.get_resource_share_invitations = _get_resource_share_invitations
    ResourceAccessManagerResponse.list_pending_invitation_resources = _list_pending_invitation_resources
    ResourceAccessManagerResponse.accept_resource_share_invitation = _accept_resource_share_invitation
    for path in ("getresourceshareinvitations", "listpendinginvitationresources", "acceptresourceshareinvitation"):
        ram_urls.url_paths["{0}/" + path + "$"] = ResourceAccessManagerResponse.dispatch
    IamResponse.simulate_principal_policy = _simulate_principal_policy


_install_doctor_handlers()


def _load_default_images(backend: Any) -> None:
    """moto's 44 default images, without the 1,257 "latest" and ECS-optimized ones moto also makes for
    us-east-1 each time a backend is made or reset (each with a volume and a snapshot: a fifth of a
    second of every test that resets the world). The tests launch from a default image
    (ami-12c6146b); the images Karpenter's aliases resolve to they publish themselves (add_image)."""
    for ami in moto_amis.AMIS:
        created = ami.get("creation_date")
        parsed = {"creation_date": parse_timestamp(created)} if isinstance(created, str) else {}
        backend.amis[ami["ami_id"]] = Ami(backend, **{**ami, "owner_alias": "amazon", **parsed})


moto_amis.AmiBackend._load_amis = _load_default_images


# --------------------------------------------------------------------------------------------
# The server and its test-side helpers
# --------------------------------------------------------------------------------------------


class EC2TestServer:
    """moto's EC2 server with capacity reservations, on 127.0.0.1 and a free port.

    The server runs in a thread of this process, so the helpers below arrange the world directly
    on the backend while the code under test talks to :attr:`endpoint_url` over HTTP.
    """

    def __init__(self, region: str = DEFAULT_REGION, account_id: str = ACCOUNT_ID) -> None:
        self.region = region
        self.account_id = account_id
        self.port = free_port()
        self.endpoint_url = f"http://127.0.0.1:{self.port}"
        self.faults = FAULTS
        self.clock = CLOCK
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=self.port, verbose=False)

    def start(self) -> EC2TestServer:
        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        self._server.start()
        return self

    def stop(self) -> None:
        self._server.stop()

    # --- state ---------------------------------------------------------------------------
    @property
    def backend(self) -> Any:
        return _backend(self.account_id, self.region)

    @property
    def calls(self) -> list[Call]:
        return CALLS

    def calls_of(self, action: str) -> list[Call]:
        return [c for c in CALLS if c.action == action]

    def reset(self) -> None:
        """A fresh world: moto's EC2 backend for this region, no faults, empty call log, real time."""
        for account_id in list(ec2_backends.keys()):  # every account a test assumed a role into
            ec2_backends[account_id].reset()
        ssm_backends[self.account_id].reset()
        SHARES.clear()
        FAULTS.clear()
        CALLS.clear()
        CLOCK.set(None)
        RESOURCE_GROUPS.clear()
        INVITATIONS.clear()
        SIMULATION["refused"] = False

    def reservation(self, reservation_id: str) -> dict[str, Any]:
        _refresh(self.backend)
        return _state(self.backend).reservations[reservation_id]

    # --- arranging the world -------------------------------------------------------------
    def add_reservation(
        self,
        instance_type: str,
        zone: str,
        count: int,
        *,
        owner_id: str | None = None,
        match: str = "targeted",
        tags: dict[str, str] | None = None,
        end: datetime | None = None,
        interruptible: bool = False,
    ) -> str:
        """An ODCR, optionally owned by another account (shared with this one through RAM)."""
        with _LOCK:
            r = _new_reservation(
                self.backend,
                instance_type=instance_type,
                zone=zone,
                count=count,
                owner_id=owner_id or self.account_id,
                match=match,
                tags=tags,
                end=end,
                interruptible=interruptible,
            )
        return r["CapacityReservationId"]

    def add_capacity_block(
        self,
        instance_type: str,
        zone: str,
        count: int,
        *,
        start: datetime,
        end: datetime,
        ultraserver_type: str | None = None,
        tags: dict[str, str] | None = None,
    ) -> str:
        """A purchased Capacity Block (a ``capacity-block`` reservation, targeted, with an end date)."""
        rid = _new_capacity_block(self.backend, instance_type, zone, count, start=start, end=end,
                                  ultraserver_type=ultraserver_type, tags=tags)["CapacityReservationId"]
        _refresh(self.backend)
        return rid

    def add_future_reservation(self, instance_type: str, zone: str, count: int, *, start: datetime,
                               commitment: timedelta = timedelta(days=14), delivery: str = "fixed",
                               match: str = "targeted", tags: dict[str, str] | None = None) -> str:
        """A future-dated ODCR, as CreateCapacityReservation with StartDate and CommitmentDuration makes it."""
        _check_future_dated(start, int(commitment.total_seconds()), delivery)
        with _LOCK:
            r = _new_reservation(self.backend, instance_type=instance_type, zone=zone, count=count,
                                 owner_id=self.account_id, match=match, start=start, tags=tags)
            _future_dated(r, start, int(commitment.total_seconds()), delivery)
        return r["CapacityReservationId"]

    def add_reservation_group(self, name: str, reservation_ids: list[str]) -> str:
        """A Capacity Reservation group (resource group) holding these reservations; returns its ARN."""
        arn = f"arn:aws:resource-groups:{self.region}:{self.account_id}:group/{name}"
        RESOURCE_GROUPS[arn] = list(reservation_ids)
        return arn

    def share(self, reservation_id: str, account_id: str) -> None:
        """Share a reservation with another account (AWS RAM): it sees it in DescribeCapacityReservations
        and may launch into it; its instances count in the owner's GetCapacityReservationUsage."""
        with _LOCK:
            SHARES.setdefault(reservation_id, set()).add(account_id)

    def invite(self, reservation_id: str, account_id: str, share_name: str = "reservations") -> str:
        """Share a reservation through an AWS RAM invitation (outside AWS Organizations): the account sees
        it only after AcceptResourceShareInvitation. Returns the invitation's ARN."""
        number = secrets.token_hex(8)
        arn = f"arn:aws:ram:{self.region}:{self.account_id}:resource-share-invitation/{number}"
        INVITATIONS[arn] = {
            "resourceShareInvitationArn": arn, "resourceShareName": share_name,
            "resourceShareArn": f"arn:aws:ram:{self.region}:{self.account_id}:resource-share/{number}",
            "senderAccountId": self.account_id, "receiverAccountId": account_id, "status": "PENDING",
            "invitationTimestamp": CLOCK.now().timestamp(), "reservationIds": [reservation_id],
        }
        return arn

    def refuse_simulation(self, refused: bool = True) -> None:
        """iam:SimulatePrincipalPolicy answers AccessDenied (karpweb's role may not simulate) until reset."""
        SIMULATION["refused"] = refused

    def backend_of(self, account_id: str) -> Any:
        """Another account's world (made on first use, as moto makes it for that account's calls)."""
        return _backend(account_id, self.region)

    def expire(self, reservation_id: str) -> None:
        """End a reservation now, as EC2 does at its end date (capacity blocks: instances terminated)."""
        _end_reservation(self.backend, reservation_id, "expired")

    def set_state(self, reservation_id: str, state: str) -> None:
        """Put a reservation in any state (e.g. ``pending``, ``failed``) without side effects."""
        with _LOCK:
            _state(self.backend).reservations[reservation_id]["State"] = state

    def set_available(self, reservation_id: str, count: int) -> None:
        with _LOCK:
            _state(self.backend).reservations[reservation_id]["AvailableInstanceCount"] = count

    def set_insufficient_capacity(self, instance_type: str, zone: str, market: str = "on-demand") -> None:
        """Launches of this pool (``on-demand`` or ``spot``) fail with InsufficientInstanceCapacity."""
        _state(self.backend).insufficient.add((instance_type, zone, market))

    def clear_insufficient_capacity(self) -> None:
        _state(self.backend).insufficient.clear()

    def clear_spot_prices(self) -> None:
        _state(self.backend).spot_prices.clear()

    def set_spot_price(self, instance_type: str, zone: str, price: float, when: datetime | None = None) -> None:
        _state(self.backend).spot_prices.append(
            {
                "AvailabilityZone": zone,
                "InstanceType": instance_type,
                "ProductDescription": "Linux/UNIX",
                "SpotPrice": f"{price:.6f}",
                "Timestamp": when or CLOCK.now(),
            }
        )

    def instance(self, instance_id: str) -> Instance:
        return self.backend.get_instance(instance_id)

    # --- launch resolution: public SSM parameters and images ------------------------------------
    def publish_parameter(self, name: str, value: str) -> None:
        """A public parameter such as ``/aws/service/eks/optimized-ami/...`` (moto refuses PutParameter
        under ``/aws``, as AWS does: only AWS publishes there)."""
        backend = ssm_backends[self.account_id][self.region]
        versions = backend._parameters[name]
        versions.append(SSMParameter(account_id=self.account_id, name=name, value=value, parameter_type="String",
                                     description=None, allowed_pattern=None, keyid=None,
                                     last_modified_date=datetime.now(timezone.utc), version=len(versions) + 1,
                                     data_type="aws:ec2:image"))

    def add_image(self, name: str, arch: str = "x86_64", created: datetime | None = None,
                  tags: dict[str, str] | None = None, owner: str = EKS_AMI_OWNER,
                  deprecation: datetime | None = None) -> str:
        """An image; ``deprecation`` is its DeprecationTime (moto has none: DescribeImages shows it
        because moto serializes the attribute of that name)."""
        image_id = moto_ec2_utils.random_ami_id()
        image = Ami(self.backend, image_id, name=name, architecture=arch, owner_id=owner, public=True,
                    virtualization_type="hvm", root_device_name="/dev/xvda", root_device_type="ebs",
                    creation_date=created or CLOCK.now())
        if deprecation is not None:
            image.deprecation_time = deprecation.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.000Z")
        for key, value in (tags or {}).items():
            self.backend.create_tags([image_id], {key: value})
        self.backend.amis[image_id] = image
        return image_id

    def publish_eks_images(self, k8s: str = "1.31", release: str = "v20261101") -> dict[tuple[str, str], str]:
        """EKS-optimized AL2023 images for every architecture and variant, with their ``recommended``
        and pinned SSM parameters, as AWS publishes them. Returns (arch, variant) -> image id."""
        images = {}
        for arch, variant in (("x86_64", "standard"), ("x86_64", "nvidia"), ("x86_64", "neuron"),
                              ("arm64", "standard"), ("arm64", "nvidia")):
            name = f"amazon-eks-node-al2023-{arch}-{variant}-{k8s}-{release}"
            image_id = self.add_image(name, arch)
            base = f"/aws/service/eks/optimized-ami/{k8s}/amazon-linux-2023/{arch}/{variant}"
            self.publish_parameter(f"{base}/recommended/image_id", image_id)
            self.publish_parameter(f"{base}/{name}/image_id", image_id)
            images[(arch, variant)] = image_id
        return images


    def publish_family_images(self, family: str, k8s: str = "1.31", version: str = "latest") -> dict[tuple[str, str], str]:
        """The public images and SSM parameters of an AMI family other than AL2023 (``AL2``,
        ``Bottlerocket`` at ``latest`` or a version such as ``v1.45.0``, ``Windows2022``), under the
        paths AWS publishes them at. Returns (arch, variant) -> image id."""
        images = {}
        if family == "Bottlerocket":
            tag = "latest" if version == "latest" else version.lstrip("v")
            release = "v1.50.0" if version == "latest" else version
            for arch, variants, flavour in (("x86_64", ("standard", "neuron"), ""), ("arm64", ("standard",), ""),
                                            ("x86_64", ("nvidia",), "-nvidia"), ("arm64", ("nvidia",), "-nvidia")):
                image_id = self.add_image(f"bottlerocket-aws-k8s-{k8s}{flavour}-{arch}-{release}-4a1b2c3d", arch)
                self.publish_parameter(f"/aws/service/bottlerocket/aws-k8s-{k8s}{flavour}/{arch}/{tag}/image_id", image_id)
                images.update({(arch, variant): image_id for variant in variants})
        elif family == "AL2":
            for arch, variants, path in (("x86_64", ("standard",), "amazon-linux-2"), ("arm64", ("standard",), "amazon-linux-2-arm64"),
                                         ("x86_64", ("nvidia", "neuron"), "amazon-linux-2-gpu")):
                image_id = self.add_image(f"{path}-eks-node-{k8s}-v20261101", arch)
                self.publish_parameter(f"/aws/service/eks/optimized-ami/{k8s}/{path}/recommended/image_id", image_id)
                images.update({(arch, variant): image_id for variant in variants})
        elif family.startswith("Windows"):
            year = family.removeprefix("Windows")
            image_id = self.add_image(f"Windows_Server-{year}-English-Core-EKS_Optimized-{k8s}-2026.11.01", "x86_64")
            self.publish_parameter(f"/aws/service/ami-windows-latest/Windows_Server-{year}-English-Core-EKS_Optimized-{k8s}/image_id",
                                   image_id)
            images[("x86_64", "standard")] = image_id
        else:
            raise ValueError(f"no public images for family {family!r} here")
        return images


def start_server(region: str = DEFAULT_REGION) -> EC2TestServer:
    return EC2TestServer(region=region).start()

from tests.support import ec2_server_commitments  # noqa: E402,F401  (Reserved Instances, Savings Plans)
from tests.support import ec2_server_lending  # noqa: E402,F401  (interruptible capacity: lend and reclaim)
from tests.support import ec2_server_buying  # noqa: E402,F401  (Capacity Block offerings and purchases)
