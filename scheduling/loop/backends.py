"""Which cloud and which cluster the loop talks to: the simulated world (the embedded default) or
the real ones (KARPWEB_PROVIDER=aws, KARPWEB_CLUSTER=kubernetes)."""

import functools

from django.conf import settings


def cloud():
    if settings.KARPWEB_PROVIDER == "aws":
        return _ec2_provider()
    from scheduling.loop.simulated import SimulatedCloud

    return SimulatedCloud()


def cluster():
    if settings.KARPWEB_CLUSTER == "kubernetes":
        from scheduling.adapters.kube.adapter import KubeClusterAdapter
        from scheduling.adapters.kube.config import load_api_client

        return KubeClusterAdapter(load_api_client(settings.KARPWEB_KUBECONFIG))
    from scheduling.loop.simulated import SimulatedCluster

    return SimulatedCluster()


def is_simulated() -> bool:
    return settings.KARPWEB_PROVIDER == "simulated" and settings.KARPWEB_CLUSTER == "simulated"


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
    return cluster()


def interruption_queue():
    """The SQS interruption queue when KARPWEB_INTERRUPTION_QUEUE names one (AWS only), else None.
    Received without a long poll: the provisioning step that reads it runs every 10 s."""
    if settings.KARPWEB_PROVIDER != "aws" or not settings.KARPWEB_INTERRUPTION_QUEUE:
        return None
    return _queue(settings.KARPWEB_INTERRUPTION_QUEUE)


@functools.cache
def _queue(name: str):
    from scheduling.adapters.ec2.interruptionqueue import InterruptionQueue

    return InterruptionQueue.from_settings(wait_seconds=0)
