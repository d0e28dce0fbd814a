"""API rate limits (429 with Retry-After, per user and per anonymous client) and revocable tokens."""

import io

import pytest
from django.core.cache import cache
from django.core.management import call_command
from rest_framework.test import APIClient

from tests.support.api_clients import token_client

pytestmark = pytest.mark.django_db


@pytest.fixture
def limits(settings):
    settings.KARPWEB_API_RATE = "3/min"
    settings.KARPWEB_API_ANON_RATE = "2/min"
    cache.clear()
    yield settings
    cache.clear()


def test_a_user_over_the_rate_gets_429_with_retry_after(limits, viewer, operator):
    client = token_client(viewer)
    assert [client.get("/api/v1/nodepools/").status_code for _ in range(3)] == [200] * 3
    refused = client.get("/api/v1/nodepools/")
    assert refused.status_code == 429
    assert int(refused["Retry-After"]) > 0
    assert "throttled" in refused.json()["detail"].lower()
    # Counted per user: another user is not affected, and writes count too.
    other = token_client(operator)
    assert other.get("/api/v1/decisions/").status_code == 200
    assert client.post("/api/v1/simulate/", b"{}", content_type="application/json").status_code == 429


def test_anonymous_requests_are_limited_per_client(limits):
    anon = APIClient()
    assert [anon.get("/api/v1/nodepools/").status_code for _ in range(2)] == [401, 401]
    refused = anon.get("/api/v1/nodepools/")
    assert refused.status_code == 429 and int(refused["Retry-After"]) > 0
    assert APIClient(REMOTE_ADDR="10.0.0.9").get("/api/v1/nodepools/").status_code == 401
    # Endpoints anyone may call count in the same bucket (DRF's anonymous throttle).
    assert anon.get("/api/v1/no-such-thing/").status_code == 429


def test_guessing_tokens_is_limited(limits, viewer):
    guesser = APIClient(REMOTE_ADDR="10.0.0.7", HTTP_AUTHORIZATION="Token " + "0" * 40)
    assert [guesser.get("/api/v1/nodepools/").status_code for _ in range(3)] == [401, 401, 429]
    # A client with a valid token from elsewhere is not affected.
    assert token_client(viewer).get("/api/v1/nodepools/").status_code == 200


def test_rates_are_read_from_the_settings(limits, viewer):
    limits.KARPWEB_API_RATE = None  # "off"
    client = token_client(viewer)
    assert {client.get("/api/v1/nodepools/").status_code for _ in range(10)} == {200}


def test_pages_are_not_api_limited(limits, viewer_client):
    assert {viewer_client.get("/nodepools/").status_code for _ in range(6)} == {200}


@pytest.mark.parametrize(("value", "ok"), [("600/min", True), ("10/s", True), ("off", True), ("5/hour", True),
                                           ("600", False), ("fast", False), ("0/min", False), ("-1/min", False)])
def test_rate_settings_are_strict(monkeypatch, value, ok):
    from django.core.exceptions import ImproperlyConfigured

    from karpweb.env import env_rate

    monkeypatch.setenv("KARPWEB_API_RATE", value)
    if ok:
        env_rate("KARPWEB_API_RATE", "600/min")
    else:
        with pytest.raises(ImproperlyConfigured, match="KARPWEB_API_RATE"):
            env_rate("KARPWEB_API_RATE", "600/min")


def test_a_revoked_token_gets_401_at_once(viewer):
    client = token_client(viewer)
    assert client.get("/api/v1/nodepools/").status_code == 200
    out = io.StringIO()
    call_command("api_token", viewer.username, "--revoke", stdout=out)
    assert "Revoked" in out.getvalue()
    response = client.get("/api/v1/nodepools/")
    assert response.status_code == 401 and response["WWW-Authenticate"] == "Token"
    # A new token works; the old key stays dead.
    new_key = io.StringIO()
    call_command("api_token", viewer.username, stdout=new_key)
    assert APIClient(HTTP_AUTHORIZATION=f"Token {new_key.getvalue().strip()}").get("/api/v1/nodepools/").status_code == 200
    assert client.get("/api/v1/nodepools/").status_code == 401


def test_a_rotated_token_replaces_the_old_one(viewer):
    client = token_client(viewer)
    out = io.StringIO()
    call_command("api_token", viewer.username, "--rotate", stdout=out)
    assert client.get("/api/v1/nodepools/").status_code == 401
    assert APIClient(HTTP_AUTHORIZATION=f"Token {out.getvalue().strip()}").get("/api/v1/nodepools/").status_code == 200


def test_the_per_user_limit_is_counted_atomically_under_parallel_requests(settings, viewer, monkeypatch):
    """16 clients at once: exactly the rate gets through (DRF's read-then-write list let 687 of 600)."""
    import threading
    import types

    from django.core.cache import cache

    from scheduling.api.throttling import UserRateThrottle

    settings.KARPWEB_API_RATE = "50/min"
    monkeypatch.setattr(UserRateThrottle, "timer", lambda self: 1_000_020.0)  # one window, whatever the clock says
    cache.clear()
    request = types.SimpleNamespace(user=viewer, META={"REMOTE_ADDR": "192.0.2.1"})
    allowed, start = [], threading.Barrier(16)

    def client():
        start.wait()
        for _ in range(10):
            allowed.append(UserRateThrottle().allow_request(request, None))

    threads = [threading.Thread(target=client) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(allowed) == 160 and allowed.count(True) == 50
