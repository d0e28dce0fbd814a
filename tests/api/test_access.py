"""Who may do what on the demo world: viewers read, operators write; token and session authentication;
the api_token command's keys in use. (401 without credentials, 403 without a role and the command's
own checks: tests/api/test_access_without_rows.py.)"""

import io

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from rest_framework.test import APIClient

from fleet.scope import default_cluster
from reservations.models import EC2NodeClass
from scheduling.models import Decision, Pod, TaskRun
from tests.support.api_clients import token_client

pytestmark = pytest.mark.django_db


@pytest.fixture
def demo_world(demo_world_for_module, db):
    """Every test here builds on the demo world: it is seeded once for the module (tests/conftest.py),
    and each test's own writes are rolled back after it."""


READS = [
    "/api/v1/capacity-reservations/",
    "/api/v1/capacity-reservations/cr-0a1b2c3d4e5f60001/",
    "/api/v1/capacity-reservations/cr-0a1b2c3d4e5f60001/samples/",
    "/api/v1/ec2nodeclasses/",
    "/api/v1/ec2nodeclasses/default/",
    "/api/v1/nodepools/",
    "/api/v1/nodepools/general/",
    "/api/v1/nodeclaims/",
    "/api/v1/nodes/",
    "/api/v1/pods/",
    "/api/v1/instance-types/",
    "/api/v1/instance-types/m5.large/",
    "/api/v1/offerings/",
    "/api/v1/decisions/",
    "/api/v1/task-runs/",
]
TERMS = {"capacityReservationSelectorTerms": [{"tags": {"team": "ml"}}]}
WRITES = [
    ("patch", "/api/v1/ec2nodeclasses/default/", {**TERMS, "resourceVersion": ""}),
    ("put", "/api/v1/ec2nodeclasses/default/", {**TERMS, "resourceVersion": ""}),
    ("post", "/api/v1/ec2nodeclasses/default/preview/", TERMS),
    ("patch", "/api/v1/nodepools/general/", {"mode": "control"}),
]
SIMULATE = ("post", "/api/v1/simulate/", {"now": "2026-11-21T12:00:00Z"})


def detail_reads():
    """Detail URLs of objects the demo world creates with generated names or ids."""
    pod = Pod.objects.order_by("namespace", "name").first()
    claim_name = pod.node.node_claim.name if pod.node and pod.node.node_claim else None
    urls = [f"/api/v1/pods/{pod.namespace}/{pod.name}/", f"/api/v1/nodes/{pod.node_name}/"]
    if claim_name:
        urls.append(f"/api/v1/nodeclaims/{claim_name}/")
    decision = Decision.objects.create(kind="launch", mode="observe", subject="pod a/b", reason="test")
    run = TaskRun.objects.create(task="provision")
    return urls + [f"/api/v1/decisions/{decision.pk}/", f"/api/v1/task-runs/{run.pk}/",
                   f"/api/v1/world/?cluster={default_cluster().name}"]  # a world is one cluster's


def call(client, method, url, body=None):
    return getattr(client, method)(url, body, format="json")


def test_bad_or_revoked_token_gets_401(demo_world, viewer):
    client = token_client(viewer)
    assert client.get("/api/v1/nodepools/").status_code == 200
    call_command("api_token", viewer.username, "--revoke", stdout=io.StringIO())
    response = client.get("/api/v1/nodepools/")
    assert response.status_code == 401 and response.json() == {"detail": "Invalid token."}


def test_viewer_reads_everything(as_viewer, demo_world):
    for url in READS + detail_reads():
        response = as_viewer.get(url)
        assert response.status_code == 200, (url, response.content[:300])
        assert response["Content-Type"] == "application/json"


@pytest.mark.parametrize("method,url,body", WRITES)
def test_viewer_cannot_write(as_viewer, demo_world, method, url, body):
    response = call(as_viewer, method, url, body)
    assert response.status_code == 403
    assert response.json() == {"detail": "Only operators may change this."}


def test_viewer_may_simulate(as_viewer, demo_world):
    world = as_viewer.get(f"/api/v1/world/?cluster={default_cluster().name}").json()
    assert as_viewer.post("/api/v1/simulate/", world, format="json").status_code == 200


def test_staff_without_a_group_reads_but_does_not_write(demo_world):
    staff = get_user_model().objects.create_user("sam", password="pw-for-tests-only", is_staff=True)
    client = token_client(staff)
    assert client.get("/api/v1/nodepools/").status_code == 200
    assert client.patch("/api/v1/nodepools/general/", {"mode": "control"}, format="json").status_code == 403


@pytest.mark.parametrize("method,url,body", WRITES)
def test_operator_and_superuser_may_write(demo_world, operator, method, url, body):
    superuser = get_user_model().objects.create_superuser("su", "su@example.com", "pw-for-tests-only")
    for user in (operator, superuser):
        if "resourceVersion" in body:  # the first write moved the version on
            body = {**body, "resourceVersion": EC2NodeClass.objects.get(name="default").resource_version}
        response = call(token_client(user), method, url, body)
        assert response.status_code == 200, response.content


def test_session_authentication_works_for_the_browser(viewer_client, demo_world):
    response = viewer_client.get("/api/v1/capacity-reservations/")
    assert response.status_code == 200 and response.json()["count"] == 13  # the demo fleet's thirteen reservations (one future-dated)


def test_session_writes_need_the_csrf_token(demo_world, operator):
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(operator)
    response = client.patch("/api/v1/nodepools/general/", {"mode": "control"}, format="json")
    assert response.status_code == 403
    assert "CSRF" in response.json()["detail"]


def test_methods_an_endpoint_does_not_offer_get_405(as_operator, demo_world):
    assert as_operator.delete("/api/v1/ec2nodeclasses/default/").status_code == 405
    assert as_operator.put("/api/v1/nodepools/general/", {"mode": "control"}, format="json").status_code == 405
    assert as_operator.post("/api/v1/capacity-reservations/", {}, format="json").status_code == 405
    assert as_operator.get("/api/v1/simulate/").status_code == 405


# --- manage.py api_token ---------------------------------------------------------------------

def run_api_token(*args):
    out, err = io.StringIO(), io.StringIO()
    call_command("api_token", *args, stdout=out, stderr=err)
    return out.getvalue().strip(), err.getvalue().strip()


def test_api_token_works_for_requests(operator, demo_world):
    key, _ = run_api_token("otto")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert client.patch("/api/v1/nodepools/general/", {"mode": "observe"}, format="json").status_code == 200


