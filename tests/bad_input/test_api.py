"""The API's writes and queries with wrong types, oversized and hostile values: 4xx with the
field named, never a 500, nothing stored."""

import json

import pytest
from django.urls import reverse
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reservations.filtersets import (
    CapacityReservationFilterSet, EC2NodeClassFilterSet, UtilizationHourFilterSet, UtilizationSampleFilterSet,
)
from scheduling.filtersets import (
    DecisionFilterSet,
    KarpenterLaunchFilterSet,
    InstanceTypeFilterSet,
    NodeClaimFilterSet,
    NodeFilterSet,
    NodePoolFilterSet,
    OfferingFilterSet,
    PodFilterSet,
    TaskRunFilterSet,
)
from tests.support.api_clients import token_client

from .conftest import FILTER_VALUES, HOSTILE_STRINGS, WRONG_TYPES

pytestmark = pytest.mark.django_db

FIELD = "capacityReservationSelectorTerms"
LISTS = [
    ("/api/v1/capacity-reservations/", CapacityReservationFilterSet),
    ("/api/v1/capacity-reservations/cr-0abc0abc0abc0abc0/samples/", UtilizationSampleFilterSet),
    ("/api/v1/capacity-reservations/cr-0abc0abc0abc0abc0/hours/", UtilizationHourFilterSet),
    ("/api/v1/ec2nodeclasses/", EC2NodeClassFilterSet),
    ("/api/v1/nodepools/", NodePoolFilterSet),
    ("/api/v1/nodeclaims/", NodeClaimFilterSet),
    ("/api/v1/nodes/", NodeFilterSet),
    ("/api/v1/pods/", PodFilterSet),
    ("/api/v1/instance-types/", InstanceTypeFilterSet),
    ("/api/v1/offerings/", OfferingFilterSet),
    ("/api/v1/decisions/", DecisionFilterSet),
    ("/api/v1/task-runs/", TaskRunFilterSet),
    ("/api/v1/karpenter-launches/", KarpenterLaunchFilterSet),
]
PAGING = ["limit", "offset", "ordering"]


@pytest.fixture
def api(operator, small_world):
    return token_client(operator)


def nodeclass_url():
    return reverse("reservations-api:ec2nodeclass-detail", args=["default"])


def check(response, *codes):
    assert response.status_code in codes, (response.status_code, response.content[:500])
    assert response["Content-Type"].startswith("application/json")
    return response.json()


# --- filters, ordering, paging ---------------------------------------------------------------------

@pytest.mark.parametrize(("url", "filterset"), LISTS, ids=[u for u, _ in LISTS])
def test_every_filter_with_every_hostile_value(api, url, filterset):
    for name in [*filterset.base_filters, *PAGING]:
        for value in FILTER_VALUES:
            response = api.get(url, {name: value})
            body = check(response, 200, 400)
            if response.status_code == 400:
                assert name in body, f"{name}={value[:20]!r}: the error names the parameter: {body}"


def test_paging_and_odd_parameters(api):
    odd = [
        {"limit": "-5"}, {"limit": "0"}, {"limit": str(10**30)}, {"offset": str(10**30)}, {"offset": "-1"},
        {"offset": str(2**63)}, {"limit": "1e3"}, {"ordering": "-" * 500}, {"ordering": "password"},
        {"ordering": "reservation__owner_id,,,--name"}, {"since": "9999-12-31T23:59:59+23:59"}, {"since": "0000-00-00"},
        {"state": ["active", "\x00", "x" * 5000]}, {"kind": ["launch"] * 200},
    ]
    for params in odd:
        for url, _ in LISTS:
            check(api.get(url, params), 200, 400)


# --- NodePool mode ---------------------------------------------------------------------------------

def test_nodepool_mode_refuses_anything_but_a_mode(api, unchanged):
    url = reverse("scheduling-api:nodepool-detail", args=["web"])
    for value in [v for v in WRONG_TYPES if v is not None] + HOSTILE_STRINGS[:-2]:
        body = check(api.patch(url, {"mode": value}, format="json"), 400)
        assert "mode" in body, (value, body)
    for raw in [b"", b"{", b"[]", b'"mode"', b"null", b"\x00\xff\xfe", b'{"mode": "observe"' + b" " * 10,
                b'{"mode": "control", "weight": 100}', b"[" * 100_000 + b"]" * 100_000,
                b'{"mode": ' + b"1" * 5000 + b"}", b'{"mode": NaN}', b'{"mode": 1e999}']:
        check(api.generic("PATCH", url, raw, content_type="application/json"), 400)
    check(api.generic("PATCH", url, "mode=control", content_type="application/x-www-form-urlencoded"), 415)
    unchanged()


# --- selector terms --------------------------------------------------------------------------------

