"""A real Kubernetes API server for the tests: etcd + kube-apiserver v1.20.2 on loopback.

The binary is built (or reused from its cache) by scripts/kube-apiserver.sh; etcd comes from
Debian's etcd-server package. The session-scoped ``kube_server`` fixture starts both on free
loopback ports with a CA made here, a serving certificate for IP 127.0.0.1, a static token file,
a service-account key pair and RBAC, installs the project's CRDs, and stops everything at the end.
No scheduler, kubelet or controller-manager runs: tests bind pods and set statuses themselves.

If the binary is missing the fixture FAILS (it never skips): run scripts/kube-apiserver.sh.
"""

from __future__ import annotations

import datetime
import http.client
import ipaddress
import json
import os
import shutil
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from tests.support.ports import free_port

REPO = Path(__file__).resolve().parents[2]
APISERVER_VERSION = "v1.20.2"
ADMIN_TOKEN = "karpweb-test-admin-" + uuid.uuid4().hex
LIMITED_TOKEN = "karpweb-test-limited-" + uuid.uuid4().hex
LIMITED_USER = "karpweb-limited"
READY_TIMEOUT = 60.0

_timings: dict[str, list[float]] = {"start": [], "restart": []}


def apiserver_binary() -> Path:
    """Where scripts/kube-apiserver.sh leaves the binary (it names the path; nothing is built here)."""
    explicit = os.environ.get("KARPWEB_KUBE_APISERVER")
    if explicit:
        return Path(explicit)
    script = REPO / "scripts" / "kube-apiserver.sh"
    return Path(subprocess.run([str(script), "--print-path"], check=True, capture_output=True, text=True).stdout.strip())


