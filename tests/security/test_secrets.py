"""No secret in a log line or an error page: the SECRET_KEY, database and Redis passwords, API
tokens, AWS keys and Kubernetes tokens never appear in what a failing request, sync or
configuration error writes or shows. Production settings turn on secure cookies, HSTS and CSRF."""

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from accounts.tokens import create_token
from karpweb.env import env_url
from reservations.models import EC2NodeClass
from scheduling.adapters.ec2 import EC2CloudProvider
from scheduling.adapters.ec2.client import make_ec2_client, make_resource_groups_client
from scheduling.adapters.ec2.sync import sync_reservations
from scheduling.models import Decision

ROOT = Path(__file__).resolve().parents[2]
AWS_KEY_ID = "AKIAKARPWEBSECRETID7"
AWS_SECRET = "karpweb/Secret+Access/Key0123456789abcdefghij"
REDIS_PASSWORD = "redis-pass-5f3a9c"
KUBE_TOKEN = "kube-bearer-token-9d8e7f6a5b"


def secrets_in(text: str, *extra: str) -> list[str]:
    known = [settings.SECRET_KEY, AWS_KEY_ID, AWS_SECRET, REDIS_PASSWORD, KUBE_TOKEN, *extra]
    password = settings.DATABASES["default"].get("PASSWORD")
    if password:
        known.append(password)
    return [secret for secret in known if secret and secret in text]


@pytest.fixture
def all_logs(caplog):
    caplog.set_level(logging.DEBUG)
    return caplog


# --- error pages and the request log ---------------------------------------------------------------

@pytest.mark.django_db
def test_a_failing_page_shows_and_logs_no_secret(viewer_client, viewer, all_logs, monkeypatch):
    from scheduling import views

    def fails(self, **kwargs):
        raise RuntimeError("the page failed")

    monkeypatch.setattr(views.OverviewView, "get_context_data", fails)
    viewer_client.raise_request_exception = False
    session_key = viewer_client.session.session_key
    response = viewer_client.get("/")
    body = response.content.decode()
    assert response.status_code == 500
    assert "Server Error (500)" in body and "Traceback" not in body and "settings" not in body.lower()
    assert not secrets_in(body, session_key)
    assert "Internal Server Error: /" in all_logs.text
    assert not secrets_in(all_logs.text, session_key)


@pytest.mark.django_db
def test_a_failing_api_request_shows_and_logs_no_token(viewer, all_logs, monkeypatch):
    from rest_framework.test import APIClient

    from scheduling.api.views import NodePoolViewSet

    def fails(self, request, *args, **kwargs):
        raise RuntimeError("the list failed")

    monkeypatch.setattr(NodePoolViewSet, "list", fails)
    token = create_token(viewer)[1]
    client = APIClient(HTTP_AUTHORIZATION=f"Token {token}")
    client.raise_request_exception = False
    response = client.get("/api/v1/nodepools/")
    assert response.status_code == 500
    assert not secrets_in(response.content.decode(), token)
    assert not secrets_in(all_logs.text, token)
    # A wrong token is not echoed either.
    wrong = APIClient(HTTP_AUTHORIZATION="Token wrong-" + token[::-1]).get("/api/v1/nodepools/")
    assert wrong.status_code == 401 and token[::-1] not in wrong.content.decode() + all_logs.text


@pytest.mark.django_db
def test_the_debug_pages_are_off(client):
    assert settings.DEBUG is False
    response = client.get("/no/such/page/")
    assert response.status_code == 404 and b"URLconf" not in response.content and b"Traceback" not in response.content


# --- a failing EC2 sync ----------------------------------------------------------------------------

@pytest.mark.django_db
def test_a_failing_ec2_sync_logs_and_records_no_aws_key(world, config, all_logs, monkeypatch):
    import boto3

    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    session = boto3.session.Session(aws_access_key_id=AWS_KEY_ID, aws_secret_access_key=AWS_SECRET)
    provider = EC2CloudProvider(config, ec2=make_ec2_client(config, session),
                                resource_groups=make_resource_groups_client(config, session), sleep=lambda s: None)
    world.add_reservation("m5.large", "us-east-1a", 2, tags={"team": "ml"})
    EC2NodeClass.objects.create(name="ml", capacity_reservation_selector_terms=[{"tags": {"team": "ml"}}])
    world.faults.inject("DescribeCapacityReservations", "AuthFailure", count=3, status=401,
                        message="AWS was not able to validate the provided access credentials")
    world.faults.inject("DescribeCapacityReservations", "InternalError", count=50)

    stats = sync_reservations(provider)

    assert stats.errors
    written = json.dumps(stats.errors) + json.dumps(list(EC2NodeClass.objects.values("conditions")))
    written += json.dumps(list(Decision.objects.values("reason", "error")))
    assert "AuthFailure" in written or "InternalError" in written
    assert not secrets_in(written) and not secrets_in(all_logs.text)
    assert all(record.levelno >= logging.INFO for record in all_logs.records if record.name.startswith("botocore"))


