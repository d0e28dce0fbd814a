import pytest
from rest_framework.test import APIClient

from accounts.tokens import create_token


def token_client(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {create_token(user)[1]}")
    client.user = user
    return client


@pytest.fixture
def anon():
    return APIClient()


@pytest.fixture
def as_viewer(viewer):
    return token_client(viewer)


@pytest.fixture
def as_operator(operator):
    return token_client(operator)


@pytest.fixture
def as_nobody(nobody):
    return token_client(nobody)
