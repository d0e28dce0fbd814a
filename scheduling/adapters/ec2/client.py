"""boto3 clients, settings, and the retry policy for EC2 calls.

Credentials come from boto3's normal chain (environment, shared config/credentials files, SSO,
web identity, container and instance metadata). Region and endpoint come from Django settings,
falling back to the environment:

* ``KARPWEB_AWS_REGION`` (else ``AWS_REGION``, ``AWS_DEFAULT_REGION``, the boto3 profile's region)
* ``KARPWEB_EC2_ENDPOINT_URL``: optional, e.g. the test server or a VPC endpoint
* ``KARPWEB_EC2_RETRY_MODE`` (``adaptive``) and ``KARPWEB_EC2_MAX_ATTEMPTS`` (5): botocore's retries
* ``KARPWEB_EC2_EXTRA_RETRIES`` (3): our own bounded retries of throttled calls after botocore's
* ``KARPWEB_RESOURCE_GROUPS_ENDPOINT_URL``: for ``resourceGroupARN`` terms (default: the EC2 one)
* ``KARPWEB_SSM_ENDPOINT_URL``, ``KARPWEB_IAM_ENDPOINT_URL``, ``KARPWEB_EKS_ENDPOINT_URL``: for launch
  resolution (AMI aliases, instance profiles, DescribeCluster); default: the EC2 one when it is set
* ``KARPWEB_SAVINGSPLANS_ENDPOINT_URL``: for Savings Plans and their rates (default: the EC2 one)
* ``KARPWEB_STS_ENDPOINT_URL``: for AssumeRole into a fleet account's ``role_arn`` (default: the EC2 one)
* ``KARPWEB_FEATURE_RESERVED_CAPACITY`` (true): the ReservedCapacity feature gate
* ``KARPWEB_PRICING_SOURCE``: ``api`` (the Pricing API, the default unless an EC2 endpoint URL is
  set) or ``bundled`` (the prices.json table only); ``KARPWEB_PRICING_REGION`` (``us-east-1``),
  ``KARPWEB_PRICING_ENDPOINT_URL`` (optional)
"""

from __future__ import annotations

import functools
import logging
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import boto3
import botocore.session
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError
from botocore.loaders import Loader, create_loader

from .interface import CloudAPIError

log = logging.getLogger(__name__)

# Codes that mean "slow down / try again" and never say anything about capacity.
THROTTLING_CODES = frozenset(
    {
        "RequestLimitExceeded",
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "RequestThrottled",
        "RequestThrottledException",
        "TooManyRequestsException",
        "SlowDown",
        "EC2ThrottledException",
        "PriorRequestNotComplete",
    }
)
TRANSIENT_CODES = frozenset({"InternalError", "InternalFailure", "ServiceUnavailable", "Unavailable"})
RETRYABLE_CODES = THROTTLING_CODES | TRANSIENT_CODES
UNAUTHORIZED_CODES = frozenset(
    {"UnauthorizedOperation", "AccessDenied", "AccessDeniedException", "AuthFailure", "UnrecognizedClientException"}
)


def setting(name: str, default: Any = None) -> Any:
    """A Django setting if Django is configured and has it, else the environment variable."""
    try:
        from django.conf import settings

        if settings.configured:
            value = getattr(settings, name, None)
            if value not in (None, ""):
                return value
    except ImportError:  # the adapter also runs outside Django (scripts, the simulated world)
        pass
    value = os.environ.get(name)
    return default if value in (None, "") else value


