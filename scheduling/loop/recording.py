"""Decisions into the log, in words, without flooding it: a decision that repeats the latest one
about the same subject (same kind, outcome and reason) within the quiet period is not written again."""

import datetime
from dataclasses import dataclass, field

from django.utils import timezone

from scheduling.models import Decision

QUIET_PERIOD = datetime.timedelta(minutes=10)
SUBJECT_LENGTH = Decision._meta.get_field("subject").max_length


def nodes_subject(names: list[str]) -> str:
    """"node a" or "nodes a, b, c": as many names as fit the subject's column, then "and N more" (a
    multi-node consolidation of a 1,000-node cluster names dozens; every name is in objects_involved)."""
    text = f"node{'s' if len(names) > 1 else ''} "
    for index, name in enumerate(names):
        rest = len(names) - index - 1
        more = f" and {rest} more" if rest else ""
        part = f"{', ' if index else ''}{name}"
        if len(text) + len(part) + len(more) > SUBJECT_LENGTH:
            return f"{text} and {len(names) - index} more" if index else text + names[0][:SUBJECT_LENGTH - len(text)]
        text += part
    return text


@dataclass
class PendingDecision:
    kind: str
    subject: str
    reason: str
    mode: str
    outcome: str = Decision.Outcome.RECOMMENDED
    node_pool: object = None
    reservation: object = None
    objects_involved: dict = field(default_factory=dict)
    details: dict = field(default_factory=dict)
    error: str = ""


def record(decisions: list[PendingDecision], now=None) -> int:
    """Write the decisions that are news; returns how many were written."""
    if not decisions:
        return 0
    now = now or timezone.now()
    recent = Decision.objects.filter(
        subject__in={d.subject for d in decisions}, created_at__gte=now - QUIET_PERIOD
    ).order_by("subject", "-created_at", "-id").values_list("subject", "kind", "outcome", "reason")
    latest = {}
    for subject, kind, outcome, reason in recent:
        latest.setdefault(subject, (kind, outcome, reason))
    fresh = [d for d in decisions if latest.get(d.subject) != (d.kind, d.outcome, d.reason)
             or d.outcome in (Decision.Outcome.ACTED, Decision.Outcome.FAILED)]
    Decision.objects.bulk_create([
        Decision(created_at=now, kind=d.kind, outcome=d.outcome, mode=d.mode, subject=d.subject, reason=d.reason,
                 node_pool=d.node_pool, reservation=d.reservation, objects_involved=d.objects_involved,
                 details=d.details, error=d.error)
        for d in fresh
    ])
    return len(fresh)
