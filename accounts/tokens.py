"""API tokens kept like passwords: django-rest-knox stores only a SHA-512 digest of each key (and its
first characters, to find it), so neither the database nor an administrator can read a key back; a
key is shown once, when it is made. Each token expires (KARPWEB_API_TOKEN_DAYS) and is deleted when
its user's password changes or the user is deactivated (accounts/signals.py).

django-rest-knox is used rather than DRF's own tokens because DRF's are stored in clear, one per
user, without expiry (that is what issue 34 found)."""

import datetime

from django.conf import settings
from django.core.cache import cache
from django.db import transaction
from django.utils import timezone
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from knox.auth import TokenAuthentication as KnoxTokenAuthentication
from knox.models import AuthToken
from rest_framework import exceptions
from rest_framework.authentication import SessionAuthentication as DRFSessionAuthentication

from accounts.models import SignInIdentity, TokenNarrowing
from karpweb.roles import open_access


class TokenAuthentication(KnoxTokenAuthentication):
    """knox's `Authorization: Token <key>`, with a key that is not UTF-8 refused (401) instead of
    raising out of knox's decode (a 500)."""

    def authenticate_credentials(self, token: bytes):
        try:
            token.decode("utf-8")
        except UnicodeDecodeError:
            raise exceptions.AuthenticationFailed("Invalid token.") from None
        user, auth_token = super().authenticate_credentials(token)
        narrowing = TokenNarrowing.objects.select_related("cluster").filter(token_key=auth_token.token_key).first()
        open_access(user, narrowing)  # the API reads with the token's user's roles (fleet/access.py)
        return user, auth_token

    def _cleanup_token(self, auth_token) -> bool:
        """Only the token presented: knox also reads all the user's other tokens on every request (a
        query per API call) to delete the expired ones. An expired token is refused whenever it is
        presented, and deleted then; the others wait for that or for `manage.py api_token`."""
        if auth_token.expiry is not None and auth_token.expiry < timezone.now():
            auth_token.delete()
            return True
        return False


class SessionAuthentication(DRFSessionAuthentication):
    """DRF's session authentication (the pages' htmx and the browsable API), opening the user's Access."""

    def authenticate(self, request):
        found = super().authenticate(request)
        if found is not None:
            open_access(found[0])
        return found


class TokenScheme(OpenApiAuthenticationExtension):
    """The schema's name for it stays `tokenAuth` (the name clients and docs/api.md use)."""

    target_class = TokenAuthentication
    name = "tokenAuth"

    def get_security_definition(self, auto_schema):
        return {"type": "apiKey", "in": "header", "name": "Authorization",
                "description": "`Token <key>` (a key is shown once, when it is made: `manage.py api_token USER`)."}


class TokenRefused(Exception):
    """A token cannot be made now; the message says why (and what to do)."""


def token_days_for(user, days: int | None = None) -> float:
    """How long a new token of `user` may live: KARPWEB_API_TOKEN_DAYS (or `days`), and for a
    single sign-on account no longer than the identity provider's session would (KARPWEB_OIDC_SESSION_HOURS
    from its last sign-in). TokenRefused when that session is over: sign in again first."""
    days = settings.KARPWEB_API_TOKEN_DAYS if days is None else days
    identity = SignInIdentity.objects.filter(user_id=user.pk).first()
    if identity is None:
        return days
    session_ends = identity.last_sign_in_at + datetime.timedelta(hours=settings.KARPWEB_OIDC_SESSION_HOURS)
    left = (session_ends - timezone.now()).total_seconds() / 86400
    if left <= 0:
        raise TokenRefused(f"{user.get_username()} signs in through single sign-on and last did "
                           f"{identity.last_sign_in_at:%Y-%m-%d %H:%M} UTC, more than KARPWEB_OIDC_SESSION_HOURS "
                           f"({settings.KARPWEB_OIDC_SESSION_HOURS}) ago: sign in again, then make the token")
    return min(days, left)


