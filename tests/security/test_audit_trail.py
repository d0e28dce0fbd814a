"""Who may do what is audited, and tokens are bounded (issue: the fleet's trust boundary, item 5):
every API token made or revoked (page, CLI, admin), every role and group change (the admin's users
and groups) and every periodic task edit leaves an audit entry with who, what and from where; tokens
per user are capped, their creation is rate-limited, a single sign-on user's token ends when the
identity provider's session would; the audit log is the fleet administrators' (page and API)."""

import datetime
import io

import pytest
from django.contrib.auth.models import Group
from django.core.management import CommandError, call_command
from django.urls import reverse
from django.utils import timezone
from django_celery_beat.models import PeriodicTask
from knox.models import AuthToken

from accounts.models import SignInIdentity
from scheduling.models import AuditEntry

pytestmark = pytest.mark.django_db


def token_entries(**filters):
    return AuditEntry.objects.fleet().filter(content_type__model="authtoken", **filters).order_by("id")


def test_a_token_made_and_revoked_on_the_page_is_audited_with_the_address(client, viewer):
    client.force_login(viewer)
    made = client.post(reverse("api_tokens"), REMOTE_ADDR="198.51.100.7")
    assert made.status_code == 200 and made.context["new_key"]
    token = AuthToken.objects.get(user=viewer)
    client.post(reverse("api_tokens"), {"revoke": token.token_key}, REMOTE_ADDR="198.51.100.8")
    entries = list(token_entries())
    assert [(e.action, e.source, e.actor, e.changes["ip_address"][1]) for e in entries] == [
        ("create", "ui", viewer.username, "198.51.100.7"), ("delete", "ui", viewer.username, "198.51.100.8")]
    assert entries[0].object_repr == f"API token {token.token_key[:8]} of {viewer.username}"
    assert made.context["new_key"] not in str(entries[0].changes) and token.digest not in entries[0].object_repr


def test_the_cli_and_the_admin_are_audited_too(viewer, admin_user_client):
    call_command("api_token", viewer.username, stdout=io.StringIO(), stderr=io.StringIO())
    token = AuthToken.objects.get(user=viewer)
    admin_user_client.post(reverse("admin:knox_authtoken_delete", args=[token.pk]), {"post": "yes"})
    assert not AuthToken.objects.filter(pk=token.pk).exists()
    assert [(e.action, e.source, e.actor) for e in token_entries()] == [
        ("create", "cli", viewer.username), ("delete", "admin", "root")]


def test_tokens_per_user_are_capped(client, viewer, settings):
    settings.KARPWEB_API_TOKENS_PER_USER = 2
    for _ in range(2):
        call_command("api_token", viewer.username, stdout=io.StringIO(), stderr=io.StringIO())
    with pytest.raises(CommandError, match="KARPWEB_API_TOKENS_PER_USER=2"):
        call_command("api_token", viewer.username, stdout=io.StringIO(), stderr=io.StringIO())
    client.force_login(viewer)
    page = client.post(reverse("api_tokens"), follow=True).content.decode()
    assert "No token made" in page and "revoke one first" in page
    assert AuthToken.objects.filter(user=viewer).count() == 2


def test_token_creation_is_rate_limited(viewer, settings):
    settings.KARPWEB_API_TOKEN_CREATE_PER_HOUR = 2
    call_command("api_token", viewer.username, "--rotate", stdout=io.StringIO(), stderr=io.StringIO())
    call_command("api_token", viewer.username, "--rotate", stdout=io.StringIO(), stderr=io.StringIO())
    with pytest.raises(CommandError, match="KARPWEB_API_TOKEN_CREATE_PER_HOUR"):
        call_command("api_token", viewer.username, "--rotate", stdout=io.StringIO(), stderr=io.StringIO())


