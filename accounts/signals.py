"""Every sign-in in the audit log: local (password) and single sign-on alike, and every sign-in the
identity provider vouched for that karpweb refused (accounts.oidc)."""

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.signals import user_logged_in
from django.contrib.contenttypes.models import ContentType
from django.db.models.signals import post_save, pre_save
from django.dispatch import receiver

from accounts.tokens import revoke_tokens
from karpweb.clientaddr import client_address
from scheduling.models import AuditEntry

OIDC_BACKEND = "accounts.oidc.KarpwebOIDCBackend"


def record_sign_in(user, request, action: str, changes: dict) -> AuditEntry:
    """One audit entry for a sign-in (or a refused one), naming the account when there is one."""
    address = client_address(request) if request is not None else None
    source = AuditEntry.Source.ADMIN if request is not None and request.path.startswith("/admin/") else AuditEntry.Source.UI
    return AuditEntry.objects.create(
        user=user, actor=user.get_username() if user is not None else "anonymous", source=source, action=action,
        content_type=ContentType.objects.get_for_model(get_user_model()), object_id=str(user.pk) if user else "",
        object_repr=(user.get_username() if user is not None else "(no karpweb account)")[:255],
        changes={"ip_address": [None, address], **changes})


@receiver(user_logged_in, dispatch_uid="karpweb-audit-sign-in")
def audit_sign_in(sender, request, user, **kwargs):
    if request is None or not request.path:
        return  # a sign-in made in code (a test client's force_login, a shell), not by a person at a page
    method = "single sign-on" if getattr(user, "backend", "") == OIDC_BACKEND else "password"
    record_sign_in(user, request, AuditEntry.Action.SIGN_IN, {"method": [None, method]})


# --- API tokens follow their user's credentials -------------------------------------------------

@receiver(pre_save, sender=settings.AUTH_USER_MODEL, dispatch_uid="karpweb-token-revocation-check")
def note_credential_change(sender, instance, update_fields=None, **kwargs):
    """Before a user is saved: will the password change, or the account be deactivated?"""
    instance._revoke_api_tokens = False
    if instance.pk is None or (update_fields is not None and not {"password", "is_active"} & set(update_fields)):
        return  # a new user, or a save of other fields (the last_login of every sign-in)
    before = sender.objects.filter(pk=instance.pk).values("password", "is_active").first()
    if before is not None:
        instance._revoke_api_tokens = (before["password"] != instance.password
                                       or (before["is_active"] and not instance.is_active))


@receiver(post_save, sender=settings.AUTH_USER_MODEL, dispatch_uid="karpweb-token-revocation")
def revoke_tokens_on_credential_change(sender, instance, created, **kwargs):
    """A changed password (someone else may have known the old one) or a deactivated account ends
    every API token of the user, as Django ends the user's other sessions."""
    if getattr(instance, "_revoke_api_tokens", False):
        instance._revoke_api_tokens = False
        revoke_tokens(instance, source=AuditEntry.Source.ADMIN)