@dataclass(frozen=True)
class EC2Config:
    region: str
    endpoint_url: str | None = None
    retry_mode: str = "adaptive"
    max_attempts: int = 5
    extra_retries: int = 3
    retry_base_seconds: float = 0.5
    pricing_source: str = "api"
    pricing_region: str = "us-east-1"
    pricing_endpoint_url: str | None = None
    resource_groups_endpoint_url: str | None = None
    ssm_endpoint_url: str | None = None
    iam_endpoint_url: str | None = None
    eks_endpoint_url: str | None = None
    sts_endpoint_url: str | None = None
    ram_endpoint_url: str | None = None
    savingsplans_endpoint_url: str | None = None
    reserved_capacity: bool = True  # the ReservedCapacity feature gate

    @classmethod
    def from_settings(cls, **overrides: Any) -> EC2Config:
        region = (
            setting("KARPWEB_AWS_REGION")
            or os.environ.get("AWS_REGION")
            or os.environ.get("AWS_DEFAULT_REGION")
            or boto3.session.Session().region_name
        )
        if not region:
            raise CloudAPIError(
                "NoRegion", "set KARPWEB_AWS_REGION (or AWS_REGION) to the region of the cluster", "config"
            )
        endpoint = setting("KARPWEB_EC2_ENDPOINT_URL")
        values: dict[str, Any] = {
            "region": region,
            "endpoint_url": endpoint,
            "retry_mode": setting("KARPWEB_EC2_RETRY_MODE", "adaptive"),
            "max_attempts": int(setting("KARPWEB_EC2_MAX_ATTEMPTS", 5)),
            "extra_retries": int(setting("KARPWEB_EC2_EXTRA_RETRIES", 3)),
            "pricing_source": setting("KARPWEB_PRICING_SOURCE", "bundled" if endpoint else "api"),
            "pricing_region": setting("KARPWEB_PRICING_REGION", "us-east-1"),
            "pricing_endpoint_url": setting("KARPWEB_PRICING_ENDPOINT_URL"),
            "resource_groups_endpoint_url": setting("KARPWEB_RESOURCE_GROUPS_ENDPOINT_URL", endpoint),
            "ssm_endpoint_url": setting("KARPWEB_SSM_ENDPOINT_URL", endpoint),
            "iam_endpoint_url": setting("KARPWEB_IAM_ENDPOINT_URL", endpoint),
            "eks_endpoint_url": setting("KARPWEB_EKS_ENDPOINT_URL", endpoint),
            "sts_endpoint_url": setting("KARPWEB_STS_ENDPOINT_URL", endpoint),
            "ram_endpoint_url": setting("KARPWEB_RAM_ENDPOINT_URL", endpoint),
            "savingsplans_endpoint_url": setting("KARPWEB_SAVINGSPLANS_ENDPOINT_URL", endpoint),
            "reserved_capacity": _bool(setting("KARPWEB_FEATURE_RESERVED_CAPACITY", True)),
        }
        values.update(overrides)
        return cls(**values)


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in ("1", "true", "yes", "on")


class _ProcessLoader(Loader):
    """botocore's data loader, one for every session of the process. Each botocore session otherwise
    has its own, and parses each service's model again for its first client (EC2's is megabytes of
    JSON: 0.25 s of CPU here, against 0.03 s with the models already loaded) and keeps its own copy:
    a worker serving many clusters and accounts (a session each) would hold one per account. boto3
    appends its data folder to a session's search paths whenever a Session is made: the paths are
    fixed here (boto3's included) and each such append goes to a copy, so they do not grow."""

    @property
    def search_paths(self) -> list[str]:
        return list(self._search_paths)


@functools.cache
def _process_loader() -> Loader:
    data_path = botocore.session.get_session().get_config_variable("data_path")  # AWS_DATA_PATH, as a session's own
    loader = create_loader(data_path)
    return _ProcessLoader(extra_search_paths=[*loader.search_paths,
                                              os.path.join(os.path.dirname(boto3.__file__), "data")],
                          include_default_search_paths=False)


def _botocore_session() -> botocore.session.Session:
    session = botocore.session.get_session()
    session.register_component("data_loader", _process_loader())
    return session


def make_session() -> boto3.session.Session:
    return boto3.session.Session(botocore_session=_botocore_session())


def assumed_role_session(role_arn: str, *, region: str, external_id: str = "", sts_endpoint_url: str | None = None,
                         session_name: str = "karpweb", duration_seconds: int = 3600,
                         base: boto3.session.Session | None = None) -> boto3.session.Session:
    """A session working as ``role_arn`` (a fleet account's role), its credentials from STS
    AssumeRole (with ``external_id`` when the role's trust policy asks for one) on karpweb's own
    credentials (``base``: boto3's chain). Nothing is called until the first request; botocore then
    refreshes them before they expire (15 minutes ahead, as its own assume-role provider does)."""
    from botocore.credentials import DeferredRefreshableCredentials

    sts = (base or make_session()).client("sts", region_name=region, endpoint_url=sts_endpoint_url,
                                          config=Config(retries={"mode": "standard", "total_max_attempts": 3},
                                                        connect_timeout=5, read_timeout=30))

    def refresh() -> dict[str, str]:
        params: dict[str, Any] = {"RoleArn": role_arn, "RoleSessionName": session_name,
                                  "DurationSeconds": duration_seconds}
        if external_id:
            params["ExternalId"] = external_id
        try:
            credentials = sts.assume_role(**params)["Credentials"]
        except (BotoCoreError, ClientError) as exc:
            raise CloudAPIError(error_code(exc), f"cannot assume {role_arn}: {error_message(exc)}", "assume_role") from exc
        return {"access_key": credentials["AccessKeyId"], "secret_key": credentials["SecretAccessKey"],
                "token": credentials["SessionToken"], "expiry_time": credentials["Expiration"].isoformat()}

    botocore_session = _botocore_session()
    botocore_session._credentials = DeferredRefreshableCredentials(refresh_using=refresh, method="sts-assume-role")
    return boto3.session.Session(botocore_session=botocore_session, region_name=region)


