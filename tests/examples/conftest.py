"""The example NodePools run through the EC2 test server (tests/support/ec2_fixtures.py)."""

import pytest

from tests.support.ec2_fixtures import *  # noqa: F403 - the fixtures


@pytest.fixture(autouse=True)
def _aws_test_credentials(aws_test_credentials) -> None:
    """Credentials for the chain, so boto3 never looks for real ones."""
