"""The pods list's table is a PlainRowsTable (karpweb/tables.py): its rows, written in one pass from plain
cell values, equal django-tables2's own rendering of the same table, for every kind of cell the list has
(links to the pod and its node in a fleet of two clusters whose nodes share names, pending pods, CPU and
memory amounts in each of their forms, empty values, escaping)."""

import pytest

from fleet import scope
from karpweb.views_generic import PAGE_SIZE
from scheduling.models import Pod
from scheduling.tables import PodTable
from scheduling.views import PodListView
from tests.factories.scheduling import PodFactory
from tests.support.plain_rows import HOSTILE, configured, same_rows, same_table, second_cluster, without_cluster
from tests.ui.test_decisions_page import rows

pytestmark = pytest.mark.django_db
# CPU: whole cores, millicores, none; memory: binary, decimal, inexact, none.
AMOUNTS = [(500, 512 * 2**20), (2000, 10**9), (0, 0), (1500, 1938410 * 2**20 + 5), (250, 7577 * 2**20)]


def pods():
    for index, (cpu, memory) in enumerate(AMOUNTS):
        PodFactory(name=f"web-{index}", node_name="node-a" if index % 2 else "node-b", phase="Running",
                   cpu_request_millicores=cpu, memory_request_bytes=memory)
    PodFactory(namespace=f"ns {HOSTILE}", name=f"odd {HOSTILE}", node_name=f"node {HOSTILE}", phase=HOSTILE)
    PodFactory(name="pending-1", node_name="", phase="Pending")
    PodFactory(name="no-phase", node_name="node-a", phase="")
    with scope.cluster_scope(second_cluster()):  # a node "node-a" of its own
        PodFactory(name="west-1", node_name="node-a", phase="Running")
    for index in range(PAGE_SIZE + 3):
        PodFactory(namespace="batch", name=f"job-{index:03}", node_name=f"node-{index % 4}" if index % 3 else "",
                   cpu_request_millicores=100 * index, memory_request_bytes=2**20 * index)


def table_for(params):
    return configured(PodTable, PodListView, "/pods/", params)


@pytest.mark.parametrize("params", [{}, {"page": "2"}, {"sort": "-name"}, {"sort": "node_name"},
                                    {"sort": "-memory_request_bytes", "page": "2"}, {"sort": "phase"}])
def test_plain_rows_are_django_tables2s_rows(db, params):
    pods()
    _, table = table_for(params)
    same_rows(table)


def test_the_whole_table_is_django_tables2s_table(db):
    """Header, sort links, rows and pagination, as django-tables2's own template renders them."""
    pods()
    request, table = table_for({"sort": "-name", "page": "2"})
    plain = same_table(request, table)
    assert len(rows(plain)) == Pod.objects.count() - PAGE_SIZE and '<a href="?sort=name&amp;page=2">' in plain


def test_the_page_shows_each_clusters_links(viewer_client, db):
    pods()
    shown = {cells[1]: cells for cells in without_cluster(rows(viewer_client.get("/pods/", {"sort": "name", "per_page": "100"})
                                               .content.decode()))}
    home = scope.default_cluster().name
    assert shown['<a href="/clusters/west/pods/default/west-1/">west-1</a>'][2] == \
        '<a href="/clusters/west/nodes/node-a/">node-a</a>'
    assert shown[f'<a href="/clusters/{home}/pods/default/web-1/">web-1</a>'][2:] == [
        f'<a href="/clusters/{home}/nodes/node-a/">node-a</a>', "Running", "2", "1G"]
    assert shown[f'<a href="/clusters/{home}/pods/default/pending-1/">pending-1</a>'][2] == "—"
    assert shown[f'<a href="/clusters/{home}/pods/default/no-phase/">no-phase</a>'][3] == "—"
    odd = next(cells for cells in shown.values() if cells[0] == "ns &lt;b&gt;&amp;&quot;&#x27;")
    assert odd[3] == "&lt;b&gt;&amp;&quot;&#x27;" and odd[4:] == ["500m", "512Mi"]
