"""TLS to the API server: the adapter verifies the cluster CA as kubectl does.

The test CA has the shape of the CA EKS generates (no Authority Key Identifier), which OpenSSL's
VERIFY_X509_STRICT refuses; Python 3.13 and urllib3 2.x turn that flag on by default. The adapter
clears that one flag and nothing else: another CA or a wrong host name is still refused, a client
certificate is still presented, and insecure-skip-tls-verify still skips.
"""

from __future__ import annotations

import datetime
import selectors
import socket
import socketserver
import ssl
import threading

import pytest
import urllib3
from kubernetes import config as kubernetes_config
from kubernetes.client import ApiClient, Configuration
from kubernetes.client.exceptions import ApiException
from urllib3.util import ssl_ as urllib3_ssl

from scheduling.adapters.kube.config import ClusterConfigError, client_from_kubeconfig
from scheduling.adapters.kube.rest import KubeRest

from . import helpers as h
from .conftest import ADMIN_TOKEN, write_kubeconfig, write_pki

pytestmark = pytest.mark.kube

ADMIN_USER = {"name": "karpweb-admin", "user": {"token": ADMIN_TOKEN}}


@pytest.fixture
def strict_like_python_313(monkeypatch):
    """urllib3's default TLS context as it is on Python 3.13, where it adds VERIFY_X509_PARTIAL_CHAIN
    and VERIFY_X509_STRICT, so these tests mean the same on 3.11. The one patch in these tests: it
    stands in for the interpreter, not for anything karpweb or the API server does."""
    create = urllib3_ssl.create_urllib3_context

    def create_as_on_313(*args, **kwargs):
        context = create(*args, **kwargs)
        if kwargs.get("verify_flags") is None:
            context.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN | ssl.VERIFY_X509_STRICT
        return context

    monkeypatch.setattr(urllib3_ssl, "create_urllib3_context", create_as_on_313)
    monkeypatch.setattr(urllib3.connection, "create_urllib3_context", create_as_on_313)


def _handshake(kube_server, context: ssl.SSLContext) -> None:
    with socket.create_connection(("127.0.0.1", kube_server.port), timeout=5) as sock:
        with context.wrap_socket(sock, server_hostname="127.0.0.1"):
            pass


def _cluster(kube_server, **fields) -> dict:
    return {"server": kube_server.host, "certificate-authority": str(kube_server.pki["ca"]), **fields}


def _adapter_rest(tmp_path, cluster: dict, user: dict = ADMIN_USER) -> KubeRest:
    return KubeRest(client_from_kubeconfig(str(write_kubeconfig(tmp_path / "kubeconfig", cluster, user))))


def _namespaces(rest: KubeRest) -> set[str]:
    return {item["metadata"]["name"] for item in rest.list(h.NAMESPACE)["items"]}


def _refusal(rest: KubeRest) -> str:
    """The error a request through ``rest`` fails with (it must fail)."""
    with pytest.raises((ApiException, urllib3.exceptions.HTTPError)) as info:
        rest.request("GET", "/version")
    return str(info.value)


# --- the shape of the CA ---------------------------------------------------------------------------
def test_strict_verification_refuses_the_test_ca_and_plain_verification_accepts_it(kube_server):
    strict = ssl.create_default_context(cafile=str(kube_server.pki["ca"]))
    strict.verify_flags |= ssl.VERIFY_X509_STRICT
    with pytest.raises(ssl.SSLCertVerificationError, match="Missing Authority Key Identifier"):
        _handshake(kube_server, strict)

    strict.verify_flags &= ~ssl.VERIFY_X509_STRICT
    _handshake(kube_server, strict)


def test_the_clients_own_context_fails_as_on_python_313(kube_server, strict_like_python_313):
    configuration = Configuration()
    kubernetes_config.load_kube_config(config_file=str(kube_server.kubeconfig), client_configuration=configuration,
                                       persist_config=False)
    assert "Missing Authority Key Identifier" in _refusal(KubeRest(ApiClient(configuration)))


# --- the adapter -----------------------------------------------------------------------------------
def test_the_adapter_lists_and_watches_where_urllib3_verifies_strictly(kube_server, rest, strict_like_python_313,
                                                                       tmp_path, unique):
    adapter_rest = _adapter_rest(tmp_path, _cluster(kube_server))
    listed = adapter_rest.list(h.NAMESPACE)
    assert "default" in {item["metadata"]["name"] for item in listed["items"]}

    h.namespace(rest, f"tls-{unique}")
    events = adapter_rest.watch(h.NAMESPACE, listed["metadata"]["resourceVersion"], timeout_seconds=5,
                                field_selector=f"metadata.name=tls-{unique}")
    try:
        assert next(events)["object"]["metadata"]["name"] == f"tls-{unique}"
    finally:
        events.close()

    context = adapter_rest.api_client.rest_client.pool_manager.connection_pool_kw["ssl_context"]
    assert not context.verify_flags & ssl.VERIFY_X509_STRICT
    assert context.verify_flags & ssl.VERIFY_X509_PARTIAL_CHAIN  # what urllib3 sets on 3.13 stays


