"""EC2 interruption messages, as EventBridge delivers them to the interruption queue, read the way
Karpenter's AWS provider reads them (aws/karpenter-provider-aws `pkg/controllers/interruption/`).
Pure: the message body in, what it
means out. A body that is not one of these is `Unknown` with the reason (logged, counted, deleted)."""

from __future__ import annotations

import json
from dataclasses import dataclass

SPOT_INTERRUPTED = "spot_interrupted"
REBALANCE = "rebalance_recommendation"
SCHEDULED_CHANGE = "scheduled_change"
INSTANCE_STOPPED = "instance_stopped"
INSTANCE_TERMINATED = "instance_terminated"
RESERVATION_INTERRUPTED = "capacity_reservation_interrupted"
# Kinds that take the node away: drain it now. A rebalance recommendation is only recorded (as upstream).
DRAINING = (SPOT_INTERRUPTED, SCHEDULED_CHANGE, INSTANCE_STOPPED, INSTANCE_TERMINATED, RESERVATION_INTERRUPTED)
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
