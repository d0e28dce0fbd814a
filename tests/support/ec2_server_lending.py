"""The EC2 test server's interruptible capacity: an owner lends idle units of an ODCR and reclaims them.

``CreateInterruptibleCapacityReservationAllocation`` and ``UpdateInterruptibleCapacityReservationAllocation``
with EC2's rules, added to moto's EC2Response like the other actions of ``ec2_server.py``:

* Create: the source is the caller's own, ``active``, an ODCR (not a Capacity Block, not itself
  interruptible) with no end date (``EndDateType=unlimited``) and without an allocation yet; 1 to
  ``AvailableInstanceCount`` units. A new interruptible reservation (``Interruptible``, ``InterruptionInfo``
  naming the source, targeted, tags from ``TagSpecifications``) holds them; they leave the source's
  available count, and the source shows ``InterruptibleCapacityAllocation`` (counts, status, the new
  reservation's id). ``ClientToken``: a retry answers the first call's result.
* Update: ``TargetInstanceCount`` above the allocation lends more (from the source's available units);
  below it reclaims. Free units of the interruptible reservation come back at once; each borrower instance
  beyond that gets EC2's "EC2 Capacity Reservation Instance Interruption Warning" (EventBridge-shaped,
  put on the SQS queues registered with :meth:`deliver_events_to`) and is terminated two minutes later on
  the server clock; its unit then returns to the source. The allocation is ``updating`` until every
  reclaimed unit is back, then ``active``. At zero with ``ZeroSizePreference=default`` the interruptible
  reservation is cancelled (``retain`` keeps it, empty).

Test support, not product code."""

from __future__ import annotations

import copy
import json
import secrets
from datetime import timedelta
from typing import Any

from moto.core.responses import ActionResult
from moto.ec2.exceptions import EC2ClientError
from moto.ec2.responses import EC2Response
from moto.sqs.models import sqs_backends

from tests.support import ec2_server as base

RECLAIM_WARNING = timedelta(minutes=2)  # EC2's warning before it terminates a borrower
WARNING_DETAIL_TYPE = "EC2 Capacity Reservation Instance Interruption Warning"
EVENT_QUEUES: list[tuple[str, str, str]] = []  # (account, region, queue name): an EventBridge rule's SQS targets


def _lending(backend: Any) -> dict[str, Any]:
    """Per backend: tokens (ClientToken -> answer) and warned instances (instance id -> terminate at)."""
    return backend.__dict__.setdefault("_karpweb_lending", {"tokens": {}, "warned": {}})


def _source(resp: EC2Response, rid: str) -> dict[str, Any]:
    r = base._state(resp.ec2_backend).reservations.get(rid)
    if r is None:
        raise EC2ClientError("InvalidCapacityReservationId.NotFound", f"The capacity reservation ID '{rid}' does not exist")
    if r["OwnerId"] != resp.current_account:
        raise EC2ClientError("InvalidParameterValue", f"Capacity Reservation {rid} is not owned by your account")
    return r


def _check_lendable(r: dict[str, Any]) -> None:
    rid = r["CapacityReservationId"]
    if r["ReservationType"] == "capacity-block" or r.get("Interruptible"):
        raise EC2ClientError("UnsupportedOperation", f"Capacity Reservation {rid} cannot lend interruptible capacity")
    if r["State"] != "active":
        raise EC2ClientError("IncorrectState", f"Capacity Reservation {rid} is {r['State']}, not active")
    if r["EndDateType"] != "unlimited":
        raise EC2ClientError("InvalidParameterValue", f"Capacity Reservation {rid} has an end date: only one with none can lend")


def _borrower(backend: Any, source: dict[str, Any]) -> dict[str, Any] | None:
    allocation = source.get("InterruptibleCapacityAllocation") or {}
    return base._state(backend).reservations.get(allocation.get("InterruptibleCapacityReservationId") or "")


