"""EC2 fixtures, shared by the suites that need a real HTTP EC2 endpoint (tests/ec2, tests/faults):
moto's server with the capacity-reservation APIs of ``tests/support/ec2_server.py``, one clock for
the server and the adapter, and providers pointed at the server.

A suite uses them with ``from tests.support.ec2_fixtures import *`` in its conftest (one server per
test session: ``ec2_server`` is session-scoped here, wherever it is imported) and an autouse
fixture that asks for ``aws_test_credentials``."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone

import boto3
import pytest
from botocore.config import Config

from scheduling.adapters.ec2 import EC2CloudProvider, EC2Config
from scheduling.adapters.ec2.client import make_ec2_client, make_resource_groups_client
from tests.support.ec2_server import EC2TestServer

REGION = "us-east-1"
T0 = datetime(2026, 11, 21, 12, 0, tzinfo=timezone.utc)


def set_test_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """Credentials for the chain, so boto3 never looks for real ones (or asks the metadata service)."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.delenv("AWS_PROFILE", raising=False)


@pytest.fixture
def aws_test_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """Credentials for the chain, so boto3 never looks for real ones (or asks the metadata service)."""
    set_test_credentials(monkeypatch)


_servers: dict[str, EC2TestServer] = {}


@pytest.fixture(scope="session")
def ec2_server(request: pytest.FixtureRequest) -> EC2TestServer:
    """One server for the whole session, even when several conftests import this fixture (moto's
    backends are process-wide, so two servers would share one world anyway)."""
    if REGION not in _servers:
        server = _servers[REGION] = EC2TestServer(region=REGION).start()

        def stop() -> None:
            _servers.pop(REGION, None)
            server.stop()

        request.config.add_cleanup(stop)
    return _servers[REGION]


@pytest.fixture(scope="session")
def ec2_endpoint(ec2_server: EC2TestServer) -> str:
    """The test server's endpoint URL (http://127.0.0.1:<free port>)."""
    return ec2_server.endpoint_url


class Clock:
    """One clock for the server and the adapter: both read ``now``."""

    def __init__(self, server: EC2TestServer, start: datetime) -> None:
        self.server = server
        self.now = start
        server.clock.set(start)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        step = timedelta(**delta)
        self.now += step
        self.server.clock.advance(step)


@pytest.fixture
def world(ec2_server: EC2TestServer) -> Iterator[EC2TestServer]:
    """A fresh EC2 world for one test."""
    ec2_server.reset()
    yield ec2_server
    ec2_server.reset()


@pytest.fixture
def clock(world: EC2TestServer) -> Clock:
    return Clock(world, T0)


def server_config(endpoint: str) -> EC2Config:
    """The adapter's configuration for the test server at ``endpoint``."""
    # botocore retries once more itself (2 attempts); our own retries then take over.
    return EC2Config(
        region=REGION,
        endpoint_url=endpoint,
        retry_mode="standard",
        max_attempts=2,
        extra_retries=3,
        pricing_source="bundled",
        resource_groups_endpoint_url=endpoint,
        ssm_endpoint_url=endpoint,
        iam_endpoint_url=endpoint,
        eks_endpoint_url=endpoint,
        savingsplans_endpoint_url=endpoint,
    )


@pytest.fixture
def config(ec2_endpoint: str) -> EC2Config:
    return server_config(ec2_endpoint)


@pytest.fixture(scope="session")
def boto_session() -> boto3.session.Session:
    """One session for all clients: botocore loads the (large) EC2 service model once."""
    return boto3.session.Session(aws_access_key_id="testing", aws_secret_access_key="testing")


@pytest.fixture
def ec2(config: EC2Config, boto_session):
    return make_ec2_client(config, boto_session)


@pytest.fixture
def sleeps() -> list[float]:
    return []


@pytest.fixture
def make_provider(config: EC2Config, clock: Clock, sleeps: list[float], boto_session) -> Callable[..., EC2CloudProvider]:
    def make(**overrides) -> EC2CloudProvider:
        return build_provider(config, clock, sleeps, boto_session, **overrides)

    return make


def build_provider(base: EC2Config, clock: Clock, sleeps: list[float], boto_session, **overrides) -> EC2CloudProvider:
    """A provider on the test server: ``base`` with ``overrides["config"]``, the test clock, and
    sleeps recorded (never slept)."""
    cfg = EC2Config(**{**base.__dict__, **overrides.pop("config", {})})
    return EC2CloudProvider(
        cfg,
        ec2=make_ec2_client(cfg, boto_session),
        resource_groups=make_resource_groups_client(cfg, boto_session),
        clock=clock,
        sleep=sleeps.append,
        instance_type_patterns=overrides.pop("instance_type_patterns", ("m5.*", "c5.large", "p5.48xlarge", "trn2u.*")),
        **overrides,
    )


@pytest.fixture
def provider(make_provider) -> EC2CloudProvider:
    return make_provider()


@pytest.fixture(scope="session")
def raw_ec2(ec2_endpoint: str, boto_session):
    """A plain boto3 client (no retries) for looking at the world over HTTP."""
    return boto_session.client(
        "ec2", region_name=REGION, endpoint_url=ec2_endpoint, config=Config(retries={"total_max_attempts": 1})
    )
