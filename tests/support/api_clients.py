"""API clients for the tests: a DRF client that sends a user's token (django-rest-knox)."""

from rest_framework.test import APIClient

from accounts.tokens import create_token


def token_client(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {create_token(user)[1]}")
    client.user = user
    return client
