"""EC2 capacity reservations (ODCRs and Capacity Blocks) as the engine sees them.

A reservation is built from one item of `aws ec2 describe-capacity-reservations`. Whether it can
take a new instance now, and how it appears in an EC2NodeClass status, are decided here.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime

from .capacityblocks import CapacityBlockTiming, capacity_block_timing
from .labels import RESERVATION_CAPACITY_BLOCK, RESERVATION_DEFAULT
from .timeutil import format_time

MATCH_CRITERIA = ("open", "targeted")
RESERVATION_TYPES = (RESERVATION_DEFAULT, RESERVATION_CAPACITY_BLOCK)
STATUS_ACTIVE, STATUS_EXPIRING = "active", "expiring"
# A future-dated reservation (or a purchased capacity block) before EC2 makes it active: "scheduled"
# until its start; "assessing", "pending", "payment-pending" while EC2 still decides or bills it;
# "delayed" when EC2 could not deliver at the start. karpweb mirrors them all and plans with none.
SCHEDULED = "scheduled"
UPCOMING_STATES = (SCHEDULED, "assessing", "pending", "payment-pending", "delayed")


@dataclass(frozen=True, slots=True)
class CapacityReservation:
    id: str
    instance_type: str
    zone: str
    available_count: int
    total_count: int
    owner_id: str = ""
    state: str = "active"  # the EC2 State: active, expired, cancelled, pending, scheduled, ...
    instance_match_criteria: str = "open"
    reservation_type: str = RESERVATION_DEFAULT
    end: datetime | None = None
    tags: dict[str, str] = field(default_factory=dict)
    interruptible: bool = False
    ultraserver_type: str = ""
    zone_id: str = ""  # AvailabilityZoneId: topology.k8s.aws/zone-id on its offering
    # karpweb's own override (`karpwebExcludedFromPlanning` on the item): an operator keeps karpweb
    # from planning into it. The text says who, when and why; empty when it is not excluded.
    excluded_from_planning: str = ""
    start: datetime | None = None  # StartDate: when a scheduled reservation becomes active

    @property
    def is_capacity_block(self) -> bool:
        return self.reservation_type == RESERVATION_CAPACITY_BLOCK

    @property
    def timing(self) -> CapacityBlockTiming | None:
        """Drain and termination times; only capacity blocks have them."""
        if not self.is_capacity_block or self.end is None:
            return None
        return capacity_block_timing(self.end, ultraserver=bool(self.ultraserver_type))

    def state_at(self, now: datetime) -> str:
        """The state at `now`: EC2 makes a scheduled reservation active at its StartDate, which the
        last sync (or a what-if world set at the start) may not show yet. Every other state is as given."""
        if self.state == SCHEDULED and self.start is not None and self.start <= now:
            return "active"
        return self.state

    def started_by(self, now: datetime) -> CapacityReservation:
        """As it is at `now`: a scheduled one past its start is active with every unit free (nothing could
        run in it before; EC2 may report none available until then), whatever the item still says."""
        if self.state == SCHEDULED and self.state_at(now) == "active":
            return replace(self, state="active", available_count=self.total_count)
        return self

    def is_upcoming(self, now: datetime) -> bool:
        """Not started yet (scheduled before its start, assessing, pending, ...): planned with only from its start."""
        return self.state_at(now) in UPCOMING_STATES

    def is_selectable(self, now: datetime) -> bool:
        """What selector terms can return: active and not past its end (upstream's filters)."""
        return self.state_at(now) == "active" and (self.end is None or self.end > now)

    def unsupported_reason(self) -> str | None:
        """Upstream skips reservations with enum values it does not know (new EC2 values)."""
        if self.instance_match_criteria not in MATCH_CRITERIA:
            return f'unknown InstanceMatchCriteria "{self.instance_match_criteria}"'
        if self.reservation_type not in RESERVATION_TYPES:
            return f'unknown ReservationType "{self.reservation_type}"'
        return None

    def status_state(self, now: datetime) -> str:
        timing = self.timing
        return STATUS_EXPIRING if timing is not None and timing.is_expiring(now) else STATUS_ACTIVE

    def usage(self) -> str:
        """`3/4`: instances in use of the total, as operators read a reservation."""
        used = max(0, self.total_count - self.available_count)
        return f"{used}/{self.total_count}" if self.total_count else f"{self.available_count} available"

    def unavailable_reason(self, now: datetime) -> str | None:
        """Why no new instance can launch into it now, in operator words; None when one can."""
        if self.excluded_from_planning:
            return f"reservation {self.id} is excluded from planning ({self.excluded_from_planning})"
        state = self.state_at(now)
        if state in UPCOMING_STATES:
            return self.not_started_reason(now)
        if state != "active":
            return f"reservation {self.id} is {state}"
        if self.end is not None and self.end <= now:
            return f"reservation {self.id} ended at {format_time(self.end)}"
        timing = self.timing
        if timing is not None and timing.is_expiring(now):
            return (f"capacity block {self.id} is expiring: draining since {format_time(timing.drain_at)}, "
                    f"ends {format_time(timing.end)}")
        if self.available_count <= 0:
            return f"reservation {self.id} is full ({self.usage()})"
        return None

    def not_started_reason(self, now: datetime) -> str:
        """'reservation cr-1 is scheduled: it starts at 2026-12-01T00:00:00Z', the words every face shows."""
        state = self.state_at(now)
        if self.start is None:
            return f"reservation {self.id} is {state}: it has no start date yet"
        if state == SCHEDULED:
            return f"reservation {self.id} is scheduled: it starts at {format_time(self.start)}"
        return f"reservation {self.id} is {state}: it was asked to start at {format_time(self.start)}"

    def status_entry(self, now: datetime) -> dict:
        """One `status.capacityReservations[]` item of an EC2NodeClass (aws/karpenter-provider-aws
        `pkg/apis/v1/ec2nodeclass_status.go`)."""
        entry = {"availabilityZone": self.zone}
        if self.end is not None:
            entry["endTime"] = format_time(self.end)
        entry.update({
            "id": self.id,
            "instanceMatchCriteria": self.instance_match_criteria,
            "instanceType": self.instance_type,
            "ownerID": self.owner_id,
            "reservationType": self.reservation_type,
            "interruptible": self.interruptible,
            "state": self.status_state(now),
        })
        return entry
