"""The pages' forms and filters with wrong, oversized and hostile values: the page answers with the
field's error (never a 500), nothing is stored, and every value shown back is escaped."""

import io

import pytest
from django.urls import reverse
from django_filters import BooleanFilter

from reservations.filtersets import CapacityReservationFilterSet, EC2NodeClassFilterSet
from reservations.models import EC2NodeClass
from scheduling.filtersets import (
    DecisionFilterSet, KarpenterLaunchFilterSet, NodeClaimFilterSet, NodeFilterSet, NodePoolFilterSet, PodFilterSet,
)
from scheduling.models import AuditEntry, NodePool

from .conftest import FILTER_VALUES, HOSTILE_STRINGS, SCRIPT, assert_escaped

pytestmark = pytest.mark.django_db

LIST_PAGES = [
    ("/reservations/", CapacityReservationFilterSet),
    ("/nodeclasses/", EC2NodeClassFilterSet),
    ("/nodepools/", NodePoolFilterSet),
    ("/nodes/", NodeFilterSet),
    ("/nodeclaims/", NodeClaimFilterSet),
    ("/pods/", PodFilterSet),
    ("/decisions/", DecisionFilterSet),
    ("/karpenter-audit/", KarpenterLaunchFilterSet),
]
EDITOR_FIELDS = ["term-0-id", "term-0-ownerID", "term-0-instanceMatchCriteria", "term-0-tag-0-key", "term-0-tag-0-value"]


@pytest.fixture
def operator_page(operator_client, small_world):
    return operator_client


def ok_page(response, *codes):
    codes = codes or (200,)
    assert response.status_code in codes, (response.status_code, response.content[:300])
    assert_escaped(response.content)
    return response.content.decode()


# --- list filters, sorting, paging -----------------------------------------------------------------

@pytest.mark.parametrize(("url", "filterset"), LIST_PAGES, ids=[u for u, _ in LIST_PAGES])
def test_every_filter_with_hostile_values(operator_page, url, filterset):
    for name in [*filterset.base_filters, "sort", "page"]:
        for value in FILTER_VALUES:
            page = ok_page(operator_page.get(url, {name: value}))
            # Text and choices refuse the NUL character by name (a yes/no filter reads it as "any").
            refuses = name in filterset.base_filters and not isinstance(filterset.base_filters[name], BooleanFilter)
            if refuses and "\x00" in value:
                assert f"{name}:" in page and "error" in page, f"{url}?{name}: the NUL character is refused"


@pytest.mark.parametrize(("url", "filterset"), LIST_PAGES, ids=[u for u, _ in LIST_PAGES])
def test_filters_through_htmx(operator_page, url, filterset):
    for name in filterset.base_filters:
        ok_page(operator_page.get(url, {name: SCRIPT}, HTTP_HX_REQUEST="true"))


def test_an_invalid_filter_is_named_on_the_page(operator_page):
    page = ok_page(operator_page.get("/decisions/", {"since": "not a time", "kind": "nonsense"}))
    assert "since:" in page and "kind:" in page


# --- the selector-term editor ----------------------------------------------------------------------

def test_editor_fields(operator_page, unchanged):
    url = reverse("reservations:nodeclass_edit", args=["default"])
    node_class = EC2NodeClass.objects.get(name="default")
    for field in EDITOR_FIELDS:
        for value in HOSTILE_STRINGS:
            data = {"resource_version": "3", "term-0-tag-0-key": "team", "term-0-tag-0-value": "ml", field: value,
                    "action": "save"}
            response = operator_page.post(url, data)
            if response.status_code == 302:  # legal (any text is a legal tag; a blank field is no field): saved once
                [term] = EC2NodeClass.objects.get(name="default").capacity_reservation_selector_terms
                assert AuditEntry.objects.count() == 1, (field, value[:30])
                assert value.strip() in {*term["tags"], *term["tags"].values()} or (not value.strip() and "tag" not in field)
                # Back to the start for the next value.
                AuditEntry.objects.all().delete()
                EC2NodeClass.objects.filter(pk=node_class.pk).update(
                    capacity_reservation_selector_terms=node_class.capacity_reservation_selector_terms,
                    resource_version="3", status_capacity_reservations=node_class.status_capacity_reservations,
                    conditions=node_class.conditions, synced_at=node_class.synced_at)
                continue
            assert 'class="error' in ok_page(response), (field, value[:30])
    unchanged()


def test_editor_resource_version(operator_page, unchanged):
    url = reverse("reservations:nodeclass_edit", args=["default"])
    for version in ["\x00", "3\x00", "x" * 5000, SCRIPT, "-1", "99999999999999999999", "", " "]:
        page = ok_page(operator_page.post(url, {"resource_version": version, "term-0-tag-0-key": "team",
                                                "term-0-tag-0-value": "ml", "action": "save"}))
        assert "conflict" in page.lower() or "resource_version: longer than" in page, repr(version)[:30]
    unchanged()


