import pytest
from rest_framework.test import APIClient

# as_viewer, as_operator and as_nobody are in tests/conftest.py; token_client lives in tests/support/api_clients.py
# (re-exported here for the modules of other branches that still import it from this conftest).
from tests.support.api_clients import token_client  # noqa: F401


@pytest.fixture
def anon():
    return APIClient()