def create_token(user, days: int | None = None, *, actor=None, source: str = "", address: str | None = None,
                 read_only: bool = False, cluster=None) -> tuple[AuthToken, str]:
    """A new token for `user`, audited (who made it, from where); the key is returned here and never
    again. `read_only` and `cluster` narrow what it may do below its user's roles. TokenRefused past the per-user cap (KARPWEB_API_TOKENS_PER_USER), the rate of creation
    (KARPWEB_API_TOKEN_CREATE_PER_HOUR) or the single sign-on session (token_days_for)."""
    lifetime = token_days_for(user, days)
    _count_creation(user)
    with transaction.atomic():
        AuthToken.objects.filter(user=user, expiry__lt=timezone.now()).delete()  # the user's expired ones
        live = AuthToken.objects.select_for_update().filter(user=user).count()
        cap = settings.KARPWEB_API_TOKENS_PER_USER
        if live >= cap:
            raise TokenRefused(f"{user.get_username()} has {live} live API tokens, the most one user may hold "
                               f"(KARPWEB_API_TOKENS_PER_USER={cap}): revoke one first")
        token, key = AuthToken.objects.create(user=user, expiry=datetime.timedelta(days=lifetime))
        if read_only or cluster is not None:
            TokenNarrowing.objects.update_or_create(token_key=token.token_key,
                                                    defaults={"read_only": read_only, "cluster": cluster})
        audit_token(token, actor or user, source, "create", address, read_only=read_only, cluster=cluster)
    return token, key


def _count_creation(user) -> None:
    """At most KARPWEB_API_TOKEN_CREATE_PER_HOUR tokens an hour per user, counted in the shared cache
    (add then incr: atomic in Redis, so every web process counts the same)."""
    limit = settings.KARPWEB_API_TOKEN_CREATE_PER_HOUR
    key = f"karpweb:token-create:{user.pk}:{timezone.now():%Y%m%d%H}"
    cache.add(key, 0, timeout=3600)
    if cache.incr(key) > limit:
        raise TokenRefused(f"{user.get_username()} made {limit} API tokens this hour "
                           f"(KARPWEB_API_TOKEN_CREATE_PER_HOUR): try again next hour")


def audit_token(token: AuthToken, actor, source: str, action: str, address: str | None = None, *,
                read_only: bool = False, cluster=None) -> None:
    """One audit entry for a token made or revoked: whose, by whom, from where (never the key)."""
    from scheduling.audit import record_change
    from scheduling.models import AuditEntry

    changes = {"owner": [None, token.user.get_username()], "expiry": [None, token.expiry.isoformat() if token.expiry else None]}
    if address:
        changes["ip_address"] = [None, address]
    if read_only:
        changes["read_only"] = [None, True]
    if cluster is not None:
        changes["cluster"] = [None, cluster.name]
    record_change(user=actor, source=source or AuditEntry.Source.CLI, obj=token,
                  action=AuditEntry.Action.CREATE if action == "create" else AuditEntry.Action.DELETE, changes=changes,
                  as_decision=False, label=f"API token {token.token_key[:8]} of {token.user.get_username()}",
                  object_id=token.token_key)


def revoke_token(token: AuthToken, *, actor, source: str, address: str | None = None) -> None:
    with transaction.atomic():
        audit_token(token, actor, source, "revoke", address)
        TokenNarrowing.objects.filter(token_key=token.token_key).delete()
        token.delete()


def revoke_tokens(user, *, actor=None, source: str = "", address: str | None = None) -> int:
    """Delete every token of `user` (each audited); requests with them get 401 at once."""
    with transaction.atomic():
        tokens = list(AuthToken.objects.select_for_update().filter(user=user).select_related("user"))
        for token in tokens:
            audit_token(token, actor or user, source, "revoke", address)
        AuthToken.objects.filter(pk__in=[t.pk for t in tokens]).delete()
        TokenNarrowing.objects.filter(token_key__in=[t.token_key for t in tokens]).delete()
    return len(tokens)


class SessionScheme(OpenApiAuthenticationExtension):
    """The session cookie, as drf-spectacular documents DRF's own session authentication."""

    target_class = SessionAuthentication
    name = "cookieAuth"

    def get_security_definition(self, auto_schema):
        return {"type": "apiKey", "in": "cookie", "name": settings.SESSION_COOKIE_NAME}
