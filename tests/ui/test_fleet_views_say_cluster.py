"""Every fleet-wide view says its cluster (#48): headings that read as English in both views, a Cluster
column on the Kubernetes-side lists in "all clusters" (not in one cluster's view), on the demo fleet."""

import re

import pytest
from django.urls import reverse

from fleet.scope import default_cluster
from scheduling.models import NodePool

pytestmark = pytest.mark.django_db


def heading(page: str) -> str:
    text = re.sub(r"<[^>]+>", "", re.search(r"<h1>(.*?)</h1>", page, re.S).group(1))
    return re.sub(r"\s+", " ", text).strip()


def test_the_fleet_lists_do_not_say_all_clusters(demo_world, viewer_client):
    assert heading(viewer_client.get(reverse("fleet:clusters")).content.decode()) == "Clusters"
    assert heading(viewer_client.get(reverse("fleet:accounts")).content.decode()) == "AWS accounts"
    assert heading(viewer_client.get(reverse("scheduling:nodes")).content.decode()) == "Nodes in all clusters"


def test_a_detail_page_names_its_own_cluster_in_either_view(demo_world, viewer_client):
    pool = NodePool.objects.select_related("cluster").exclude(cluster=default_cluster()).first()
    for chosen in ({}, {"cluster": pool.cluster.name}):
        page = viewer_client.get(pool.get_absolute_url(), chosen).content.decode()
        title = heading(page)
        assert "all clusters" not in title and title.endswith(f"in {pool.cluster.name}"), title


def test_a_reservation_page_says_no_cluster_in_all_clusters(demo_world, viewer_client):
    from reservations.models import CapacityReservation

    reservation = CapacityReservation.objects.first()
    title = heading(viewer_client.get(reservation.get_absolute_url()).content.decode())
    assert "all clusters" not in title, title


KUBERNETES_LISTS = ("scheduling:nodepools", "scheduling:nodes", "scheduling:nodeclaims", "scheduling:pods",
                    "scheduling:decisions", "scheduling:karpenter_audit", "reservations:nodeclasses")


def table_of(page: str) -> tuple[list[str], list[str]]:
    """(header texts, each body row's first cell's HTML) of the page's list."""
    table = re.search(r'<div id="table".*?<table.*?</table>', page, re.S).group(0)
    headers = [re.sub(r"<[^>]+>|\s+", "", cell) for cell in re.findall(r"<th[^>]*>(.*?)</th>", table, re.S)]
    body = re.search(r"<tbody[^>]*>(.*?)</tbody>", table, re.S).group(1)
    return headers, re.findall(r"<tr[^>]*>\s*<td[^>]*>(.*?)</td>", body, re.S)


def test_every_kubernetes_list_says_each_rows_cluster_in_all_clusters(demo_world, viewer_client):
    from fleet.models import Cluster

    from tests.factories.scheduling import DecisionFactory

    clusters = {cluster.name: cluster.get_absolute_url() for cluster in Cluster.objects.all()}
    from django.utils import timezone

    from scheduling.models import KarpenterLaunch

    for cluster in Cluster.objects.all():  # the demo has no decisions or Karpenter launches yet: one a cluster, same names
        DecisionFactory(cluster=cluster, subject="pod default/web-1")
        KarpenterLaunch.objects.create(cluster=cluster, claim_name="default-x1", instance_type="m5.large", zone="us-east-1a",
                                       capacity_type="on-demand", launched_at=timezone.now(),
                                       outcome=KarpenterLaunch.Outcome.NO_FREE_UNIT, reason="none free")
    for name in KUBERNETES_LISTS:
        headers, first_cells = table_of(viewer_client.get(reverse(name), {"per_page": 1000}).content.decode())
        assert headers[0] == "Cluster", (name, headers)
        assert first_cells, name
        linked = {re.search(r'>([^<]+)</a>', cell).group(1) for cell in first_cells}
        for cluster in linked:
            assert f'href="{clusters[cluster]}"' in "".join(first_cells), (name, cluster)
        assert len(linked) > 1, (name, linked)


def test_one_clusters_view_has_no_cluster_column(demo_world, viewer_client):
    one = default_cluster().name
    for name in KUBERNETES_LISTS:
        headers, _cells = table_of(viewer_client.get(reverse(name), {"cluster": one}).content.decode())
        assert "Cluster" not in headers, (name, headers)


@pytest.mark.parametrize("params", [{"sort": "-cluster"}, {"sort": "cluster", "page": "2"}])
def test_the_cluster_column_is_django_tables2s_column(params):
    """A PlainRowsTable's rows with the Cluster column shown are what django-tables2 renders, sorted by it too."""
    from scheduling.tables import PodTable
    from scheduling.views import PodListView
    from tests.support.plain_rows import configured, same_rows, same_table
    from tests.ui.test_pod_list_rows import pods

    pods()
    request, table = configured(PodTable, PodListView, "/pods/", params, cluster_column=True)
    same_rows(table)
    assert '<a href="/fleet/clusters/west/">west</a>' in same_table(request, table)
