"""Queries that both databases karpweb runs on can answer: the quick start and a developer's run use
SQLite, CI and production PostgreSQL, so a lookup only PostgreSQL knows passes CI and breaks the
quick start. SQLite has no JSON `contains` / `contained_by` (Django raises NotSupportedError); a key
lookup (`tags__<key>=value`) or `has_key` works on both. Read from the source, so it holds under
either database."""

import re

from django.apps import apps
from django.db.models import JSONField

from tests.foundation.test_architecture import ROOT, modules

UNSUPPORTED_ON_SQLITE = ("contains", "contained_by")


def json_field_names() -> set[str]:
    return {field.name for model in apps.get_models() for field in model._meta.get_fields()
            if isinstance(field, JSONField)}


def test_no_json_lookup_that_sqlite_cannot_answer():
    names = json_field_names()
    assert {"tags", "labels", "conditions"} <= names  # the check sees the fields it guards
    lookup = re.compile(r"\b(\w+)__(" + "|".join(UNSUPPORTED_ON_SQLITE) + r")\b")
    found = []
    for path in modules().values():  # the product's modules, migrations left out
        for number, line in enumerate(path.read_text().splitlines(), 1):
            for match in lookup.finditer(line):
                if match.group(1).rsplit("__", 1)[-1] in names:
                    found.append(f"{path.relative_to(ROOT)}:{number}: {match.group(0)}")
    assert found == [], "JSON lookups SQLite cannot answer (use a key lookup or has_key):\n" + "\n".join(found)
