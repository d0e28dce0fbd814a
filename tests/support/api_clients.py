"""API clients for the tests: a DRF client that sends a user's token (django-rest-knox).

The token is made as knox makes one, without accounts.tokens.create_token's audit entry and limits:
it stands for a token the user made before the test (the tests of making tokens call create_token)."""

import datetime

from django.conf import settings
from knox.models import AuthToken
from rest_framework.test import APIClient


def token_client(user) -> APIClient:
    client = APIClient()
    _token, key = AuthToken.objects.create(user=user, expiry=datetime.timedelta(days=settings.KARPWEB_API_TOKEN_DAYS))
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    client.user = user
    return client
