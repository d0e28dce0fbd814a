"""EC2 interruption messages, as EventBridge delivers them to the interruption queue, read the way
Karpenter's AWS provider reads them (aws/karpenter-provider-aws `pkg/controllers/interruption`).
Pure: the message body in, what it means out. A body that is not one of these is `Unknown` with the
reason (logged, counted, deleted)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta

from .timeutil import parse_optional_time

SPOT_INTERRUPTED = "spot_interrupted"
REBALANCE = "rebalance_recommendation"
SCHEDULED_CHANGE = "scheduled_change"
INSTANCE_STOPPED = "instance_stopped"
INSTANCE_TERMINATED = "instance_terminated"
RESERVATION_INTERRUPTED = "capacity_reservation_interrupted"
# EC2 status checks (DescribeInstanceStatus, aws provider pkg/providers/instancestatus): failed
# instance or system checks terminate forcefully (the claim's termination time is now: pods are
# deleted, PDBs notwithstanding), a scheduled event drains.
INSTANCE_STATUS = "instance_status"
SYSTEM_STATUS = "system_status"
EVENT_STATUS = "event_status"
FORCEFUL = (INSTANCE_STATUS, SYSTEM_STATUS)
UNHEALTHY_THRESHOLD = timedelta(seconds=120)  # upstream's UnhealthyThreshold: a check failed this long
STATUS_EVENT_CODES = ("instance-reboot", "system-reboot", "system-maintenance", "instance-retirement", "instance-stop")
# Kinds that take the node away: drain it now. A rebalance recommendation is only recorded (as upstream).
DRAINING = (SPOT_INTERRUPTED, SCHEDULED_CHANGE, INSTANCE_STOPPED, INSTANCE_TERMINATED, RESERVATION_INTERRUPTED,
            INSTANCE_STATUS, SYSTEM_STATUS, EVENT_STATUS)
STOPPING_STATES = {"stopping": INSTANCE_STOPPED, "stopped": INSTANCE_STOPPED, "shutting-down": INSTANCE_TERMINATED,
                   "terminated": INSTANCE_TERMINATED}


@dataclass(frozen=True)
class Interruption:
    kind: str
    instance_ids: tuple[str, ...]
    reservation_id: str = ""  # for a Capacity Reservation reclaim
    detail: str = ""  # in words, for the decision

    @property
    def drains(self) -> bool:
        return self.kind in DRAINING

    @property
    def forceful(self) -> bool:
        return self.kind in FORCEFUL


@dataclass(frozen=True)
class Unknown:
    reason: str


def parse(body: str) -> Interruption | Unknown | None:
    """The message's meaning; None for an event that needs nothing (an instance starting, a Health
    event about another service)."""
    try:
        event = json.loads(body)
    except (json.JSONDecodeError, TypeError, ValueError):
        return Unknown("not JSON")
    if not isinstance(event, dict):
        return Unknown("not a JSON object")
    source, kind, detail = event.get("source"), event.get("detail-type"), event.get("detail")
    if not isinstance(detail, dict):
        return Unknown(f"no detail object (source {source!r}, detail-type {kind!r})")
    instance = detail.get("instance-id")
    if source == "aws.ec2" and kind == "EC2 Spot Instance Interruption Warning" and isinstance(instance, str):
        return Interruption(SPOT_INTERRUPTED, (instance,), detail=f"spot interruption warning ({detail.get('instance-action', 'terminate')})")
    if source == "aws.ec2" and kind == "EC2 Instance Rebalance Recommendation" and isinstance(instance, str):
        return Interruption(REBALANCE, (instance,), detail="rebalance recommendation")
    if source == "aws.ec2" and kind == "EC2 Instance State-change Notification" and isinstance(instance, str):
        state = detail.get("state")
        if state in STOPPING_STATES:
            return Interruption(STOPPING_STATES[state], (instance,), detail=f"instance state {state}")
        return None
    if source == "aws.ec2" and kind == "EC2 Capacity Reservation Instance Interruption Warning":
        instances = detail.get("instance-ids") or ([instance] if isinstance(instance, str) else [])
        reservation = detail.get("capacity-reservation-id") or ""
        if instances and all(isinstance(i, str) for i in instances):
            return Interruption(RESERVATION_INTERRUPTED, tuple(instances), str(reservation),
                                detail=f"interruptible Capacity Reservation {reservation or '(unnamed)'} reclaims its capacity")
    if source == "aws.health" and kind == "AWS Health Event":
        if detail.get("service") != "EC2" or detail.get("eventTypeCategory") != "scheduledChange":
            return None
        entities = [e.get("entityValue") for e in detail.get("affectedEntities") or [] if isinstance(e, dict)]
        instances = tuple(e for e in entities if isinstance(e, str) and e.startswith("i-"))
        if instances:
            return Interruption(SCHEDULED_CHANGE, instances, detail=f"scheduled change {detail.get('eventTypeCode', '')}".strip())
        return None
    return Unknown(f"not an interruption event karpweb knows (source {source!r}, detail-type {kind!r})")


def status_check_failures(statuses: list[dict], now: datetime) -> list[Interruption]:
    """DescribeInstanceStatus's InstanceStatuses (as EC2 answers them) read as upstream's
    instance-status controller does: per instance, one interruption per category with a failed
    check impaired for UNHEALTHY_THRESHOLD or longer (instance, system), or a scheduled event
    (event). EBS checks are not acted on, as upstream."""
    found = []
    for status in statuses:
        instance = status.get("InstanceId")
        if not isinstance(instance, str):
            continue
        for key, kind in (("InstanceStatus", INSTANCE_STATUS), ("SystemStatus", SYSTEM_STATUS)):
            failed = [d for d in (status.get(key) or {}).get("Details") or []
                      if d.get("Status") == "failed" and _impaired_long_enough(d.get("ImpairedSince"), now)]
            if failed:
                names = ", ".join(sorted(str(d.get("Name", "")) for d in failed))
                found.append(Interruption(kind, (instance,), detail=f"EC2 {key} check failed ({names}) for "
                                                                    f"{int(UNHEALTHY_THRESHOLD.total_seconds())} s or more"))
        events = [e.get("Code") for e in status.get("Events") or [] if e.get("Code") in STATUS_EVENT_CODES]
        if events:
            found.append(Interruption(EVENT_STATUS, (instance,), detail=f"EC2 scheduled event {', '.join(sorted(events))}"))
    return found


def _impaired_long_enough(since, now: datetime) -> bool:
    moment = parse_optional_time(since)
    return moment is not None and now - moment >= UNHEALTHY_THRESHOLD
