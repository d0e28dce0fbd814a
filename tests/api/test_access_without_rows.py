"""The access tests that need no demo world (tests/api/test_access.py seeds it once for its module, so
these, which must not see it, live here): refusals before any object is looked up, and the api_token
command."""

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError
from knox.models import AuthToken

from tests.api.test_access import READS, SIMULATE, WRITES, call, run_api_token

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("method,url,body", [("get", url, None) for url in READS] + WRITES + [SIMULATE])
def test_anonymous_gets_401_json_not_a_login_redirect(anon, db, method, url, body):
    """Refused before any object is looked up: no data needed."""
    response = call(anon, method, url, body)
    assert response.status_code == 401
    assert response["Content-Type"] == "application/json"
    assert response["WWW-Authenticate"] == "Token"
    assert response.json() == {"detail": "Authentication credentials were not provided."}


@pytest.mark.parametrize("method,url,body", [("get", url, None) for url in READS] + WRITES + [SIMULATE])
def test_user_without_a_role_gets_403(as_nobody, method, url, body):
    response = call(as_nobody, method, url, body)
    assert response.status_code == 403
    assert response.json() == {"detail": "You need the viewer or operator role to use karpweb's API."}


def test_unknown_api_path_is_a_json_404(as_viewer):
    response = as_viewer.get("/api/v1/no-such-thing/")
    assert response.status_code == 404
    assert response.json() == {"detail": "No API endpoint at /api/v1/no-such-thing/."}
    response = as_viewer.get("/api/v1/nodepools")
    assert response.status_code == 404
    assert response.json() == {"detail": "No API endpoint at /api/v1/nodepools (did you mean /api/v1/nodepools/ ?)."}


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


def test_api_token_says_what_the_role_allows(viewer, nobody):
    assert "is a viewer: the token reads" in run_api_token("vera")[1]
    assert "neither the viewer nor the operator role" in run_api_token("nora")[1]


def test_api_token_refuses_unknown_and_inactive_users(db):
    with pytest.raises(CommandError, match='no user "ghost"'):
        run_api_token("ghost")
    get_user_model().objects.create_user("gone", is_active=False)
    with pytest.raises(CommandError, match="inactive"):
        run_api_token("gone")
