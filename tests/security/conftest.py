import pytest

from tests.support.ec2_fixtures import *  # noqa: F403 - the EC2 test server, for a failing sync


@pytest.fixture
def aws(aws_test_credentials) -> None:
    """Test credentials for boto3's chain (never real ones)."""