def test_editor_actions(operator_page, unchanged):
    url = reverse("reservations:nodeclass_edit", args=["default"])
    for action in [SCRIPT, "remove-term-" + "9" * 400, "remove-tag-0-" + "9" * 400, "add-tag-99999", "remove-term--1",
                   "\x00", "x" * 10_000, "save\x00"]:
        ok_page(operator_page.post(url, {"resource_version": "3", "term-0-tag-0-key": "team",
                                         "term-0-tag-0-value": "ml", "action": action}))
        ok_page(operator_page.post(url, {"action": action}, HTTP_HX_REQUEST="true"))
    unchanged()


def test_editor_with_too_many_rows_and_odd_names(operator_page, unchanged):
    url = reverse("reservations:nodeclass_edit", args=["default"])
    data = {f"term-{i}-tag-{j}-key": f"k{j}" for i in range(35) for j in range(2)}
    data.update({"term-99999-id": "cr-0abc", "term--1-id": "x", "term-0-tag-0-key\x00": "x", "action": "save",
                 "resource_version": "3"})
    assert "at most 30 terms" in ok_page(operator_page.post(url, data))
    tags = {f"term-0-tag-{j}-key": f"k{j}" for j in range(25)} | {f"term-0-tag-{j}-value": "v" for j in range(25)}
    assert "20 tags" in ok_page(operator_page.post(url, {**tags, "action": "save", "resource_version": "3"}))
    # Past Django's limit on the number of fields (1000) the request itself is refused.
    flood = {f"term-{i}-tag-{j}-key": "k" for i in range(40) for j in range(30)}
    assert operator_page.post(url, flood).status_code == 400
    unchanged()


# --- NodePool mode ---------------------------------------------------------------------------------

def test_nodepool_mode(operator_page, unchanged):
    url = reverse("scheduling:nodepool_mode", args=["web"])
    for value in [v for v in HOSTILE_STRINGS if v.strip()]:
        page = ok_page(operator_page.post(url, {"mode": value}, follow=True))
        assert "is not one of observe, control" in page, repr(value)[:30]
        assert NodePool.objects.get(name="web").mode == ""
    assert len(ok_page(operator_page.post(url, {"mode": "x" * 100_000}, follow=True))) < 60_000, "the value is cut short"
    unchanged()


def test_nodeclass_open_mode(operator_page, unchanged):
    url = reverse("reservations:nodeclass_open_mode", args=["default"])
    for value in [v for v in HOSTILE_STRINGS if v.strip()]:
        page = ok_page(operator_page.post(url, {"open_reservations": value, "resource_version": "3"}, follow=True))
        assert "is not one of true, false" in page, repr(value)[:30]
    for version in ["\x00", "x" * 100_000, SCRIPT, "2"]:
        page = ok_page(operator_page.post(url, {"open_reservations": "true", "resource_version": version}, follow=True))
        assert "Not changed" in page and len(page) < 60_000, repr(version)[:30]
    unchanged()


# --- what-if ---------------------------------------------------------------------------------------

def test_whatif_world_text_and_file(viewer_client, small_world):
    texts = [
        SCRIPT, "{", "[]", "null", "\x00", "[" * 100_000 + "]" * 100_000, '{"pods": ' + "1" * 5000 + "}", '{"now": NaN}',
        '{"pods": [{"metadata": {"name": "<script>alert(1)</script>"}}]}', "x" * (5 * 2**20 + 1),
        '{"nodePools": [{"metadata": {"name": "\\"><img src=x onerror=alert(1)>"}, "spec": {"weight": 1e999}}]}',
    ]
    for text in texts:
        assert "problems" in ok_page(viewer_client.post(reverse("scheduling:whatif"), {"world": text})), text[:30]
    for content in (b"\xff\xfe\x00\x01", b"<script>alert(1)</script>", b"{" * 10, b"x" * (5 * 2**20 + 1)):
        upload = io.BytesIO(content)
        upload.name = "world.json"
        assert "problems" in ok_page(viewer_client.post(reverse("scheduling:whatif"), {"world_file": upload}))


# --- login -----------------------------------------------------------------------------------------

def test_login(client, small_world, settings):
    # Hostile values, not a lock-out (tests/security/test_signin_lockout.py): every try gets the form.
    settings.AXES_FAILURE_LIMIT = 10_000
    for value in HOSTILE_STRINGS:
        for data in ({"username": value, "password": "pw"}, {"username": "root", "password": value},
                     {"username": value, "password": value, "next": value}):
            ok_page(client.post("/login/", data))
            assert "_auth_user_id" not in client.session
        ok_page(client.get("/login/", {"next": value}))
