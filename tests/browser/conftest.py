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


@pytest.fixture(scope="session", autouse=True)
def _static_files_kept():
    """The live server's static files with a max-age, as WhiteNoise serves them in production (their
    names hashed, kept a year): Django's handler sends none, so Chromium fetched plotly.js again for
    every page and never kept its compiled code."""
    from django.contrib.staticfiles.handlers import StaticFilesHandler

    original = StaticFilesHandler.serve

    def serve(self, request):
        response = original(self, request)
        response["Cache-Control"] = "max-age=3600"
        return response

    StaticFilesHandler.serve = serve
    yield
    StaticFilesHandler.serve = original


@pytest.fixture(scope="session")
def _shared_context(browser_type, browser_type_launch_args, browser_context_args, tmp_path_factory):
    """A persistent context (a profile on disk): an off-the-record one keeps its HTTP cache in memory,
    where no entry may be over an eighth of its 10 MB, and plotly.js is 4.8 MB."""
    context = browser_type.launch_persistent_context(tmp_path_factory.mktemp("chromium-profile"),
                                                     **browser_type_launch_args, **browser_context_args)
    yield context
    context.close()


@pytest.fixture
def context(_shared_context):
    """Every test's pages in one browser context (pytest-playwright makes one a test), so that its
    cache keeps plotly.js (4.8 MB) and the code Chromium compiled from it: in a fresh context the
    first chart page (the overview, where every sign-in lands) took 1.3 to 1.6 s, 1.1 s of it
    compiling the script, against 0.3 s with it kept. What a test leaves is cleared after it: its
    pages are closed and the cookies (a session) deleted; karpweb keeps nothing else in the browser
    (no web storage, no service worker)."""
    yield _shared_context
    for page in _shared_context.pages:
        page.close()
    _shared_context.clear_cookies()
    _shared_context.clear_permissions()


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
