"""How karpweb reaches the cluster: kubeconfig, in-cluster service account, the RBAC it needs, and
the messages operators see when access fails."""

import re
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest
import yaml
from kubernetes.client import ApiClient, Configuration
from kubernetes.client.exceptions import ApiException
from kubernetes.config import incluster_config

from scheduling.adapters.kube import config as kube_config
from scheduling.adapters.kube.adapter import KubeClusterAdapter
from scheduling.adapters.kube.decisionlog import mark_failed, record_cluster_error, record_drain
from scheduling.adapters.kube.errors import ClusterError, describe_api_error
from scheduling.adapters.kube.interface import Condition, DrainResult, NodeClaimRequest
from scheduling.adapters.kube import events as E
from scheduling.adapters.kube.rbac import cluster_role
from scheduling.adapters.kube.resources import POD, PVC, VOLUMEATTACHMENT, Resource
from scheduling.adapters.kube.rest import KubeRest
from scheduling.adapters.kube.sync import ClusterSync
from scheduling.models import Decision

from . import helpers as h
from .conftest import free_port

pytestmark = pytest.mark.kube

DOCS = Path(__file__).resolve().parents[2] / "docs" / "kubernetes.md"


def _client_with_token(kube_server, token: str) -> ApiClient:
    configuration = Configuration(host=kube_server.host, api_key={"BearerToken": token},
                                  api_key_prefix={"BearerToken": "Bearer"})
    configuration.ssl_ca_cert = str(kube_server.pki["ca"])
    return kube_config.api_client(configuration)


def _service_account_token(rest: KubeRest, ns: str, name: str) -> str:
    rest.create(h.SERVICE_ACCOUNT, {"apiVersion": "v1", "kind": "ServiceAccount",
                                    "metadata": {"name": name, "namespace": ns}}, namespace=ns)
    request = rest.create(h.SERVICE_ACCOUNT, {
        "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
        "spec": {"audiences": ["https://kubernetes.default.svc.cluster.local"], "expirationSeconds": 3600},
    }, namespace=ns, subresource="token", name=name)
    return request["status"]["token"]


# --- configuration -------------------------------------------------------------------------------
def test_kubeconfig_from_the_setting_or_the_environment(kube_server, settings, monkeypatch):
    settings.KARPWEB_KUBECONFIG = str(kube_server.kubeconfig)
    client = kube_config.load_api_client()
    assert client.configuration.host == kube_server.host
    assert KubeRest(client).request("GET", "/version")["gitVersion"] == "v1.20.2"

    settings.KARPWEB_KUBECONFIG = None
    monkeypatch.setenv("KUBECONFIG", f"/nonexistent/config:{kube_server.kubeconfig}")
    assert KubeRest(kube_config.load_api_client()).request("GET", "/version")["major"] == "1"

    with pytest.raises(kube_config.ClusterConfigError) as info:
        kube_config.load_api_client(kubeconfig="/nonexistent/kubeconfig")
    assert str(info.value).startswith("cannot use kubeconfig /nonexistent/kubeconfig: ")


def test_in_cluster_service_account(kube_server, kube_api_client, unique, tmp_path, settings, monkeypatch):
    rest = KubeRest(kube_api_client)
    ns = h.namespace(rest, f"ns-{unique}")
    token = _service_account_token(rest, ns, "karpweb")
    token_file, ca_file = tmp_path / "token", tmp_path / "ca.crt"
    token_file.write_text(token)
    ca_file.write_bytes(kube_server.pki["ca"].read_bytes())
    # What the kubelet mounts into a pod, at a test path instead of /var/run/secrets/...
    monkeypatch.setattr(incluster_config, "SERVICE_TOKEN_FILENAME", str(token_file))
    monkeypatch.setattr(incluster_config, "SERVICE_CERT_FILENAME", str(ca_file))
    monkeypatch.setattr(kube_config, "SERVICE_ACCOUNT_TOKEN", token_file)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", str(kube_server.port))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    settings.KARPWEB_KUBECONFIG = None

    client = kube_config.load_api_client()
    adapter = KubeClusterAdapter(client)
    with pytest.raises(ClusterError) as info:
        adapter.list("Node")
    assert info.value.message == (
        f"Node: forbidden: karpweb's service account ({ns}/karpweb) may not list nodes; "
        "grant it in karpweb's ClusterRole (docs/kubernetes.md lists the rules)")


def test_no_cluster_configured(settings, monkeypatch, tmp_path):
    settings.KARPWEB_KUBECONFIG = None
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setattr(kube_config, "DEFAULT_KUBECONFIG", tmp_path / "missing")
    with pytest.raises(kube_config.ClusterConfigError) as info:
        kube_config.load_api_client()
    assert str(info.value).startswith("no Kubernetes cluster configured: set KUBECONFIG")


