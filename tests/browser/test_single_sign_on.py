"""Single sign-on in a real browser against a real OpenID Connect provider process: the sign-in page
offers the provider; roles follow the group claim at every sign-in (gained, changed, lost); a person
in no mapped group is refused with the reason; a replayed callback, a forged state and a token for
another nonce are refused; every sign-in and role change is in the audit log; the client secret is
in no log line; local accounts can be switched off."""

import logging
import re

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import expect

from accounts.models import SignInIdentity
from karpweb.roles import user_roles
from scheduling.models import AuditEntry
from tests.support import oidc_provider

PASSWORD = "idp-password-for-tests"


def person(*groups):
    return {"password": PASSWORD, "email": "alice@example.com", "name": "Alice Example", "groups": list(groups)}


@pytest.fixture
def idp(live_server, tmp_path, settings):
    provider = oidc_provider.start(f"{live_server.url}/oidc/callback/", {"alice": person("platform-ops")}, tmp_path)
    settings.KARPWEB_OIDC_ISSUER = provider.issuer
    settings.OIDC_RP_CLIENT_ID = oidc_provider.CLIENT_ID
    settings.OIDC_RP_CLIENT_SECRET = oidc_provider.CLIENT_SECRET
    settings.KARPWEB_OIDC_NAME = "Test IdP"
    settings.KARPWEB_OIDC_VIEWER_GROUPS = ["platform-viewers"]
    settings.KARPWEB_OIDC_OPERATOR_GROUPS = ["platform-ops"]
    settings.KARPWEB_OIDC_ADMIN_GROUPS = ["platform-admins"]
    settings.AUTHENTICATION_BACKENDS = [*settings.AUTHENTICATION_BACKENDS, "accounts.oidc.KarpwebOIDCBackend"]
    yield provider
    provider.process.terminate()
    provider.process.wait(10)


def sign_in(page, live_server, idp_session=False):
    page.goto(f"{live_server.url}/login/")
    page.get_by_role("link", name="Sign in with Test IdP").click()
    if not idp_session:
        page.wait_for_url(re.compile(r"http://127\.0\.0\.1:\d+/interaction/"))
        page.fill("input[name=login]", "alice")
        page.fill("input[name=password]", PASSWORD)
        page.click("button[type=submit]")
    page.wait_for_url(re.compile(re.escape(live_server.url) + r"/(login/)?$"))


def sign_out(page):
    if page.locator(".user-menu").count():  # the console's log out is in the user menu (opens on hover);
        page.locator(".user-menu").hover()  # the admin's is in its header
    page.get_by_role("button", name="log out").click()


def roles_of(username):
    return user_roles(get_user_model().objects.get(username=username))  # a fresh row: roles are cached per object


def audit(action):
    return list(AuditEntry.objects.filter(action=action, content_type__model="user").order_by("id"))


def test_roles_follow_the_group_claim_at_every_sign_in(transactional_db, live_server, page, idp, caplog, artifacts):
    caplog.set_level(logging.DEBUG)
    page.goto(f"{live_server.url}/login/")
    expect(page.get_by_role("link", name="Sign in with Test IdP")).to_be_visible()
    page.screenshot(path=str(artifacts / "sign-in-page.png"), full_page=True)

    sign_in(page, live_server)
    assert page.url == f"{live_server.url}/"
    expect(page.locator(".who")).to_contain_text("alice · operator")
    alice = get_user_model().objects.get(username="alice")
    assert user_roles(alice) == {"operator"} and alice.email == "alice@example.com" and not alice.has_usable_password()
    identity = SignInIdentity.objects.get(user=alice)
    assert (identity.issuer, identity.subject, identity.groups) == (idp.issuer, "alice", ["platform-ops"])
    [signed_in] = audit("sign-in")
    assert signed_in.changes["method"] == [None, "single sign-on"] and signed_in.actor == "alice"
    [granted] = audit("change")
    assert granted.changes["roles"] == [[], ["operator"]]

    # The provider moves alice to the viewers: the next sign-in makes her a viewer, and says so.
    idp.set_accounts({"alice": person("platform-viewers", "unrelated")})
    sign_out(page)
    sign_in(page, live_server, idp_session=True)
    assert roles_of("alice") == {"viewer"}
    assert [e.changes["roles"] for e in audit("change")] == [[[], ["operator"]], [["operator"], ["viewer"]]]
    assert len(audit("sign-in")) == 2

    # Made an admin: Django's admin opens for her.
    idp.set_accounts({"alice": person("platform-admins")})
    sign_out(page)
    sign_in(page, live_server, idp_session=True)
    alice.refresh_from_db()
    assert alice.is_staff and alice.is_superuser and roles_of("alice") == {"admin", "operator"}
    page.goto(f"{live_server.url}/admin/")
    expect(page.get_by_text("karpweb administration")).to_be_visible()

    # Out of every mapped group: refused with the reason, and her roles are gone.
    idp.set_accounts({"alice": person("unrelated")})
    sign_out(page)
    sign_in(page, live_server, idp_session=True)
    assert page.url == f"{live_server.url}/login/"
    expect(page.get_by_role("alert")).to_contain_text(
        "Single sign-on refused: alice is in none of the groups that give a karpweb role (their groups claim: unrelated)")
    alice.refresh_from_db()
    assert roles_of("alice") == set() and not alice.is_staff
    page.goto(f"{live_server.url}/")
    assert page.url.startswith(f"{live_server.url}/login/")  # not signed in
    [refused] = audit("refused")
    assert "none of the groups" in refused.changes["reason"][1]
    assert audit("change")[-1].changes["roles"] == [["admin", "operator"], []]

    assert oidc_provider.CLIENT_SECRET not in caplog.text
    assert oidc_provider.CLIENT_SECRET not in "".join(str(e.changes) for e in AuditEntry.objects.all())


