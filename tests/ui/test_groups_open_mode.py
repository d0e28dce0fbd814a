"""Issue 12 on the pages: the open-mode switch on the EC2NodeClass page (operators only, audited),
Capacity Reservation groups on the class and reservation pages, and the selector-term editor's
resourceGroupARN field with per-term messages."""

import pytest
from django.urls import reverse

from reservations.groups import store_group
from reservations.models import OPEN_RESERVATIONS_ANNOTATION, EC2NodeClass
from scheduling.models import AuditEntry

pytestmark = pytest.mark.django_db


@pytest.fixture
def demo_world(demo_world_for_module, db):
    """Every test here builds on the demo world: it is seeded once for the module (tests/conftest.py),
    and each test's own writes are rolled back after it."""


ARN = "arn:aws:resource-groups:us-east-1:123456789012:group/web-pool"


def open_mode_url(name="default"):
    return reverse("reservations:nodeclass_open_mode", args=[name])


def test_operator_turns_open_mode_on_and_off_and_each_change_is_audited(operator_client, demo_world):
    page = operator_client.get(reverse("reservations:nodeclass", args=["default"])).content.decode()
    assert "Open mode is <strong>off</strong>" in page and "Turn open mode on" in page
    version = EC2NodeClass.objects.get(name="default").resource_version
    response = operator_client.post(open_mode_url(), {"open_reservations": "true", "resource_version": version}, follow=True)
    assert "Open mode of default is on" in [str(m) for m in response.context["messages"]][0]
    node_class = EC2NodeClass.objects.get(name="default")
    assert node_class.open_reservations and node_class.annotations[OPEN_RESERVATIONS_ANNOTATION] == "true"
    assert node_class.resource_version != version
    entry = AuditEntry.objects.get()
    assert (entry.actor, entry.source, entry.changes) == ("otto", "ui", {"open_reservations": [False, True]})
    assert "Turn open mode off" in response.content.decode()

    # A form read before that change is stale: refused, nothing changes.
    response = operator_client.post(open_mode_url(), {"open_reservations": "false", "resource_version": version}, follow=True)
    assert "Not changed" in [str(m) for m in response.context["messages"]][0]
    assert EC2NodeClass.objects.get(name="default").open_reservations

    operator_client.post(open_mode_url(), {"open_reservations": "false", "resource_version": node_class.resource_version})
    node_class.refresh_from_db()
    assert not node_class.open_reservations and OPEN_RESERVATIONS_ANNOTATION not in node_class.annotations
    assert AuditEntry.objects.count() == 2


def test_open_mode_refuses_viewers_and_bad_values(client, viewer, operator, demo_world):
    client.force_login(viewer)
    assert client.post(open_mode_url(), {"open_reservations": "true"}).status_code == 403
    assert "Turn open mode on" not in client.get(reverse("reservations:nodeclass", args=["default"])).content.decode()
    client.force_login(operator)
    response = client.post(open_mode_url(), {"open_reservations": "yes"}, follow=True)
    assert 'open_reservations: "yes" is not one of true, false' in [str(m) for m in response.context["messages"]][0]
    assert not EC2NodeClass.objects.get(name="default").open_reservations
    assert not AuditEntry.objects.exists()


def test_group_members_on_the_class_and_reservation_pages(viewer_client, demo_world):
    EC2NodeClass.objects.filter(name="default").update(
        capacity_reservation_selector_terms=[{"tags": {"team": "web"}}, {"resourceGroupARN": ARN}])
    store_group(ARN, ["cr-0a1b2c3d4e5f60001", "cr-0a1b2c3d4e5f60002"])
    page = viewer_client.get(reverse("reservations:nodeclass", args=["default"])).content.decode()
    groups = page.split('id="groups"')[1].split("</section>")[0]
    assert ARN in groups and "2 members" in groups and "cr-0a1b2c3d4e5f60002" in groups
    reservation = viewer_client.get(reverse("reservations:detail", args=["cr-0a1b2c3d4e5f60001"])).content.decode()
    assert "Capacity Reservation groups" in reservation and "web-pool" in reservation


def edit_url(name="default"):
    return reverse("reservations:nodeclass_edit", args=[name])


def test_editor_has_a_resource_group_arn_field_with_per_term_messages(operator_client, demo_world):
    page = operator_client.get(edit_url()).content.decode()
    assert 'name="term-0-resourceGroupARN"' in page
    response = operator_client.post(edit_url(), {
        "term-0-resourceGroupARN": "arn:aws:resource-groups:us-east-1:123:group/x",
        "term-1-resourceGroupARN": ARN, "term-1-tag-0-key": "team", "term-1-tag-0-value": "web",
        "action": "save",
    })
    page = response.content.decode()
    first = page.split('data-term="0"')[1].split("</fieldset>")[0]
    second = page.split('data-term="1"')[1].split("</fieldset>")[0]
    assert "capacityReservationSelectorTerms[0].resourceGroupARN: &quot;arn:aws:resource-groups:us-east-1:123:group/x&quot; does not match" in first
    assert ("capacityReservationSelectorTerms[1].resourceGroupARN: must be alone in its term, but the term also sets tags"
            in second)
    assert not AuditEntry.objects.exists()

    version = EC2NodeClass.objects.get(name="default").resource_version
    response = operator_client.post(edit_url(), {
        "resource_version": version, "term-0-tag-0-key": "team", "term-0-tag-0-value": "web",
        "term-1-resourceGroupARN": ARN, "action": "save",
    })
    assert response.status_code == 302
    saved = EC2NodeClass.objects.get(name="default")
    assert saved.capacity_reservation_selector_terms == [{"tags": {"team": "web"}}, {"resourceGroupARN": ARN}]
    entry = AuditEntry.objects.get()
    assert entry.changes["capacity_reservation_selector_terms"][1][1] == {"resourceGroupARN": ARN}
    page = operator_client.get(edit_url()).content.decode()
    assert f'name="term-1-resourceGroupARN" value="{ARN}"' in page
