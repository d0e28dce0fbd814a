"""API tokens kept like passwords (accounts/tokens.py, django-rest-knox): only a digest is stored, the
key is shown once, a token expires, and a password change or a deactivation revokes it; the admin
never shows a key and cannot make one."""

import datetime
import hashlib
import importlib
import io
import types

import pytest
import time_machine
from django.apps import apps
from django.core.management import call_command
from django.db import connection
from django.utils import timezone
from knox.models import AuthToken
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db


def make_key(username: str) -> str:
    out = io.StringIO()
    call_command("api_token", username, stdout=out, stderr=io.StringIO())
    return out.getvalue().strip()


def status_with(key: str) -> int:
    return APIClient(HTTP_AUTHORIZATION=f"Token {key}").get("/api/v1/nodepools/").status_code


def test_a_key_cannot_be_read_back_from_the_database(viewer):
    key = make_key(viewer.username)
    assert key.startswith("karpweb_") and len(key) == len("karpweb_") + 64
    assert status_with(key) == 200
    stored = AuthToken.objects.get(user=viewer)
    assert stored.digest == hashlib.sha512(key.encode()).hexdigest()
    dump = io.StringIO()
    call_command("dumpdata", "knox", "auth", "accounts", "scheduling.auditentry", stdout=dump)
    assert key not in dump.getvalue()
    assert key[len("karpweb_") + 8:] not in dump.getvalue()  # not even most of it


def test_a_token_expires(viewer, settings):
    key = make_key(viewer.username)
    expiry = AuthToken.objects.get(user=viewer).expiry
    assert expiry - timezone.now() > datetime.timedelta(days=settings.KARPWEB_API_TOKEN_DAYS - 1)
    with time_machine.travel(expiry + datetime.timedelta(minutes=1)):
        assert status_with(key) == 401
    assert not AuthToken.objects.filter(user=viewer).exists()  # and the expired one is gone


def test_a_password_change_revokes_the_users_tokens(viewer, operator):
    key, other = make_key(viewer.username), make_key(operator.username)
    viewer.last_name = "Unchanged credentials"
    viewer.save()
    assert status_with(key) == 200  # other changes keep it
    viewer.set_password("a-new-long-password-77")
    viewer.save()
    assert status_with(key) == 401
    assert status_with(other) == 200  # another user's token is not touched


def test_deactivating_a_user_revokes_the_users_tokens(viewer):
    key = make_key(viewer.username)
    viewer.is_active = False
    viewer.save(update_fields=["is_active"])
    assert not AuthToken.objects.filter(user=viewer).exists()
    viewer.is_active = True
    viewer.save()
    assert status_with(key) == 401  # reactivating does not bring it back


def test_a_token_that_is_not_utf8_is_a_401(viewer):
    client = APIClient(HTTP_AUTHORIZATION="Token karpweb_\xff\xfe")
    assert client.get("/api/v1/nodepools/").status_code == 401


def test_the_admin_never_shows_a_key_and_cannot_make_one(admin_user_client, viewer):
    key = make_key(viewer.username)
    token = AuthToken.objects.get(user=viewer)
    listing = admin_user_client.get("/admin/knox/authtoken/")
    assert listing.status_code == 200 and viewer.username in listing.content.decode()
    detail = admin_user_client.get(f"/admin/knox/authtoken/{token.pk}/change/")
    for page in (listing, detail):  # (the digest names the row in links: it cannot be turned back into the key)
        assert key[len("karpweb_") + 8:].encode() not in page.content
    assert admin_user_client.get("/admin/knox/authtoken/add/").status_code == 403
    assert admin_user_client.get("/admin/authtoken/token/").status_code == 404  # DRF's clear-text tokens are gone
    response = admin_user_client.post(f"/admin/knox/authtoken/{token.pk}/delete/", {"post": "yes"})
    assert response.status_code == 302 and status_with(key) == 401  # revoked from the admin


def test_the_migration_moves_clear_keys_to_digests(viewer):
    """An installation from before: DRF's table with a key in clear. After the migration the key still
    works and the table holds nothing."""
    old_key = "0123456789abcdef0123456789abcdef01234567"
    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE authtoken_token (key varchar(40) PRIMARY KEY, created timestamptz NOT NULL, "
                       "user_id integer NOT NULL)")
        cursor.execute("INSERT INTO authtoken_token VALUES (%s, %s, %s)", [old_key, timezone.now(), viewer.pk])
    migration = importlib.import_module("accounts.migrations.0002_harden_hash_api_tokens")
    migration.move_keys(apps, types.SimpleNamespace(connection=connection))
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM authtoken_token")
        assert cursor.fetchone()[0] == 0
    assert status_with(old_key) == 200
    assert AuthToken.objects.get(user=viewer).digest == hashlib.sha512(old_key.encode()).hexdigest()



def test_the_api_tokens_page_shows_a_new_key_once_and_revokes(viewer_client, viewer, operator):
    others = make_key(operator.username)
    made = viewer_client.post("/account/api-tokens/")
    assert made.status_code == 200 and "no-store" in made["Cache-Control"]
    key = made.content.decode().split('<pre id="new-key">')[1].split("</pre>")[0]
    assert status_with(key) == 200
    listing = viewer_client.get("/account/api-tokens/").content.decode()
    assert key[len("karpweb_") + 8:] not in listing and key[:15] in listing  # never again, only its start
    assert operator.username not in listing  # only one's own tokens
    assert viewer_client.post("/account/api-tokens/", {"revoke": others[:15]}).status_code == 302
    assert status_with(others) == 200  # another user's token cannot be revoked from here
    assert viewer_client.post("/account/api-tokens/", {"revoke": key[:15]}).status_code == 302
    assert status_with(key) == 401
