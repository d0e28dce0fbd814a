"""Quantities as Kubernetes people write them, on rows these tests make themselves
(tests/ui/test_labels_and_quantities.py seeds the demo world once for its module; these must not see it)."""

import re

import pytest
from django.urls import reverse

from tests.factories.scheduling import NodeFactory, NodePoolFactory, PodFactory

pytestmark = pytest.mark.django_db


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
    assert "250m CPU, 256Mi memory" in pod_page
    # A unit, not any "MB": the page's random CSRF token may hold those two letters.
    assert not re.search(r"\d\s*MB\b", pod_page)
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