def test_a_single_sign_on_users_token_ends_with_the_providers_session(viewer, settings):
    settings.KARPWEB_OIDC_SESSION_HOURS = 8
    signed_in = timezone.now() - datetime.timedelta(hours=2)
    identity = SignInIdentity.objects.create(user=viewer, issuer="https://idp.example", subject="v",
                                             last_sign_in_at=signed_in)
    call_command("api_token", viewer.username, stdout=io.StringIO(), stderr=io.StringIO())
    expiry = AuthToken.objects.get(user=viewer).expiry
    assert abs(expiry - (signed_in + datetime.timedelta(hours=8))) < datetime.timedelta(minutes=1)
    SignInIdentity.objects.filter(pk=identity.pk).update(last_sign_in_at=timezone.now() - datetime.timedelta(hours=9))
    with pytest.raises(CommandError, match="sign in again"):
        call_command("api_token", viewer.username, stdout=io.StringIO(), stderr=io.StringIO())


def test_role_and_group_changes_in_the_admin_are_audited(admin_user_client, viewer):
    operator_group = Group.objects.get_or_create(name="operator")[0]
    url = reverse("admin:auth_user_change", args=[viewer.pk])
    form = admin_user_client.get(url).context["adminform"].form
    data = {name: value for name, value in form.initial.items() if value is not None and name != "password"}
    data.update(groups=[g.pk for g in viewer.groups.all()] + [operator_group.pk], user_permissions=[],
                date_joined_0=viewer.date_joined.strftime("%Y-%m-%d"), date_joined_1=viewer.date_joined.strftime("%H:%M:%S"),
                last_login_0="", last_login_1="", is_active="on")
    data = {k: v for k, v in data.items() if k not in ("date_joined", "last_login", "is_staff", "is_superuser")}
    saved = admin_user_client.post(url, data, REMOTE_ADDR="198.51.100.9")
    assert saved.status_code == 302, saved.context["adminform"].form.errors
    entry = AuditEntry.objects.fleet().filter(content_type__model="user", action="change").get()
    assert entry.changes["groups"] == [["viewer"], ["operator", "viewer"]]
    assert entry.changes["ip_address"] == [None, "198.51.100.9"] and entry.actor == "root"

    group_url = reverse("admin:auth_group_change", args=[operator_group.pk])
    admin_user_client.post(group_url, {"name": "operator", "permissions": []})
    admin_user_client.post(reverse("admin:auth_group_delete", args=[operator_group.pk]), {"post": "yes"})
    group_entries = AuditEntry.objects.fleet().filter(content_type__model="group")
    assert [e.action for e in group_entries.order_by("id")] == ["delete"]  # the unchanged save records nothing


def test_a_periodic_task_edit_is_audited(admin_user_client):
    from django_celery_beat.models import IntervalSchedule

    every = IntervalSchedule.objects.create(every=30, period=IntervalSchedule.SECONDS)
    task = PeriodicTask.objects.create(name="audited sync", task="scheduling.tasks.sync_ec2", interval=every)
    url = reverse("admin:django_celery_beat_periodictask_change", args=[task.pk])
    form = admin_user_client.get(url).context["adminform"].form
    data = {name: ("" if value is None else value) for name, value in form.initial.items()}
    data.update(enabled="", interval=task.interval_id or "", regtask=task.task, task=task.task)
    data = {k: (v.pk if hasattr(v, "pk") else v) for k, v in data.items() if not isinstance(v, bool) or v}
    saved = admin_user_client.post(url, data)
    assert saved.status_code == 302, saved.context["adminform"].form.errors
    entry = AuditEntry.objects.fleet().filter(content_type__model="periodictask").get()
    assert entry.changes["enabled"] == [True, False] and entry.object_repr.startswith(task.name)


def test_the_audit_log_is_the_fleet_administrators(as_fleet_admin, as_operator, client, fleet_admin, operator):
    call_command("api_token", operator.username, stdout=io.StringIO(), stderr=io.StringIO())
    assert as_operator.get("/api/v1/audit/").status_code == 403
    listed = as_fleet_admin.get("/api/v1/audit/", {"user": operator.username, "action": "create"}).json()["results"]
    assert [(e["user"], e["kind"], e["action"], e["source"]) for e in listed] == [
        (operator.username, "auth token", "create", "cli")]
    assert as_fleet_admin.get("/api/v1/audit/", {"user": "nobody-at-all"}).json()["results"] == []
    client.force_login(operator)
    assert client.get(reverse("scheduling:audit_log")).status_code == 403
    client.force_login(fleet_admin)
    page = client.get(reverse("scheduling:audit_log"), {"user": operator.username})
    assert page.status_code == 200 and "auth token API token" in page.content.decode()
