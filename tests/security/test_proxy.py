"""Behind an ingress (KARPWEB_TRUSTED_PROXY_HOPS): the client's address comes from the entries the
trusted proxies appended to X-Forwarded-For, never from what the client wrote there, and it is the one
address the sign-in lock-out, the API's limiters and the audit log use."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.test import RequestFactory
from django.urls import reverse
from rest_framework.test import APIClient

from karpweb.clientaddr import client_address
from scheduling.models import AuditEntry
from tests.support.api_clients import token_client

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[2]
INGRESS = "10.42.0.7"  # every request's REMOTE_ADDR behind the ingress controller
PASSWORD = "a-good-long-password-42"


@pytest.fixture
def one_proxy(settings):
    settings.KARPWEB_TRUSTED_PROXY_HOPS = 1
    return settings


def via_ingress(forwarded_for: str) -> dict:
    return {"REMOTE_ADDR": INGRESS, "HTTP_X_FORWARDED_FOR": forwarded_for}


def sign_in(client, username, password, forwarded_for):
    return client.post(reverse("login"), {"username": username, "password": password}, **via_ingress(forwarded_for))


@pytest.mark.parametrize(("hops", "forwarded", "expected"), [
    (0, "203.0.113.9", "10.42.0.7"),                   # no proxy trusted: the header is the client's word
    (1, "203.0.113.9", "203.0.113.9"),
    (1, "1.2.3.4, 203.0.113.9", "203.0.113.9"),        # the left part was written by the client
    (2, "1.2.3.4, 203.0.113.9, 10.1.1.1", "203.0.113.9"),
    (2, "203.0.113.9", "203.0.113.9"),                 # fewer entries than hops: the outermost one
    (1, "", "10.42.0.7"),                              # not through the proxy (a probe in the cluster)
    (1, "not-an-address", "10.42.0.7"),
    (1, "2001:db8::0001", "2001:db8::1"),
])
def test_the_client_address_is_the_one_the_trusted_proxies_saw(settings, hops, forwarded, expected):
    settings.KARPWEB_TRUSTED_PROXY_HOPS = hops
    request = RequestFactory().get("/", **via_ingress(forwarded))
    assert client_address(request) == expected


def test_behind_the_ingress_one_guesser_does_not_lock_everybody_out(one_proxy, client):
    bob = get_user_model().objects.create_user("proxy-bob", "bob@example.com", PASSWORD)
    for index in range(one_proxy.AXES_FAILURE_LIMIT):
        sign_in(client, f"proxy-nobody-{index}", "guess", "198.51.100.66")
    # The guesser's address is locked, whatever it writes in front of it ...
    assert sign_in(client, "proxy-bob", PASSWORD, "192.0.2.1, 198.51.100.66").status_code == 429
    # ... and bob, from his own address through the same ingress, signs in.
    assert sign_in(client, "proxy-bob", PASSWORD, "198.51.100.20").status_code == 302
    entry = AuditEntry.objects.get(action=AuditEntry.Action.SIGN_IN, user=bob)
    assert entry.changes["ip_address"] == [None, "198.51.100.20"]
    assert AuditEntry.objects.filter(object_repr__contains="from 198.51.100.66").exists()
    assert not AuditEntry.objects.filter(object_repr__contains=f"from {INGRESS}").exists()


def test_rotating_a_spoofed_header_does_not_dodge_the_lock_out(one_proxy, client):
    get_user_model().objects.create_user("proxy-carol", "carol@example.com", PASSWORD)
    for index in range(one_proxy.AXES_FAILURE_LIMIT):
        sign_in(client, f"proxy-other-{index}", "guess", f"192.0.2.{index}, 198.51.100.67")
    assert sign_in(client, "proxy-carol", PASSWORD, "192.0.2.200, 198.51.100.67").status_code == 429


def test_without_a_proxy_the_header_is_ignored(settings, client):
    settings.KARPWEB_TRUSTED_PROXY_HOPS = 0
    get_user_model().objects.create_user("proxy-dave", "dave@example.com", PASSWORD)
    for index in range(settings.AXES_FAILURE_LIMIT):
        client.post(reverse("login"), {"username": f"proxy-x-{index}", "password": "guess"},
                    REMOTE_ADDR="198.51.100.68", HTTP_X_FORWARDED_FOR=f"192.0.2.{index}")
    refused = client.post(reverse("login"), {"username": "proxy-dave", "password": PASSWORD},
                          REMOTE_ADDR="198.51.100.68", HTTP_X_FORWARDED_FOR="192.0.2.250")
    assert refused.status_code == 429


@pytest.fixture
def api_limits(one_proxy):
    one_proxy.KARPWEB_API_ANON_RATE = "2/min"
    one_proxy.KARPWEB_API_RATE = "100/min"
    return one_proxy


def guess(forwarded_for: str) -> int:
    guesser = APIClient(HTTP_AUTHORIZATION="Token " + "0" * 40, **via_ingress(forwarded_for))
    return guesser.get("/api/v1/nodepools/").status_code


def test_rotating_the_header_does_not_dodge_the_api_limiter(api_limits):
    codes = [guess(f"192.0.2.{index}, 198.51.100.70") for index in range(4)]
    assert codes == [401, 401, 429, 429]


def test_a_guesser_cannot_lock_a_valid_token_out(api_limits, viewer):
    # The guesser fills the bucket of the victim's address (sharing it, or writing it in the header).
    assert [guess("198.51.100.71") for _ in range(3)] == [401, 401, 429]
    victim = token_client(viewer)
    victim.credentials(HTTP_AUTHORIZATION=victim._credentials["HTTP_AUTHORIZATION"], **via_ingress("198.51.100.71"))
    assert victim.get("/api/v1/nodepools/").status_code == 200
    # Without credentials, the full bucket answers at once.
    assert APIClient(**via_ingress("198.51.100.71")).get("/api/v1/nodepools/").status_code == 429


def test_drf_throttles_key_on_the_client_not_the_header(one_proxy):
    from rest_framework.request import Request

    from scheduling.api.throttling import AnonRateThrottle, UserRateThrottle

    request = Request(RequestFactory().get("/api/v1/nodepools/", **via_ingress("192.0.2.1, 198.51.100.72")))
    assert AnonRateThrottle().get_ident(request) == UserRateThrottle().get_ident(request) == "198.51.100.72"


def settings_value(name: str, **env) -> str:
    environment = {**os.environ, "DJANGO_SETTINGS_MODULE": "karpweb.settings", "DEBUG": "false",
                   "SECRET_KEY": "k7-Qz9_w" * 8, "ALLOWED_HOSTS": "karpweb.example.com", **env}
    code = f"import django; django.setup(); from django.conf import settings; print(repr(getattr(settings, {name!r}, None)))"
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=environment, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip().splitlines()[-1]


def test_x_forwarded_proto_is_believed_only_behind_a_trusted_proxy():
    assert settings_value("SECURE_PROXY_SSL_HEADER", KARPWEB_TRUSTED_PROXY_HOPS="0") == "None"
    assert settings_value("SECURE_PROXY_SSL_HEADER", KARPWEB_TRUSTED_PROXY_HOPS="1") == "('HTTP_X_FORWARDED_PROTO', 'https')"


def test_only_a_proxy_in_the_trusted_networks_is_believed(one_proxy):
    """A pod that reaches karpweb directly (not through the ingress) cannot choose its address."""
    import ipaddress

    one_proxy.KARPWEB_TRUSTED_PROXY_CIDRS = [ipaddress.ip_network("10.42.0.0/16")]
    factory = RequestFactory()
    assert client_address(factory.get("/", **via_ingress("203.0.113.9"))) == "203.0.113.9"
    direct = factory.get("/", REMOTE_ADDR="10.99.3.4", HTTP_X_FORWARDED_FOR="203.0.113.9")
    assert client_address(direct) == "10.99.3.4"


def test_the_proxy_networks_setting_names_a_bad_entry():
    env = {**os.environ, "KARPWEB_TRUSTED_PROXY_CIDRS": "10.0.0.0/8, ten", "DJANGO_SETTINGS_MODULE": "karpweb.settings"}
    ran = subprocess.run([sys.executable, "-c", "import django; django.setup()"], env=env, capture_output=True,
                         text=True, cwd=ROOT)
    assert ran.returncode != 0 and "KARPWEB_TRUSTED_PROXY_CIDRS: 'ten' is not a CIDR block" in ran.stderr
