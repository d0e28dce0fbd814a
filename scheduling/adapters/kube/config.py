"""Where karpweb finds its cluster: a kubeconfig, or the service account of the pod it runs in.

Order (first that applies wins):
1. an explicit kubeconfig path passed in (or the ``KUBECONFIG`` setting / environment variable,
   which may list several files separated by ``:``, merged as kubectl does);
2. in-cluster: ``KUBERNETES_SERVICE_HOST`` is set and the service-account token is mounted;
3. ``~/.kube/config``.
"""

from __future__ import annotations

import os
from pathlib import Path

from kubernetes import config as kube_config
from kubernetes.client import ApiClient, Configuration
from kubernetes.config.config_exception import ConfigException

SERVICE_ACCOUNT_TOKEN = Path("/var/run/secrets/kubernetes.io/serviceaccount/token")
DEFAULT_KUBECONFIG = Path.home() / ".kube" / "config"


class ClusterConfigError(Exception):
    """karpweb cannot tell how to reach the cluster; the message says what to set."""


def _configured_kubeconfig() -> str | None:
    try:
        from django.conf import settings

        if settings.configured and getattr(settings, "KARPWEB_KUBECONFIG", None):
            return settings.KARPWEB_KUBECONFIG
    except ImportError:  # pragma: no cover - Django is always installed with karpweb
        pass
    return os.environ.get("KUBECONFIG") or None


def in_cluster() -> bool:
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and SERVICE_ACCOUNT_TOKEN.exists()


def client_from_kubeconfig(path: str, context: str | None = None) -> ApiClient:
    configuration = Configuration()
    try:
        kube_config.load_kube_config(config_file=path, context=context, client_configuration=configuration,
                                     persist_config=False)
    except (ConfigException, OSError, ValueError) as exc:
        raise ClusterConfigError(f"cannot use kubeconfig {path}{' context ' + context if context else ''}: {exc}") from exc
    return _finish(configuration)


def client_in_cluster() -> ApiClient:
    configuration = Configuration()
    try:
        kube_config.load_incluster_config(client_configuration=configuration)
    except ConfigException as exc:
        raise ClusterConfigError(f"cannot use the in-cluster service account: {exc}") from exc
    return _finish(configuration)


def load_api_client(kubeconfig: str | None = None, context: str | None = None) -> ApiClient:
    """An ApiClient for the configured cluster (see the module docstring for the order)."""
    path = kubeconfig or _configured_kubeconfig()
    if path:
        return client_from_kubeconfig(path, context)
    if in_cluster():
        return client_in_cluster()
    if DEFAULT_KUBECONFIG.exists():
        return client_from_kubeconfig(str(DEFAULT_KUBECONFIG), context)
    raise ClusterConfigError(
        "no Kubernetes cluster configured: set KUBECONFIG to a kubeconfig file, or run karpweb in a pod "
        "with a service account (KARPWEB_CLUSTER=kubernetes needs one of them)"
    )


def _finish(configuration: Configuration) -> ApiClient:
    # Watches hold one connection each (five kinds) next to ordinary requests.
    configuration.connection_pool_maxsize = max(configuration.connection_pool_maxsize or 0, 16)
    client = ApiClient(configuration=configuration)
    client.user_agent = "karpweb"
    return client
