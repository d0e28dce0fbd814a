"""Which cloud and which cluster the loop talks to.

The scope's `fleet.Cluster` row says (fleet/scope.py; with no scope open, the default cluster's row):
its `connection` (simulated, in-cluster, a kubeconfig path or Secret reference, or EKS through its
account's credentials) and its account's `role_arn` (assumed through STS) and region. Every loop step
runs in its cluster's scope, a fleet of one too: KARPWEB_CLUSTER and KUBECONFIG only made the first
cluster's row (fleet/defaults.py) and are not read here. Whether the cloud is EC2 or the simulated one
is the fleet's choice, not an account's: KARPWEB_PROVIDER. The default cluster's blank join fields
and interruption queue still default to their settings (`join_info`, `interruption_queue`), as a
blank `mode` follows KARPWEB_MODE.

Adapters and providers are cached per process: one per cluster (forgotten when its row changes),
so each keeps its read-through caches (images, subnets, the EKS token) between task runs, as
Karpenter's controllers do. What launches are decided from (reservation availability, unavailable
offerings) is in the shared cache instead (`shared_state`; docs/architecture.md, "Process caches")."""

from __future__ import annotations

import functools
import threading

from django.conf import settings

from fleet.connection import is_aws, is_kubernetes  # noqa: F401 - the loop asks them here too
from fleet.scope import NoClusterScope, current_cluster, default_cluster
from scheduling.adapters.ec2.client import account_session, cluster_ec2_config
from scheduling.adapters.kube import clusters as kube_clusters

_lock = threading.Lock()
_providers: dict[tuple, object] = {}
_queues: dict[tuple, object] = {}


def is_simulated() -> bool:
    return not is_aws() and not is_kubernetes()


def cloud():
    if not is_aws():
        from scheduling.loop.simulated import SimulatedCloud

        return SimulatedCloud()
    cluster = current_cluster() or default_cluster()
    return _cached(_providers, _provider_key(cluster), lambda: _cluster_provider(cluster))


def cloud_for_reservation(reservation):
    """The EC2 provider that may act on `reservation`: that of a cluster of its owner's account (only
    the owner modifies, cancels, extends, splits or moves it), in its region; the scope's cluster when
    it is one of those. A reservation the fleet does not own: a cluster of an account that sees it
    (its reads and the EC2NodeClass it changes are theirs). Nothing fits: `cloud()` as it stands."""
    from fleet.models import Cluster
    from fleet.scope import cluster_scope

    if reservation.owner_account_id:
        accounts = [reservation.owner_account_id]
    else:
        accounts = list(reservation.visibilities.model._base_manager.filter(reservation_id=reservation.pk)
                        .values_list("account_id", flat=True))
    scoped = current_cluster()
    if scoped is not None and scoped.account_id in accounts:
        return cloud()
    clusters = Cluster._base_manager.filter(account_id__in=accounts).select_related("account").order_by("pk")
    acting = next((c for c in clusters if not reservation.region or c.region in (reservation.region, "")), None)
    if acting is None:
        return cloud()
    with cluster_scope(acting):
        return cloud()


def cluster():
    """The scope's cluster's adapter (unscoped code: the default cluster's), from its row."""
    scoped = current_cluster() or default_cluster()
    if not is_kubernetes(scoped):
        from scheduling.loop.simulated import SimulatedCluster

        return SimulatedCluster()
    return kube_clusters.adapter_for(scoped)


def forget() -> None:
    """Drop every cached adapter and provider (a test that changed the fleet's rows)."""
    with _lock:
        _providers.clear()
        _queues.clear()
    kube_clusters.forget()


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


def _provider_key(cluster) -> tuple:
    account = cluster.account
    return (cluster.pk, cluster.name, cluster.endpoint, cluster.ca_bundle, cluster.service_cidr, cluster.region,
            cluster.connection, account.account_id, account.role_arn, account.external_id, tuple(account.regions or ()))


