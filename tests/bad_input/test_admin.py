"""The admin's change forms for EC2NodeClasses and NodePools: every JSON field and the plain ones
with wrong types, unreadable, oversized and hostile values. Field errors, nothing stored."""

import json

import pytest
from django import forms
from django.urls import reverse

from reservations.models import EC2NodeClass
from scheduling.models import NodePool

from .conftest import HOSTILE_STRINGS, SCRIPT, assert_escaped

pytestmark = pytest.mark.django_db

# Text the JSON field cannot turn into something storable.
UNREADABLE_JSON = ["{", "[" * 100_000 + "]" * 100_000, "1" * 5000, '{"a": "\\u0000"}', '{"\\u0000": 1}', "NaN", "1e999",
                   '[-Infinity]', "\x00", SCRIPT]
# node_class_ref is no form field: it is read-only, written from the EC2NodeClass chosen (NodePoolAdminForm).
NODEPOOL_JSON = {
    "requirements": [{}, "x", [{"key": 1}], [{"key": "a", "operator": "Between", "values": ["1"]}], [{"key": SCRIPT}]],
    "taints": [{}, [{"key": "a"}], [{"key": "a", "effect": "Sometimes"}], [1, 2]],
    "startup_taints": [{}, [{"effect": "NoSchedule"}]],
    "labels": [[], {"a": 1}, {"a": ["b"]}],
    "limits": [[], {"cpu": "lots"}, {"cpu": -1}, {"memory": SCRIPT}],
    "budgets": [{}, [{"nodes": "many"}], [{"nodes": "10%", "schedule": "every day"}], [{"nodes": "1", "duration": "1x"}]],
}
# Status the loop and the sync write: shown read-only, never a form field (tests/foundation/test_admin_mirrored.py).
NODEPOOL_TEXT = {"consolidate_after": ["soon", "-5m", SCRIPT], "expire_after": ["later", "1y", "\x00"]}
NODECLASS_JSON = {
    "capacity_reservation_selector_terms": [{}, "x", [{"id": "nope"}], [{"tags": {"a": 1}}], [{"tags": {"team": "\x00"}}],
                                            [{"tags": {"team": "x" * 300}}], [{"tags": {"a": "b"}}] * 31],
    "spec": [[], "x", 1, None],
    "annotations": [[], {"a": 1}, {"a": {"b": "c"}}],
}


def admin_url(model, *args, view="change"):
    return reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_{view}", args=args)


def form_data(client, url) -> dict:
    form = client.get(url).context["adminform"].form
    data = {}
    for name in form.fields:
        value = form[name].value()
        if name in ("selected_reservations",):
            data[name] = [str(v) for v in (value or [])]
        else:
            data[name] = "" if value is None else value
    return data


def post(client, url, data):
    response = client.post(url, data)
    assert response.status_code == 200, (response.status_code, response.content[:300])
    assert_escaped(response.content)
    return response.context["adminform"].form.errors


@pytest.fixture
def pool_url(admin_user_client, small_world):
    return admin_url(NodePool, small_world["pool"].pk)


@pytest.fixture
def class_url(admin_user_client, small_world):
    return admin_url(EC2NodeClass, small_world["node_class"].pk)


def test_the_unchanged_forms_save(admin_user_client, pool_url, class_url):
    for url in (pool_url, class_url):
        assert admin_user_client.post(url, form_data(admin_user_client, url)).status_code == 302


def json_fields(client, url) -> set[str]:
    form = client.get(url).context["adminform"].form
    return {name for name, field in form.fields.items() if isinstance(field, forms.JSONField)}


def test_nodepool_json_fields(admin_user_client, pool_url, unchanged):
    assert set(NODEPOOL_JSON) == json_fields(admin_user_client, pool_url)  # every JSON field the form has
    data = form_data(admin_user_client, pool_url)
    for field, values in NODEPOOL_JSON.items():
        for text in [*UNREADABLE_JSON, *(json.dumps(value) for value in values)]:
            errors = post(admin_user_client, pool_url, {**data, field: text})
            assert field in errors, (field, text[:40], errors)
    unchanged()


def test_nodepool_plain_fields(admin_user_client, pool_url, unchanged):
    data = form_data(admin_user_client, pool_url)
    cases = [(f, v) for f, values in NODEPOOL_TEXT.items() for v in values]
    cases += [("name", v) for v in HOSTILE_STRINGS if "\x00" in v or len(v) > 253 or not v.strip()]
    cases += [("weight", v) for v in ("-1", "101", "1e309", "99999999999999999999", SCRIPT)]
    for field, value in cases:
        errors = post(admin_user_client, pool_url, {**data, field: value})
        assert field in errors, (field, value[:40], errors)
    unchanged()


def test_a_static_nodepool_refuses_a_weight_and_limits_but_nodes(admin_user_client, pool_url, small_world, unchanged):
    """spec.replicas as the CRD's rules have it: with it, no weight and no limit but limits.nodes."""
    data = {**form_data(admin_user_client, pool_url), "replicas": "2"}
    for change, field in [({"weight": "10"}, "weight"), ({"weight": "0", "limits": json.dumps({"cpu": "8"})}, "limits"),
                          ({"weight": "0", "replicas": "-1"}, "replicas")]:
        errors = post(admin_user_client, pool_url, {**data, **change})
        assert field in errors, (change, errors)
    unchanged()
    saved = admin_user_client.post(pool_url, {**data, "weight": "0", "limits": json.dumps({"nodes": "3"})})
    assert saved.status_code == 302
    assert NodePool.objects.get(pk=small_world["pool"].pk).replicas == 2


def test_nodepool_node_class_ref_cannot_be_posted(admin_user_client, pool_url, small_world):
    """Read-only: whatever is posted for it is ignored, never a 500, and the ref stays the class's."""
    data = form_data(admin_user_client, pool_url)
    assert "node_class_ref" not in data
    before = NodePool.objects.get(pk=small_world["pool"].pk).node_class_ref
    for text in ["{", "[]", json.dumps({"kind": SCRIPT}), "\x00"]:
        response = admin_user_client.post(pool_url, {**data, "node_class_ref": text})
        assert response.status_code == 302, (text[:40], response.status_code)
        assert NodePool.objects.get(pk=small_world["pool"].pk).node_class_ref == before


def test_nodeclass_json_fields(admin_user_client, class_url, unchanged):
    assert set(NODECLASS_JSON) == json_fields(admin_user_client, class_url)  # every JSON field the form has
    data = form_data(admin_user_client, class_url)
    for field, values in NODECLASS_JSON.items():
        for text in [*UNREADABLE_JSON, *(json.dumps(value) for value in values)]:
            errors = post(admin_user_client, class_url, {**data, field: text})
            assert field in errors, (field, text[:40], errors)
    unchanged()


def test_hostile_but_legal_values_are_stored_and_shown_escaped(admin_user_client, pool_url):
    data = form_data(admin_user_client, pool_url)
    labels = {"team": SCRIPT, "note": "' OR '1'='1"}
    assert admin_user_client.post(pool_url, {**data, "labels": json.dumps(labels)}).status_code == 302
    assert NodePool.objects.get(name="web").labels == labels
    response = admin_user_client.get(pool_url)
    assert_escaped(response.content)
    assert_escaped(admin_user_client.get(admin_url(NodePool, view="changelist") + "?q=" + SCRIPT).content)