class _LendingActions(EC2Response):
    def create_interruptible_capacity_reservation_allocation(self) -> ActionResult:
        self.error_on_dryrun()
        backend, token = self.ec2_backend, self._get_param("ClientToken")
        with base._LOCK:
            tokens = _lending(backend)["tokens"]
            if token and token in tokens:
                return ActionResult(copy.deepcopy(tokens[token]))
            source = _source(self, self._get_param("CapacityReservationId"))
            _check_lendable(source)
            if (source.get("InterruptibleCapacityAllocation") or {}).get("Status") not in (None, "canceled"):
                raise EC2ClientError("InvalidParameterValue", f"Capacity Reservation {source['CapacityReservationId']} "
                                     "already has an interruptible allocation: update it instead")
            count = int(self._get_param("InstanceCount") or 0)
            if not 1 <= count <= source["AvailableInstanceCount"]:
                raise EC2ClientError("InvalidParameterValue", f"InstanceCount {count} must be between 1 and the "
                                     f"{source['AvailableInstanceCount']} available instances of {source['CapacityReservationId']}")
            lent = base._new_reservation(
                backend, instance_type=source["InstanceType"], zone=source["AvailabilityZone"], count=count,
                owner_id=source["OwnerId"], platform=source["InstancePlatform"], tenancy=source["Tenancy"], match="targeted",
                tags=self._parse_tag_specification().get("capacity-reservation", {}), interruptible=True)
            lent["InterruptionInfo"] = {"SourceCapacityReservationId": source["CapacityReservationId"], "InterruptionType": "adhoc"}
            source["AvailableInstanceCount"] -= count
            source["InterruptibleCapacityAllocation"] = {
                "InstanceCount": count, "TargetInstanceCount": count, "Status": "active",
                "InterruptibleCapacityReservationId": lent["CapacityReservationId"], "InterruptionType": "adhoc",
                "ZeroSizePreference": self._get_param("ZeroSizePreference") or "default"}
            answer = {"SourceCapacityReservationId": source["CapacityReservationId"], "TargetInstanceCount": count,
                      "Status": "active", "InterruptionType": "adhoc"}
            if token:
                tokens[token] = answer
            return ActionResult(answer)

    def update_interruptible_capacity_reservation_allocation(self) -> ActionResult:
        self.error_on_dryrun()
        backend = self.ec2_backend
        with base._LOCK:
            source = _source(self, self._get_param("CapacityReservationId"))
            allocation, lent = source.get("InterruptibleCapacityAllocation"), _borrower(backend, source)
            if not allocation or lent is None or allocation["Status"] == "canceled":
                raise EC2ClientError("InvalidParameterValue",
                                     f"Capacity Reservation {source['CapacityReservationId']} has no interruptible allocation")
            if self._get_param("ZeroSizePreference"):
                allocation["ZeroSizePreference"] = self._get_param("ZeroSizePreference")
            raw = self._get_param("TargetInstanceCount")
            target = allocation["TargetInstanceCount"] if raw is None else int(raw)
            if target < 0:
                raise EC2ClientError("InvalidParameterValue", "TargetInstanceCount must be 0 or more")
            grow = target - allocation["InstanceCount"]
            if grow > 0:
                if grow > source["AvailableInstanceCount"]:
                    raise EC2ClientError("InvalidParameterValue", f"{source['CapacityReservationId']} has "
                                         f"{source['AvailableInstanceCount']} available instances, not {grow}")
                source["AvailableInstanceCount"] -= grow
                lent["TotalInstanceCount"] += grow
                lent["AvailableInstanceCount"] += grow
                allocation["InstanceCount"] = target
            allocation["TargetInstanceCount"] = target
            _warn_borrowers(backend, source, lent)
            _settle(backend, source)
            return ActionResult({
                "InterruptibleCapacityReservationId": lent["CapacityReservationId"],
                "SourceCapacityReservationId": source["CapacityReservationId"],
                "InstanceCount": allocation["InstanceCount"], "TargetInstanceCount": target,
                "Status": allocation["Status"], "InterruptionType": "adhoc"})


def _running_members(backend: Any, rid: str) -> list[Any]:
    found = []
    for instance_id in sorted(base._state(backend).members.get(rid, set())):
        instance = backend.get_instance_by_id(instance_id)
        if instance is not None and instance.state not in ("terminated", "shutting-down"):
            found.append(instance)
    return found


def _warn_borrowers(backend: Any, source: dict[str, Any], lent: dict[str, Any]) -> None:
    """Borrowers beyond what the free units cover get the two-minute warning (once each)."""
    allocation, warned = source["InterruptibleCapacityAllocation"], _lending(backend)["warned"]
    running = _running_members(backend, lent["CapacityReservationId"])
    already = sum(1 for i in running if i.id in warned)
    short = allocation["InstanceCount"] - allocation["TargetInstanceCount"] - lent["AvailableInstanceCount"] - already
    for instance in [i for i in running if i.id not in warned][:max(short, 0)]:
        warned[instance.id] = base.CLOCK.now() + RECLAIM_WARNING
        _deliver(backend, instance.id)


def _settle(backend: Any, source: dict[str, Any]) -> None:
    """Reclaimed units that are free again (never used, or their borrower gone) go back to the source."""
    allocation, lent = source["InterruptibleCapacityAllocation"], _borrower(backend, source)
    while allocation["InstanceCount"] > allocation["TargetInstanceCount"] and lent["AvailableInstanceCount"] > 0:
        lent["TotalInstanceCount"] -= 1
        lent["AvailableInstanceCount"] -= 1
        source["AvailableInstanceCount"] += 1
        allocation["InstanceCount"] -= 1
    done = allocation["InstanceCount"] == allocation["TargetInstanceCount"]
    allocation["Status"] = "active" if done else "updating"
    if done and allocation["InstanceCount"] == 0 and allocation.get("ZeroSizePreference", "default") == "default":
        lent["State"], allocation["Status"] = "cancelled", "canceled"


