"""Where karpweb finds its cluster: a kubeconfig, or the service account of the pod it runs in.

Order (first that applies wins):
1. an explicit kubeconfig path passed in (or the ``KUBECONFIG`` setting / environment variable,
   which may list several files separated by ``:``, merged as kubectl does);
2. in-cluster: ``KUBERNETES_SERVICE_HOST`` is set and the service-account token is mounted;
3. ``~/.kube/config``.

TLS: the API server's certificate is verified as kubectl verifies it (the whole chain up to the
configured CA, and the host name), without OpenSSL's ``VERIFY_X509_STRICT``: on Python 3.13 urllib3
turns that flag on, and it refuses the CA EKS generates for a cluster (no Authority Key Identifier;
kubernetes-client/python#2394). See :func:`cluster_tls_context`.
"""

from __future__ import annotations

import base64
import os
import re
import ssl
from pathlib import Path

import yaml
from kubernetes import config as kube_config
from kubernetes.client import ApiClient, Configuration
from kubernetes.config.config_exception import ConfigException
from urllib3.util import ssl_ as urllib3_ssl

from fleet.endpoints import SECRET_REFERENCE

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


def client_from_kubeconfig(path: str, context: str | None = None, *, fleet_row: bool = False) -> ApiClient:
    """`fleet_row`: the path comes from a Cluster row (an administrator typed it), not from the
    deployment's own settings: its kubeconfig may run no command (`kubeconfig_problems`)."""
    configuration = Configuration()
    try:
        if fleet_row:
            with open(path, "rb") as handle:
                _refuse_problems(yaml.safe_load(handle), f"kubeconfig {path}", from_secret=False)
        kube_config.load_kube_config(config_file=path, context=context, client_configuration=configuration,
                                     persist_config=False)
    except (ConfigException, OSError, ValueError, yaml.YAMLError) as exc:
        raise ClusterConfigError(f"cannot use kubeconfig {path}{' context ' + context if context else ''}: {exc}") from exc
    return api_client(configuration)


# Keys of a kubeconfig's user that name a local file: a kubeconfig from a Secret could otherwise have
# karpweb read its own service account token (or any file) and send it to the server it names.
FILE_KEYS = ("tokenFile", "client-certificate", "client-key")


def kubeconfig_problems(document, *, from_secret: bool) -> list[str]:
    """What karpweb refuses in a fleet cluster's kubeconfig: `exec` credential plugins and auth
    providers that run a command (unless KARPWEB_KUBECONFIG_ALLOW_EXEC), and, from a Secret, any
    file it names (a Secret's kubeconfig carries its credentials inline)."""
    if not isinstance(document, dict):
        return ["is not a kubeconfig (a YAML map)"]
    allow_exec = _setting("KARPWEB_KUBECONFIG_ALLOW_EXEC", False)
    problems = []
    for entry in document.get("users") or []:
        user = (entry or {}).get("user") or {}
        name = (entry or {}).get("name", "?")
        if user.get("exec") and not allow_exec:
            problems.append(f'user "{name}" runs a command (exec); set KARPWEB_KUBECONFIG_ALLOW_EXEC=true to allow it')
        if ((user.get("auth-provider") or {}).get("config") or {}).get("cmd-path") and not allow_exec:
            problems.append(f'user "{name}" runs a command (auth-provider cmd-path)')
        if from_secret:
            problems += [f'user "{name}" names a file ({key})' for key in FILE_KEYS if user.get(key)]
    if from_secret:
        for entry in document.get("clusters") or []:
            if ((entry or {}).get("cluster") or {}).get("certificate-authority"):
                problems.append(f'cluster "{entry.get("name", "?")}" names a file (certificate-authority)')
    return problems


def _refuse_problems(document, where: str, *, from_secret: bool) -> None:
    problems = kubeconfig_problems(document, from_secret=from_secret)
    if problems:
        raise ClusterConfigError(f"{where} is refused: " + "; ".join(problems))


def _setting(name: str, default):
    from django.conf import settings

    return getattr(settings, name, default)


SECRET_DEFAULT_KEY = "kubeconfig"


def is_secret_reference(value: str) -> bool:
    return value.startswith("secret:")