def test_the_adapter_refuses_a_server_outside_the_configured_ca(kube_server, tmp_path):
    (tmp_path / "other").mkdir()
    other_ca = write_pki(tmp_path / "other")["ca"]
    refusal = _refusal(_adapter_rest(tmp_path, _cluster(kube_server, **{"certificate-authority": str(other_ca)})))
    assert "certificate verify failed" in refusal
    assert "Authority Key Identifier" not in refusal


def test_a_ca_file_that_is_no_certificate_is_a_configuration_error(kube_server, tmp_path):
    not_a_certificate = tmp_path / "ca.crt"
    not_a_certificate.write_text("-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n")
    with pytest.raises(ClusterConfigError, match="cannot load the cluster CA certificate"):
        _adapter_rest(tmp_path, _cluster(kube_server, **{"certificate-authority": str(not_a_certificate)}))


def test_the_adapter_checks_the_host_name(kube_server, tmp_path):
    refusal = _refusal(_adapter_rest(tmp_path, _cluster(kube_server, **{"tls-server-name": "elsewhere.example"})))
    assert "elsewhere.example" in refusal  # OpenSSL's "Hostname mismatch" (or urllib3's own check) names it

    assert "default" in _namespaces(_adapter_rest(tmp_path, _cluster(kube_server, **{
        "tls-server-name": "kubernetes.default.svc"})))


def test_the_adapter_presents_the_client_certificate(kube_server, tmp_path):
    cert, key = _admin_client_certificate(kube_server, tmp_path)
    with_certificate = {"name": "cert-admin", "user": {"client-certificate": str(cert), "client-key": str(key)}}
    assert "default" in _namespaces(_adapter_rest(tmp_path, _cluster(kube_server), with_certificate))

    anonymous = _adapter_rest(tmp_path, _cluster(kube_server), {"name": "anonymous", "user": {}})
    with pytest.raises(ApiException) as info:
        anonymous.list(h.NAMESPACE)
    assert info.value.status in (401, 403)


@pytest.mark.filterwarnings("ignore::urllib3.exceptions.InsecureRequestWarning")
def test_insecure_skip_tls_verify_still_skips_verification(kube_server, tmp_path):
    cluster = {"server": kube_server.host, "insecure-skip-tls-verify": True}
    assert "default" in _namespaces(_adapter_rest(tmp_path, cluster))


def test_through_a_proxy_the_adapter_still_verifies_the_api_server(kube_server, tmp_path, monkeypatch):
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    (tmp_path / "other").mkdir()
    other_ca = str(write_pki(tmp_path / "other")["ca"])
    with _ConnectProxy() as proxy:
        assert "default" in _namespaces(_adapter_rest(tmp_path, _cluster(kube_server, **{"proxy-url": proxy.url})))
        refusal = _refusal(_adapter_rest(tmp_path, _cluster(kube_server, **{
            "proxy-url": proxy.url, "certificate-authority": other_ca})))
    assert "certificate verify failed" in refusal
    assert proxy.tunnels and set(proxy.tunnels) == {f"127.0.0.1:{kube_server.port}"}


class _ConnectProxy(socketserver.ThreadingTCPServer):
    """A minimal HTTP CONNECT proxy on loopback: it tunnels bytes and records where to."""

    daemon_threads = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), _TunnelHandler)
        self.tunnels: list[str] = []
        self.url = f"http://127.0.0.1:{self.server_address[1]}"

    def __enter__(self):
        threading.Thread(target=self.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self.shutdown()
        self.server_close()


class _TunnelHandler(socketserver.StreamRequestHandler):
    def handle(self):
        method, target, _version = self.rfile.readline().decode("latin-1").split()
        while self.rfile.readline() not in (b"\r\n", b"\n", b""):
            pass  # the request's headers
        assert method == "CONNECT"
        self.server.tunnels.append(target)
        host, port = target.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=10) as upstream:
            self.wfile.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            self.wfile.flush()
            _pump(self.connection, upstream)


def _pump(client: socket.socket, upstream: socket.socket) -> None:
    """Copy bytes both ways until either side closes."""
    peers = {client: upstream, upstream: client}
    with selectors.DefaultSelector() as selector:
        for sock in peers:
            selector.register(sock, selectors.EVENT_READ)
        while True:
            for key, _ in selector.select(timeout=10):
                data = key.fileobj.recv(65536)
                if not data:
                    return
                peers[key.fileobj].sendall(data)


def _admin_client_certificate(kube_server, tmp_path):
    """A client certificate from the test CA for a system:masters user (the API server trusts the CA
    for client certificates: --client-ca-file)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    ca_cert = x509.load_pem_x509_certificate(kube_server.pki["ca"].read_bytes())
    ca_key = serialization.load_pem_private_key(kube_server.pki["ca_key"].read_bytes(), password=None)
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "karpweb-cert-admin"),
                                 x509.NameAttribute(NameOID.ORGANIZATION_NAME, "system:masters")]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .sign(ca_key, hashes.SHA256())
    )
    cert_path, key_path = tmp_path / "client.crt", tmp_path / "client.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    key_path.chmod(0o600)
    return cert_path, key_path
