"""Local sign-in takes a limited number of wrong passwords, per user and per address (django-axes):
then it is locked with a clear page, even for the right password, until the lock ends or an
administrator deletes the attempt; lock-out and unlock are in the audit log."""

import datetime

import pytest
import time_machine
from django.contrib.auth import get_user_model
from django.urls import reverse
from django.utils import timezone

from scheduling.models import AuditEntry

pytestmark = pytest.mark.django_db
PASSWORD = "a-good-long-password-42"


@pytest.fixture
def alice(db):
    return get_user_model().objects.create_user("alice", "alice@example.com", PASSWORD)


def sign_in(client, username, password, address="198.51.100.7"):
    return client.post(reverse("login"), {"username": username, "password": password}, REMOTE_ADDR=address)


def test_wrong_passwords_lock_the_account_until_an_admin_unlocks_it(client, alice, admin_user_client, settings):
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        assert sign_in(client, "alice", "guess").status_code == 200  # the form again, with its error
    locked = sign_in(client, "alice", "guess")
    assert locked.status_code == 429
    page = locked.content.decode()
    assert "Too many failed sign-ins" in page and "<strong>alice</strong>" in page and "ask an administrator" in page
    # The right password is refused too, from another address (the user is locked, not only the address).
    assert sign_in(client, "alice", PASSWORD, address="203.0.113.9").status_code == 429
    lockouts = AuditEntry.objects.filter(object_repr__startswith="sign-in lock-out of alice")
    assert lockouts.count() == 1 and lockouts[0].changes["locked_out"] == [False, True]

    attempt_ids = list(admin_user_client.get(reverse("admin:axes_accessattempt_changelist")).context["cl"].result_list
                       .filter(username="alice").values_list("pk", flat=True))
    assert attempt_ids
    response = admin_user_client.post(reverse("admin:axes_accessattempt_changelist"),
                                      {"action": "delete_selected", "_selected_action": attempt_ids, "post": "yes"})
    assert response.status_code == 302
    unlocks = AuditEntry.objects.filter(action="delete", changes__username=["alice", None])
    assert unlocks.count() == len(attempt_ids)  # one per deleted attempt (one per address alice was tried from)
    assert {(u.source, u.changes["locked_out"][1]) for u in unlocks} == {("admin", False)}
    assert "alice" not in {u.actor for u in unlocks}
    assert sign_in(client, "alice", PASSWORD).status_code == 302  # signed in


def test_one_address_guessing_many_users_is_locked_out(client, alice, settings):
    for index in range(settings.AXES_FAILURE_LIMIT):
        sign_in(client, f"user-{index}", "guess", address="192.0.2.66")
    assert sign_in(client, "alice", PASSWORD, address="192.0.2.66").status_code == 429
    assert sign_in(client, "alice", PASSWORD, address="192.0.2.67").status_code == 302  # alice herself is not locked
    assert AuditEntry.objects.filter(object_repr__contains="from 192.0.2.66").exists()


def test_the_lock_ends_after_the_cool_off(client, alice, settings):
    for _ in range(settings.AXES_FAILURE_LIMIT):
        sign_in(client, "alice", "guess")
    assert sign_in(client, "alice", PASSWORD).status_code == 429
    with time_machine.travel(timezone.now() + settings.AXES_COOLOFF_TIME + datetime.timedelta(seconds=1)):
        assert sign_in(client, "alice", PASSWORD).status_code == 302