def _deliver(backend: Any, instance_id: str) -> None:
    """EventBridge's event, as its rule puts it on each target queue (the body is the event itself)."""
    event = {"version": "0", "id": secrets.token_hex(16), "detail-type": WARNING_DETAIL_TYPE, "source": "aws.ec2",
             "account": backend.account_id, "time": base.CLOCK.now().strftime("%Y-%m-%dT%H:%M:%SZ"),
             "region": backend.region_name,
             "resources": [f"arn:aws:ec2:{backend.region_name}:{backend.account_id}:instance/{instance_id}"],
             "detail": {"instance-id": instance_id, "instance-action": "terminate"}}
    for account, region, queue in EVENT_QUEUES:
        if (account, region) == (backend.account_id, backend.region_name):
            sqs_backends[account][region].send_message(queue, json.dumps(event))


def _terminate_warned(backend: Any) -> None:
    """At the end of the warning EC2 terminates the borrower; then its unit is reclaimed."""
    warned = _lending(backend)["warned"]
    for instance_id, when in list(warned.items()):
        instance = backend.get_instance_by_id(instance_id)
        if instance is None or instance.state == "terminated":
            warned.pop(instance_id)
        elif base.CLOCK.now() >= when:
            instance.terminate()
            warned.pop(instance_id)
    for source in base._state(backend).reservations.values():
        if (source.get("InterruptibleCapacityAllocation") or {}).get("Status") == "updating":
            _settle(backend, source)


_original_refresh = base._refresh


def _refresh(backend: Any) -> None:
    _original_refresh(backend)
    with base._LOCK:
        _terminate_warned(backend)


base._refresh = _refresh  # every action (and EC2TestServer.reservation) moves reclaims along the clock too

for _name in ("create_interruptible_capacity_reservation_allocation", "update_interruptible_capacity_reservation_allocation"):
    setattr(EC2Response, _name, _LendingActions.__dict__[_name])


class _LendingHelpers:
    """EC2TestServer's helpers for lent capacity and its borrowers (set onto it below)."""

    def deliver_events_to(self, queue_name: str) -> None:
        """An EventBridge rule for EC2's events with this SQS queue (of the server's account) as target."""
        EVENT_QUEUES.append((self.account_id, self.region, queue_name))

    def lend(self, reservation_id: str, count: int) -> str:
        """The owner lends `count` units at once (as CreateInterruptibleCapacityReservationAllocation); returns
        the interruptible reservation's id."""
        with base._LOCK:
            source = base._state(self.backend).reservations[reservation_id]
            _check_lendable(source)
            source["AvailableInstanceCount"] -= count
            lent = base._new_reservation(self.backend, instance_type=source["InstanceType"], zone=source["AvailabilityZone"],
                                         count=count, owner_id=source["OwnerId"], match="targeted", interruptible=True)
            lent["InterruptionInfo"] = {"SourceCapacityReservationId": reservation_id, "InterruptionType": "adhoc"}
            source["InterruptibleCapacityAllocation"] = {
                "InstanceCount": count, "TargetInstanceCount": count, "Status": "active",
                "InterruptibleCapacityReservationId": lent["CapacityReservationId"], "InterruptionType": "adhoc",
                "ZeroSizePreference": "default"}
        return lent["CapacityReservationId"]

    def launch_borrower(self, interruptible_id: str, image_id: str = "ami-12c6146b") -> str:
        """A borrower's instance in the interruptible reservation (RunInstances with MarketType
        interruptible-capacity-reservation, as a borrowing account launches)."""
        import boto3

        ec2 = boto3.client("ec2", region_name=self.region, endpoint_url=self.endpoint_url,
                           aws_access_key_id="testing", aws_secret_access_key="testing")
        r = base._state(self.backend).reservations[interruptible_id]
        answer = ec2.run_instances(
            ImageId=image_id, MinCount=1, MaxCount=1, InstanceType=r["InstanceType"],
            Placement={"AvailabilityZone": r["AvailabilityZone"]},
            InstanceMarketOptions={"MarketType": "interruptible-capacity-reservation"},
            CapacityReservationSpecification={"CapacityReservationTarget": {"CapacityReservationId": interruptible_id}})
        return answer["Instances"][0]["InstanceId"]


_original_reset = base.EC2TestServer.reset


def _reset(self: Any) -> None:
    _original_reset(self)
    EVENT_QUEUES.clear()


base.EC2TestServer.reset = _reset
for _name in ("deliver_events_to", "lend", "launch_borrower"):
    setattr(base.EC2TestServer, _name, _LendingHelpers.__dict__[_name])