_ec2_config = cluster_ec2_config
_session = account_session


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
        config, **shared_state(cluster.account.account_id), ec2=make_ec2_client(config, session), pricing=pricing,
        resource_groups=make_resource_groups_client(config, session),
        ssm=make_client("ssm", config, config.ssm_endpoint_url, session),
        iam=make_client("iam", config, config.iam_endpoint_url, session),
        eks=make_client("eks", config, config.eks_endpoint_url, session),
        ram=make_client("ram", config, config.ram_endpoint_url, session),
        sts=make_client("sts", config, config.sts_endpoint_url, session),
        savingsplans=make_client("savingsplans", config, config.savingsplans_endpoint_url, session),
        kube_dns=kube_dns if is_kubernetes(cluster) else None,
        cluster=join_info(cluster))


def join_info(cluster) -> dict:
    """What nodes launched for `cluster` join it with: its row's endpoint, CA bundle and Service CIDR;
    blank ones in the default cluster are the settings' (KARPWEB_CLUSTER_*, as before the fleet), in
    any other asked of EKS DescribeCluster (as is the version, unless the default's setting gives it)."""
    info = {"name": cluster.name, "endpoint": cluster.endpoint, "ca": cluster.ca_bundle, "cidr": cluster.service_cidr,
            "version": ""}
    if _is_default(cluster):
        for key, setting in SETTING_OF.items():
            info[key] = info[key] or getattr(settings, setting, "") or ""
    return info


# The settings a single-cluster karpweb joined nodes with: the default cluster's, where its row is blank.
SETTING_OF = {"endpoint": "KARPWEB_CLUSTER_ENDPOINT", "ca": "KARPWEB_CLUSTER_CA_BUNDLE", "cidr": "KARPWEB_CLUSTER_CIDR",
              "version": "KARPWEB_KUBERNETES_VERSION"}


def _is_default(cluster) -> bool:
    try:
        return cluster.pk == default_cluster().pk
    except NoClusterScope:
        return False


def cluster_adapter_for(cluster_id: int):
    """The adapter of the scope's cluster (`cluster_id`: asserted, so a provider never reads another's)."""
    scoped = current_cluster()
    assert scoped is not None and scoped.pk == cluster_id, "cluster_adapter_for runs in its cluster's scope"
    return cluster()


def shared_state(account_id: str) -> dict:
    """What a provider decides launches from, kept outside its process: the reservations' available
    counts and the unavailable offerings in the shared cache (Redis with KARPWEB_CACHE_URL), and a
    reservation the cache does not know asked of the mirror and the ledger (a cold worker)."""
    from django.core.cache import cache

    from reservations.ledger import launchable_units

    return {"shared_store": cache, "reservation_fallback": launchable_units, "account_id": account_id}


def interruption_queue():
    """The SQS interruption queue of the scope's cluster (AWS only), else None: its row's
    `interruption_queue`, read with its account's credentials in its region; blank in the default
    cluster, KARPWEB_INTERRUPTION_QUEUE (as before the fleet). Received without a long poll: the
    provisioning step that reads it runs every 10 s."""
    if not is_aws():
        return None
    scoped = current_cluster()
    if scoped is not None and scoped.interruption_queue:
        return _cached(_queues, (scoped.pk, scoped.interruption_queue, scoped.region, scoped.account.role_arn,
                                 scoped.account.external_id), lambda: _cluster_queue(scoped))
    if not settings.KARPWEB_INTERRUPTION_QUEUE:
        return None
    if scoped is not None and (not _is_default(scoped) or scoped.account.role_arn):
        return None  # the setting's queue is read with karpweb's own credentials: the default cluster's, as before
    return _queue(settings.KARPWEB_INTERRUPTION_QUEUE)


def _cluster_queue(cluster):
    from scheduling.adapters.ec2.interruptionqueue import InterruptionQueue

    config = cluster_ec2_config(cluster)
    return InterruptionQueue.for_account(cluster.interruption_queue, config, account_session(cluster.account, config),
                                         wait_seconds=0)


@functools.cache
def _queue(name: str):
    from scheduling.adapters.ec2.interruptionqueue import InterruptionQueue

    return InterruptionQueue.from_settings(wait_seconds=0)
