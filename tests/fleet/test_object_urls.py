"""A Kubernetes-side object's pages and API endpoints carry its cluster: two clusters may both have a
NodePool "default" (unique per cluster and name). /clusters/<cluster>/nodepools/<name>/ is each one's
page; the route without a cluster still answers (a fleet of one, old links): the page itself when one
cluster has the name, a choice when several do. The API's details take ?cluster=."""

import pytest
from django.urls import reverse

from fleet import scope
from fleet.middleware import SESSION_KEY
from tests.factories.reservations import EC2NodeClassFactory
from tests.factories.scheduling import DecisionFactory, NodeClaimFactory, NodeFactory, NodePoolFactory, PodFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def twins(two_clusters):
    """East and west each hold a NodePool "default" (weights 10 and 20 tell them apart), a node
    "twin-node" in it, an EC2NodeClass "twin-class", a NodeClaim and a pod of one name."""
    _home, east, west = two_clusters
    made = {}
    for weight, cluster in ((10, east), (20, west)):
        with scope.cluster_scope(cluster):
            node_class = EC2NodeClassFactory(name="twin-class")
            pool = NodePoolFactory(name="default", weight=weight, node_class=node_class)
            node = NodeFactory(name="twin-node", node_pool=pool)
            claim = NodeClaimFactory(name="twin-claim", node_pool=pool)
            pod = PodFactory(namespace="ns", name="twin-pod", node=node, node_name=node.name)
            DecisionFactory(node_pool=pool, subject=f"twin decision {cluster.name}")
            made[cluster.name] = dict(pool=pool, node=node, claim=claim, pod=pod, node_class=node_class)
    return east, west, made


def test_each_clusters_object_links_to_its_own_page(viewer_client, twins):
    east, west, made = twins
    assert made["east"]["pool"].get_absolute_url() == "/clusters/east/nodepools/default/"
    assert made["west"]["pool"].get_absolute_url() == "/clusters/west/nodepools/default/"
    assert made["west"]["pod"].get_absolute_url() == "/clusters/west/pods/ns/twin-pod/"
    assert made["west"]["node_class"].get_edit_url() == "/clusters/west/nodeclasses/twin-class/edit/"
    east_page = viewer_client.get("/clusters/east/nodepools/default/")
    west_page = viewer_client.get("/clusters/west/nodepools/default/")
    assert (east_page.status_code, west_page.status_code) == (200, 200)
    assert east_page.context["pool"].weight == 10 and west_page.context["pool"].weight == 20
    assert "in west" in west_page.content.decode()  # the heading names the URL's cluster
    assert SESSION_KEY not in viewer_client.session  # the header's choice is not changed by a link
    for kind, url in (("node", "/clusters/west/nodes/twin-node/"), ("claim", "/clusters/west/nodeclaims/twin-claim/"),
                      ("pod", "/clusters/west/pods/ns/twin-pod/"),
                      ("node_class", "/clusters/west/nodeclasses/twin-class/")):
        page = viewer_client.get(url)
        assert page.status_code == 200, url
        shown = page.context["claim" if kind == "claim" else kind]
        assert shown.pk == made["west"][kind].pk, url
    assert viewer_client.get("/clusters/nowhere/nodepools/default/").status_code == 404
    assert viewer_client.get("/clusters/east/nodepools/absent/").status_code == 404


def test_every_list_links_to_the_right_clusters_object(viewer_client, twins):
    east, west, made = twins
    pools = viewer_client.get(reverse("scheduling:nodepools")).content.decode()
    assert 'href="/clusters/east/nodepools/default/"' in pools and 'href="/clusters/west/nodepools/default/"' in pools
    nodes = viewer_client.get(reverse("scheduling:nodes")).content.decode()
    assert 'href="/clusters/east/nodes/twin-node/"' in nodes and 'href="/clusters/west/nodes/twin-node/"' in nodes
    pods = viewer_client.get(reverse("scheduling:pods")).content.decode()
    assert 'href="/clusters/west/nodes/twin-node/"' in pods and 'href="/clusters/west/pods/ns/twin-pod/"' in pods
    classes = viewer_client.get(reverse("reservations:nodeclasses")).content.decode()
    assert 'href="/clusters/east/nodeclasses/twin-class/"' in classes
    decisions = viewer_client.get(reverse("scheduling:decisions"), {"q": "twin decision"}).content.decode()
    assert 'href="/clusters/east/nodepools/default/"' in decisions and 'href="/clusters/west/nodepools/default/"' in decisions
    node_class_page = viewer_client.get("/clusters/west/nodeclasses/twin-class/").content.decode()
    assert 'href="/clusters/west/nodepools/default/"' in node_class_page


