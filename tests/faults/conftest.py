"""Fault tests: the real parts (the EC2 test server over HTTP, the real kube-apiserver, Redis, Celery
workers) with faults injected into them."""

import pytest
from django.core.management import call_command

from tests.kube.conftest import kube_api_client, kube_restart, kube_server, unique  # noqa: F401 - one API server per session
from tests.support.ec2_fixtures import *  # noqa: F403 - the EC2 test server and providers pointed at it


@pytest.fixture
def aws(aws_test_credentials) -> None:
    """Test credentials for boto3's chain (never real ones, never the metadata service)."""


@pytest.fixture
def demo(transactional_db):
    """The simulated demo world, committed (workers in other threads and processes read it)."""
    # One cluster: these tests follow each task's own run (a fleet's tasks dispatch: tests/fleet).
    call_command("seed_demo", "--one-cluster")
