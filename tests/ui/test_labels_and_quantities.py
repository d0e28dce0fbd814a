"""What a newcomer reads on the demo world: quantities as Kubernetes people write them, and filter labels
and column headers in words on every list page (found from the URL configuration, so a new list is
covered). Quantities on rows of their own: tests/ui/test_quantities_own_rows.py."""

import re

import pytest
from django.urls import reverse

from reservations.models import CapacityReservation
from scheduling.models import InstanceType
from tests.support.labels import LIST_PAGES, label_problems

pytestmark = pytest.mark.django_db


@pytest.fixture
def demo_world(demo_world_for_module, db):
    """Every database test here builds on the demo world: it is seeded once for the module
    (tests/conftest.py), and each test's own writes are rolled back after it."""


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
def test_every_filter_and_column_is_labelled_in_words(demo_world, client, viewer, fleet_admin, page):
    client.force_login(fleet_admin if page == "scheduling:audit_log" else viewer)  # the audit log is theirs
    response = client.get(reverse(page))
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


def test_instance_types_show_memory_with_binary_units(demo_world, viewer_client):
    listing = viewer_client.get(reverse("scheduling:instancetypes"), {"q": "m5.large"}).content.decode()
    assert ">8Gi<" in listing.replace("<td >", "<td>")
    detail = viewer_client.get(InstanceType.objects.get(name="m5.large").get_absolute_url()).content.decode()
    assert "8Gi as EC2 reports it; a node reports 7577Mi" in detail
