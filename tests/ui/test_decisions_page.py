"""The decisions page, whose table is a PlainRowsTable (karpweb/tables.py): its rows written in one pass
instead of through django-tables2's per-cell machinery, with the same columns, sort links, pages, htmx
partial, NodePool links and escaping."""

import datetime
import html
import re
import sys

import pytest
from django.test import RequestFactory
from django.urls import reverse
from django.utils import formats, timezone
from django.utils.html import conditional_escape
from django_tables2 import RequestConfig
from hypothesis import given, settings
from hypothesis import strategies as st

from fleet.models import Cluster

from karpweb.tables import short_datetimes
from karpweb.views_generic import PAGE_SIZE
from scheduling.models import Decision, Mode, NodePool
from scheduling.tables import DecisionTable
from tests.factories.scheduling import DecisionFactory, NodePoolFactory

URL = "/decisions/"
HEADERS = ["Created at", "Kind", "Outcome", "Mode", "Subject", "Reason", "NodePool"]
SCRIPT = '<script>alert("x")</script> & \'quoted\''


def django_tables2_rows(table) -> str:
    """The rows as django-tables2 renders them through templates/tables/table.html."""
    return "".join("<tr>" + "".join(f"<td>{conditional_escape(cell)}</td>" for cell in row) + "</tr>"
                   for row in table.paginated_rows)


def rows(html: str) -> list[list[str]]:
    """The body's rows, each a list of its cells' HTML."""
    body = re.search(r"<tbody[^>]*>(.*?)</tbody>", html, re.S).group(1)
    return [re.findall(r"<td>(.*?)</td>", row, re.S) for row in re.findall(r"<tr>(.*?)</tr>", body, re.S)]


def normalized(html: str) -> str:
    return re.sub(r">\s+<", "><", re.sub(r"\s+", " ", html)).strip()


def page(client, **params):
    response = client.get(URL, params)
    assert response.status_code == 200
    return response.content.decode()


# --- the rows equal django-tables2's ------------------------------------------------------------

names = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="/"), min_size=1, max_size=20)
texts = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40) | st.sampled_from(["", SCRIPT])
moments = st.datetimes(min_value=datetime.datetime(2000, 1, 1), max_value=datetime.datetime(2100, 1, 1),
                       timezones=st.just(datetime.timezone.utc))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(moments, st.sampled_from(Decision.Kind.values), st.sampled_from(Decision.Outcome.values),
                          st.sampled_from(Mode.values), texts, texts, st.none() | names), max_size=6))
def test_plain_rows_are_django_tables2s_rows(records):
    cluster = Cluster(name="rows")  # unsaved: a Decision made without one asks the database for the default
    decisions = [Decision(created_at=at, kind=kind, outcome=outcome, mode=mode, subject=subject, reason=reason,
                          node_pool=NodePool(name=pool, cluster=cluster) if pool else None, cluster=cluster)
                 for at, kind, outcome, mode, subject, reason, pool in records]
    table = DecisionTable(decisions)
    assert table.plain_rows() == django_tables2_rows(table)


def test_the_whole_table_is_django_tables2s_table(viewer_client, db):
    """Header, sort links, rows and pagination: the page's table as django-tables2's own template
    renders it, for a sorted, filtered second page."""
    pool = NodePoolFactory(name="web")
    for index in range(PAGE_SIZE + 7):
        DecisionFactory(kind=Decision.Kind.DRAIN if index % 3 else Decision.Kind.LAUNCH, node_pool=pool if index % 2 else None,
                        subject=f"node n-{index}", reason=SCRIPT if index == 0 else f"reason {index}")
    request = RequestFactory().get(URL, {"sort": "-subject", "page": "2", "kind": ["drain", "launch"]})
    table = DecisionTable(Decision.objects.select_related("node_pool").order_by("-created_at"))
    RequestConfig(request, paginate={"per_page": PAGE_SIZE}).configure(table)
    assert table.template_name == "tables/plain_rows.html"
    plain = table.as_html(request)
    table.template_name = "tables/table.html"
    assert normalized(plain) == normalized(table.as_html(request))
    assert len(rows(plain)) == 7 and '<a href="?sort=subject&amp;page=2&amp;kind=drain&amp;kind=launch">' in plain


@pytest.mark.parametrize("at", [datetime.datetime(2026, 11, 26, h, m, s, tzinfo=datetime.timezone.utc)
                                for h, m, s in [(0, 0, 0), (12, 0, 0), (12, 30, 5), (13, 0, 59), (23, 59, 0), (7, 5, 0)]])
def test_short_datetimes_write_what_the_date_filter_writes(at):
    assert short_datetimes()(at) == formats.date_format(timezone.localtime(at), "SHORT_DATETIME_FORMAT")


# --- what the page shows --------------------------------------------------------------------------

def test_the_columns_and_one_row(viewer_client, db):
    pool = NodePoolFactory(name="gpu-reserved")
    made = DecisionFactory(kind=Decision.Kind.DRAIN, outcome=Decision.Outcome.ACTED, mode=Mode.CONTROL, subject="node gpu-3",
                           reason="node gpu-3 drains at 13:20", node_pool=pool)
    content = page(viewer_client)
    assert [normalized(re.sub(r"<[^>]+>", "", th)) for th in re.findall(r"<th[^>]*>(.*?)</th>", content, re.S)] == HEADERS
    assert rows(content) == [[short_datetimes()(made.created_at), "capacity-block drain", "Acted", "control (act)", "node gpu-3",
                           "node gpu-3 drains at 13:20", '<a href="/nodepools/gpu-reserved/">gpu-reserved</a>']]


