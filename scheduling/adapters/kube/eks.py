"""An EKS cluster reached with an AWS account's credentials, as `aws eks get-token` does: the API
server's endpoint and CA from DescribeCluster, and a bearer token that is a presigned STS
GetCallerIdentity URL naming the cluster (header x-k8s-aws-id), which EKS's authenticator checks
(kubernetes-sigs/aws-iam-authenticator `pkg/token/token.go`). The token is valid 15 minutes; the
client makes a new one before each request once the last is 10 minutes old.

The token goes only where AWS says the cluster is: the endpoint and CA DescribeCluster gives for the
cluster's name in its account and region (https:// only). A Cluster row's endpoint and CA are what
nodes join with; with connection `eks` they must equal AWS's, or the row is refused on save
(`join_settings_problems`) and the connection refused at run time."""

from __future__ import annotations

import base64
import time
from typing import Any

from kubernetes.client import ApiClient, Configuration

from fleet.endpoints import endpoint_problem

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


def described_access(session: Any, cluster_name: str, region: str, eks_endpoint_url: str | None = None) -> tuple[str, str]:
    """(endpoint, base64 CA) of the EKS cluster as DescribeCluster gives them; ClusterConfigError when
    the call fails or AWS names no https:// endpoint and CA."""
    try:
        described = session.client("eks", region_name=region, endpoint_url=eks_endpoint_url) \
            .describe_cluster(name=cluster_name)["cluster"]
    except Exception as exc:  # botocore's errors: the message names the call and the cluster
        raise ClusterConfigError(f"cannot describe EKS cluster {cluster_name} in {region}: {exc}") from exc
    endpoint = described.get("endpoint") or ""
    ca = (described.get("certificateAuthority") or {}).get("data") or ""
    problem = endpoint_problem(endpoint)
    if problem:
        raise ClusterConfigError(f"EKS cluster {cluster_name}: DescribeCluster's endpoint {endpoint[:200]!r} {problem}")
    if not ca:
        raise ClusterConfigError(f"EKS cluster {cluster_name}: DescribeCluster gave no certificate authority")
    return endpoint, ca


def eks_api_client(session: Any, cluster_name: str, region: str, *, eks_endpoint_url: str | None = None,
                   sts_endpoint_url: str | None = None) -> ApiClient:
    """An ApiClient for the EKS cluster `cluster_name` in `region`, as `session`'s identity, to the
    endpoint and CA AWS describes and nowhere else."""
    endpoint, ca = described_access(session, cluster_name, region, eks_endpoint_url)
    configuration = Configuration(host=endpoint, ca_cert_data=base64.b64decode(ca).decode())
    made = [0.0]

    def refresh(config: Configuration) -> None:
        if time.monotonic() - made[0] >= TOKEN_REFRESH_SECONDS:
            config.api_key = {"authorization": eks_token(session, cluster_name, region, sts_endpoint_url)}
            config.api_key_prefix = {"authorization": "Bearer"}
            made[0] = time.monotonic()

    refresh(configuration)
    configuration.refresh_api_key_hook = refresh
    return api_client(configuration)


def join_settings_problems(cluster) -> dict[str, str]:
    """For an `eks` Cluster row: its endpoint and CA (what nodes join) where they differ from what
    DescribeCluster gives, by model field, each message naming both; {} when they agree or are blank."""
    from scheduling.adapters.ec2.client import account_session, cluster_ec2_config

    config = cluster_ec2_config(cluster)
    try:
        endpoint, ca = described_access(account_session(cluster.account, config), cluster.name, config.region,
                                        config.eks_endpoint_url)
    except Exception as exc:  # DescribeCluster, credentials or STS: a row that cannot be checked is not saved
        return {"endpoint" if cluster.endpoint else "ca_bundle": f"cannot be checked against AWS: {exc}"}
    problems = {}
    if cluster.endpoint and cluster.endpoint.rstrip("/") != endpoint.rstrip("/"):
        problems["endpoint"] = (f"{cluster.endpoint} is not the endpoint AWS gives for EKS cluster {cluster.name} "
                                f"({endpoint}); leave it blank or give AWS's")
    if cluster.ca_bundle and "".join(cluster.ca_bundle.split()) != "".join(ca.split()):
        problems["ca_bundle"] = (f"is not the certificate authority AWS gives for EKS cluster {cluster.name} "
                                 f"({ca[:24]}...); leave it blank or give AWS's")
    return problems
