"""The second hardening round's bad input (issue 34): each answered 500 on the old main; now a 4xx
that names the field."""

import copy
import json
from pathlib import Path

import pytest
from django.test import Client

from scheduling.whatif import run_world_text
from tests.support.api_clients import token_client

pytestmark = pytest.mark.django_db

EXAMPLE = json.loads((Path(__file__).resolve().parents[2] / "examples" / "reserved-first.json").read_text())
LIST_PAGES = ["/nodepools/", "/nodes/", "/instance-types/", "/nodeclaims/", "/pods/", "/decisions/",
              "/karpenter-audit/", "/reservations/", "/nodeclasses/", "/recommendations/"]


@pytest.mark.parametrize("page", LIST_PAGES)
def test_a_bad_per_page_is_a_400_naming_it(viewer_client, page):
    for per_page in ["-5", "0", "abc", "1e3", "٣", "100000000"]:
        response = viewer_client.get(page, {"per_page": per_page})
        assert response.status_code == 400, per_page
        assert b"per_page" in response.content


@pytest.mark.parametrize("page", ["/nodepools/", "/decisions/"])
def test_a_sensible_per_page_still_works(viewer_client, page):
    assert viewer_client.get(page, {"per_page": "25"}).status_code == 200


@pytest.mark.parametrize("label", ["%", "%=", "=%", "a%b=c%", "%%s=%(x)s"])
def test_percent_signs_in_the_label_filter_are_not_a_500(viewer, label):
    response = token_client(viewer).get("/api/v1/instance-types/", {"label": label})
    assert response.status_code in (200, 400)
    if response.status_code == 400:
        assert "label" in response.json()


def world_with(**changes) -> str:
    world = copy.deepcopy(EXAMPLE)
    for path, value in changes.items():
        target = world
        *parents, last = path.split(".")
        for part in parents:
            target = target[int(part)] if part.isdigit() else target[part]
        target[int(last) if last.isdigit() else last] = value
    return json.dumps(world)


NUMBER_PATH = "instanceTypes.0.offerings.0.price"


@pytest.mark.parametrize(("text", "field"), [
    (world_with(now="9999-12-31T23:59:59Z"), "now"),
    (world_with(now="0001-01-01T00:00:00Z"), "now"),
    (world_with(**{NUMBER_PATH: 1e308}), "instanceTypes[0].offerings[0].price"),
    (world_with(**{"instanceTypes.0.pods": 10**18}), "instanceTypes[0].pods"),
    (world_with(**{NUMBER_PATH: 0.096}).replace("0.096", "NaN", 1), "instanceTypes[0].offerings[0].price"),
    (world_with(**{NUMBER_PATH: 0.096}).replace("0.096", "Infinity", 1), "instanceTypes[0].offerings[0].price"),
    (world_with(**{NUMBER_PATH: 0.096}).replace("0.096", "-Infinity", 1), "instanceTypes[0].offerings[0].price"),
])
def test_out_of_range_worlds_are_refused_by_the_api_naming_the_field(viewer, text, field):
    response = token_client(viewer).post("/api/v1/simulate/", text, content_type="application/json")
    assert response.status_code == 400, response.content[:300]
    assert any(problem.startswith(field) for problem in response.json()["problems"]), response.json()


def test_the_what_if_page_refuses_them_too(viewer_client):
    response = viewer_client.post("/what-if/", {"world": world_with(now="9999-12-31T23:59:59Z")})
    assert response.status_code == 200
    assert b"now:" in response.content
    assert not run_world_text(world_with(**{NUMBER_PATH: 1e308})).ok


def test_an_ordinary_world_still_simulates(viewer):
    assert token_client(viewer).post("/api/v1/simulate/", json.dumps(EXAMPLE), content_type="application/json").status_code == 200


@pytest.mark.parametrize("header", ["Bearer ünïcödé", "Bearer \u2603", "Bearer tok\u00e9n"])
def test_a_non_ascii_metrics_token_is_a_401(settings, header):
    settings.KARPWEB_METRICS_TOKEN = "s3cret-metrics-token"
    response = Client(HTTP_AUTHORIZATION=header).get("/metrics")
    assert response.status_code == 401


def test_an_api_body_over_the_limit_is_a_json_413(settings, operator, small_world):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 2048
    body = json.dumps({"capacityReservationSelectorTerms": [{"tags": {"team": "x" * 4096}}], "resourceVersion": "3"})
    response = token_client(operator).patch("/api/v1/ec2nodeclasses/default/", body, content_type="application/json")
    assert response.status_code == 413
    assert response["Content-Type"] == "application/json"
    assert "too large" in response.json()["detail"].lower()


def test_the_api_caps_a_selector_term_field_as_the_editor_does(operator, small_world, unchanged):
    body = {"capacityReservationSelectorTerms": [{"id": "cr-" + "a" * 10_000}], "resourceVersion": "3"}
    response = token_client(operator).patch("/api/v1/ec2nodeclasses/default/", body, format="json")
    assert response.status_code == 400
    assert "512" in json.dumps(response.json())
    unchanged()


@pytest.mark.parametrize("page", ["/nodepools/", "/decisions/"])
def test_a_bad_page_number_is_not_a_500(viewer_client, page):
    for number in ["-1", "0", "abc", "99999999999999999999", "1e3"]:
        assert viewer_client.get(page, {"page": number}).status_code in (200, 404), number
