"""Every list page, found from the URL configuration (a new list is covered without a test edit), and
the check that a label or column header reads as a person wrote it."""

import re

from django.urls import URLPattern, URLResolver, get_resolver

from karpweb.views_generic import ObjectListView

# What django-filter appends to a label it makes from a field name and a lookup.
LOOKUP_WORDS = re.compile(r"\b(contains|is equal to|is in|is greater than|is less than|starts with|ends with|"
                          r"is null|is between)\b", re.IGNORECASE)
MACHINE_WORDS = re.compile(r"_|millicores|\bbytes\b|\bid\b")


def list_page_names(patterns=None, namespace=""):
    for entry in patterns if patterns is not None else get_resolver().url_patterns:
        if isinstance(entry, URLResolver):
            inner = f"{namespace}{entry.namespace}:" if entry.namespace else namespace
            yield from list_page_names(entry.url_patterns, inner)
        elif isinstance(entry, URLPattern):
            view_class = getattr(entry.callback, "view_class", None)
            if view_class and issubclass(view_class, ObjectListView):
                yield f"{namespace}{entry.name}"


LIST_PAGES = sorted(set(list_page_names()))


def label_problems(labels: list[str]) -> list[str]:
    """Why each label is not one a person wrote: empty, repeated, a field name, a lookup suffix."""
    problems, seen = [], set()
    for label in labels:
        text = str(label or "").strip()
        if not text:
            problems.append("an empty label")
        elif text.lower() in seen:
            problems.append(f"{text!r} twice")
        elif MACHINE_WORDS.search(text) or LOOKUP_WORDS.search(text) or not (text[0].isupper() or text[:1] == "v"):
            problems.append(f"{text!r} reads as machine-made")
        seen.add(text.lower())
    return problems
