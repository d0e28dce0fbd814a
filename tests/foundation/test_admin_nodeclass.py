"""EC2NodeClass edits in the admin go the editor's way: checked, compare-and-swap on the version the
page was read at, status refreshed, annotation written, recorded once with the diff."""

import json

import pytest
from django.contrib import admin
from django.test import RequestFactory
from django.urls import reverse

from reservations.models import OPEN_RESERVATIONS_ANNOTATION, EC2NodeClass
from scheduling.models import AuditEntry
from tests.factories.reservations import CapacityReservationFactory, EC2NodeClassFactory
from tests.support.clusters import cluster_row

pytestmark = pytest.mark.django_db


@pytest.fixture
def node_class():
    CapacityReservationFactory(reservation_id="cr-0web", tags={"team": "web"})
    CapacityReservationFactory(reservation_id="cr-0ml", tags={"team": "ml"})
    return EC2NodeClassFactory(name="default", capacity_reservation_selector_terms=[{"tags": {"team": "web"}}],
                               resource_version="7", annotations={"owner": "platform"})


def change_url(node_class):
    return reverse("admin:reservations_ec2nodeclass_change", args=[node_class.pk])


def form_data(client, url, **changes) -> dict:
    """What the browser posts: every field, and the hidden initial values of the fields with callable
    defaults (Django compares against those to tell what changed)."""
    form = client.get(url).context["adminform"].form
    data = {}
    for name, field in form.fields.items():
        value = form[name].value()
        if field.show_hidden_initial:
            data[f"initial-{name}"] = value
        if name == "selected_reservations":
            data[name] = [str(v) for v in (value or [])]
        elif isinstance(value, bool):
            if value:
                data[name] = "on"
        else:
            data[name] = "" if value is None else value
    for name, value in changes.items():
        if value is False:
            data.pop(name, None)
        else:
            data[name] = "on" if value is True else value
    return data


def test_selector_terms_saved_like_the_editor(admin_user_client, node_class):
    url = change_url(node_class)
    terms = [{"tags": {"team": "ml"}}]
    response = admin_user_client.post(url, form_data(admin_user_client, url, capacity_reservation_selector_terms=json.dumps(terms)))
    assert response.status_code == 302, response.context["adminform"].form.errors
    node_class.refresh_from_db()
    assert node_class.capacity_reservation_selector_terms == terms
    assert node_class.resource_version == "8"  # bumped: a stale editor page now gets a conflict
    assert [r.reservation_id for r in node_class.selected_reservations.all()] == ["cr-0ml"]  # status refreshed
    [entry] = AuditEntry.objects.filter(content_type__model="ec2nodeclass")
    assert entry.source == "admin" and entry.actor == "root"
    assert set(entry.changes) == {"capacity_reservation_selector_terms"}


def test_open_mode_in_the_admin_writes_the_annotation(admin_user_client, node_class):
    url = change_url(node_class)
    response = admin_user_client.post(url, form_data(admin_user_client, url, open_reservations=True))
    assert response.status_code == 302, response.context["adminform"].form.errors
    node_class.refresh_from_db()
    assert node_class.open_reservations is True
    assert node_class.annotations == {"owner": "platform", OPEN_RESERVATIONS_ANNOTATION: "true"}
    [entry] = AuditEntry.objects.filter(content_type__model="ec2nodeclass")
    assert entry.changes == {"open_reservations": [False, True]}


def test_a_stale_page_is_refused_and_nothing_stored(admin_user_client, node_class):
    url = change_url(node_class)
    data = form_data(admin_user_client, url, capacity_reservation_selector_terms=json.dumps([{"tags": {"team": "ml"}}]))
    EC2NodeClass.objects.filter(pk=node_class.pk).update(resource_version="9")  # someone else saved meanwhile
    response = admin_user_client.post(url, data)
    assert response.status_code == 200
    [error] = response.context["adminform"].form.non_field_errors()
    assert "changed after you opened this page (version 7, now 9)" in error
    node_class.refresh_from_db()
    assert node_class.capacity_reservation_selector_terms == [{"tags": {"team": "web"}}]
    assert not AuditEntry.objects.exists()


def test_other_fields_save_as_before_and_the_version_check_only_guards_routed_ones(admin_user_client, node_class):
    url = change_url(node_class)
    data = form_data(admin_user_client, url, annotations=json.dumps({"owner": "ml-platform"}))
    EC2NodeClass.objects.filter(pk=node_class.pk).update(resource_version="9")
    response = admin_user_client.post(url, data)
    assert response.status_code == 302, response.context["adminform"].form.errors
    node_class.refresh_from_db()
    assert node_class.annotations == {"owner": "ml-platform"}
    [entry] = AuditEntry.objects.filter(content_type__model="ec2nodeclass")
    assert set(entry.changes) == {"annotations"}


def test_on_a_real_cluster_spec_and_annotations_are_read_only(admin_user_client):
    model_admin = admin.site._registry[EC2NodeClass]
    request = RequestFactory().get("/")
    assert "spec" not in model_admin.get_readonly_fields(request)
    with cluster_row(connection="in-cluster"):
        assert {"spec", "annotations"} <= set(model_admin.get_readonly_fields(request))
