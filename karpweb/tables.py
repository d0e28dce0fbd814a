"""Column types every table shares, registered with django-tables2 so tables built from model fields
use them, and PlainRowsTable: a table whose rows skip django-tables2's per-cell machinery."""

from html import escape

import django_tables2 as tables
from django_tables2 import utils as tables_utils
from django_tables2.columns import library
from django.db import models
from django.utils import dateformat, formats, timezone
from django.utils.html import conditional_escape
from django.utils.safestring import SafeString, mark_safe


def short_datetimes():
    """A function writing a time as the `date` filter does with SHORT_DATETIME_FORMAT, in the current
    time zone, for a column of times: the format looked up and parsed once, then the same DateFormat
    methods called for its parts (16 Python calls a time; the filter's way, 41)."""
    zone = timezone.get_current_timezone()
    parts = [(getattr(dateformat.DateFormat, piece), "") if index % 2 else (None, dateformat.re_escaped.sub(r"\1", piece))
             for index, piece in enumerate(dateformat.re_formatchars.split(formats.get_format("SHORT_DATETIME_FORMAT")))
             if piece]

    def write(value):
        written = dateformat.DateFormat(timezone.localtime(value, zone))
        return "".join([str(method(written)) if method else text for method, text in parts])

    return write


def short_datetime(value) -> str:
    """One time, as short_datetimes() writes it."""
    return short_datetimes()(value)


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
        return short_datetime(value)

    def value(self, value):
        return value.isoformat(sep=" ") if value else value


# What django.utils.html.escape() replaces, and with what (html.escape's entities), for str.translate.
ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#x27;"})


def choice_labels(model, field_name: str) -> dict:
    """A choice field's labels by value, as get_FOO_display() finds them (which, called per cell,
    rebuilds the mapping from the field's choices every time)."""
    return dict(model._meta.get_field(field_name).flatchoices)


def link(url: str, text) -> SafeString:
    """`<a href="url">text</a>`, both escaped: what linkify renders."""
    return mark_safe(f'<a href="{escape(url)}">{escape(str(text))}</a>')


def id_link(url: str, text) -> SafeString:
    """`<a class="id" href="url">text</a>`, both escaped: what linkify renders with attrs={"a": {"class": "id"}}."""
    return mark_safe(f'<a class="id" href="{escape(url)}">{escape(str(text))}</a>')


class _Blank:
    """A cell left empty: what a render method that returns "" shows (not the table's default)."""

    __slots__ = ()

    def __html__(self) -> str:
        return ""


BLANK = _Blank()


def cluster_link(cluster_id: int | None) -> SafeString | None:
    """A link to the page of the cluster with primary key `cluster_id` (its name from the process's kept
    list of clusters: no query); None for a fleet-wide row."""
    from karpweb.urlcache import cluster_url
    from fleet.scope import cluster_name

    return None if cluster_id is None else link(cluster_url(cluster_id), cluster_name(cluster_id))


class ClusterColumn(tables.Column):
    """The row's cluster, linking to its page: a Kubernetes-side list shows it in the all-clusters view,
    where the same names run in several clusters (ObjectListView leaves it out of one cluster's view).
    Read from the row's cluster_id and the kept list of clusters: no join, no query a row."""

    def __init__(self, **kwargs):
        # Hidden unless shown (ObjectListView, in the all-clusters view): a table used elsewhere keeps its columns.
        kwargs = {"verbose_name": "Cluster", "accessor": "cluster_id", "order_by": ("cluster__name",), "visible": False,
                  "empty_values": (), **kwargs}
        super().__init__(**kwargs)

    def render(self, record):
        return cluster_cell(record)


def cluster_cell(record) -> SafeString | str | None:
    """A row's Cluster cell: a link to its cluster; a removed cluster's name as its history keeps it
    (a decision's cluster_name); None for a fleet-wide row."""
    if record.cluster_id is None:
        return getattr(record, "cluster_name", None) or None
    return cluster_link(record.cluster_id)


class PlainRowsTable(tables.Table):
    """A django-tables2 table whose rows are written in one pass from plain cell values (row_cells()),
    where django-tables2 renders every cell through BoundRow, BoundColumn, an accessor, a render call
    with inspected arguments and a template node (about a hundred Python calls a cell). The header,
    ordering and pagination stay django-tables2's. For tables without row or cell attributes and
    without pinned rows; tests compare its rows with django-tables2's own."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("template_name", "tables/plain_rows.html")
        super().__init__(*args, **kwargs)

    def row_cells(self):
        """A function giving a record's cells in column order: text (escaped when the row is written),
        HTML (a SafeString, e.g. link()), or None or "" for the table's default, as django-tables2
        shows an empty value; BLANK for an empty cell (a render method's "", which django-tables2 shows as is). Made once a rendering, so it can look up what the rows share once.
        Every subclass gives its own: the base class knows no columns."""
        raise TypeError(f"{type(self).__name__} must define row_cells(): PlainRowsTable has no cells of its own")

    def shows_cluster(self) -> bool:
        """Whether the table has a ClusterColumn shown (first, by its Meta.sequence): row_cells() leaves it out."""
        column = self.base_columns.get("cluster")
        return isinstance(column, ClusterColumn) and self.columns["cluster"].visible

    def cells_with_cluster(self):
        """row_cells(), with the row's cluster first where the table shows it (links made once a cluster)."""
        cells = self.row_cells()
        if not self.shows_cluster():
            return cells
        links: dict = {}

        def with_cluster(record):
            cluster_id = record.cluster_id
            if cluster_id is None:
                return (cluster_cell(record), *cells(record))
            if cluster_id not in links:
                links[cluster_id] = cluster_link(cluster_id)
            return (links[cluster_id], *cells(record))

        return with_cluster

    def plain_rows(self) -> SafeString:
        """The page's rows (every row when not paginated) as HTML, "" when there are none."""
        cells, default = self.cells_with_cluster(), conditional_escape(self.default)
        # conditional_escape() inlined, its escape() a C call: it costs six Python calls a cell.
        return mark_safe("".join([
            "<tr>" + "".join([
                "<td>" + (default if cell is None or cell == "" else cell.__html__() if hasattr(cell, "__html__")
                          else str(cell).translate(ESCAPES)) + "</td>"
                for cell in cells(record)
            ]) + "</tr>"
            for record in self.paginated_rows.data
        ]))


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