# --- RBAC ---------------------------------------------------------------------------------------
def test_docs_show_the_cluster_role_the_code_defines():
    blocks = re.findall(r"```yaml\n(.*?)```", DOCS.read_text(), re.S)
    documents = [doc for block in blocks for doc in yaml.safe_load_all(block) if doc]
    (role,) = [doc for doc in documents if doc.get("kind") == "ClusterRole"]
    assert role == cluster_role()
    kinds = {doc["kind"] for doc in documents}
    assert {"ServiceAccount", "ClusterRoleBinding"} <= kinds


@pytest.mark.django_db
def test_the_documented_cluster_role_is_enough_for_everything(kube_server, kube_api_client, unique):
    rest = KubeRest(kube_api_client)
    ns = h.namespace(rest, f"ns-{unique}")
    token = _service_account_token(rest, ns, "karpweb")
    role = cluster_role(f"karpweb-{unique}")
    rest.create(h.CLUSTER_ROLE, role)
    adapter = KubeClusterAdapter(_client_with_token(kube_server, token), eviction_timeout=2, pod_wait=3)

    request = NodeClaimRequest(nodepool=f"pool-{unique}", node_class_ref=h.NODE_CLASS_REF, name=f"claim-{unique}",
                               requirements=[{"key": "karpenter.sh/capacity-type", "operator": "In",
                                              "values": ["reserved"]}])
    h.nodepool(rest, f"pool-{unique}")
    with pytest.raises(ClusterError) as info:
        adapter.create_nodeclaim(request)
    assert info.value.message.startswith(
        f"NodePool pool-{unique}: forbidden: karpweb's service account ({ns}/karpweb) may not get nodepools.karpenter.sh")

    rest.create(h.CLUSTER_ROLE_BINDING, {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": f"karpweb-{unique}"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": f"karpweb-{unique}"},
        "subjects": [{"kind": "ServiceAccount", "name": "karpweb", "namespace": ns}],
    })
    _wait_until_allowed(adapter)

    sync = ClusterSync(adapter)
    assert sync.sync_once().errors == []
    assert adapter.karpenter_signals().error == ""  # its Lease and Deployment are readable
    adapter.kube_dns_ip()  # kube-system/kube-dns is readable (a forbidden read raises)
    events = adapter.watch("NodePool", sync.resource_versions["NodePool"], timeout_seconds=1)
    assert [e for e in events if e.type != "BOOKMARK"] == []
    adapter.create_nodeclaim(request)
    rest.patch(h.NODECLAIM, f"claim-{unique}", {"status": {"nodeName": f"node-{unique}"}}, subresource="status")
    h.node(rest, f"node-{unique}", labels=h.RESERVED_LABELS)
    h.pod(rest, ns, "web", node_name=f"node-{unique}")
    h.ec2nodeclass(rest, f"nc-{unique}", terms=[{"id": "cr-0000000000000000a"}])
    assert adapter.demote(nodeclaim=f"claim-{unique}").changed
    adapter.set_conditions("EC2NodeClass", f"nc-{unique}", [Condition("CapacityReservationsReady", "True")])
    adapter.set_conditions("NodePool", f"pool-{unique}", [Condition("Ready", "True")])
    adapter.set_conditions("NodeClaim", f"claim-{unique}", [Condition("Drifted", "True", "CapacityReservationDrift")])
    assert adapter.create_events(E.disruption_blocked(E.node_ref(f"node-{unique}"), E.nodeclaim_ref(f"claim-{unique}"),
                                                      "pod has an annotation")) == 2  # Events (#48)
    _, version = adapter.get_selector_terms(f"nc-{unique}")
    adapter.update_selector_terms(f"nc-{unique}", [{"tags": {"team": "ml"}}], version)
    # Termination: the finalizer, the termination time, a pod deleted at it, a tolerating pod's
    # volume (its claim read) not waited for, the Node and its NodeClaim deleted.
    adapter.register_node(f"node-{unique}", adapter.get_nodeclaim(f"claim-{unique}"), [])
    adapter.annotate_nodeclaim(f"claim-{unique}", "karpenter.sh/nodeclaim-termination-timestamp", "2026-01-01T00:00:00Z")
    rest.create(PVC, {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data", "namespace": ns},
                      "spec": {"accessModes": ["ReadWriteOnce"], "volumeName": f"pv-{unique}",
                               "resources": {"requests": {"storage": "1Gi"}}}}, namespace=ns)
    rest.create(POD, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "agent", "namespace": ns},
                      "spec": {"nodeName": f"node-{unique}", "containers": [{"name": "c", "image": "registry.example/a:1"}],
                               "tolerations": [{"key": "karpenter.sh/disrupted", "operator": "Exists"}],
                               "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]}}, namespace=ns)
    rest.create(VOLUMEATTACHMENT, {"apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttachment",
                                   "metadata": {"name": f"va-{unique}"},
                                   "spec": {"attacher": "ebs.csi.aws.com", "nodeName": f"node-{unique}",
                                            "source": {"persistentVolumeName": f"pv-{unique}"}}})
    result = adapter.drain(f"node-{unique}", termination_time=datetime(2026, 1, 1, tzinfo=timezone.utc))
    assert result.errors == [] and result.deleted_pods == [f"{ns}/web"], result.summary()
    assert adapter.pending_volume_attachments(f"node-{unique}") == []
    assert adapter.delete_node(f"node-{unique}") and adapter.remove_node_finalizer(f"node-{unique}")
    assert adapter.delete_nodeclaim(f"claim-{unique}")


def _wait_until_allowed(adapter, timeout=10.0):
    """RBAC changes reach the authorizer's cache within moments."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            adapter.list("NodePool")
            return
        except ClusterError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


# --- messages -----------------------------------------------------------------------------------
def test_unreachable_server_and_missing_crd_messages(kube_api_client):
    port = free_port()
    configuration = Configuration(host=f"https://127.0.0.1:{port}")
    configuration.retries = 0
    adapter = KubeClusterAdapter(ApiClient(configuration))
    with pytest.raises(ClusterError) as info:
        adapter.list("NodeClaim")
    assert info.value.unreachable
    assert info.value.message.startswith(
        f"NodeClaim: cannot reach the Kubernetes API server at https://127.0.0.1:{port} to list nodeclaims.karpenter.sh: "
        "connection refused")

    widgets = Resource("Widget", "example.karpweb.io", "v1", "widgets")
    rest = KubeRest(kube_api_client)
    with pytest.raises(ApiException) as raw:
        rest.list(widgets)
    error = describe_api_error(raw.value, verb="list", resource=widgets)
    assert error.message == ("Widget: the example.karpweb.io/v1 Widget API is not served by this cluster; install the "
                             "CustomResourceDefinitions (Karpenter's, or karpweb's deploy/crds/)")


@pytest.mark.django_db
def test_errors_are_recorded_in_the_decision_log(kube_server, rest, unique):
    from scheduling.adapters.kube.config import client_from_kubeconfig

    limited = KubeClusterAdapter(client_from_kubeconfig(str(kube_server.limited_kubeconfig)))
    h.nodepool(rest, f"pool-{unique}")
    with pytest.raises(ClusterError) as info:
        limited.demote(node=f"node-{unique}")
    decision = record_cluster_error(info.value, kind=Decision.Kind.DEMOTE, details={"reservation": "cr-1"})
    assert decision.outcome == Decision.Outcome.FAILED and decision.kind == "demote"
    assert decision.subject == f"Node node-{unique}"
    assert decision.error == decision.reason == (
        f'Node node-{unique}: forbidden: karpweb\'s user "karpweb-limited" may not get nodes; '
        "grant it in karpweb's ClusterRole (docs/kubernetes.md lists the rules)")
    assert decision.details == {"reservation": "cr-1", "kubernetes": {
        "status": 403, "reason": "Forbidden", "verb": "get", "object": f"Node node-{unique}"}}

    planned = Decision.objects.create(kind=Decision.Kind.LAUNCH, mode="control", subject=f"pool {unique}",
                                      reason="3 pods pending")
    with pytest.raises(ClusterError) as info:
        limited.create_nodeclaim(NodeClaimRequest(nodepool=f"pool-{unique}", node_class_ref=h.NODE_CLASS_REF,
                                                  requirements=[]))
    mark_failed(planned, info.value)
    planned.refresh_from_db()
    assert planned.outcome == Decision.Outcome.FAILED
    assert planned.error.startswith(f"NodePool pool-{unique}: forbidden: karpweb's user \"karpweb-limited\" may not get")

    drain = record_drain(DrainResult(node="n1", evicted=["a/b"], blocked={"a/c": "annotated karpenter.sh/do-not-disrupt=true"},
                                     remaining=["a/c"]), reason="capacity block cr-1 ends in 40 minutes")
    assert drain.outcome == Decision.Outcome.SKIPPED and drain.kind == Decision.Kind.DRAIN
    assert drain.objects_involved == {"nodes": ["n1"], "pods": ["a/b", "a/c"]}
    assert drain.details["summary"] == ("node n1: not drained; evicted 1 pod(s); "
                                        "a/c blocked: annotated karpenter.sh/do-not-disrupt=true")
    limited.close()
