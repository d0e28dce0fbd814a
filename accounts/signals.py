"""Every sign-in in the audit log: local (password) and single sign-on alike, and every sign-in the
identity provider vouched for that karpweb refused (accounts.oidc)."""

from django.contrib.auth import get_user_model
from django.contrib.auth.signals import user_logged_in
from django.contrib.contenttypes.models import ContentType
from django.dispatch import receiver

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