def client_from_secret(reference: str, reader: ApiClient) -> ApiClient:
    """An ApiClient from the kubeconfig in a Secret (`reference`: "secret:<namespace>/<name>[/<key>]",
    key "kubeconfig" by default), read through `reader` (karpweb's own cluster)."""
    from kubernetes.client import CoreV1Api
    from kubernetes.client.exceptions import ApiException

    match = SECRET_REFERENCE.match(reference)
    if not match:
        raise ClusterConfigError(f'kubeconfig: "{reference}" is not a Secret reference '
                                 '("secret:<namespace>/<name>[/<key>]", e.g. secret:karpweb/prod-eu-kubeconfig)')
    namespace, name, key = match.group(1), match.group(2), match.group(3) or SECRET_DEFAULT_KEY
    try:
        secret = CoreV1Api(reader).read_namespaced_secret(name, namespace)
    except ApiException as exc:
        raise ClusterConfigError(f"cannot read Secret {namespace}/{name}: {exc.status} {exc.reason}") from exc
    encoded = (secret.data or {}).get(key)
    if not encoded:
        raise ClusterConfigError(f"Secret {namespace}/{name} has no key {key!r} holding a kubeconfig")

    configuration = Configuration()
    try:
        document = yaml.safe_load(base64.b64decode(encoded))
        _refuse_problems(document, f"the kubeconfig in Secret {namespace}/{name} key {key!r}", from_secret=True)
        kube_config.load_kube_config_from_dict(document, persist_config=False, client_configuration=configuration)
    except (ConfigException, ValueError, yaml.YAMLError) as exc:
        raise ClusterConfigError(f"the kubeconfig in Secret {namespace}/{name} key {key!r} is unusable: {exc}") from exc
    return api_client(configuration)


def client_in_cluster() -> ApiClient:
    configuration = Configuration()
    try:
        kube_config.load_incluster_config(client_configuration=configuration)
    except ConfigException as exc:
        raise ClusterConfigError(f"cannot use the in-cluster service account: {exc}") from exc
    return api_client(configuration)


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


def cluster_tls_context(ca_file: str | None = None, ca_data: str | bytes | None = None) -> ssl.SSLContext:
    """A TLS context that verifies the API server against the cluster CA (the system's CAs when
    none is given).

    urllib3's own context (TLS 1.2+, certificate and host name required, and on Python 3.13
    ``VERIFY_X509_PARTIAL_CHAIN``) minus ``VERIFY_X509_STRICT`` only: strict checking refuses
    RFC 5280-valid certificates that lack an Authority Key Identifier, which EKS's cluster CA does,
    and kubectl (Go's crypto/x509) accepts them. Chain, expiry and host name checks all remain.
    """
    context = urllib3_ssl.create_urllib3_context(cert_reqs=ssl.CERT_REQUIRED)
    context.verify_flags &= ~ssl.VERIFY_X509_STRICT
    if ca_file or ca_data:
        context.load_verify_locations(cafile=ca_file, cadata=ca_data)
    else:
        context.load_default_certs()
    return context


def api_client(configuration: Configuration) -> ApiClient:
    """The ApiClient for ``configuration``, verifying TLS with :func:`cluster_tls_context`."""
    # Watches hold one connection each (five kinds) next to ordinary requests.
    configuration.connection_pool_maxsize = max(configuration.connection_pool_maxsize or 0, 16)
    client = ApiClient(configuration=configuration)
    client.user_agent = "karpweb"
    if configuration.verify_ssl:  # verify_ssl=False stays what the client makes of it: no checks
        _verify_with(client, _tls_context_for(configuration))
    return client


def _tls_context_for(configuration: Configuration) -> ssl.SSLContext:
    try:
        return cluster_tls_context(configuration.ssl_ca_cert, configuration.ca_cert_data)
    except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError
        raise ClusterConfigError(f"cannot load the cluster CA certificate: {exc}") from exc


def _verify_with(client: ApiClient, context: ssl.SSLContext) -> None:
    """Make every connection of ``client`` (requests and watches alike) use ``context``.

    The client's RESTClientObject builds its urllib3 pool manager (plain, HTTP or SOCKS proxy)
    with no ssl_context; each connection pool it creates takes its keywords from
    ``connection_pool_kw``, so adding the context there, before any pool exists, keeps everything
    else the client set (proxy, server name, retries, socket options, pool size). urllib3 still
    loads the configured CA and client certificate files into the context for each connection,
    as it does into the contexts it makes itself.
    """
    pool_manager = client.rest_client.pool_manager
    assert not pool_manager.pools, "set the TLS context before the first request"
    pool_manager.connection_pool_kw["ssl_context"] = context