def write_pki(directory: Path) -> dict[str, Path]:
    """A CA (and its key, for client certificates), a serving certificate for 127.0.0.1 signed by it,
    and a service-account key pair. The CA has only Basic Constraints and Key Usage, no Authority
    Key Identifier: the shape of the CA EKS generates for a cluster."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    def pem_key(key) -> bytes:
        return key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()
        )

    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "karpweb-test-ca")])
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, content_commitment=False, key_encipherment=False, data_encipherment=False,
                key_agreement=False, key_cert_sign=True, crl_sign=True, encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
        .sign(ca_key, hashes.SHA256())
    )
    serving_key = ec.generate_private_key(ec.SECP256R1())
    serving_cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]))
        .issuer_name(ca_name)
        .public_key(serving_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(
            x509.SubjectAlternativeName([
                x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                x509.DNSName("localhost"),
                x509.DNSName("kubernetes.default.svc"),
            ]),
            critical=False,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    sa_key = ec.generate_private_key(ec.SECP256R1())
    paths = {
        "ca": directory / "ca.crt",
        "ca_key": directory / "ca.key",
        "serving_cert": directory / "apiserver.crt",
        "serving_key": directory / "apiserver.key",
        "sa_key": directory / "sa.key",
        "sa_pub": directory / "sa.pub",
    }
    paths["ca"].write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    paths["ca_key"].write_bytes(pem_key(ca_key))
    paths["serving_cert"].write_bytes(serving_cert.public_bytes(serialization.Encoding.PEM))
    paths["serving_key"].write_bytes(pem_key(serving_key))
    paths["sa_key"].write_bytes(pem_key(sa_key))
    paths["sa_pub"].write_bytes(
        sa_key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    for key in ("ca_key", "serving_key", "sa_key"):
        paths[key].chmod(0o600)
    return paths


def _tail(path: Path, lines: int = 25) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


class KubeTestServer:
    """etcd + kube-apiserver on loopback, owned by the test session."""

    def __init__(self, workdir: Path, apiserver: Path, etcd: Path):
        self.workdir = workdir
        self.apiserver_bin = apiserver
        self.etcd_bin = etcd
        self.pki = write_pki(workdir)
        self.token_file = workdir / "tokens.csv"
        self.token_file.write_text(
            f'{ADMIN_TOKEN},karpweb-admin,karpweb-admin,"system:masters"\n'
            f"{LIMITED_TOKEN},{LIMITED_USER},{LIMITED_USER}\n"
        )
        self.token_file.chmod(0o600)
        self.etcd_proc: subprocess.Popen | None = None
        self.apiserver_proc: subprocess.Popen | None = None
        self.etcd_port = 0
        self.port = 0
        self.kubeconfig = workdir / "kubeconfig"
        self.limited_kubeconfig = workdir / "kubeconfig-limited"
        self._client = None  # KubeRest as cluster admin, for empty()

    @property
    def host(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    # --- processes ------------------------------------------------------------------------
    def _spawn(self, argv: list[str], log_name: str) -> subprocess.Popen:
        log = open(self.workdir / log_name, "ab")  # noqa: SIM115 - closed in _reap
        proc = subprocess.Popen(
            argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
        )
        proc._karpweb_log = log  # type: ignore[attr-defined]
        return proc

    @staticmethod
    def _reap(proc: subprocess.Popen | None, timeout: float = 15.0) -> None:
        """SIGTERM, then SIGKILL after ``timeout`` seconds; only ever our own child process."""
        if proc is None:
            return
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=15)
        log = getattr(proc, "_karpweb_log", None)
        if log:
            log.close()

    def _start_etcd(self) -> None:
        data_dir = self.workdir / "etcd-data"
        for _attempt in range(3):
            self.etcd_port, peer = free_port(), free_port()
            client_url, peer_url = f"http://127.0.0.1:{self.etcd_port}", f"http://127.0.0.1:{peer}"
            shutil.rmtree(data_dir, ignore_errors=True)
            self.etcd_proc = self._spawn(
                [
                    str(self.etcd_bin), "--name", "karpweb-test", "--data-dir", str(data_dir),
                    "--listen-client-urls", client_url, "--advertise-client-urls", client_url,
                    "--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url,
                    "--initial-cluster", f"karpweb-test={peer_url}", "--unsafe-no-fsync",
                    "--logger", "zap", "--log-level", "warn",
                ],
                "etcd.log",
            )
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and self.etcd_proc.poll() is None:
                try:
                    conn = http.client.HTTPConnection("127.0.0.1", self.etcd_port, timeout=1)
                    conn.request("GET", "/health")
                    if json.loads(conn.getresponse().read()).get("health") == "true":
                        return
                except (OSError, ValueError, http.client.HTTPException):
                    pass
                time.sleep(0.05)
            self._reap(self.etcd_proc)
        pytest.fail(f"etcd did not become healthy; log {self.workdir / 'etcd.log'}:\n{_tail(self.workdir / 'etcd.log')}")

    def _apiserver_argv(self) -> list[str]:
        return [
            str(self.apiserver_bin),
            f"--etcd-servers=http://127.0.0.1:{self.etcd_port}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={self.port}",
            "--insecure-port=0",
            f"--tls-cert-file={self.pki['serving_cert']}",
            f"--tls-private-key-file={self.pki['serving_key']}",
            f"--client-ca-file={self.pki['ca']}",
            f"--token-auth-file={self.token_file}",
            f"--service-account-key-file={self.pki['sa_pub']}",
            f"--service-account-signing-key-file={self.pki['sa_key']}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            "--authorization-mode=RBAC",
            "--disable-admission-plugins=ServiceAccount",
            "--service-cluster-ip-range=10.96.0.0/24",
            "--allow-privileged=true",
            "--profiling=false",
            f"--cert-dir={self.workdir / 'certs'}",
            "--v=1",
        ]

    def _ready(self) -> bool:
        # The adapter's TLS policy: the test CA has the shape of EKS's (no Authority Key
        # Identifier), which Python 3.13's default context refuses.
        from scheduling.adapters.kube.config import cluster_tls_context

        context = cluster_tls_context(ca_file=str(self.pki["ca"]))
        try:
            conn = http.client.HTTPSConnection("127.0.0.1", self.port, context=context, timeout=2)
            conn.request("GET", "/readyz", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
            response = conn.getresponse()
            body = response.read()
            return response.status == 200 and body.strip() == b"ok"
        except (OSError, http.client.HTTPException):
            return False

    def _start_apiserver(self, keep_port: bool) -> float:
        attempts = 1 if keep_port else 3
        for _attempt in range(attempts):
            if not keep_port or not self.port:
                self.port = free_port()
            started = time.monotonic()
            self.apiserver_proc = self._spawn(self._apiserver_argv(), "kube-apiserver.log")
            deadline = started + READY_TIMEOUT
            while time.monotonic() < deadline and self.apiserver_proc.poll() is None:
                if self._ready():
                    return time.monotonic() - started
                time.sleep(0.1)
            self._reap(self.apiserver_proc)
        pytest.fail(
            f"kube-apiserver did not become ready on port {self.port}; log "
            f"{self.workdir / 'kube-apiserver.log'}:\n{_tail(self.workdir / 'kube-apiserver.log')}"
        )

    def start(self) -> float:
        self._start_etcd()
        elapsed = self._start_apiserver(keep_port=False)
        self._write_kubeconfig(self.kubeconfig, "karpweb-admin", ADMIN_TOKEN)
        self._write_kubeconfig(self.limited_kubeconfig, LIMITED_USER, LIMITED_TOKEN)
        _timings["start"].append(elapsed)
        return elapsed

    def stop_apiserver(self) -> None:
        # kube-apiserver drains open watches for up to a minute on SIGTERM; a test restart need
        # not wait for that (clients see the connections drop either way).
        self._reap(self.apiserver_proc, timeout=2.0)
        self.apiserver_proc = None

    def start_apiserver(self) -> float:
        """Start the API server again on the same port (etcd keeps the data)."""
        elapsed = self._start_apiserver(keep_port=True)
        _timings["restart"].append(elapsed)
        return elapsed

    def restart_apiserver(self) -> float:
        self.stop_apiserver()
        return self.start_apiserver()

    def stop(self) -> None:
        if self._client is not None:
            self._client.api_client.close()
            self._client = None
        self._reap(self.apiserver_proc, timeout=2.0)
        self._reap(self.etcd_proc)
        self.apiserver_proc = self.etcd_proc = None

    # --- between tests ----------------------------------------------------------------------
    def empty(self) -> None:
        """Delete every object karpweb syncs that earlier tests left (pods in every namespace, Nodes,
        NodeClaims, NodePools, EC2NodeClasses), so each test's cluster holds only what it makes: a
        pending pod another test left would otherwise be nominated to this test's node and keep it
        from being disrupted. No controller runs here, so finalizers are removed first."""
        from scheduling.adapters.kube.resources import PDB, PDB_V1BETA1, SYNCED

        rest = self._rest()
        policy = [v.get("groupVersion") for v in rest.request("GET", "/apis/policy").get("versions") or []]
        for resource in reversed(SYNCED):  # pods first, EC2NodeClasses last
            if resource.kind == "Service":
                continue  # the API server's own (default/kubernetes) and the tests' kube-dns stay
            if resource is PDB and "policy/v1" not in policy:
                resource = PDB_V1BETA1  # this server (v1.20) serves only policy/v1beta1
            items = rest.list(resource)["items"]
            for item in items:
                metadata = item["metadata"]
                if metadata.get("finalizers"):
                    rest.patch(resource, metadata["name"], {"metadata": {"finalizers": None}},
                               namespace=metadata.get("namespace"))
            if not resource.namespaced:
                if items:
                    rest.request("DELETE", resource.path())
                continue
            for namespace in sorted({item["metadata"]["namespace"] for item in items}):
                rest.request("DELETE", resource.path(namespace=namespace), body={"gracePeriodSeconds": 0})

    def _rest(self):
        if self._client is None:
            from scheduling.adapters.kube.config import client_from_kubeconfig
            from scheduling.adapters.kube.rest import KubeRest

            self._client = KubeRest(client_from_kubeconfig(str(self.kubeconfig)))
        return self._client

    # --- clients --------------------------------------------------------------------------
    def inline_kubeconfig(self) -> bytes:
        """The admin kubeconfig with its CA inline, as a kubeconfig kept in a Secret must carry it
        (karpweb refuses one that names a file)."""
        import base64

        path = self.workdir / "kubeconfig-inline"
        write_kubeconfig(path, {"server": self.host, "certificate-authority-data":
                                base64.b64encode(Path(self.pki["ca"]).read_bytes()).decode()},
                         {"name": "karpweb-admin", "user": {"token": ADMIN_TOKEN}})
        return path.read_bytes()

    def _write_kubeconfig(self, path: Path, user: str, token: str) -> None:
        write_kubeconfig(path, {"server": self.host, "certificate-authority": str(self.pki["ca"])},
                         {"name": user, "user": {"token": token}})


def write_kubeconfig(path: Path, cluster: dict, user: dict) -> Path:
    """A one-context kubeconfig: ``cluster`` is its cluster entry's fields, ``user`` its named user."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "karpweb-test", "cluster": cluster}],
        "users": [user],
        "contexts": [{"name": "karpweb-test", "context": {"cluster": "karpweb-test", "user": user["name"]}}],
        "current-context": "karpweb-test",
    }
    path.write_text(json.dumps(config, indent=2))
    path.chmod(0o600)
    return path