def test_the_route_without_a_cluster_answers_in_the_only_cluster_or_asks_which(viewer_client, twins):
    east, west, made = twins
    ambiguous = viewer_client.get("/nodepools/default/")
    assert ambiguous.status_code == 300
    text = ambiguous.content.decode()
    assert "2 clusters have a NodePool &quot;default&quot; (east, west)" in text
    assert 'href="/clusters/east/nodepools/default/"' in text and 'href="/clusters/west/nodepools/default/"' in text
    # The header's choice narrows it to one: that cluster's page, at the old address.
    viewer_client.get(reverse("scheduling:nodepools"), {"cluster": "west"})
    chosen = viewer_client.get("/nodepools/default/")
    assert chosen.status_code == 200 and chosen.context["pool"].weight == 20
    # Only east has it: the chosen cluster (west) has none, and the page says where it is.
    with scope.cluster_scope(east):
        NodePoolFactory(name="east-only", weight=30)
    missing = viewer_client.get("/nodepools/east-only/")
    assert missing.status_code == 404
    assert "cluster &quot;west&quot; has no NodePool &quot;east-only&quot;; east has one" in missing.content.decode()
    assert 'href="/clusters/east/nodepools/east-only/"' in missing.content.decode()
    viewer_client.get(reverse("scheduling:nodepools"), {"cluster": "all"})
    found = viewer_client.get("/nodepools/east-only/")  # the fleet's only one: shown in its cluster
    assert found.status_code == 200 and found.context["pool"].weight == 30 and "in east" in found.content.decode()
    assert viewer_client.get("/nodepools/nowhere/").status_code == 404


def test_anonymous_users_learn_nothing_from_the_route_without_a_cluster(client, twins):
    response = client.get("/nodepools/default/")
    assert response.status_code == 302 and response["Location"].startswith("/login/")


def test_an_operator_changes_the_mode_of_the_clusters_own_pool(operator_client, twins):
    east, west, made = twins
    response = operator_client.post("/clusters/west/nodepools/default/mode/", {"mode": "observe"})
    assert response.status_code == 302 and response["Location"] == "/clusters/west/nodepools/default/"
    made["east"]["pool"].refresh_from_db()
    made["west"]["pool"].refresh_from_db()
    assert (made["east"]["pool"].mode, made["west"]["pool"].mode) == ("", "observe")


def test_a_fleet_of_one_keeps_its_links(viewer_client):
    assert not scope.several_clusters()
    pool = NodePoolFactory(name="solo")
    assert pool.get_absolute_url() == "/nodepools/solo/"
    assert viewer_client.get("/nodepools/solo/").status_code == 200
    name = scope.default_cluster().name
    assert viewer_client.get(f"/clusters/{name}/nodepools/solo/").status_code == 200


