"""Beside a running Karpenter, on the real API server: its leader-election Lease (or its Deployment)
makes karpweb refuse control on the pages, the API and in the loop; Karpenter going away is reported
and never switches karpweb to control by itself; an operator does, audited."""

import datetime

import pytest
from django.core.management import call_command
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from scheduling.adapters.kube.resources import DEPLOYMENT, LEASE, NODECLAIM, NODEPOOL
from scheduling.adapters.kube.sync import ClusterSync
from scheduling.loop import backends, provisioning, steps
from scheduling.loop.coexistence import check_karpenter
from scheduling.models import AuditEntry, ControllerGuard, Decision, NodePool
from scheduling.modes import control_refusal, effective_mode, global_mode
from tests.support.clusters import use_kube_server

from . import helpers as h

pytestmark = [pytest.mark.kube, pytest.mark.django_db]


@pytest.fixture
def beside_karpenter(settings, unique, adapter, monkeypatch, kube_server):
    """karpweb in control mode on the test cluster, looking for a Lease name of this test's own (the
    server is shared by every test; the default name is the same code with another string)."""
    use_kube_server(kube_server)
    settings.KARPWEB_MODE = "control"
    settings.KARPWEB_KARPENTER = "auto"
    settings.KARPWEB_KARPENTER_LEASE_NAME = f"karpenter-leader-election-{unique}"
    monkeypatch.setattr(backends, "cluster", lambda: adapter)
    return settings.KARPWEB_KARPENTER_LEASE_NAME


def put_lease(rest, ns, name, renewed_at, holder="karpenter-5f7d8-x2x9q_0d6c", duration=15):
    body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": name, "namespace": ns},
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": duration,
                     "renewTime": renewed_at.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")}}
    try:
        current = rest.get(LEASE, name, ns)
    except Exception:
        return rest.create(LEASE, body, namespace=ns)
    body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
    return rest.replace(LEASE, name, body, namespace=ns)


def operator_api(operator):
    client = APIClient()
    client.force_authenticate(operator)
    return client


def test_a_live_lease_refuses_control_everywhere(beside_karpenter, rest, unique, adapter, operator, client, settings, kube_server):
    ns = h.namespace(rest, f"karpenter-{unique}")
    put_lease(rest, ns, beside_karpenter, timezone.now())
    # seed_demo writes the pools and pods as the simulated world (it makes the first cluster simulated),
    # then karpweb is on the cluster again.
    call_command("seed_demo", "--one-cluster")  # one cluster: the install beside Karpenter
    use_kube_server(kube_server)
    assert control_refusal().startswith("karpweb has not yet checked")  # before the first look: refused too
    now = timezone.now()
    assert check_karpenter(adapter, now) == {"karpenter_live": 1}
    refusal = control_refusal()
    assert refusal.startswith(f"Karpenter is the active controller: Lease {ns}/{beside_karpenter} held by "
                              "karpenter-5f7d8-x2x9q_0d6c, renewed ")
    assert global_mode() == "observe"
    pool = NodePool.objects.get(name="gpu-reserved")
    pool.mode = "control"
    pool.save()
    assert effective_mode(pool) == "observe"
    decision = Decision.objects.get(subject="Karpenter")
    assert decision.reason.startswith("Karpenter is the active controller") and decision.kind == "status"

    # The API: switching a pool to control is a conflict that says why; the status says who controls.
    api = operator_api(operator)
    response = api.patch(reverse("scheduling-api:nodepool-detail", args=["web"]), {"mode": "control"}, format="json")
    assert response.status_code == 409 and response.json()["detail"] == f"mode: control is refused: {refusal}"
    assert NodePool.objects.get(name="web").mode != "control"
    status = api.get(reverse("scheduling-api:controller")).json()
    assert status["karpenter"]["live"] is True and status["controlRefused"] == refusal
    assert status["globalMode"] == "observe" and status["configuredMode"] == "control"
    assert api.post(reverse("scheduling-api:allow-control")).status_code == 409

    # The pages: the overview and the NodePool say so; the mode form refuses control.
    client.force_login(operator)
    overview = client.get(reverse("scheduling:overview")).content.decode()
    assert 'id="controller-banner"' in overview and "Control mode is refused" in overview
    assert "let karpweb control" not in overview  # nothing to allow while Karpenter runs
    page = client.get(pool.get_absolute_url()).content.decode()
    assert "Control mode is refused" in page and refusal.split(":")[0] in page
    answer = client.post(reverse("scheduling:nodepool_mode", args=["web"]), {"mode": "control"}, follow=True)
    assert "mode: control is refused: Karpenter is the active controller" in answer.content.decode()

    # The loop: pending pods are planned, recorded as recommendations, and nothing reaches the cluster.
    counts = steps.provision()
    assert counts["claims_planned"] > 0 and counts["launched"] == 0
    assert set(Decision.objects.filter(kind="launch").values_list("outcome", "mode")) == {("recommended", "observe")}
    ours = rest.list(NODECLAIM, label_selector=provisioning.PROVISIONER_LABEL)["items"]
    assert [c for c in ours if c["metadata"]["labels"].get("karpenter.sh/nodepool") in {"web", "gpu-reserved"}] == []


