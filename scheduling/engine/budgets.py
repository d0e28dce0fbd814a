"""A NodePool's `spec.disruption`: consolidation policy, consolidateAfter, disruption budgets, and
karpweb's keep-idle-reserved opt-in; with the Go durations and cron schedules they are written in.

Upstream (core `pkg/apis/v1/nodepool.go`, `pkg/controllers/disruption/helpers.go`):
  * `consolidationPolicy` WhenEmpty | WhenEmptyOrUnderutilized (default); `consolidateAfter` a
    duration or `Never` (default 0s: a node is consolidatable as soon as its pods stop changing).
  * `budgets` (default `[{nodes: "10%"}]` when the field is absent; an explicit empty list means no
    limit): each `{nodes, reasons?, schedule?, duration?}`. `nodes` is a count or a percentage of the
    NodePool's nodes, rounded UP (as Kubernetes rounds maxUnavailable). A budget without `reasons`
    applies to every reason (Underutilized, Empty, Drifted). A budget with a `schedule` (cron, UTC)
    is active for `duration` after each time the schedule fires; one without is always active. The
    allowance for a reason is the smallest `nodes` of the active budgets that apply to it, minus the
    NodePool's nodes that are already being disrupted (deleting or not Ready).
  * `expireAfter` (template spec, default 720h) scales the disruption cost of a node by the
    fraction of its lifetime that remains.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any, Callable

WHEN_EMPTY = "WhenEmpty"
WHEN_EMPTY_OR_UNDERUTILIZED = "WhenEmptyOrUnderutilized"
POLICIES = (WHEN_EMPTY, WHEN_EMPTY_OR_UNDERUTILIZED)

REASON_UNDERUTILIZED = "Underutilized"
REASON_EMPTY = "Empty"
REASON_DRIFTED = "Drifted"
REASONS = (REASON_UNDERUTILIZED, REASON_EMPTY, REASON_DRIFTED)

NEVER = "Never"
KEEP_IDLE_RESERVED_ANNOTATION = "karpweb.io/keep-idle-reserved-nodes"
DEFAULT_EXPIRE_AFTER = timedelta(hours=720)
MAX_BUDGETS = 50
UNLIMITED = 2**31 - 1

_NODES = re.compile(r"^((100|[0-9]{1,2})%|[0-9]+)$")
_DURATION_PART = re.compile(r"([0-9]*(?:\.[0-9]*)?)(ns|us|µs|μs|ms|s|m|h)")
_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1, "m": 60, "h": 3600}


class SpecError(ValueError):
    """A malformed duration, schedule or budget; the message names what is wrong."""


def parse_duration(text: str) -> timedelta:
    """A Go duration (`30s`, `1h30m`, `1.5h`, `0`). Raises SpecError."""
    value = text.strip()
    if value in ("0", "+0", "-0"):
        return timedelta(0)
    sign = -1 if value.startswith("-") else 1
    body = value.lstrip("+-")
    if not body:
        raise SpecError(f'"{text}" is not a duration (e.g. 30s, 5m, 1h30m)')
    seconds, position = 0.0, 0
    while position < len(body):
        match = _DURATION_PART.match(body, position)
        if match is None or match.group(1) in ("", "."):
            raise SpecError(f'"{text}" is not a duration (e.g. 30s, 5m, 1h30m)')
        seconds += float(match.group(1)) * _UNITS[match.group(2)]
        position = match.end()
    return timedelta(seconds=sign * seconds)


def format_duration(delta: timedelta) -> str:
    """`1h30m`, `45s`, `0s` (Go's style, without the zero parts)."""
    total = int(delta.total_seconds())
    if total == 0:
        return "0s"
    hours, rest = divmod(abs(total), 3600)
    minutes, seconds = divmod(rest, 60)
    text = (f"{hours}h" if hours else "") + (f"{minutes}m" if minutes else "") + (f"{seconds}s" if seconds else "")
    return ("-" if total < 0 else "") + text


# cron --------------------------------------------------------------------------------------------

_MONTHS = {name: index for index, name in enumerate(
    ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"), start=1)}
_DAYS = {name: index for index, name in enumerate(("sun", "mon", "tue", "wed", "thu", "fri", "sat"))}
_DESCRIPTORS = {
    "@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *", "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *",
}
# (name, low, high, names)
_FIELDS = (("minute", 0, 59, {}), ("hour", 0, 23, {}), ("day of month", 1, 31, {}), ("month", 1, 12, _MONTHS),
           ("day of week", 0, 6, _DAYS))


@dataclass(frozen=True, slots=True)
class CronSchedule:
    """A standard five-field cron schedule in UTC (robfig/cron's ParseStandard, which upstream
    uses): minute hour day-of-month month day-of-week, with `*`, `?`, lists, ranges, steps, month and
    weekday names, and the @yearly/@monthly/@weekly/@daily/@hourly descriptors. As in cron, when
    both day fields are restricted a day matching either one fires."""

    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]
    any_day: bool  # day of month is * or ?
    any_weekday: bool

    @classmethod
    def parse(cls, text: str) -> "CronSchedule":
        spec = _DESCRIPTORS.get(text.strip().lower(), text)
        parts = spec.split()
        if len(parts) != 5:
            raise SpecError(f'"{text}" is not a cron schedule: expected 5 fields (minute hour day-of-month month '
                            f'day-of-week) or a descriptor such as @daily, got {len(parts)}')
        sets = [_parse_field(part, *definition) for part, definition in zip(parts, _FIELDS)]
        return cls(*sets, any_day=parts[2] in ("*", "?"), any_weekday=parts[4] in ("*", "?"))

    def _day_matches(self, moment: datetime) -> bool:
        day_ok = moment.day in self.days
        weekday_ok = (moment.isoweekday() % 7) in self.weekdays
        if self.any_day or self.any_weekday:
            return day_ok and weekday_ok
        return day_ok or weekday_ok

    def next_after(self, moment: datetime, limit: datetime) -> datetime | None:
        """The first time the schedule fires strictly after `moment`, if it is not after `limit`."""
        t = (moment.astimezone(timezone.utc).replace(second=0, microsecond=0) + timedelta(minutes=1))
        while t <= limit:
            if t.month not in self.months:
                t = (t.replace(day=1, hour=0, minute=0) + timedelta(days=32)).replace(day=1)
            elif not self._day_matches(t):
                t = t.replace(hour=0, minute=0) + timedelta(days=1)
            elif t.hour not in self.hours:
                t = t.replace(minute=0) + timedelta(hours=1)
            elif t.minute not in self.minutes:
                t += timedelta(minutes=1)
            else:
                return t
        return None


def _parse_field(text: str, name: str, low: int, high: int, names: dict[str, int]) -> frozenset[int]:
    values: set[int] = set()
    for item in text.split(","):
        body, _, step_text = item.partition("/")
        try:
            step = int(step_text) if step_text else 1
        except ValueError:
            raise SpecError(f'cron {name} "{item}": step "{step_text}" is not a number') from None
        if step < 1:
            raise SpecError(f'cron {name} "{item}": step must be at least 1')
        if body in ("*", "?"):
            start, end = low, high
        else:
            first, dash, last = body.partition("-")
            start = _cron_value(first, name, low, high, names)
            end = _cron_value(last, name, low, high, names) if dash else (high if step_text else start)
            if end < start:
                raise SpecError(f'cron {name} "{item}": range runs backwards')
        values.update(range(start, end + 1, step))
    return frozenset(values)


def _cron_value(text: str, name: str, low: int, high: int, names: dict[str, int]) -> int:
    if text.lower() in names:
        return names[text.lower()]
    if not text.isdigit():
        raise SpecError(f'cron {name}: "{text}" is not a number' + (" or a name" if names else ""))
    value = int(text)
    if not low <= value <= high:
        raise SpecError(f"cron {name}: {value} is outside {low}-{high}")
    return value


# budgets -----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Budget:
    nodes: str  # "10%" or "5"
    reasons: frozenset[str] | None = None  # None: every reason
    schedule: CronSchedule | None = None
    duration: timedelta | None = None

    def applies_to(self, reason: str) -> bool:
        return self.reasons is None or reason in self.reasons

    def is_active(self, now: datetime) -> bool:
        """Upstream `Budget.IsActive`: the schedule fired within the last `duration`."""
        if self.schedule is None:
            return True
        return self.schedule.next_after(now - self.duration, now) is not None

    def allowed(self, node_count: int) -> int:
        if self.nodes.endswith("%"):
            return math.ceil(int(self.nodes[:-1]) * node_count / 100)
        return int(self.nodes)


DEFAULT_BUDGETS = (Budget("10%"),)


@dataclass(frozen=True, slots=True)
class DisruptionSpec:
    consolidation_policy: str = WHEN_EMPTY_OR_UNDERUTILIZED
    consolidate_after: timedelta | None = timedelta(0)  # None: Never
    budgets: tuple[Budget, ...] = DEFAULT_BUDGETS
    expire_after: timedelta | None = DEFAULT_EXPIRE_AFTER  # None: Never
    keep_idle_reserved: bool = False
    # spec.template.spec.terminationGracePeriod: how long a draining node may wait for pods that will not
    # leave (do-not-disrupt, PDB-blocked); with one, drift (eventual disruption) takes such a node anyway.
    termination_grace_period: timedelta | None = None

    def allowed(self, reason: str, node_count: int, now: datetime) -> int:
        """How many of the NodePool's nodes may be disrupted for `reason` (before subtracting the
        ones already being disrupted)."""
        allowed = UNLIMITED
        for budget in self.budgets:
            if budget.applies_to(reason) and budget.is_active(now):
                allowed = min(allowed, budget.allowed(node_count))
        return allowed


Problem = Callable[[str, str], None]


def parse_disruption(meta: dict, spec: dict, template_spec: dict, path: str, problem: Problem) -> DisruptionSpec:
    """`spec.disruption`, `spec.template.spec.expireAfter` and the keep-idle-reserved annotation of
    a NodePool object; every problem is reported as (json path, message)."""
    disruption = spec.get("disruption")
    disruption_path = f"{path}.spec.disruption"
    if disruption is None:
        disruption = {}
    elif not isinstance(disruption, dict):
        problem(disruption_path, "expected an object")
        disruption = {}
    policy = disruption.get("consolidationPolicy", WHEN_EMPTY_OR_UNDERUTILIZED)
    if policy not in POLICIES:
        problem(f"{disruption_path}.consolidationPolicy", f'"{policy}" is not one of {", ".join(POLICIES)}')
        policy = WHEN_EMPTY_OR_UNDERUTILIZED
    return DisruptionSpec(
        consolidation_policy=policy,
        consolidate_after=_never_or_duration(disruption, "consolidateAfter", timedelta(0), disruption_path, problem),
        budgets=_budgets(disruption.get("budgets"), f"{disruption_path}.budgets", problem),
        expire_after=_never_or_duration(template_spec, "expireAfter", DEFAULT_EXPIRE_AFTER,
                                        f"{path}.spec.template.spec", problem),
        keep_idle_reserved=_keep_idle(meta, f"{path}.metadata.annotations", problem),
        termination_grace_period=_grace_period(template_spec, f"{path}.spec.template.spec", problem),
    )


def _grace_period(template_spec: dict, path: str, problem: Problem) -> timedelta | None:
    if template_spec.get("terminationGracePeriod") is None:
        return None
    if template_spec["terminationGracePeriod"] == NEVER:
        problem(f"{path}.terminationGracePeriod", 'a duration such as "48h" (Never is not allowed here)')
        return None
    return _never_or_duration(template_spec, "terminationGracePeriod", timedelta(0), path, problem)


def _never_or_duration(parent: dict, key: str, default: timedelta, path: str, problem: Problem) -> timedelta | None:
    value = parent.get(key)
    if value is None:
        return default
    if value == NEVER:
        return None
    if not isinstance(value, str):
        problem(f"{path}.{key}", f'expected a duration such as "30s" or "Never", got {value!r}')
        return default
    try:
        duration = parse_duration(value)
    except SpecError as exc:
        problem(f"{path}.{key}", str(exc))
        return default
    if duration < timedelta(0):
        problem(f"{path}.{key}", f'"{value}" must not be negative')
        return default
    return duration


def _budgets(value: Any, path: str, problem: Problem) -> tuple[Budget, ...]:
    if value is None:
        return DEFAULT_BUDGETS
    if not isinstance(value, list):
        problem(path, "expected a list of budgets")
        return DEFAULT_BUDGETS
    if len(value) > MAX_BUDGETS:
        problem(path, f"{len(value)} budgets, at most {MAX_BUDGETS} are allowed")
    budgets = []
    for index, item in enumerate(value):
        budget = _budget(item, f"{path}[{index}]", problem)
        if budget is not None:
            budgets.append(budget)
    return tuple(budgets)


def _budget(item: Any, path: str, problem: Problem) -> Budget | None:
    if not isinstance(item, dict):
        problem(path, "expected an object")
        return None
    nodes = item.get("nodes", "10%")
    if isinstance(nodes, int) and not isinstance(nodes, bool):
        nodes = str(nodes)
    if not isinstance(nodes, str) or not _NODES.match(nodes):
        problem(f"{path}.nodes", f'{nodes!r} is not a node count ("5") or a percentage ("10%")')
        return None
    reasons = item.get("reasons")
    if reasons is not None:
        if not isinstance(reasons, list):
            problem(f"{path}.reasons", "expected a list")
            return None
        unknown = [r for r in reasons if r not in REASONS]
        if unknown:
            problem(f"{path}.reasons", f"{unknown[0]!r} is not one of {', '.join(REASONS)}")
            return None
        reasons = frozenset(reasons)
    schedule_text, duration_text = item.get("schedule"), item.get("duration")
    if (schedule_text is None) != (duration_text is None):
        problem(path, "schedule and duration must be set together")
        return None
    schedule = duration = None
    if schedule_text is not None:
        try:
            if not isinstance(schedule_text, str):
                raise SpecError("expected a cron schedule string")
            schedule = CronSchedule.parse(schedule_text)
        except SpecError as exc:
            problem(f"{path}.schedule", str(exc))
            return None
        try:
            if not isinstance(duration_text, str):
                raise SpecError('expected a duration string such as "8h"')
            duration = parse_duration(duration_text)
        except SpecError as exc:
            problem(f"{path}.duration", str(exc))
            return None
    return Budget(nodes, reasons, schedule, duration)


def _keep_idle(meta: dict, path: str, problem: Problem) -> bool:
    annotations = meta.get("annotations") if isinstance(meta, dict) else None
    if not isinstance(annotations, dict) or KEEP_IDLE_RESERVED_ANNOTATION not in annotations:
        return False
    value = annotations[KEEP_IDLE_RESERVED_ANNOTATION]
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    problem(f"{path}.{KEEP_IDLE_RESERVED_ANNOTATION}", f'{value!r} must be "true" or "false"')
    return False
