"""API tokens kept like passwords: django-rest-knox stores only a SHA-512 digest of each key (and its
first characters, to find it), so neither the database nor an administrator can read a key back; a
key is shown once, when it is made. Each token expires (KARPWEB_API_TOKEN_DAYS) and is deleted when
its user's password changes or the user is deactivated (accounts/signals.py).

django-rest-knox is used rather than DRF's own tokens because DRF's are stored in clear, one per
user, without expiry (that is what issue 34 found)."""

import datetime

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from knox.auth import TokenAuthentication as KnoxTokenAuthentication
from knox.models import AuthToken
from rest_framework import exceptions


class TokenAuthentication(KnoxTokenAuthentication):
    """knox's `Authorization: Token <key>`, with a key that is not UTF-8 refused (401) instead of
    raising out of knox's decode (a 500)."""

    def authenticate_credentials(self, token: bytes):
        try:
            token.decode("utf-8")
        except UnicodeDecodeError:
            raise exceptions.AuthenticationFailed("Invalid token.") from None
        return super().authenticate_credentials(token)

    def _cleanup_token(self, auth_token) -> bool:
        """Only the token presented: knox also reads all the user's other tokens on every request (a
        query per API call) to delete the expired ones. An expired token is refused whenever it is
        presented, and deleted then; the others wait for that or for `manage.py api_token`."""
        if auth_token.expiry is not None and auth_token.expiry < timezone.now():
            auth_token.delete()
            return True
        return False


class TokenScheme(OpenApiAuthenticationExtension):
    """The schema's name for it stays `tokenAuth` (the name clients and docs/api.md use)."""

    target_class = TokenAuthentication
    name = "tokenAuth"

    def get_security_definition(self, auto_schema):
        return {"type": "apiKey", "in": "header", "name": "Authorization",
                "description": "`Token <key>` (a key is shown once, when it is made: `manage.py api_token USER`)."}


def create_token(user, days: int | None = None) -> tuple[AuthToken, str]:
    """A new token for `user`; the key is returned here and never again."""
    days = settings.KARPWEB_API_TOKEN_DAYS if days is None else days
    AuthToken.objects.filter(user=user, expiry__lt=timezone.now()).delete()  # the user's expired ones
    return AuthToken.objects.create(user=user, expiry=datetime.timedelta(days=days))


def revoke_tokens(user) -> int:
    """Delete every token of `user`; requests with them get 401 at once."""
    with transaction.atomic():
        deleted, _ = AuthToken.objects.filter(user=user).delete()
    return deleted
