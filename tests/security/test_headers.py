"""Response headers and page markup of the second hardening round: a Content-Security-Policy on every
page and no inline script for it to forbid, `Cache-Control: no-store` on what a signed-in user sees,
and /metrics closed unless a token is set or a setting says it is public."""

import re
from collections import deque
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urldefrag, urlsplit

import pytest
from django.test import Client

from tests.support.api_clients import token_client

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[2]
MAX_PAGES = 120


class PageParts(HTMLParser):
    """The links of a page, its scripts without src, and attributes that run script (onclick=...)."""

    def __init__(self):
        super().__init__()
        self.links, self.inline_scripts, self.handlers = [], [], []
        self._in_inline_script = False

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        self.handlers += [f"<{tag} {name}>" for name in attributes if name.startswith("on")]
        if tag == "a" and attributes.get("href"):
            self.links.append(attributes["href"])
        if any((value or "").strip().lower().startswith("javascript:") for value in attributes.values()):
            self.handlers.append(f"<{tag}> javascript: URL")
        if tag == "script" and not attributes.get("src") and attributes.get("type") != "application/json":
            self._in_inline_script = True

    def handle_data(self, data):
        if self._in_inline_script and data.strip():
            self.inline_scripts.append(data.strip()[:80])

    def handle_endtag(self, tag):
        if tag == "script":
            self._in_inline_script = False


def crawl(client, start_paths):
    """Every page reachable from `start_paths` by links on the same site (GET only), up to MAX_PAGES."""
    seen, queue, pages = set(start_paths), deque(start_paths), {}
    while queue and len(pages) < MAX_PAGES:
        path = queue.popleft()
        response = client.get(path)
        pages[path] = response
        if response.status_code != 200 or "text/html" not in response.get("Content-Type", ""):
            continue
        parts = PageParts()
        parts.feed(response.content.decode())
        for href in parts.links:
            href = urldefrag(href)[0]
            split = urlsplit(href)
            if split.scheme or split.netloc or not href.startswith("/") or href.startswith(("/logout", "/static/")):
                continue
            if "/delete/" in href or href.endswith("/history/"):
                continue
            if href not in seen:
                seen.add(href)
                queue.append(href)
    return pages


def test_every_page_has_the_policy_and_no_inline_script(admin_user_client, demo_world):
    pages = crawl(admin_user_client, ["/", "/admin/", "/api/docs/", "/what-if/edit/"])
    pages.update(crawl(Client(), ["/login/"]))
    assert len(pages) > 40  # the crawl reached the site, not one page
    html_pages = 0
    for path, response in pages.items():
        policy = response.get("Content-Security-Policy", "")
        assert "script-src 'self'" in policy and "frame-ancestors 'none'" in policy, path
        script_sources = re.search(r"script-src ([^;]*)", policy).group(1)
        assert "unsafe-inline" not in script_sources and "unsafe-eval" not in script_sources
        if response.status_code == 200 and "text/html" in response.get("Content-Type", ""):
            html_pages += 1
            parts = PageParts()
            parts.feed(response.content.decode())
            assert parts.inline_scripts == [], (path, parts.inline_scripts)
            assert parts.handlers == [], (path, parts.handlers)
    assert html_pages > 40


def test_signed_in_pages_and_api_answers_are_not_stored(viewer_client, viewer, demo_world):
    for path in ("/", "/reservations/", "/nodepools/", "/what-if/"):
        cache_control = viewer_client.get(path)["Cache-Control"]
        assert "no-store" in cache_control and "private" in cache_control, path
    assert "no-store" in token_client(viewer).get("/api/v1/nodepools/")["Cache-Control"]
    # What nobody signed in sees is left to the view (the health check, for one).
    assert "no-store" not in Client().get("/healthz").get("Cache-Control", "")


@pytest.fixture
def private_metrics(settings):
    settings.KARPWEB_METRICS_PUBLIC = False
    settings.KARPWEB_METRICS_TOKEN = ""
    return settings


def test_metrics_are_closed_without_a_token(private_metrics):
    response = Client().get("/metrics")
    assert response.status_code == 403 and b"KARPWEB_METRICS_TOKEN" in response.content


def test_metrics_with_a_token_need_it(private_metrics):
    private_metrics.KARPWEB_METRICS_TOKEN = "metrics-token-for-the-headers-test"
    assert Client().get("/metrics").status_code == 401
    assert Client(HTTP_AUTHORIZATION="Bearer wrong").get("/metrics").status_code == 401
    scraped = Client(HTTP_AUTHORIZATION="Bearer metrics-token-for-the-headers-test").get("/metrics")
    assert scraped.status_code == 200 and b"karpweb_" in scraped.content


def test_metrics_public_on_purpose(private_metrics):
    private_metrics.KARPWEB_METRICS_PUBLIC = True
    assert Client().get("/metrics").status_code == 200


def test_the_secret_example_names_the_metrics_token():
    lines = (ROOT / "deploy/kustomize/secret.env.example").read_text().splitlines()
    assert "KARPWEB_METRICS_TOKEN=" in lines


def test_the_debug_error_page_hides_connection_urls(settings, rf):
    from django.views.debug import technical_500_response

    secret = "".join(["hun", "ter2"])  # not spelled out here: the page shows this file's source too
    settings.DEBUG = True
    settings.REDIS_URL = f"redis://:{secret}@redis.example:6379/0"
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache",
                                   "LOCATION": f"redis://:{secret}@redis.example:6379/1"}}
    request = rf.get("/")
    request.META["KARPWEB_CACHE_URL"] = f"redis://:{secret}@redis.example/1"
    page = error_page(request, technical_500_response)
    assert "boom" in page and secret not in page


def error_page(request, technical_500_response) -> str:
    """DEBUG's page for an error raised here (this frame's locals hold no secret)."""
    try:
        raise RuntimeError("boom")
    except RuntimeError as exc:
        return technical_500_response(request, type(exc), exc, exc.__traceback__).content.decode()


def test_every_answer_refuses_the_browser_features_no_page_uses(viewer_client, client):
    for answer in (viewer_client.get("/"), client.get("/accounts/login/"), client.get("/api/v1/"),
                   client.get("/healthz")):
        policy = answer.headers.get("Permissions-Policy", "")
        assert "camera=()" in policy and "geolocation=()" in policy and "microphone=()" in policy, answer
