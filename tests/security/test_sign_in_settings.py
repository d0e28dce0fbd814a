"""Single sign-on's settings and the mapping from groups to roles, without a provider: a setting
that would lock everybody out is refused at start with the variable named; a provider that cannot be
read is said on the sign-in page, and a local sign-in still works meanwhile; every local sign-in is
audited."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model

from karpweb.roles import roles_from_groups
from scheduling.models import AuditEntry
from tests.support.ports import free_port

ROOT = Path(__file__).resolve().parents[2]


def start_with(**variables):
    env = {k: v for k, v in os.environ.items() if not k.startswith("KARPWEB_OIDC") and k != "KARPWEB_LOCAL_LOGIN"}
    env.update(DJANGO_SETTINGS_MODULE="karpweb.settings", **variables)
    return subprocess.run([sys.executable, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("variables, named", [
    ({"KARPWEB_LOCAL_LOGIN": "false"}, "KARPWEB_LOCAL_LOGIN=false needs KARPWEB_OIDC_ISSUER"),
    ({"KARPWEB_OIDC_ISSUER": "https://idp.example.com"}, "KARPWEB_OIDC_CLIENT_ID must be set"),
    ({"KARPWEB_OIDC_ISSUER": "https://idp.example.com", "KARPWEB_OIDC_CLIENT_ID": "karpweb",
      "KARPWEB_OIDC_CLIENT_SECRET": "s"}, "none of KARPWEB_OIDC_VIEWER_GROUPS"),
    ({"KARPWEB_OIDC_ISSUER": "ftp://idp.example.com"}, "KARPWEB_OIDC_ISSUER"),
])
def test_settings_that_would_lock_everybody_out_are_refused(variables, named):
    result = start_with(**variables)
    assert result.returncode != 0 and named in result.stderr and "Traceback" not in result.stderr.splitlines()[-1]


def test_a_complete_configuration_starts():
    result = start_with(KARPWEB_OIDC_ISSUER="https://idp.example.com", KARPWEB_OIDC_CLIENT_ID="karpweb",
                        KARPWEB_OIDC_CLIENT_SECRET="s", KARPWEB_OIDC_OPERATOR_GROUPS="platform-ops,sre",
                        KARPWEB_LOCAL_LOGIN="false")
    assert result.returncode == 0, result.stderr


def test_roles_from_groups():
    groups = dict(viewer_groups=["ro"], operator_groups=["ops", "sre"], admin_groups=["root"])
    assert roles_from_groups(["sre", "other"], **groups) == {"operator"}
    assert roles_from_groups(["ro"], **groups) == {"viewer"}
    assert roles_from_groups(["root"], **groups) == {"admin", "operator"}
    assert roles_from_groups(["other"], **groups) == set()
    assert roles_from_groups([], **groups) == set()


@pytest.mark.django_db
def test_an_unreachable_provider_is_said_and_local_sign_in_still_works(client, settings):
    settings.KARPWEB_OIDC_ISSUER = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    settings.OIDC_RP_CLIENT_ID, settings.OIDC_RP_CLIENT_SECRET = "karpweb", "s"
    settings.KARPWEB_OIDC_NAME = "Corp SSO"
    settings.AUTHENTICATION_BACKENDS = [*settings.AUTHENTICATION_BACKENDS, "accounts.oidc.KarpwebOIDCBackend"]
    page = client.get("/login/").content.decode()
    assert "Sign in with Corp SSO" in page and 'name="password"' in page

    redirected = client.get("/oidc/authenticate/")
    assert redirected.status_code == 302 and redirected["Location"] == "/login/"
    page = client.get("/login/").content.decode()
    assert "Single sign-on refused: the identity provider&#x27;s discovery document" in page
    assert "could not be read: ConnectionError" in page

    get_user_model().objects.create_user("breakglass", password="a-long-break-glass-password-1")
    signed_in = client.post("/login/", {"username": "breakglass", "password": "a-long-break-glass-password-1"},
                            REMOTE_ADDR="198.51.100.4")
    assert signed_in.status_code == 302
    [entry] = AuditEntry.objects.filter(action="sign-in")
    assert entry.actor == "breakglass" and entry.changes == {"ip_address": [None, "198.51.100.4"],
                                                             "method": [None, "password"]}
    assert str(entry) == "breakglass signed in breakglass via ui"


@pytest.mark.django_db
def test_the_admin_signs_in_on_the_same_page(client):
    response = client.get("/admin/")
    assert response.status_code == 302
    follow = client.get(response["Location"])
    assert follow.status_code == 302 and follow["Location"] == "/login/?next=/admin/"
