"""The console shows one cluster or all (fleet/middleware.py): ?cluster=<name> chooses one and the
session remembers it, ?cluster=all forgets it, an unknown name is said and changes nothing; the
header's picker and every heading say which; the API and the admin are not narrowed by the session."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from fleet.middleware import SESSION_KEY
from fleet.models import Cluster
from fleet.scope import cluster_scope
from tests.factories.scheduling import NodeFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def nodes_in_two(two_clusters):
    home, east, _west = two_clusters
    with cluster_scope(home):
        NodeFactory(name="home-node-1")
    with cluster_scope(east):
        NodeFactory(name="east-node-1")
    return home, east


def messages_of(response):
    return [str(m) for m in response.context["messages"]]


def test_a_chosen_cluster_scopes_every_page_until_all_is_chosen(viewer_client, nodes_in_two):
    home, east = nodes_in_two
    url = reverse("scheduling:nodes")
    page = viewer_client.get(url).content.decode()
    assert "home-node-1" in page and "east-node-1" in page and "in all clusters" in page

    page = viewer_client.get(url, {"cluster": "east"}).content.decode()
    assert "east-node-1" in page and "home-node-1" not in page and "in east" in page
    assert viewer_client.session[SESSION_KEY] == "east"
    # Remembered: the next page, with no parameter, shows the same cluster.
    page = viewer_client.get(url).content.decode()
    assert "east-node-1" in page and "home-node-1" not in page
    assert 'id="cluster-picker"' in page and "cluster east" in page

    page = viewer_client.get(url, {"cluster": "all"}).content.decode()
    assert "home-node-1" in page and "east-node-1" in page
    assert SESSION_KEY not in viewer_client.session


def test_an_unknown_cluster_is_said_and_changes_nothing(viewer_client, nodes_in_two):
    url = reverse("scheduling:nodes")
    viewer_client.get(url, {"cluster": "east"})
    response = viewer_client.get(url, {"cluster": "nowhere<b>"})
    assert response.status_code == 200
    (message,) = messages_of(response)
    assert message.startswith('cluster: no cluster is named "nowhere<b>"') and "still showing east" in message
    page = response.content.decode()
    assert "nowhere&lt;b&gt;" in page and "nowhere<b>" not in page
    assert "east-node-1" in page and "home-node-1" not in page


def test_a_cluster_deleted_since_it_was_chosen_shows_all(viewer_client, nodes_in_two, make_cluster):
    gone = make_cluster("gone")
    viewer_client.get(reverse("scheduling:nodes"), {"cluster": "gone"})
    gone.delete()
    response = viewer_client.get(reverse("scheduling:nodes"))
    assert response.status_code == 200 and "home-node-1" in response.content.decode()
    assert messages_of(response) == ['cluster: "gone" no longer exists; showing all clusters.']


def test_the_parameter_is_not_read_by_the_lists_own_filters(viewer_client, nodes_in_two):
    """?cluster=all is the picker's, not a cluster named "all" for the list's filter (no empty list)."""
    page = viewer_client.get(reverse("scheduling:nodes"), {"cluster": "all", "q": "node-1"}).content.decode()
    assert "home-node-1" in page and "east-node-1" in page


def test_the_picker_keeps_the_page_and_its_filters_and_drops_the_page_number(viewer_client, nodes_in_two):
    page = viewer_client.get(reverse("scheduling:nodes"), {"q": "node", "page": "1"}).content.decode()
    assert 'href="/nodes/?q=node&amp;cluster=east"' in page
    assert 'href="/nodes/?q=node&amp;cluster=all"' in page


def test_a_fleet_of_one_shows_no_picker_and_no_cluster_in_headings(viewer_client, db):
    page = viewer_client.get(reverse("scheduling:nodes")).content.decode()
    assert "cluster-picker" not in page and "all clusters" not in page and "cluster-shown" not in page


def test_the_api_and_admin_are_not_narrowed_by_the_session(client, admin_user, nodes_in_two):
    client.force_login(admin_user)
    client.get(reverse("scheduling:nodes"), {"cluster": "east"})
    names = {row["name"] for row in client.get("/api/v1/nodes/").json()["results"]}
    assert {"home-node-1", "east-node-1"} <= names
    admin = client.get(reverse("admin:scheduling_node_changelist")).content.decode()
    assert "home-node-1" in admin and "east-node-1" in admin


def cluster_reads(client, url, data=None):
    with CaptureQueriesContext(connection) as captured:
        assert client.get(url, data).status_code == 200
    return [q["sql"] for q in captured if 'FROM "fleet_cluster"' in q["sql"]]


def test_the_clusters_are_read_at_most_once_a_page_and_kept_by_the_process(viewer_client, nodes_in_two, make_cluster):
    url = reverse("scheduling:nodes")
    from fleet.scope import default_cluster

    default_cluster()  # kept by a process that has served pages (the test just made clusters: it forgot it)
    # One list of clusters per process (fleet.scope.fleet_clusters): the default's look-up read it, the picker reuses it.
    assert cluster_reads(viewer_client, url, {"cluster": "east"}) == []
    assert cluster_reads(viewer_client, url) == []
    # A cluster made elsewhere (another process) is found by its name, with one fresh read.
    from fleet.scope import fleet_clusters

    fleet_clusters()
    Cluster.objects.bulk_create([Cluster(name="elsewhere", account=east_account(nodes_in_two))])  # no signal
    assert len(cluster_reads(viewer_client, url, {"cluster": "elsewhere"})) == 1
    assert viewer_client.session[SESSION_KEY] == "elsewhere"


def east_account(clusters):
    return clusters[1].account
