"""Sign-in events into the audit log: every lock-out of a local account or address (django-axes),
and every unlock an administrator makes in the admin. Connected in SchedulingConfig.ready."""

import datetime

from axes.models import AccessAttempt
from axes.signals import user_locked_out
from django.conf import settings
from django.contrib.contenttypes.models import ContentType
from django.dispatch import receiver
from django.utils import timezone

from scheduling.models import AuditEntry


# Django's usernames are at most 150 characters; axes stores what it is given in a 255-character
# column, so a hostile, longer username would fail the sign-in with a database error instead of
# counting as a wrong one.
USERNAME_LENGTH = 150


def username_for_axes(request, credentials=None) -> str:
    """AXES_USERNAME_CALLABLE: the username tried, as axes counts it (cut to a real username's length)."""
    source = credentials if credentials else getattr(request, "POST", {})
    return str(source.get(settings.AXES_USERNAME_FORM_FIELD, "") or "")[:USERNAME_LENGTH]


@receiver(user_locked_out, dispatch_uid="karpweb-audit-lockout")
def audit_lockout(sender, request=None, username=None, ip_address=None, **kwargs):
    """One entry per lock-out: further attempts while locked (axes signals each) add none."""
    username = (username or "")[:150]
    what = f"sign-in lock-out of {username or '(no username)'} from {ip_address or 'unknown address'}"[:255]
    since = timezone.now() - datetime.timedelta(seconds=settings.AXES_COOLOFF_TIME.total_seconds())
    recent = AuditEntry.objects.filter(content_type=ContentType.objects.get_for_model(AccessAttempt), created_at__gte=since)
    same = recent.filter(changes__username=[None, username]) if username else recent.filter(object_repr=what)
    if same.exists():  # the same lock-out, tried again (from anywhere, for a username)
        return
    AuditEntry.objects.create(
        actor=username or "anonymous", source=AuditEntry.Source.ADMIN if request is not None and
        request.path.startswith("/admin/") else AuditEntry.Source.UI, action=AuditEntry.Action.CREATE,
        content_type=ContentType.objects.get_for_model(AccessAttempt), object_id="", object_repr=what,
        changes={"locked_out": [False, True], "username": [None, username], "ip_address": [None, ip_address],
                 "failure_limit": [None, settings.AXES_FAILURE_LIMIT]})
