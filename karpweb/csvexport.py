"""CSV downloads of the console's lists (`?export=csv` on a list page): the rows the list's filters
keep, in the requester's scope, streamed so a long list never sits in memory.

A cell a spreadsheet would read as a formula is neutralised as OWASP's CSV-injection guidance says:
text that starts with `=`, `+`, `-`, `@`, a tab or a carriage return gets a leading `'`. Numbers
(int, float, Decimal) are written as they are: they come from karpweb's own numeric fields, cannot
carry a formula, and a spreadsheet must read `-3` as minus three.

The rows are read while the response streams, after the view has returned and the middleware has
closed the requester's access and the header's cluster (context variables, fleet/access.py and
fleet/scope.py). The queryset's iterator is made in the view, so its query carries the requester's
scope; the rows are also produced inside a copy of the view's context (`contextvars.copy_context`),
so that any other read a cell makes runs in that scope too, never unrestricted."""

from __future__ import annotations

import contextvars
import csv
import datetime
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from decimal import Decimal

from django.http import StreamingHttpResponse

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
CHUNK_ROWS = 2000  # rows read from the database at a time (QuerySet.iterator)


def safe_cell(value) -> str | int | float | Decimal:
    """One cell: numbers as they are, times as ISO 8601 in UTC, None empty, text with a formula's
    first character neutralised."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float, Decimal)):
        return value
    if isinstance(value, datetime.datetime):
        return value.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    text = str(value)
    return "'" + text if text.startswith(FORMULA_STARTS) else text


class _Line:
    """A file for csv.writer whose write() hands the line back (nothing is kept)."""

    def write(self, line: str) -> str:
        return line


Column = tuple[str, Callable[[object], object]]  # header, the cell of a row


@dataclass(frozen=True)
class CsvExport:
    """One download a list offers: its file name's stem, the link's words, the columns, and the rows
    it writes from the list's filtered queryset (`rows(view, queryset)`, or an HttpResponse refusing)."""

    stem: str
    label: str
    columns: Sequence[Column]
    rows: Callable = lambda view, queryset: queryset


def csv_lines(columns: Sequence[Column], rows: Iterable) -> Iterator[str]:
    writer = csv.writer(_Line())
    yield writer.writerow([header for header, _ in columns])
    for row in rows:
        yield writer.writerow([safe_cell(cell(row)) for _, cell in columns])


def _in_context(context: contextvars.Context, lines: Iterator[str]) -> Iterator[str]:
    while True:
        try:
            yield context.run(next, lines)
        except StopIteration:
            return


def streamed_csv(filename: str, columns: Sequence[Column], rows: Iterable) -> StreamingHttpResponse:
    """A download of `rows` (a QuerySet is read CHUNK_ROWS at a time), produced in this request's
    context (its requester's scope) however late the server iterates it."""
    if hasattr(rows, "iterator"):
        rows = rows.iterator(chunk_size=CHUNK_ROWS)
    response = StreamingHttpResponse(_in_context(contextvars.copy_context(), csv_lines(columns, rows)),
                                     content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response
