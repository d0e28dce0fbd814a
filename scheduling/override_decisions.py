"""An operator's own changes as decisions: every manual change (admin, UI, API, CLI) that the audit log records
also becomes a Decision of kind `override`, in words, so the decisions page's "manual override" filter finds
selector-term saves, NodePool edits, mode switches and applied recommendations beside what the loop decided."""

from __future__ import annotations

import json

from django.db import models

from scheduling.models import AuditEntry, Decision

# The names an operator knows the fields by (upstream's where there is one).
FIELD_NAMES = {"capacity_reservation_selector_terms": "capacityReservationSelectorTerms", "node_class": "EC2NodeClass",
               "node_class_ref": "nodeClassRef", "open_reservations": "open mode", "total_instance_count": "instance count",
               "end_date": "end date", "keep_idle_reserved_nodes": "keep idle reserved nodes"}
SHOWN = 120  # characters of one value in words
WHERE = {"ui": "in the console", "admin": "in the admin", "api": "through the API", "cli": "from the command line"}


def _short(value) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= SHOWN else text[:SHOWN - 1] + "…"


def _change_in_words(field: str, old, new) -> str:
    name = FIELD_NAMES.get(field, field.replace("_", " "))
    if field == "recommendation":
        return f"applied the recommendation: {_short(new)}"
    if isinstance(old, list) and isinstance(new, list):
        added = [item for item in new if item not in old]
        removed = [item for item in old if item not in new]
        parts = [f"added {_short(item)}" for item in added] + [f"removed {_short(item)}" for item in removed]
        return f"{name}: " + ("; ".join(parts) if parts else "reordered")
    if old in (None, "", [], {}):
        return f"{name} set to {_short(new)}"
    return f"{name} {_short(old)} → {_short(new) if new not in (None, '') else '(blank)'}"


def changes_in_words(changes: dict) -> str:
    return "; ".join(_change_in_words(field, *pair) for field, pair in changes.items()
                     if isinstance(pair, (list, tuple)) and len(pair) == 2) or "no field changed"


def record_override(entry: AuditEntry, obj: models.Model) -> Decision:
    from reservations.models import CapacityReservation
    from scheduling.models import NodePool
    from scheduling.modes import global_mode

    label = obj._meta.verbose_name
    verb = {"create": "created", "delete": "deleted"}.get(entry.action, "changed")
    return Decision.objects.create(
        kind=Decision.Kind.OVERRIDE, outcome=Decision.Outcome.ACTED, mode=global_mode(), subject=f"{label} {entry.object_repr}"[:255],
        reason=(f"{entry.actor} {verb} {label} {entry.object_repr} {WHERE.get(entry.source, entry.source)}: "
                f"{changes_in_words(entry.changes)}"),
        node_pool=obj if isinstance(obj, NodePool) else None,
        reservation=obj if isinstance(obj, CapacityReservation) else None,
        details={"auditEntry": entry.pk, "changes": entry.changes, "source": entry.source},
    )
