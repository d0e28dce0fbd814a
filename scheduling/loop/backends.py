"""Which cloud and which cluster the loop talks to.

Inside a cluster scope (fleet/scope.py) the scope's `fleet.Cluster` row says: its `connection`
(simulated, in-cluster, a kubeconfig path or Secret reference, or EKS through its account's
credentials) and its account's `role_arn` (assumed through STS) and region. With no scope open (a
fleet of one, the way a single-cluster karpweb ran) the settings say, as before: KARPWEB_CLUSTER,
KARPWEB_KUBECONFIG, KARPWEB_PROVIDER and the SDK's credential chain; the fleet's first cluster was
made from the same settings (fleet/defaults.py). Whether the cloud is EC2 or the simulated one is
the fleet's choice, not an account's: KARPWEB_PROVIDER.

Adapters and providers are cached per process: one per cluster (forgotten when its row changes),
so each keeps its caches (reservation availability, unavailable offerings, images, the EKS token)
between task runs, as Karpenter's controllers do."""

from __future__ import annotations

import functools
import threading

from django.conf import settings

from fleet.connection import is_aws, is_kubernetes  # noqa: F401 - the loop asks them here too
from fleet.scope import NoClusterScope, current_cluster, default_cluster

_lock = threading.Lock()
_adapters: dict[tuple, object] = {}
_providers: dict[tuple, object] = {}


def is_simulated() -> bool:
    return not is_aws() and not is_kubernetes()


def cloud():
    if not is_aws():
        from scheduling.loop.simulated import SimulatedCloud

        return SimulatedCloud()
    cluster = current_cluster()
    if cluster is None or _as_the_settings_say(cluster):
        return _ec2_provider()
    return _cached(_providers, _provider_key(cluster), lambda: _cluster_provider(cluster))


def cluster():
    scoped = current_cluster()
    if scoped is None:
        return _settings_cluster()
    if not is_kubernetes(scoped):
        from scheduling.loop.simulated import SimulatedCluster

        return SimulatedCluster()
    return _cached(_adapters, _adapter_key(scoped), lambda: _cluster_adapter(scoped))


def forget() -> None:
    """Drop every cached adapter and provider (a test that changed the fleet's rows)."""
    with _lock:
        _adapters.clear()
        _providers.clear()
    _ec2_provider.cache_clear()
    _dns_reader.cache_clear()


def _cached(cache: dict, key: tuple, make):
    with _lock:
        found = cache.get(key)
    if found is not None:
        return found
    made = make()
    with _lock:
        # A row that changed leaves its old entry behind: drop the cluster's older ones.
        for stale in [k for k in cache if k[0] == key[0] and k != key]:
            del cache[stale]
        return cache.setdefault(key, made)


def _settings_cluster():
    if settings.KARPWEB_CLUSTER == "kubernetes":
        from scheduling.adapters.kube.adapter import KubeClusterAdapter
        from scheduling.adapters.kube.config import load_api_client

        return KubeClusterAdapter(load_api_client(settings.KARPWEB_KUBECONFIG))
    from scheduling.loop.simulated import SimulatedCluster

    return SimulatedCluster()


def _adapter_key(cluster) -> tuple:
    account = cluster.account
    return (cluster.pk, cluster.connection, cluster.kubeconfig, cluster.endpoint, cluster.name, cluster.region,
            account.role_arn, account.external_id)


def _cluster_adapter(cluster):
    """The Kubernetes adapter for a fleet cluster, from its connection."""
    from scheduling.adapters.kube.adapter import KubeClusterAdapter
    from scheduling.adapters.kube import config

    connection = cluster.Connection
    if cluster.connection == connection.IN_CLUSTER:
        client = config.client_in_cluster()
    elif cluster.connection == connection.KUBECONFIG:
        if config.is_secret_reference(cluster.kubeconfig):
            # The Secret is in karpweb's own cluster: the one the settings name.
            reader = config.load_api_client(settings.KARPWEB_KUBECONFIG or None)
            try:
                client = config.client_from_secret(cluster.kubeconfig, reader)
            finally:
                reader.close()
        else:
            client = config.client_from_kubeconfig(cluster.kubeconfig)
    elif cluster.connection == connection.EKS:
        from scheduling.adapters.kube.eks import eks_api_client

        ec2_config = _ec2_config(cluster)
        client = eks_api_client(_session(cluster.account, ec2_config), cluster.name, ec2_config.region,
                                endpoint=cluster.endpoint, eks_endpoint_url=ec2_config.eks_endpoint_url,
                                sts_endpoint_url=ec2_config.sts_endpoint_url)
    else:
        raise ValueError(f"connection: {cluster.connection!r} is not a Kubernetes connection")
    return KubeClusterAdapter(client)