def test_values_are_escaped_and_empty_ones_show_a_dash(viewer_client, db):
    DecisionFactory(subject="", reason=SCRIPT, node_pool=None)
    content = page(viewer_client)
    assert 'alert("x")' not in content
    assert rows(content) == [[rows(content)[0][0], "launch a node", "recommended (observe mode)", "observe (recommend only)", "—",
                           "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#x27;quoted&#x27;", "—"]]


def test_the_nodepool_link_opens_the_nodepool(viewer_client, db):
    DecisionFactory(node_pool=NodePoolFactory(name="batch & co"))
    href = re.search(r'<td><a href="([^"]+)">batch &amp; co</a></td>', page(viewer_client)).group(1)
    assert html.unescape(href) == reverse("scheduling:nodepool", args=["batch & co"]) == "/nodepools/batch%20&%20co/"
    detail = viewer_client.get(html.unescape(href))
    assert detail.status_code == 200 and detail.context["pool"] == NodePool.objects.get(name="batch & co")


@pytest.mark.parametrize("column, key", [
    ("kind", lambda d: d.kind), ("outcome", lambda d: d.outcome), ("subject", lambda d: d.subject),
    ("reason", lambda d: d.reason), ("created_at", lambda d: d.created_at),
    ("node_pool", lambda d: d.node_pool.name if d.node_pool else ""),
])
def test_each_sort_link_orders_the_rows(viewer_client, db, column, key):
    start = timezone.now() - datetime.timedelta(hours=1)
    pools = [NodePoolFactory(name=name) for name in ("b-pool", "d-pool", "a-pool", "c-pool")]
    for index, (kind, subject) in enumerate([("drain", "pod b"), ("launch", "node c"), ("bind", "pod a"), ("drift", "node a")]):
        DecisionFactory(kind=kind, subject=subject, reason=f"because {3 - index}", node_pool=pools[index],
                        outcome=Decision.Outcome.values[index], created_at=start + datetime.timedelta(minutes=index))
    # Unsorted, newest first; the header links to the column ascending, then to it descending.
    unsorted = page(viewer_client)
    assert [cells[4] for cells in rows(unsorted)] == ["node a", "pod a", "node c", "pod b"]
    assert f'<a href="?sort={column}">' in unsorted
    ascending = sorted(Decision.objects.select_related("node_pool"), key=key)
    assert [cells[4] for cells in rows(page(viewer_client, sort=column))] == [d.subject for d in ascending]
    assert f'<a href="?sort=-{column}">' in page(viewer_client, sort=column)
    assert [cells[4] for cells in rows(page(viewer_client, sort=f"-{column}"))] == [d.subject for d in reversed(ascending)]


def test_pages_of_fifty_with_links_that_keep_the_filter(viewer_client, db):
    start = timezone.now() - datetime.timedelta(days=1)
    for index in range(PAGE_SIZE + 5):
        DecisionFactory(kind=Decision.Kind.DRAIN, subject=f"node n-{index:03d}", created_at=start + datetime.timedelta(minutes=index))
    DecisionFactory(kind=Decision.Kind.LAUNCH, subject="pod other")
    first = page(viewer_client, kind="drain")
    assert [cells[4] for cells in rows(first)] == [f"node n-{index:03d}" for index in range(PAGE_SIZE + 4, 4, -1)]
    assert '<a href="?kind=drain&amp;page=2">' in first
    second = page(viewer_client, kind="drain", page="2")
    assert [cells[4] for cells in rows(second)] == [f"node n-{index:03d}" for index in range(4, -1, -1)]


def test_the_htmx_partial_is_the_filtered_table_alone(viewer_client, db):
    DecisionFactory(kind=Decision.Kind.DRAIN, subject="node gpu-3")
    DecisionFactory(kind=Decision.Kind.LAUNCH, subject="pod default/web-7")
    response = viewer_client.get(URL, {"kind": "drain"}, headers={"HX-Request": "true"})
    partial = response.content.decode()
    assert response.status_code == 200 and response.templates[0].name == "htmx/table.html"
    assert partial.lstrip().startswith('<div class="table-container">') and "<form" not in partial and "<html" not in partial
    assert [cells[4] for cells in rows(partial)] == ["node gpu-3"]


def test_no_decisions_is_an_empty_body(viewer_client, db):
    assert rows(page(viewer_client)) == []


def python_calls(client, url) -> int:
    """Python function calls one request makes (a warmed-up one)."""
    calls = 0

    def count(frame, event, arg):
        nonlocal calls
        calls += event == "call"

    assert client.get(url).status_code == 200
    sys.setprofile(count)
    try:
        client.get(url)
    finally:
        sys.setprofile(None)
    return calls


def test_python_calls_a_row_and_a_page(viewer_client, db):
    """The figure that predicts Python 3.11's frame-stack thrash (docs/operations.md#performance): how
    many Python calls the page makes, and each row. Through django-tables2's cells and Django's widget
    templates it was 737 a row and 57,000 for a page of 50; written plainly, 46 and 13,000."""
    pools = [NodePoolFactory(name=f"pool-{index}") for index in range(3)]
    for index in range(5):
        DecisionFactory(node_pool=pools[index % 3])
    few = python_calls(viewer_client, URL)
    for index in range(PAGE_SIZE):
        DecisionFactory(node_pool=pools[index % 3], reason=SCRIPT)
    full = python_calls(viewer_client, URL)
    assert (full - few) / (PAGE_SIZE - 5) < 60 and full < 20_000, (few, full)
