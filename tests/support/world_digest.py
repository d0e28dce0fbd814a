"""A digest of what the database holds, that does not depend on primary keys: per model, the number of
rows and a hash of their values, each foreign key written as the row it points at (that row's own
values, its keys left out), so two databases holding the same world give the same digest whatever
order or sequence numbers their rows got.

For a fixed time (time_machine) and a fixed `now`, seed_demo's world has one digest: the seed_demo
tests pin it, so that making the seeding cheaper cannot change what it writes."""

from __future__ import annotations

import datetime
import decimal
import hashlib
import json

from django.apps import apps
from django.db import models

APPS = ("fleet", "reservations", "scheduling")


def _value(value) -> str:
    if isinstance(value, datetime.datetime):
        return value.astimezone(datetime.UTC).isoformat()
    if isinstance(value, float):
        return f"{value:.9g}"  # averages may differ in their last bits between databases
    if isinstance(value, decimal.Decimal):
        return f"{float(value):.9g}"
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True, default=str)
    return repr(value)


def _skipped(field) -> bool:
    """The primary key, the times Django stamps on save (a row the migrations made has its own), and
    an account's external ID (karpweb makes it at random: fleet.models.new_external_id)."""
    from fleet.models import new_external_id

    return (field.primary_key or getattr(field, "auto_now", False) or getattr(field, "auto_now_add", False)
            or field.default is new_external_id)


def _own_fields(model) -> list:
    return [f for f in model._meta.concrete_fields if not f.is_relation and not _skipped(f)]


def _own_labels(model, cache: dict) -> dict:
    """pk -> a label made of the row's own values (no keys), for the rows foreign keys point at."""
    if model not in cache:
        fields = _own_fields(model)
        names = [f.attname for f in fields]
        cache[model] = {
            row["pk"]: hashlib.sha256("|".join(_value(row[n]) for n in names).encode()).hexdigest()[:16]
            for row in model._base_manager.order_by().values("pk", *names)
        }
    return cache[model]


def model_digest(model, cache: dict | None = None) -> tuple[int, str]:
    """(row count, hash of the sorted rows) of one model."""
    cache = {} if cache is None else cache
    fields = [f for f in model._meta.concrete_fields if not _skipped(f)]
    names = [f.attname for f in fields]
    lines = []
    for row in model._base_manager.order_by().values(*names):
        parts = []
        for field, name in zip(fields, names):
            value = row[name]
            if field.is_relation and value is not None:
                value = _own_labels(field.related_model, cache).get(value, "?")
                parts.append(f"{field.name}->{value}")
            else:
                parts.append(f"{field.name}={_value(value)}")
        lines.append("|".join(parts))
    lines.sort()
    return len(lines), hashlib.sha256("\n".join(lines).encode()).hexdigest()[:16]


# Counted from the rows above by the loop (scheduling/totals.py), not written by anyone:
# tests/fleet/test_totals.py checks them against a fresh count.
DERIVED = {"scheduling.ClusterTotals", "scheduling.NodePoolTotals", "scheduling.NodeGroupTotals"}


def world_digest() -> dict[str, tuple[int, str]]:
    """model label -> (rows, hash) for every model of karpweb's own apps (many-to-many tables too), but
    the running totals counted from them."""
    cache: dict = {}
    return {model._meta.label: model_digest(model, cache)
            for app in APPS for model in apps.get_app_config(app).get_models(include_auto_created=True)
            if not model._meta.proxy and model._meta.label not in DERIVED}