_servers: list[KubeTestServer] = []


@pytest.fixture(scope="session")
def kube_server(request, tmp_path_factory) -> KubeTestServer:
    """One server for the session, also when another suite's conftest imports these fixtures
    (tests/faults does): the first use starts it, the end of the session stops it."""
    if not _servers:
        _servers.append(_start_kube_server(tmp_path_factory))

        def stop() -> None:
            _servers.pop().stop()

        request.config.add_cleanup(stop)
    return _servers[0]


_second: list[KubeTestServer] = []


@pytest.fixture(scope="session")
def second_kube_server(request, tmp_path_factory) -> KubeTestServer:
    """Another API server (its own etcd and CA, free ports): a second cluster for the fleet tests.
    Started on first use only, stopped at the end of the session."""
    if not _second:
        _second.append(_start_kube_server(tmp_path_factory))

        def stop() -> None:
            _second.pop().stop()

        request.config.add_cleanup(stop)
    return _second[0]


def _start_kube_server(tmp_path_factory) -> KubeTestServer:
    binary = apiserver_binary()
    if not (binary.is_file() and os.access(binary, os.X_OK)):
        pytest.fail(
            f"kube-apiserver {APISERVER_VERSION} is not built ({binary} missing). "
            "Run scripts/kube-apiserver.sh (builds it once from Debian's kubernetes source package "
            "and caches it outside the repo, ~3 min), then rerun the tests.",
            pytrace=False,
        )
    etcd = shutil.which("etcd") or "/usr/bin/etcd"
    if not os.access(etcd, os.X_OK):
        pytest.fail("etcd is not installed. Run scripts/kube-apiserver.sh (installs Debian's etcd-server).",
                    pytrace=False)
    server = KubeTestServer(tmp_path_factory.mktemp("kube-apiserver"), binary, Path(etcd))
    try:
        server.start()
        from scheduling.adapters.kube.config import client_from_kubeconfig
        from scheduling.adapters.kube.crds import install_crds

        client = client_from_kubeconfig(str(server.kubeconfig))
        try:
            install_crds(client)
        finally:
            client.close()
    except BaseException:
        server.stop()
        raise
    return server


