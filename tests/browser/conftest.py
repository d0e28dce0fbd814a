"""Playwright in Debian's Chromium (never `playwright install`: it downloads, and fails here)."""

import shutil
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management import call_command

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
PASSWORD = "pw-for-browser-tests"


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    if not Path(CHROMIUM).exists():
        pytest.fail("Chromium is missing: apt-get install -y chromium (.ci/run does this)")
    return {
        **browser_type_launch_args,
        "executable_path": CHROMIUM,
        "args": ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"],
    }


@pytest.fixture
def artifacts():
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS


@pytest.fixture
def demo(transactional_db):
    call_command("seed_demo")


@pytest.fixture
def operator_login(transactional_db, live_server, page):
    user = get_user_model().objects.create_user("olga", "olga@example.com", PASSWORD)
    user.groups.add(Group.objects.get_or_create(name="operator")[0])
    page.goto(f"{live_server.url}/login/")
    page.fill("input[name=username]", "olga")
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_server.url}/")
    return page


@pytest.fixture(autouse=True)
def no_content_security_policy_violations(request):
    """Every browser test also checks that the page ran under karpweb's Content-Security-Policy without
    the browser refusing anything (an inline script, a style, a source the policy does not allow)."""
    if "page" not in request.fixturenames:
        yield
        return
    page = request.getfixturevalue("page")
    refused = []
    page.on("console", lambda message: refused.append(message.text)
            if "Content Security Policy" in message.text else None)
    yield
    assert refused == [], refused


def each_page(pages, check) -> None:
    """``check(page)`` for every page in one signed-in browser over one seeded world (a seed and a sign-in
    per page cost more than the page); fails once, naming every page that failed and why."""
    failures = []
    for one in pages:
        try:
            check(one)
        except Exception as problem:  # noqa: BLE001 - an assertion or a Playwright timeout: both name the page
            failures.append(f"{one}: {problem}")
    assert failures == [], "\n".join(failures)
