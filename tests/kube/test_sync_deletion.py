"""Issue #49: pods' and nodes' metadata.deletionTimestamp (and a pod's status.startTime, its
containers' host ports) go from the real kube-apiserver through the sync into the loop's world, so
the loop decides with them as `simulate` does: a terminating pod, a deleting node's pods planned at once."""

import pytest

from scheduling.adapters.kube.resources import NODE, POD
from scheduling.adapters.kube.sync import ClusterSync
from scheduling.engine import parse_world
from scheduling.models import Node, Pod
from scheduling.world import current_world

from . import helpers as h

pytestmark = [pytest.mark.kube, pytest.mark.django_db]

HOLD = "example.com/hold"  # a finalizer keeps a deleted object, deletionTimestamp set, as a draining kubelet would


def _hold(rest, resource, name, namespace=None):
    rest.patch(resource, name, {"metadata": {"finalizers": [HOLD]}}, namespace=namespace)


def _release(rest, resource, name, namespace=None):
    rest.patch(resource, name, {"metadata": {"finalizers": None}}, namespace=namespace)


def test_deletion_and_start_times_reach_the_loops_world(adapter, rest, unique):
    ns = h.namespace(rest, f"ns-{unique}")
    node_name = f"node-{unique}"
    h.node(rest, node_name, labels={"karpenter.sh/nodepool": "default"})
    h.pod(rest, ns, "going", node_name=node_name, annotations={"karpenter.sh/do-not-disrupt": "5m"})
    rest.create(POD, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": ns}, "spec": {
        "nodeName": node_name, "terminationGracePeriodSeconds": 0,
        "containers": [{"name": "app", "image": "registry.example/app:1",
                        "ports": [{"containerPort": 8080, "hostPort": 8080, "protocol": "UDP"}],
                        "resources": {"requests": {"cpu": "100m"}}}]}}, namespace=ns)
    rest.patch(POD, "web", {"status": {"phase": "Running", "startTime": "2026-11-21T05:00:00Z"}}, namespace=ns,
               subresource="status")
    _hold(rest, POD, "going", ns)
    _hold(rest, NODE, node_name)
    try:
        rest.delete(POD, "going", ns)
        rest.delete(NODE, node_name)
        ClusterSync(adapter).sync_once()

        going, web = Pod.objects.get(namespace=ns, name="going"), Pod.objects.get(namespace=ns, name="web")
        assert going.deleting_since is not None and web.deleting_since is None
        assert web.started_at is not None and web.started_at.isoformat().startswith("2026-11-21T05:00:00")
        assert Node.objects.get(name=node_name).deleting_since is not None

        world = parse_world(current_world())
        pods = {p.key: p for p in world.pods}
        assert pods[f"{ns}/going"].terminating and not pods[f"{ns}/web"].terminating
        assert pods[f"{ns}/web"].started is not None
        assert [(p.port, p.protocol) for p in pods[f"{ns}/web"].host_ports] == [(8080, "UDP")]
        assert next(n for n in world.nodes if n.name == node_name).deleting
    finally:
        _release(rest, POD, "going", ns)
        _release(rest, NODE, node_name)
