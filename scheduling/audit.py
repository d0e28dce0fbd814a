"""The audit log of manual changes: one function every entry point (admin, UI, API, CLI) calls."""

import datetime
import decimal

from django.contrib.contenttypes.models import ContentType
from django.db import models

from scheduling.models import AuditEntry


def json_safe(value):
    """A JSON-storable form of a form/model value (instances by their str, dates in ISO 8601)."""
    if isinstance(value, models.Model):
        return str(value)
    if isinstance(value, (models.QuerySet, list, tuple, set)):
        return [json_safe(item) for item in value]
    if isinstance(value, dict):
        return {str(key): json_safe(item) for key, item in value.items()}
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, (decimal.Decimal, datetime.timedelta)):
        return str(value)
    return value


def diff(before: dict, after: dict) -> dict:
    """{field: [old, new]} for the fields whose JSON-safe value changed."""
    changes = {}
    for field in sorted(set(before) | set(after)):
        old, new = json_safe(before.get(field)), json_safe(after.get(field))
        if old != new:
            changes[field] = [old, new]
    return changes


def record_change(*, user, source: str, obj: models.Model, action: str, changes: dict | None = None,
                  as_decision: bool = True, label: str | None = None, object_id: str | None = None) -> AuditEntry:
    """`as_decision`: also show it on the decisions page as a manual override (a change to what a
    cluster runs); False for who-may-do-what changes (tokens, users, groups, schedules). `label`: what
    the entry calls the object, and `object_id` its id, when str(obj) or its key would say too much (a
    token's digest)."""
    from scheduling.override_decisions import record_override

    actor = getattr(user, "get_username", lambda: "")() or "anonymous"
    entry = AuditEntry.objects.create(
        user=user if getattr(user, "pk", None) else None,
        actor=actor,
        source=source,
        action=action,
        content_type=ContentType.objects.get_for_model(obj, for_concrete_model=False),
        object_id=object_id or str(obj.pk),
        object_repr=(label or str(obj))[:255],
        changes=changes or {},
    )
    if as_decision:
        record_override(entry, obj)  # the decisions page shows an operator's own changes as manual overrides
    return entry
