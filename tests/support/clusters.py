"""The fleet's default cluster as a test needs it: its row, not the settings, says how the loop
reaches it (fleet/scope.py; the settings only made the first cluster, fleet/defaults.py)."""

import contextlib
from collections.abc import Iterator

from fleet.models import Cluster


def use_cluster(**fields) -> Cluster:
    """Set `fields` on the default cluster's row (connection="kubeconfig", kubeconfig=path;
    connection="in-cluster"; connection="simulated"; ...) and forget what the process made from the
    old row (its adapters and providers, the kept list of clusters). The test's transaction rolls the
    row back."""
    from fleet.scope import default_cluster, forget_default
    from scheduling.loop import backends

    cluster = default_cluster()
    for name, value in fields.items():
        setattr(cluster, name, value)
    cluster.save()
    forget_default()
    backends.forget()
    return default_cluster()


def use_kube_server(server) -> Cluster:
    """The default cluster reached through `server`'s (a KubeTestServer's) kubeconfig."""
    return use_cluster(connection=Cluster.Connection.KUBECONFIG, kubeconfig=str(server.kubeconfig))


@contextlib.contextmanager
def cluster_row(**fields) -> Iterator[Cluster]:
    """`use_cluster(**fields)` until the block ends; the row's old values come back after it."""
    from fleet.scope import default_cluster

    cluster = default_cluster()
    before = {name: getattr(cluster, name) for name in fields}
    try:
        yield use_cluster(**fields)
    finally:
        use_cluster(**before)