def test_karpenter_going_away_is_reported_and_needs_an_operator(beside_karpenter, rest, unique, adapter, operator):
    ns = h.namespace(rest, f"karpenter-{unique}")
    start = timezone.now()
    put_lease(rest, ns, beside_karpenter, start)
    check_karpenter(adapter, start)
    # Karpenter stops renewing: 10 minutes on, the lease is stale.
    later = start + datetime.timedelta(minutes=10)
    assert check_karpenter(adapter, later) == {"karpenter_live": 0}
    guard = ControllerGuard.objects.get()
    assert not guard.karpenter_live and guard.reason.startswith(f"Karpenter is not running: Lease {ns}/{beside_karpenter}")
    assert "(expired after 15 s)" in guard.reason
    # ... but karpweb stays in observe: a stale lease is not an operator's decision.
    assert control_refusal().startswith("Karpenter ran in this cluster until ")
    assert global_mode() == "observe"
    gone = Decision.objects.filter(subject="Karpenter").order_by("created_at").last()
    assert gone.reason.startswith("Karpenter is not running") and "karpweb stays in observe until an operator" in gone.reason
    assert check_karpenter(adapter, later + datetime.timedelta(seconds=30)) == {"karpenter_live": 0}
    assert Decision.objects.filter(subject="Karpenter").count() == 2  # one entry per change, not per sync

    api = operator_api(operator)
    status = api.get(reverse("scheduling-api:controller")).json()
    assert status["mayAllowControl"] is True and status["controlAllowedAt"] is None
    allowed = api.post(reverse("scheduling-api:allow-control"))
    assert allowed.status_code == 200 and allowed.json()["controlRefused"] is None and allowed.json()["globalMode"] == "control"
    assert allowed.json()["controlAllowedBy"] == operator.username
    entry = AuditEntry.objects.get(object_repr="Karpenter coexistence")
    assert entry.actor == operator.username and entry.source == "api" and "control_allowed_at" in entry.changes
    assert api.post(reverse("scheduling-api:allow-control")).status_code == 409  # nothing left to allow

    # It comes back (a flap): refused at once, and its going away again needs a new permission.
    back = timezone.now() + datetime.timedelta(minutes=11)
    put_lease(rest, ns, beside_karpenter, back)
    check_karpenter(adapter, back)
    assert global_mode() == "observe"
    check_karpenter(adapter, back + datetime.timedelta(minutes=5))
    assert control_refusal().startswith("Karpenter ran in this cluster until ") and global_mode() == "observe"


def test_a_running_deployment_counts_when_leader_election_is_off(beside_karpenter, rest, unique, adapter):
    ns = h.namespace(rest, f"karpenter-{unique}")
    labels = {"app.kubernetes.io/name": "karpenter", "app.kubernetes.io/instance": f"karpenter-{unique}"}
    rest.create(DEPLOYMENT, {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "karpenter", "namespace": ns, "labels": labels},
        "spec": {"replicas": 1, "selector": {"matchLabels": labels}, "template": {
            "metadata": {"labels": labels},
            "spec": {"containers": [{"name": "controller", "image": "public.ecr.aws/karpenter/controller:1.8.0"}]}}},
    }, namespace=ns)
    try:
        rest.patch(DEPLOYMENT, "karpenter", {"status": {"replicas": 1, "readyReplicas": 1}}, namespace=ns,
                   subresource="status")
        check_karpenter(adapter, timezone.now())
        assert f"Deployment {ns}/karpenter has 1 ready replica(s)" in control_refusal()
    finally:
        rest.delete(DEPLOYMENT, "karpenter", namespace=ns)  # other tests share the server
    check_karpenter(adapter, timezone.now())
    assert not ControllerGuard.objects.get().karpenter_live


def test_every_sync_checks_first(beside_karpenter, rest, unique):
    ns = h.namespace(rest, f"karpenter-{unique}")
    put_lease(rest, ns, beside_karpenter, timezone.now())
    counts = steps.sync_kubernetes()
    assert counts["karpenter_live"] == 1 and ControllerGuard.objects.get().karpenter_live


def test_declared_absent_or_present(beside_karpenter, rest, unique, adapter, settings):
    ns = h.namespace(rest, f"karpenter-{unique}")
    put_lease(rest, ns, beside_karpenter, timezone.now())
    settings.KARPWEB_KARPENTER = "absent"
    check_karpenter(adapter, timezone.now())
    assert control_refusal() == "" and global_mode() == "control"
    settings.KARPWEB_KARPENTER = "present"
    assert control_refusal().startswith("KARPWEB_KARPENTER=present") and global_mode() == "observe"


def test_observing_writes_no_condition_to_the_cluster(beside_karpenter, rest, unique, adapter, settings):
    """Beside Karpenter (or in observe mode) karpweb computes NodePool and NodeClaim conditions for its
    pages but writes none to the cluster: Karpenter's controllers own them there."""
    h.nodepool(rest, f"watched-{unique}")
    h.nodeclaim(rest, f"watched-{unique}-a", f"watched-{unique}")
    settings.KARPWEB_KARPENTER = "present"
    ClusterSync(adapter).sync_once()

    steps.status()

    assert NodePool.objects.get(name=f"watched-{unique}").conditions  # computed for the pages
    assert "conditions" not in rest.get(NODEPOOL, f"watched-{unique}").get("status", {})
    assert all(c["type"] != "ReservedCapacityAvailable"
               for c in rest.get(NODECLAIM, f"watched-{unique}-a").get("status", {}).get("conditions", []))

    settings.KARPWEB_KARPENTER = "absent"  # karpweb alone, in control: it writes them as Karpenter would
    NodePool.objects.filter(name=f"watched-{unique}").update(conditions=[])
    steps.status()
    written = {c["type"] for c in rest.get(NODEPOOL, f"watched-{unique}")["status"]["conditions"]}
    assert {"Ready", "NodeClassReady"} <= written
