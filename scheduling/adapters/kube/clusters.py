"""The Kubernetes adapter of each cluster of the fleet, from its row (fleet.Cluster.connection):
in-cluster, a kubeconfig path or Secret reference, or EKS through its account's credentials; cached
per process, one per cluster (a changed row makes a new one), so each keeps its caches between runs.
The settings-made cluster is no exception: its row (made from KARPWEB_CLUSTER and KUBECONFIG by the
migration, fleet/defaults.py) says how it is reached, whatever the settings say later.

One trust rule: a kubeconfig path a row names is an administrator's input, read only inside
KARPWEB_KUBECONFIG_DIR and never running a command (fleet.models.kubeconfig_problem,
config.client_from_kubeconfig(fleet_row=True)); the deployment's own kubeconfig (KUBECONFIG, which
its operator set) is trusted as before when the row names exactly that path. `writer_for()` is what
an operator's change to a cluster's object (selector terms, open mode, the admin's spec fields) is
written through: the object's own cluster's adapter."""

from __future__ import annotations

import threading

from django.conf import settings

from fleet.connection import is_kubernetes

_lock = threading.Lock()
_adapters: dict[tuple, object] = {}


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
    loop sees it: its row's connection (None: the scope's cluster, else the default one)."""
    return is_kubernetes(cluster)


def writer_for(cluster):
    """The adapter an operator's change to one of `cluster`'s objects is written through; None when
    that cluster is simulated (the mirror's rows are its objects: the change is saved there alone)."""
    from fleet.access import check_may_change

    if cluster is not None:
        check_may_change(cluster.pk, cluster.account_id, f"cluster {cluster.name}'s objects")
    if not owns_its_objects(cluster):
        return None
    if cluster is None:
        from fleet.scope import working_cluster

        cluster = working_cluster()
    return adapter_for(cluster)


def forget() -> None:
    with _lock:
        _adapters.clear()


def _key(cluster) -> tuple:
    account = cluster.account
    return (cluster.pk, cluster.connection, cluster.kubeconfig, _is_own_kubeconfig(cluster.kubeconfig),
            cluster.endpoint, cluster.name, cluster.region, account.role_arn, account.external_id)


def _make(cluster):
    from scheduling.adapters.kube import config
    from scheduling.adapters.kube.adapter import KubeClusterAdapter

    connection = cluster.Connection
    if cluster.connection == connection.IN_CLUSTER:
        client = _own_cluster_client(cluster)
    elif cluster.connection == connection.KUBECONFIG:
        if not cluster.kubeconfig:
            raise config.ClusterConfigError(f'kubeconfig: cluster {cluster.name} connects through a kubeconfig and '
                                            'names none: give its path or a Secret reference (secret:<namespace>/<name>)')
        if _is_own_kubeconfig(cluster.kubeconfig):
            # The deployment's own KUBECONFIG, which its operator set: trusted as before the fleet.
            client = config.client_from_kubeconfig(cluster.kubeconfig)
        elif config.is_secret_reference(cluster.kubeconfig):
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
                raise config.ClusterConfigError(f"kubeconfig: cluster {cluster.name}'s {cluster.kubeconfig} {problem}")
            client = config.client_from_kubeconfig(cluster.kubeconfig, fleet_row=True)
    elif cluster.connection == connection.EKS:
        from scheduling.adapters.ec2.client import account_session, cluster_ec2_config
        from scheduling.adapters.kube.eks import eks_api_client

        ec2_config = cluster_ec2_config(cluster)
        client = eks_api_client(account_session(cluster.account, ec2_config), cluster.name, ec2_config.region,
                                eks_endpoint_url=ec2_config.eks_endpoint_url,
                                sts_endpoint_url=ec2_config.sts_endpoint_url)
    else:
        raise ValueError(f"connection: cluster {cluster.name}'s {cluster.connection!r} is not a Kubernetes connection")
    return KubeClusterAdapter(client)


def _own_cluster_client(cluster):
    """karpweb's own cluster: the pod's service account; outside a pod (a developer's machine)
    ~/.kube/config, the deployment's own as docs/kubernetes.md orders them."""
    from scheduling.adapters.kube import config

    try:
        if not config.in_cluster() and config.DEFAULT_KUBECONFIG.exists():
            return config.client_from_kubeconfig(str(config.DEFAULT_KUBECONFIG))
        return config.client_in_cluster()
    except config.ClusterConfigError as exc:
        raise config.ClusterConfigError(f"connection: cluster {cluster.name} is in-cluster: {exc} (run karpweb in "
                                        "the cluster's pod, or give the cluster a kubeconfig)") from exc


def _is_own_kubeconfig(path: str) -> bool:
    """Whether a row's kubeconfig is the deployment's own (KUBECONFIG, as the settings read it)."""
    own = getattr(settings, "KARPWEB_KUBECONFIG", "") or ""
    return bool(own) and path == own