# Refused: wrong types, unknown fields, too many, too long, and what cannot be stored.
TERM_VALUES = [
    *[value for value in WRONG_TYPES if value != []],
    *[[{"id": value}] for value in HOSTILE_STRINGS],
    *[[{"ownerID": value, "tags": {"team": "web"}}] for value in HOSTILE_STRINGS],
    *[[{"instanceMatchCriteria": value}] for value in HOSTILE_STRINGS],
    [{"tags": {"a\x00b": "x"}}], [{"tags": {"team": "a\x00b"}}], [{"tags": {"team": "\x00"}}],
    [{"tags": {"x" * 129: "web"}}], [{"tags": {"team": "x" * 257}}], [{"tags": {"": "web"}}], [{"tags": {"team": ""}}],
    [{"tags": {"team": "web"}, "id": "cr-0abc", "unknown": 1}],
    [{"tags": {"team": "web"}}] * 10_000,
    [{"tags": {f"k{i}": "v" for i in range(10_000)}}],
    [{"tags": {"team": ["web"]}}], [{"tags": [["team", "web"]]}], [{"id": ["cr-0abc"]}], [{"tags": {"team": 1.5}}],
]
# Legal (EC2 allows any character in a tag): stored as sent, shown escaped.
LEGAL_TAGS = ['<script>alert("x")</script>', "' OR '1'='1' --", "😀 ünïcödé \u202e", "{{ 7*7 }}", "x" * 256]


def test_selector_term_writes_and_previews_refuse_bad_terms(api, unchanged):
    preview = reverse("reservations-api:ec2nodeclass-preview", args=["default"])
    for terms in TERM_VALUES:
        for method in ("put", "patch"):
            body = check(getattr(api, method)(nodeclass_url(), {FIELD: terms, "resourceVersion": "3"}, format="json"), 400)
            assert FIELD in body, (method, repr(terms)[:80], body)
        assert FIELD in check(api.post(preview, {FIELD: terms}, format="json"), 400), repr(terms)[:80]
    for number in (b"1e999", b"-1e999", b"NaN", b"Infinity"):
        raw = b'{"capacityReservationSelectorTerms": [{"tags": {"team": ' + number + b'}}], "resourceVersion": "3"}'
        check(api.generic("PUT", nodeclass_url(), raw, content_type="application/json"), 400)
    unchanged()


def test_hostile_but_legal_tags_are_stored_as_sent(api):
    from reservations.models import EC2NodeClass
    from scheduling.models import AuditEntry

    for value in LEGAL_TAGS:
        version = EC2NodeClass.objects.get(name="default").resource_version
        response = api.put(nodeclass_url(), {FIELD: [{"tags": {value[:128]: value}}]}, format="json",
                           HTTP_IF_MATCH=f'"{version}"')
        check(response, 200)
        assert EC2NodeClass.objects.get(name="default").capacity_reservation_selector_terms == [{"tags": {value[:128]: value}}]
        assert AuditEntry.objects.latest("pk").changes["capacity_reservation_selector_terms"][1] == [{"tags": {value[:128]: value}}]


def test_selector_terms_resource_version_and_if_match_of_any_shape(api, unchanged):
    for version in [*WRONG_TYPES, *HOSTILE_STRINGS]:
        response = api.put(nodeclass_url(), {FIELD: [{"tags": {"team": "ml"}}], "resourceVersion": version}, format="json")
        body = check(response, 400, 409)
        assert "resourceVersion" in body or "detail" in body, (repr(version)[:40], body)
    for header in ['"\x7f"', "W/" * 1000, '"' + "9" * 5000 + '"', ",,,", '"4", "\\"', '"' + "x" * 100_000 + '"']:
        response = api.put(nodeclass_url(), {FIELD: [{"tags": {"team": "<b>"}}]}, format="json", HTTP_IF_MATCH=header)
        check(response, 412)
    unchanged()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(key=st.text(max_size=80), value=st.text(max_size=300))
def test_any_text_as_a_tag_is_stored_intact_or_refused(api, key, value):
    from reservations.models import EC2NodeClass

    node_class = EC2NodeClass.objects.get(name="default")
    response = api.put(nodeclass_url(), {FIELD: [{"tags": {key: value}}]}, format="json",
                       HTTP_IF_MATCH=f'"{node_class.resource_version}"')
    assert response.status_code in (200, 400), (response.status_code, response.content[:300])
    node_class.refresh_from_db()
    if response.status_code == 200:
        assert node_class.capacity_reservation_selector_terms == [{"tags": {key: value}}]
    else:
        assert FIELD in response.json()


# --- simulate --------------------------------------------------------------------------------------

def test_simulate_answers_problems_for_any_body(api):
    bodies = [
        b"", b" ", b"{", b"[]", b"null", b"0", b'"world"', b"\xff\xfe\x00", b"[" * 100_000 + b"]" * 100_000,
        b'{"pods": ' + b"1" * 5000 + b"}", b'{"now": NaN}', b'{"pods": [{"metadata": {"name": "\\u0000"}}]}',
        json.dumps({"pods": [{"metadata": {"name": "<script>alert(1)</script>", "namespace": "x"},
                              "spec": {"containers": [{"resources": {"requests": {"cpu": "1e999"}}}]}}]}).encode(),
        json.dumps({"nodePools": [{"spec": {"limits": {"cpu": 10**400}}}]}).encode(),
    ]
    for raw in bodies:
        response = api.generic("POST", reverse("scheduling-api:simulate"), raw, content_type="application/json")
        body = check(response, 200, 400)
        if response.status_code == 400:
            assert body.get("problems") or body.get("detail"), raw[:40]


def test_simulate_refuses_a_body_over_the_limit(api):
    raw = b'{"pods": [' + b'{"metadata": {"name": "p"}},' * 200_000 + b"{}]}"
    check(api.generic("POST", reverse("scheduling-api:simulate"), raw, content_type="application/json"), 413)
