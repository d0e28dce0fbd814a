"""What a newcomer reads: quantities as Kubernetes people write them, and filter labels and column
headers in words on every list page (found from the URL configuration, so a new list is covered)."""

import re

import pytest
from django.urls import reverse

from reservations.models import CapacityReservation
from scheduling.models import InstanceType
from tests.factories.scheduling import NodeFactory, NodePoolFactory, PodFactory
from tests.support.labels import LIST_PAGES, label_problems

pytestmark = pytest.mark.django_db

def test_the_list_pages_are_found():
    assert {"reservations:list", "reservations:nodeclasses", "scheduling:pods", "scheduling:nodes",
            "scheduling:nodeclaims", "scheduling:nodepools", "scheduling:decisions", "scheduling:instancetypes"} <= set(LIST_PAGES)


def test_the_label_check_catches_what_it_should():
    assert label_problems(["Node name", "Node name"]) == ["'Node name' twice"]
    assert label_problems(["cpu_request_millicores", "Name contains", "zone", ""]) == [
        "'cpu_request_millicores' reads as machine-made", "'Name contains' reads as machine-made",
        "'zone' reads as machine-made", "an empty label"]
    assert label_problems(["Search", "NodePool", "vCPUs", "Memory request"]) == []


@pytest.mark.parametrize("page", LIST_PAGES)
def test_every_filter_and_column_is_labelled_in_words(demo_world, viewer_client, page):
    response = viewer_client.get(reverse(page))
    assert response.status_code == 200
    form = response.context["filterset"].form
    assert label_problems([field.label for field in form]) == []
    assert label_problems([column.header for column in response.context["table"].columns]) == []
    html = response.content.decode()
    # A yes/no filter offers words for its three states, never django's "Unknown".
    assert ">Unknown<" not in html


def test_several_values_are_checkboxes_that_show_what_is_chosen(demo_world, viewer_client):
    html = viewer_client.get(reverse("reservations:list"), {"state": ["active", "expired"]}).content.decode()
    fieldset = html.split('<fieldset class="choices"><legend>State</legend>')[1].split("</fieldset>")[0]
    boxes = re.findall(r'<input type="checkbox" name="state" value="([a-z-]+)"[^>]*?( checked)?>', fieldset)
    assert {value for value, _ in boxes} == set(CapacityReservation.State.values)  # every option in view
    assert {value for value, checked in boxes if checked} == {"active", "expired"}


def test_pods_show_requests_as_kubernetes_people_read_them(viewer_client):
    node = NodeFactory(name="big-node", allocatable_cpu_millicores=191450, allocatable_memory_bytes=1938410 * 2**20)
    PodFactory(name="huge", cpu_request_millicores=96000, memory_request_bytes=2**40, node=node, node_name=node.name)
    PodFactory(name="small", cpu_request_millicores=250, memory_request_bytes=256 * 2**20)
    listing = viewer_client.get(reverse("scheduling:pods")).content.decode()
    headers = re.findall(r"<th[^>]*>\s*(?:<a[^>]*>)?([^<]+)", listing)
    assert "CPU request" in headers and "Memory request" in headers
    for shown in ("<td >96</td>", "<td >1Ti</td>", "<td >250m</td>", "<td >256Mi</td>"):
        assert shown.replace(" >", ">") in listing.replace(" >", ">")
    assert "1099511627776" not in listing and "96000" not in listing
    pod_page = viewer_client.get(reverse("scheduling:pod", args=["default", "small"])).content.decode()
    assert "250m CPU, 256Mi memory" in pod_page and "MB" not in pod_page
    node_page = viewer_client.get(reverse("scheduling:node", args=["big-node"])).content.decode()
    assert "191450m CPU, 1.85Ti memory" in node_page
    assert "<td>96</td><td>1Ti</td>" in node_page


def test_node_pool_limits_name_their_units(viewer_client):
    pool = NodePoolFactory(name="capped", limits={"cpu": "1000", "memory": "4Ti", "nvidia.com/gpu": "8"})
    for _ in range(2):
        NodeFactory(node_pool=pool, allocatable_cpu_millicores=107600, allocatable_memory_bytes=512 * 2**30)
    page = viewer_client.get(pool.get_absolute_url()).content.decode()
    assert "215.2 of 1000 CPU" in page
    assert "1Ti of 4Ti memory" in page
    assert "— of 8 nvidia.com/gpu" in page


def test_instance_types_show_memory_with_binary_units(demo_world, viewer_client):
    listing = viewer_client.get(reverse("scheduling:instancetypes"), {"q": "m5.large"}).content.decode()
    assert ">8Gi<" in listing.replace("<td >", "<td>")
    detail = viewer_client.get(InstanceType.objects.get(name="m5.large").get_absolute_url()).content.decode()
    assert "8Gi as EC2 reports it; a node reports 7577Mi" in detail
