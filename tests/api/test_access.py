"""Who may do what: 401 JSON without credentials (never a login redirect), 403 without a role,
viewers read, operators write; token and session authentication; the api_token command."""

import io

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from knox.models import AuthToken
from rest_framework.test import APIClient

from reservations.models import EC2NodeClass
from scheduling.models import Decision, Pod, TaskRun
from tests.api.conftest import token_client

pytestmark = pytest.mark.django_db

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
    "/api/v1/world/",
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
    return urls + [f"/api/v1/decisions/{decision.pk}/", f"/api/v1/task-runs/{run.pk}/"]


def call(client, method, url, body=None):
    return getattr(client, method)(url, body, format="json")


@pytest.mark.parametrize("method,url,body", [("get", url, None) for url in READS] + WRITES + [SIMULATE])
def test_anonymous_gets_401_json_not_a_login_redirect(anon, db, method, url, body):
    """Refused before any object is looked up: no data needed."""
    response = call(anon, method, url, body)
    assert response.status_code == 401
    assert response["Content-Type"] == "application/json"
    assert response["WWW-Authenticate"] == "Token"
    assert response.json() == {"detail": "Authentication credentials were not provided."}


def test_bad_or_revoked_token_gets_401(demo_world, viewer):
    client = token_client(viewer)
    assert client.get("/api/v1/nodepools/").status_code == 200
    call_command("api_token", viewer.username, "--revoke", stdout=io.StringIO())
    response = client.get("/api/v1/nodepools/")
    assert response.status_code == 401 and response.json() == {"detail": "Invalid token."}


@pytest.mark.parametrize("method,url,body", [("get", url, None) for url in READS] + WRITES + [SIMULATE])
def test_user_without_a_role_gets_403(as_nobody, method, url, body):
    response = call(as_nobody, method, url, body)
    assert response.status_code == 403
    assert response.json() == {"detail": "You need the viewer or operator role to use karpweb's API."}


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
    world = as_viewer.get("/api/v1/world/").json()
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
    assert response.status_code == 200 and response.json()["count"] == 12  # the demo fleet's twelve reservations


def test_session_writes_need_the_csrf_token(demo_world, operator):
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(operator)
    response = client.patch("/api/v1/nodepools/general/", {"mode": "control"}, format="json")
    assert response.status_code == 403
    assert "CSRF" in response.json()["detail"]


def test_unknown_api_path_is_a_json_404(as_viewer):
    response = as_viewer.get("/api/v1/no-such-thing/")
    assert response.status_code == 404
    assert response.json() == {"detail": "No API endpoint at /api/v1/no-such-thing/."}
    response = as_viewer.get("/api/v1/nodepools")
    assert response.status_code == 404
    assert response.json() == {"detail": "No API endpoint at /api/v1/nodepools (did you mean /api/v1/nodepools/ ?)."}


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


def test_api_token_makes_a_new_key_each_time_rotates_and_revokes(operator):
    key, note = run_api_token("otto")
    assert "shown this once" in note
    second, _ = run_api_token("otto")
    assert second != key and AuthToken.objects.filter(user=operator).count() == 2  # a key is never shown again
    rotated, _ = run_api_token("otto", "--rotate")
    assert rotated not in (key, second) and AuthToken.objects.filter(user=operator).count() == 1
    message, _ = run_api_token("otto", "--revoke")
    assert message == "Revoked 1 API token(s) of otto." and not AuthToken.objects.filter(user=operator).exists()
    assert run_api_token("otto", "--revoke")[0] == "otto had no API token."


def test_api_token_works_for_requests(operator, demo_world):
    key, _ = run_api_token("otto")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert client.patch("/api/v1/nodepools/general/", {"mode": "observe"}, format="json").status_code == 200


def test_api_token_says_what_the_role_allows(viewer, nobody):
    assert "is a viewer: the token reads" in run_api_token("vera")[1]
    assert "neither the viewer nor the operator role" in run_api_token("nora")[1]


def test_api_token_refuses_unknown_and_inactive_users(db):
    with pytest.raises(CommandError, match='no user "ghost"'):
        run_api_token("ghost")
    get_user_model().objects.create_user("gone", is_active=False)
    with pytest.raises(CommandError, match="inactive"):
        run_api_token("gone")