def cluster_ec2_config(cluster) -> EC2Config:
    """The EC2 settings for a fleet cluster (fleet.Cluster): its region, else its account's first."""
    region = cluster.region or next(iter(cluster.account.regions or ()), "")
    return EC2Config.from_settings(**({"region": region} if region else {}))


def account_session(account, config: EC2Config) -> boto3.session.Session:
    """An account's session (fleet.AwsAccount): its role assumed through STS, else karpweb's own credentials."""
    if not account.role_arn:
        return make_session()
    return assumed_role_session(account.role_arn, external_id=account.external_id, region=config.region,
                                sts_endpoint_url=config.sts_endpoint_url, session_name=f"karpweb-{account.account_id}")


def make_ec2_client(config: EC2Config, session: boto3.session.Session | None = None) -> Any:
    session = session or make_session()
    return session.client(
        "ec2",
        region_name=config.region,
        endpoint_url=config.endpoint_url,
        config=Config(
            retries={"mode": config.retry_mode, "total_max_attempts": config.max_attempts},
            connect_timeout=5,
            read_timeout=30,
            user_agent_extra="karpweb",
        ),
    )


def make_pricing_client(config: EC2Config, session: boto3.session.Session | None = None) -> Any:
    session = session or make_session()
    return session.client(
        "pricing",
        region_name=config.pricing_region,
        endpoint_url=config.pricing_endpoint_url,
        config=Config(retries={"mode": "standard", "total_max_attempts": 3}, connect_timeout=5, read_timeout=30),
    )


def make_client(service: str, config: EC2Config, endpoint_url: str | None,
                session: boto3.session.Session | None = None) -> Any:
    """A client for one of the launch-resolution services (ssm, iam, eks) with EC2's retry policy."""
    session = session or make_session()
    return session.client(
        service,
        region_name=config.region,
        endpoint_url=endpoint_url,
        config=Config(retries={"mode": config.retry_mode, "total_max_attempts": config.max_attempts},
                      connect_timeout=5, read_timeout=30, user_agent_extra="karpweb"),
    )


def make_resource_groups_client(config: EC2Config, session: boto3.session.Session | None = None) -> Any:
    session = session or make_session()
    return session.client(
        "resource-groups",
        region_name=config.region,
        endpoint_url=config.resource_groups_endpoint_url,
        config=Config(
            retries={"mode": config.retry_mode, "total_max_attempts": config.max_attempts},
            connect_timeout=5,
            read_timeout=30,
        ),
    )


def error_code(exc: BaseException) -> str:
    if isinstance(exc, ClientError):
        return str(exc.response.get("Error", {}).get("Code") or "ClientError")
    if isinstance(exc, CloudAPIError):
        return exc.code
    return type(exc).__name__


def error_message(exc: BaseException) -> str:
    if isinstance(exc, ClientError):
        return str(exc.response.get("Error", {}).get("Message") or exc)
    return str(exc)


class Caller:
    """Calls one EC2 operation with our bounded retry on top of botocore's own.

    botocore (``adaptive`` or ``standard`` mode) already retries throttling and 5xx answers with
    backoff. When it gives up on a throttled call we retry up to ``extra_retries`` more times with
    exponential backoff and jitter, and then raise :class:`CloudAPIError` with the EC2 code. The
    sleep function is injectable for tests.
    """

    def __init__(
        self,
        config: EC2Config,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
    ) -> None:
        self.extra_retries = config.extra_retries
        self.base = config.retry_base_seconds
        self.sleep = sleep
        self.rng = rng or random.Random()
        self.retries_done = 0  # how many of our own retries happened (for metrics and tests)

    def __call__(self, client: Any, operation: str, **params: Any) -> dict[str, Any]:
        method = getattr(client, operation)
        attempt = 0
        while True:
            try:
                return method(**params)
            except ClientError as exc:
                code = error_code(exc)
                if code in RETRYABLE_CODES and attempt < self.extra_retries:
                    delay = self.base * (2**attempt) * (0.5 + self.rng.random())
                    log.warning("EC2 %s answered %s; retry %d in %.2fs", operation, code, attempt + 1, delay)
                    attempt += 1
                    self.retries_done += 1
                    self.sleep(delay)
                    continue
                raise CloudAPIError(code, error_message(exc), operation) from exc
            except BotoCoreError as exc:
                raise CloudAPIError(type(exc).__name__, str(exc), operation) from exc
