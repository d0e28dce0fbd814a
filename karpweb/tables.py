"""Column types every table shares, registered with django-tables2 so tables built from model fields
use them."""

import django_tables2 as tables
from django_tables2 import utils as tables_utils
from django_tables2.columns import library
from django.db import models
from django.utils import formats, timezone


@library.register
class DateTimeColumn(tables.Column):
    """django-tables2's DateTimeColumn renders each cell through a template it compiles per cell
    (a third of a 50-row page's time); this formats the same text directly: local time in
    SHORT_DATETIME_FORMAT, as the `date` filter does."""

    @classmethod
    def from_field(cls, field, **kwargs):
        if isinstance(field, models.DateTimeField):
            return cls(**kwargs)
        return None

    def render(self, value):
        return formats.date_format(timezone.localtime(value), "SHORT_DATETIME_FORMAT")

    def value(self, value):
        return value.isoformat(sep=" ") if value else value


def _memoize_signatures() -> None:
    """django-tables2 calls inspect.signature on a column's render function for every cell (a fifth
    of a list page's time). A function's parameters do not change, so remember them: keyed by the
    function (bound methods by their function, whose bound signature never varies), bounded so
    callables made per request cannot grow it without end."""
    compute = tables_utils.signature
    if getattr(compute, "memoized", False):
        return
    known: dict = {}

    def signature(fn):
        key = (getattr(fn, "__func__", fn), hasattr(fn, "__self__"))
        try:
            return known[key]
        except (KeyError, TypeError):  # TypeError: an unhashable callable, computed every time
            result = compute(fn)
        if len(known) > 4096:
            known.clear()
        try:
            known[key] = result
        except TypeError:
            pass
        return result

    signature.memoized = True
    tables_utils.signature = signature


_memoize_signatures()