def test_replayed_forged_and_foreign_callbacks_are_refused(transactional_db, live_server, page, idp, caplog):
    callbacks = []
    page.on("request", lambda request: callbacks.append(request.url) if "/oidc/callback/" in request.url else None)
    sign_in(page, live_server)
    assert page.url == f"{live_server.url}/" and len(callbacks) == 1

    # The same callback again (its state was used up): refused.
    assert page.goto(callbacks[0]).status == 400
    page.goto(f"{live_server.url}/")
    sign_out(page)
    # ...and after signing out (no state left in the session at all): back to the sign-in page.
    page.goto(callbacks[0])
    assert page.url == f"{live_server.url}/login/"
    assert page.goto(f"{live_server.url}/").url.startswith(f"{live_server.url}/login/")

    # A state karpweb never issued. (A flow is started without following karpweb's redirect, so the
    # session holds a real state; the browser's route handlers never see a redirect's target.)
    caplog.clear()
    start = page.request.get(f"{live_server.url}/oidc/authenticate/", max_redirects=0)
    assert start.status == 302 and "state=" in start.headers["location"] and "nonce=" in start.headers["location"]
    forged = page.goto(f"{live_server.url}/oidc/callback/?code=abc&state=forged-state")
    assert forged.status == 400 and "state not found in session" in caplog.text
    assert page.goto(f"{live_server.url}/").url.startswith(f"{live_server.url}/login/")

    # An ID token minted for another nonce: the authorization request rewritten on its way to the
    # provider (which still knows alice, so it answers at once with a code).
    start = page.request.get(f"{live_server.url}/oidc/authenticate/", max_redirects=0)
    answers = []
    page.on("response", lambda response: answers.append(response.status) if "/oidc/callback/" in response.url else None)
    page.goto(re.sub(r"nonce=[^&]+", "nonce=someone-elses-nonce", start.headers["location"]))
    assert answers == [400] and "JWT Nonce verification failed" in caplog.text
    assert page.goto(f"{live_server.url}/").url.startswith(f"{live_server.url}/login/")
    assert len(AuditEntry.objects.filter(action="sign-in")) == 1  # only the first, real one


def test_local_accounts_can_be_switched_off(transactional_db, live_server, page, idp, settings, client):
    local = get_user_model().objects.create_user("breakglass", password="a-long-break-glass-password-1")
    page.goto(f"{live_server.url}/login/")
    expect(page.locator("input[name=password]")).to_be_visible()  # break-glass, while on

    settings.KARPWEB_LOCAL_LOGIN = False
    settings.AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "accounts.oidc.KarpwebOIDCBackend"]
    page.goto(f"{live_server.url}/login/")
    expect(page.get_by_role("link", name="Sign in with Test IdP")).to_be_visible()
    expect(page.locator("input[name=password]")).to_have_count(0)
    refused = client.post("/login/", {"username": local.username, "password": "a-long-break-glass-password-1"})
    assert refused.status_code == 403 and "KARPWEB_LOCAL_LOGIN=false" in refused.content.decode()
    assert "_auth_user_id" not in client.session
    sign_in(page, live_server)  # single sign-on still works
    assert page.url == f"{live_server.url}/"
