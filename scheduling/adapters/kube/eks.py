"""An EKS cluster reached with an AWS account's credentials, as `aws eks get-token` does: the API
server's endpoint and CA from DescribeCluster, and a bearer token that is a presigned STS
GetCallerIdentity URL naming the cluster (header x-k8s-aws-id), which EKS's authenticator checks
(kubernetes-sigs/aws-iam-authenticator `pkg/token/token.go`). The token is valid 15 minutes; the
client makes a new one before each request once the last is 10 minutes old."""

from __future__ import annotations

import base64
import time
from typing import Any

from kubernetes.client import ApiClient, Configuration

from .config import ClusterConfigError, api_client

TOKEN_PREFIX = "k8s-aws-v1."
CLUSTER_ID_HEADER = "x-k8s-aws-id"
TOKEN_REFRESH_SECONDS = 600  # EKS accepts a token for 15 minutes


def eks_token(session: Any, cluster_name: str, region: str, sts_endpoint_url: str | None = None) -> str:
    sts = session.client("sts", region_name=region, endpoint_url=sts_endpoint_url)

    def name_the_cluster(request, **kwargs) -> None:
        request.headers[CLUSTER_ID_HEADER] = cluster_name

    sts.meta.events.register("before-sign.sts.GetCallerIdentity", name_the_cluster)
    url = sts.generate_presigned_url("get_caller_identity", Params={}, ExpiresIn=60, HttpMethod="GET")
    return TOKEN_PREFIX + base64.urlsafe_b64encode(url.encode()).decode().rstrip("=")


def eks_api_client(session: Any, cluster_name: str, region: str, *, endpoint: str = "",
                   eks_endpoint_url: str | None = None, sts_endpoint_url: str | None = None) -> ApiClient:
    """An ApiClient for the EKS cluster `cluster_name` in `region`, as `session`'s identity."""
    try:
        described = session.client("eks", region_name=region, endpoint_url=eks_endpoint_url) \
            .describe_cluster(name=cluster_name)["cluster"]
    except Exception as exc:  # botocore's errors: the message names the call and the cluster
        raise ClusterConfigError(f"cannot describe EKS cluster {cluster_name} in {region}: {exc}") from exc
    ca = (described.get("certificateAuthority") or {}).get("data") or ""
    configuration = Configuration(host=endpoint or described.get("endpoint") or "",
                                  ca_cert_data=base64.b64decode(ca).decode() if ca else None)
    if not configuration.host:
        raise ClusterConfigError(f"EKS cluster {cluster_name}: DescribeCluster gave no endpoint; set the cluster's endpoint")
    made = [0.0]

    def refresh(config: Configuration) -> None:
        if time.monotonic() - made[0] >= TOKEN_REFRESH_SECONDS:
            config.api_key = {"authorization": eks_token(session, cluster_name, region, sts_endpoint_url)}
            config.api_key_prefix = {"authorization": "Bearer"}
            made[0] = time.monotonic()

    refresh(configuration)
    configuration.refresh_api_key_hook = refresh
    return api_client(configuration)
