"""Fixtures for the EC2 adapter tests: the shared ones of ``tests/support/ec2_fixtures.py`` (a real
HTTP EC2 endpoint and providers pointed at it), with test credentials for every test here."""

import pytest

from tests.support.ec2_fixtures import *  # noqa: F403 - the fixtures
from tests.support.ec2_fixtures import REGION, T0, Clock  # noqa: F401 - imported by the tests


@pytest.fixture(autouse=True)
def _aws_test_credentials(aws_test_credentials) -> None:
    """Credentials for the chain, so boto3 never looks for real ones (or asks the metadata service)."""
