"""What the code talks to, asked of the cluster scope (fleet/scope.py): one function each.

The scope's cluster's row says (`Cluster.connection`); with no scope open, the default cluster's row
(with several clusters and none flagged default: whether any of them is a real cluster). The settings
KARPWEB_CLUSTER and KUBECONFIG only made the first cluster's row (fleet/defaults.py). The
cloud is the fleet's choice, not an account's: KARPWEB_PROVIDER (aws: every account is EC2, each
through its own credentials; scheduling/loop/backends.py makes them)."""

from django.conf import settings

from fleet.scope import NoClusterScope, current_cluster, default_cluster, fleet_clusters


def is_kubernetes(cluster=None) -> bool:
    """Whether `cluster` (default: the scope's) is a real Kubernetes cluster, not the simulated world."""
    cluster = cluster or current_cluster()
    if cluster is None:
        try:
            cluster = default_cluster()
        except NoClusterScope:
            return any(_real(member) for member in fleet_clusters())
    return _real(cluster)


def _real(cluster) -> bool:
    return cluster.connection != cluster.Connection.SIMULATED


def is_aws() -> bool:
    """Whether the cloud is EC2 (KARPWEB_PROVIDER=aws) rather than the simulated one."""
    return settings.KARPWEB_PROVIDER == "aws"


def karpenter() -> str:
    """Whether Karpenter runs in the scope's cluster (auto, present, absent): its row, else KARPWEB_KARPENTER."""
    cluster = current_cluster()
    return cluster.karpenter if cluster is not None and cluster.karpenter else settings.KARPWEB_KARPENTER


def mode() -> str:
    """The configured mode: the scope's cluster's when its row sets one, else KARPWEB_MODE."""
    cluster = current_cluster()
    return cluster.mode if cluster is not None and cluster.mode else settings.KARPWEB_MODE