# --- a Kubernetes API server that cannot be reached ------------------------------------------------

def test_an_unreachable_kube_api_server_names_the_host_not_the_token(tmp_path, all_logs):
    from scheduling.adapters.kube.adapter import KubeClusterAdapter
    from scheduling.adapters.kube.config import client_from_kubeconfig
    from scheduling.adapters.kube.errors import ClusterError

    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1", "insecure-skip-tls-verify": True}}],
        "users": [{"name": "u", "user": {"token": KUBE_TOKEN}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
    }))
    adapter = KubeClusterAdapter(client_from_kubeconfig(str(kubeconfig)))
    with pytest.raises(ClusterError) as info:
        adapter.list("Node")
    assert "127.0.0.1:1" in info.value.message
    assert not secrets_in(info.value.message) and not secrets_in(all_logs.text)


# --- configuration errors --------------------------------------------------------------------------

@pytest.mark.parametrize(("name", "url", "schemes"), [
    ("REDIS_URL", f"http://:{REDIS_PASSWORD}@redis:6379/0", ("redis", "rediss")),
    ("KARPWEB_CACHE_URL", f"memcached://user:{REDIS_PASSWORD}@cache:11211", ("redis", "rediss")),
    ("DATABASE_URL", f"mysql://karpweb:{REDIS_PASSWORD}@db/karpweb", ("postgres", "sqlite")),
    ("KARPWEB_EC2_ENDPOINT_URL", f"ftp://me:{REDIS_PASSWORD}@ec2.example.com", ("http", "https")),
])
def test_a_bad_url_setting_is_named_without_its_password(monkeypatch, name, url, schemes):
    monkeypatch.setenv(name, url)
    with pytest.raises(ImproperlyConfigured) as info:
        env_url(name, None, schemes)
    assert name in str(info.value) and REDIS_PASSWORD not in str(info.value) and "***" in str(info.value)


# --- production settings ---------------------------------------------------------------------------

def test_production_settings_secure_cookies_hsts_and_csrf():
    env = {k: v for k, v in os.environ.items() if k not in {"DEBUG", "DJANGO_ALLOW_ASYNC_UNSAFE"}}
    env.update(SECRET_KEY="production-like-" + "0123456789abcdef" * 4, ALLOWED_HOSTS="karpweb.example.com",
               DJANGO_SETTINGS_MODULE="karpweb.settings")
    script = (
        "import json; from django.conf import settings as s; print(json.dumps({k: getattr(s, k) for k in ("
        "'DEBUG', 'SESSION_COOKIE_SECURE', 'CSRF_COOKIE_SECURE', 'SESSION_COOKIE_HTTPONLY', 'SECURE_HSTS_SECONDS', "
        "'SECURE_HSTS_INCLUDE_SUBDOMAINS', 'SECURE_CONTENT_TYPE_NOSNIFF', 'X_FRAME_OPTIONS', 'MIDDLEWARE')}))"
    )
    result = subprocess.run([sys.executable, "manage.py", "shell", "-c", script], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    values = json.loads(result.stdout.strip().splitlines()[-1])
    assert values["DEBUG"] is False
    assert values["SESSION_COOKIE_SECURE"] and values["CSRF_COOKIE_SECURE"] and values["SESSION_COOKIE_HTTPONLY"]
    assert values["SECURE_HSTS_SECONDS"] >= 31536000 and values["SECURE_HSTS_INCLUDE_SUBDOMAINS"]
    assert values["SECURE_CONTENT_TYPE_NOSNIFF"] and values["X_FRAME_OPTIONS"] == "DENY"
    assert "django.middleware.csrf.CsrfViewMiddleware" in values["MIDDLEWARE"]
    assert "django.middleware.security.SecurityMiddleware" in values["MIDDLEWARE"]


@pytest.mark.django_db
def test_forms_refuse_posts_without_the_csrf_token(operator, small_pool):
    from django.test import Client

    client = Client(enforce_csrf_checks=True)
    client.force_login(operator)
    assert client.post("/nodepools/web/mode/", {"mode": "control"}).status_code == 403
    assert client.post("/login/", {"username": "x", "password": "y"}).status_code == 403


@pytest.fixture
def small_pool(db):
    from tests.factories.scheduling import NodePoolFactory

    return NodePoolFactory(name="web")