def _as_the_settings_say(cluster) -> bool:
    """The default cluster, in its account's own credentials and the settings' region, is the one a
    single-cluster karpweb worked on: the same provider (and caches) serve it with or without a scope."""
    if cluster.account.role_arn or (cluster.region and cluster.region != (settings.KARPWEB_AWS_REGION or cluster.region)):
        return False
    try:
        return cluster.pk == default_cluster().pk
    except NoClusterScope:
        return False


def _provider_key(cluster) -> tuple:
    account = cluster.account
    return (cluster.pk, cluster.name, cluster.endpoint, cluster.region, cluster.connection, account.account_id,
            account.role_arn, account.external_id, tuple(account.regions or ()))


def _ec2_config(cluster):
    from scheduling.adapters.ec2.client import EC2Config

    region = cluster.region or next(iter(cluster.account.regions or ()), "")
    return EC2Config.from_settings(**({"region": region} if region else {}))


def _session(account, ec2_config):
    """The account's session: its role assumed through STS, else karpweb's own credentials."""
    from scheduling.adapters.ec2.client import assumed_role_session, make_session

    if not account.role_arn:
        return make_session()
    return assumed_role_session(account.role_arn, external_id=account.external_id, region=ec2_config.region,
                                sts_endpoint_url=ec2_config.sts_endpoint_url,
                                session_name=f"karpweb-{account.account_id}")


def _cluster_provider(cluster):
    """The EC2 provider for a fleet cluster: its account's credentials, its region, its name and
    endpoint for the nodes it launches (nodes join it), its kube-dns for their cluster DNS."""
    from scheduling.adapters.ec2.client import make_client, make_ec2_client, make_pricing_client, \
        make_resource_groups_client
    from scheduling.adapters.ec2.provider import EC2CloudProvider

    config = _ec2_config(cluster)
    session = _session(cluster.account, config)
    pricing = make_pricing_client(config, session) if config.pricing_source == "api" else None
    cluster_id = cluster.pk

    def kube_dns() -> str:
        from fleet.scope import cluster_scope

        with cluster_scope(cluster):  # whichever scope asks: this cluster's Service
            return cluster_adapter_for(cluster_id).kube_dns_ip()

    return EC2CloudProvider(
        config, ec2=make_ec2_client(config, session), pricing=pricing,
        resource_groups=make_resource_groups_client(config, session),
        ssm=make_client("ssm", config, config.ssm_endpoint_url, session),
        iam=make_client("iam", config, config.iam_endpoint_url, session),
        eks=make_client("eks", config, config.eks_endpoint_url, session),
        ram=make_client("ram", config, config.ram_endpoint_url, session),
        sts=make_client("sts", config, config.sts_endpoint_url, session),
        kube_dns=kube_dns if is_kubernetes(cluster) else None,
        cluster={"name": cluster.name, "endpoint": cluster.endpoint})


def cluster_adapter_for(cluster_id: int):
    """The adapter of the scope's cluster (`cluster_id`: asserted, so a provider never reads another's)."""
    scoped = current_cluster()
    assert scoped is not None and scoped.pk == cluster_id, "cluster_adapter_for runs in its cluster's scope"
    return cluster()


@functools.cache
def _ec2_provider():
    """One per worker process: it keeps the in-memory reservation availability and the 3-minute
    unavailable-offerings cache between task runs, as Karpenter's provider does."""
    from scheduling.adapters.ec2.provider import EC2CloudProvider

    # Without KARPWEB_CLUSTER_DNS, nodes get the kube-dns Service's ClusterIP, read from the cluster.
    kube_dns = _kube_dns_ip if settings.KARPWEB_CLUSTER == "kubernetes" else None
    return EC2CloudProvider(kube_dns=kube_dns)


def _kube_dns_ip() -> str:
    return _dns_reader().kube_dns_ip()


@functools.cache
def _dns_reader():
    """The cluster adapter the EC2 provider reads kube-system/kube-dns through (one per process)."""
    return _settings_cluster()


def interruption_queue():
    """The SQS interruption queue when KARPWEB_INTERRUPTION_QUEUE names one (AWS only), else None.
    Received without a long poll: the provisioning step that reads it runs every 10 s. One queue:
    the default cluster's (its EventBridge rules feed it); other clusters of a fleet read none yet."""
    if not is_aws() or not settings.KARPWEB_INTERRUPTION_QUEUE:
        return None
    scoped = current_cluster()
    if scoped is not None and not _as_the_settings_say(scoped):
        return None
    return _queue(settings.KARPWEB_INTERRUPTION_QUEUE)


@functools.cache
def _queue(name: str):
    from scheduling.adapters.ec2.interruptionqueue import InterruptionQueue

    return InterruptionQueue.from_settings(wait_seconds=0)