@pytest.fixture(scope="session")
def kube_api_client(kube_server):
    """An ApiClient for the test server, authenticated as a cluster admin (system:masters)."""
    from scheduling.adapters.kube.config import client_from_kubeconfig

    client = client_from_kubeconfig(str(kube_server.kubeconfig))
    yield client
    client.close()


@pytest.fixture
def rest(kube_api_client):
    """Plain REST calls to the test server, for setting up and reading back objects."""
    from scheduling.adapters.kube.rest import KubeRest

    return KubeRest(kube_api_client)


@pytest.fixture
def adapter(kube_api_client):
    """The adapter under test, with its defaults (test_adapter.py shortens its eviction waits)."""
    from scheduling.adapters.kube.adapter import KubeClusterAdapter

    return KubeClusterAdapter(kube_api_client)


@pytest.fixture
def kube_restart(kube_server):
    """Call it to stop and start kube-apiserver (same port, same etcd) in the middle of a test."""
    return kube_server.restart_apiserver


@pytest.fixture
def unique():
    """A short unique suffix for object names, so tests never collide on the shared server."""
    return uuid.uuid4().hex[:8]


def pytest_terminal_summary(terminalreporter):
    if _timings["start"] or _timings["restart"]:
        starts = ", ".join(f"{t:.2f} s" for t in _timings["start"])
        restarts = ", ".join(f"{t:.2f} s" for t in _timings["restart"]) or "none"
        terminalreporter.write_line(
            f"kube-apiserver {APISERVER_VERSION}: ready after start in {starts}; after restarts in {restarts}"
        )
