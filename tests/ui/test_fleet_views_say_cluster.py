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
        assert f'href="{pool.cluster.get_absolute_url()}"' in re.search(r"<h1>(.*?)</h1>", page, re.S).group(1)


def test_a_reservation_page_says_no_cluster_in_all_clusters(demo_world, viewer_client):
    from reservations.models import CapacityReservation

    reservation = CapacityReservation.objects.first()
    title = heading(viewer_client.get(reservation.get_absolute_url()).content.decode())
    assert "all clusters" not in title, title
