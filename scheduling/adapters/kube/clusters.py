"""The Kubernetes adapter of each cluster of the fleet, from its row (fleet.Cluster.connection):
in-cluster, a kubeconfig path or Secret reference, or EKS through its account's credentials; cached
per process, one per cluster (a changed row makes a new one), so each keeps its caches between runs.

`settings_adapter()` is the one a single-cluster karpweb used (KARPWEB_KUBECONFIG). `writer_for()`
is what an operator's change to a cluster's object (selector terms, open mode, the admin's spec
fields) is written through: the object's own cluster, never whichever cluster the settings name."""

from __future__ import annotations

import threading

from django.conf import settings

from fleet.connection import is_kubernetes
from fleet.scope import follows_settings

_lock = threading.Lock()
_adapters: dict[tuple, object] = {}


def settings_adapter():
    """The adapter KARPWEB_KUBECONFIG (or the in-cluster service account) names: a fleet of one's."""
    from scheduling.adapters.kube.adapter import KubeClusterAdapter
    from scheduling.adapters.kube.config import load_api_client

    return KubeClusterAdapter(load_api_client(settings.KARPWEB_KUBECONFIG))


def adapter_for(cluster):
    """The cached adapter of a cluster whose connection is a real Kubernetes one."""
    key = _key(cluster)
    with _lock:
        found = _adapters.get(key)
    if found is not None:
        return found
    made = _make(cluster)
    with _lock:
        # A row that changed leaves its old entry behind: drop the cluster's older ones.
        for stale in [k for k in _adapters if k[0] == key[0] and k != key]:
            del _adapters[stale]
        return _adapters.setdefault(key, made)


def owns_its_objects(cluster) -> bool:
    """Whether `cluster`'s Kubernetes objects live in an API server (not the simulated world), as its
    loop sees it: the row's connection; for the settings' own cluster alone in the fleet, the settings
    (KARPWEB_CLUSTER: its loop runs with no scope, scheduling/loop/runs.scope_for)."""
    if cluster is None or follows_settings(cluster):
        return settings.KARPWEB_CLUSTER == "kubernetes"
    return is_kubernetes(cluster)


def writer_for(cluster):
    """The adapter an operator's change to one of `cluster`'s objects is written through; None when
    that cluster is simulated (the mirror's rows are its objects: the change is saved there alone)."""
    from fleet.access import check_may_change

    if cluster is not None:
        check_may_change(cluster.pk, cluster.account_id, f"cluster {cluster.name}'s objects")
    if not owns_its_objects(cluster):
        return None
    if cluster is None or follows_settings(cluster):
        return settings_adapter()
    return adapter_for(cluster)


def forget() -> None:
    with _lock:
        _adapters.clear()


def _key(cluster) -> tuple:
    account = cluster.account
    return (cluster.pk, cluster.connection, cluster.kubeconfig, cluster.endpoint, cluster.name, cluster.region,
            account.role_arn, account.external_id)


def _make(cluster):
    from scheduling.adapters.kube import config
    from scheduling.adapters.kube.adapter import KubeClusterAdapter

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
            from fleet.models import kubeconfig_problem

            problem = kubeconfig_problem(cluster.kubeconfig)  # a row saved before the rule, or written around it
            if problem:
                raise config.ClusterConfigError(f"kubeconfig: {cluster.kubeconfig} {problem}")
            client = config.client_from_kubeconfig(cluster.kubeconfig, fleet_row=True)
    elif cluster.connection == connection.EKS:
        from scheduling.adapters.ec2.client import account_session, cluster_ec2_config
        from scheduling.adapters.kube.eks import eks_api_client

        ec2_config = cluster_ec2_config(cluster)
        client = eks_api_client(account_session(cluster.account, ec2_config), cluster.name, ec2_config.region,
                                eks_endpoint_url=ec2_config.eks_endpoint_url,
                                sts_endpoint_url=ec2_config.sts_endpoint_url)
    else:
        raise ValueError(f"connection: {cluster.connection!r} is not a Kubernetes connection")
    return KubeClusterAdapter(client)