def test_the_api_details_take_the_cluster(as_viewer, twins):
    east, west, made = twins
    ambiguous = as_viewer.get("/api/v1/nodepools/default/")
    assert ambiguous.status_code == 400
    assert ambiguous.json() == {"cluster": ['2 clusters have a NodePool "default" (east, west): say which with '
                                            "?cluster=<name>"]}
    west_pool = as_viewer.get("/api/v1/nodepools/default/", {"cluster": "west"}).json()
    assert west_pool["weight"] == 20 and west_pool["url"].endswith("/api/v1/nodepools/default/?cluster=west")
    assert as_viewer.get(west_pool["url"]).json()["weight"] == 20  # its own url reads it back
    listed = as_viewer.get("/api/v1/nodepools/", {"q": "default"}).json()["results"]
    assert sorted(pool["url"].rsplit("?", 1)[1] for pool in listed if pool["name"] == "default") == [
        "cluster=east", "cluster=west"]
    for url in ("/api/v1/nodes/twin-node/", "/api/v1/nodeclaims/twin-claim/", "/api/v1/pods/ns/twin-pod/",
                "/api/v1/ec2nodeclasses/twin-class/"):
        assert as_viewer.get(url).status_code == 400, url
        assert as_viewer.get(url, {"cluster": "east"}).status_code == 200, url
    assert as_viewer.get("/api/v1/nodepools/default/", {"cluster": "nowhere"}).status_code == 404
    for invalid in ("w" * 300, "we\x00st"):  # as the schema documents the details' 400
        response = as_viewer.get("/api/v1/nodepools/default/", {"cluster": invalid})
        assert response.status_code == 400 and list(response.json()) == ["cluster"]


def test_pages_that_list_nodes_by_name_link_to_their_clusters_node(viewer_client, as_viewer, twins):
    """The pages that know a node or an EC2NodeClass only by name (an open-mode instance's node, the
    on-demand nodes beside a reservation, the doctor's findings) link to the one in its own cluster:
    east's "twin-node" runs in an open reservation by open matching, west's of the same name beside it."""
    from django.utils import timezone

    from reservations.models import DoctorFinding, OpenReservationInstance
    from scheduling.engine.instances import instance_id
    from tests.factories.reservations import CapacityReservationFactory

    east, west, made = twins
    now = timezone.now()
    east_node, west_node = made["east"]["node"], made["west"]["node"]
    reservation = CapacityReservationFactory(
        reservation_id="cr-0000000000000twin", instance_type=east_node.instance_type, availability_zone=east_node.zone,
        instance_match_criteria="open", total_instance_count=3, available_instance_count=1, tags={})
    in_it = instance_id(east_node.provider_id)
    OpenReservationInstance.objects.create(instance_id=in_it, reservation=reservation, instance_type=east_node.instance_type,
                                           availability_zone=east_node.zone, node_name="twin-node", first_seen=now, last_seen=now)
    for cluster in (east, west):
        DoctorFinding.objects.create(cluster=cluster, key=f"twin-{cluster.name}", code="no-selector-term", severity="warning",
                                     node_class_name="twin-class", evidence="e", fix="f", first_seen=now, last_seen=now)
    east_href, west_href = 'href="/clusters/east/nodes/twin-node/"', 'href="/clusters/west/nodes/twin-node/"'

    unselected = viewer_client.get(reverse("reservations:unselected")).content.decode()
    could_use, open_in_it = unselected.split(f'data-reservation="{reservation.reservation_id}"')[1].split("</tr>")[0].split(
        'class="open-in-it"')
    assert west_href in could_use and east_href not in could_use  # east's node of the name is the one in it
    assert east_href in open_in_it and west_href not in open_in_it
    detail = viewer_client.get(reservation.get_absolute_url()).content.decode()
    assert east_href in detail.split('id="open-instances"')[1]
    east_class = viewer_client.get("/clusters/east/nodeclasses/twin-class/").content.decode()
    west_class = viewer_client.get("/clusters/west/nodeclasses/twin-class/").content.decode()
    assert east_href in east_class and in_it not in west_class and east_href not in west_class
    doctor = viewer_client.get(reverse("reservations:doctor")).content.decode()
    by_class = doctor.split('id="by-nodeclass"')[1].split("</section>")[0]
    assert by_class.count('href="/clusters/east/nodeclasses/twin-class/"') == 2  # the heading and the finding
    assert by_class.count('href="/clusters/west/nodeclasses/twin-class/"') == 2
    assert 'href="/nodeclasses/twin-class/"' not in doctor
    assert 'href="/nodes/twin-node/"' not in unselected + detail + east_class
    # The API's pod `url`, which is built by hand, names its cluster as the other objects' urls do.
    pod = as_viewer.get("/api/v1/pods/ns/twin-pod/", {"cluster": "west"}).json()
    assert pod["url"].endswith("/api/v1/pods/ns/twin-pod/?cluster=west") and as_viewer.get(pod["url"]).status_code == 200
