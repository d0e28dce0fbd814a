"""ClusterSync: the real API server mirrored into the models (list, watch, 410, restart)."""

import logging
import threading

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from reservations.models import EC2NodeClass
from scheduling.adapters.kube.adapter import KubeClusterAdapter
from scheduling.adapters.kube.errors import ResourceVersionExpired
from scheduling.adapters.kube.resources import NODE, NODECLAIM, POD
from scheduling.adapters.kube.sync import ClusterSync, pod_requests
from scheduling.models import Node, NodeClaim, NodePool, Pod
from tests.factories.reservations import CapacityReservationFactory

from . import helpers as h

pytestmark = [pytest.mark.kube, pytest.mark.django_db]

RESERVATION = h.RESERVED_LABELS["karpenter.k8s.aws/capacity-reservation-id"]


def _world(rest, unique):
    """One of everything, linked the way Karpenter links them."""
    ns = h.namespace(rest, f"ns-{unique}")
    h.ec2nodeclass(rest, f"nc-{unique}", terms=[{"id": RESERVATION}, {"tags": {"team": "ml"}}])
    rest.patch(h.EC2NODECLASS, f"nc-{unique}", {"status": {
        "capacityReservations": [{"id": RESERVATION, "availabilityZone": "us-east-1a", "instanceType": "p5.48xlarge",
                                  "instanceMatchCriteria": "targeted", "ownerID": "123456789012",
                                  "reservationType": "capacity-block", "state": "active"}],
        "conditions": [{"type": "CapacityReservationsReady", "status": "True", "reason": "CapacityReservationsReady",
                        "message": "", "lastTransitionTime": "2026-11-21T05:00:00Z"}],
    }}, subresource="status")
    h.nodepool(rest, f"pool-{unique}", node_class=f"nc-{unique}", weight=50, limits={"cpu": "1000"},
               disruption={"consolidationPolicy": "WhenEmpty", "consolidateAfter": "5m"})
    h.nodeclaim(rest, f"claim-{unique}", f"pool-{unique}", node_class=f"nc-{unique}",
                labels=h.RESERVED_LABELS, node_name=f"node-{unique}")
    h.node(rest, f"node-{unique}", labels={**h.RESERVED_LABELS, "karpenter.sh/nodepool": f"pool-{unique}",
                                           "node.kubernetes.io/instance-type": "p5.48xlarge",
                                           "topology.kubernetes.io/zone": "us-east-1a"})
    h.pod(rest, ns, "bound", node_name=f"node-{unique}", labels={"app": "train"}, cpu="1500m", memory="2Gi",
          owner={"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "train-abc",
                 "uid": "00000000-0000-0000-0000-0000000000aa", "controller": True})
    h.pod(rest, ns, "pending", cpu="250m", memory="512Mi")
    h.pod(rest, ns, "finished", node_name=f"node-{unique}", phase="Succeeded")
    return ns


def test_sync_once_mirrors_every_kind_with_its_links(adapter, rest, unique):
    reservation = CapacityReservationFactory(reservation_id=RESERVATION, instance_type="p5.48xlarge")
    ns = _world(rest, unique)

    stats = ClusterSync(adapter).sync_once()

    assert stats.errors == [] and stats.lists == 12  # Karpenter's and the core kinds, the storage kinds, NodeOverlays, PDBs, DaemonSets
    node_class = EC2NodeClass.objects.get(name=f"nc-{unique}")
    assert node_class.capacity_reservation_selector_terms == [{"id": RESERVATION}, {"tags": {"team": "ml"}}]
    assert "capacityReservationSelectorTerms" not in node_class.spec and node_class.spec["role"] == "KarpenterNodeRole"
    assert node_class.status_capacity_reservations[0]["id"] == RESERVATION
    assert node_class.condition_status("CapacityReservationsReady") == "True"
    assert list(node_class.selected_reservations.all()) == [reservation]
    assert node_class.resource_version and node_class.uid and node_class.created_at

    pool = NodePool.objects.get(name=f"pool-{unique}")
    assert pool.node_class == node_class
    assert (pool.weight, pool.consolidation_policy, pool.consolidate_after) == (50, "WhenEmpty", "5m")
    assert pool.budgets == [{"nodes": "10%"}] and pool.limits == {"cpu": "1000"}
    assert pool.labels == {"team": "ml"} and pool.expire_after == "720h"
    assert pool.requirements[0]["key"] == "karpenter.sh/capacity-type"

    claim = NodeClaim.objects.get(name=f"claim-{unique}")
    assert (claim.node_pool, claim.node_class, claim.reservation) == (pool, node_class, reservation)
    assert (claim.capacity_type, claim.instance_type, claim.zone) == ("reserved", "p5.48xlarge", "us-east-1a")
    assert claim.reservation_label == RESERVATION and claim.node_name == f"node-{unique}"
    assert claim.resources == {"cpu": "4", "memory": "16Gi"} and claim.image_id == "ami-0abc"
    assert claim.launched_at is not None and claim.registered_at is not None and claim.initialized_at is None

    node = Node.objects.get(name=f"node-{unique}")
    assert (node.node_claim, node.node_pool, node.reservation) == (claim, pool, reservation)
    assert (node.allocatable_cpu_millicores, node.allocatable_memory_bytes, node.allocatable_pods) == (3920, 15 * 2**30, 110)
    assert node.ready and not node.unschedulable and node.provider_id.startswith("aws:///us-east-1a/")

    bound = Pod.objects.get(namespace=ns, name="bound")
    assert bound.node == node and bound.phase == "Running" and not bound.is_pending
    assert (bound.cpu_request_millicores, bound.memory_request_bytes) == (1500, 2 * 2**30)
    assert (bound.owner_kind, bound.owner_name) == ("ReplicaSet", "train-abc")
    assert bound.spec["nodeSelector"] == {"karpenter.sh/capacity-type": "reserved"}
    assert bound.spec["tolerations"][0]["key"] == "nvidia.com/gpu"
    pending = Pod.objects.get(namespace=ns, name="pending")
    assert pending.is_pending and pending.node is None and pending.cpu_request_millicores == 250
    assert not Pod.objects.filter(namespace=ns, name="finished").exists()  # finished pods are not mirrored


def test_a_static_nodepool_is_mirrored_and_planned_with_its_replicas(adapter, rest, unique):
    """spec.replicas survives the CRD's schema (pruning), the scale subresource sets it as
    `kubectl scale` does, and the world the loop plans from carries it (without a weight)."""
    from scheduling.engine.world import parse_world
    from scheduling.world import current_world

    h.ec2nodeclass(rest, f"nc-{unique}")
    h.nodepool(rest, f"fixed-{unique}", node_class=f"nc-{unique}", replicas=3, limits={"nodes": "5"})
    try:
        rest.patch(h.NODEPOOL, f"fixed-{unique}", {"spec": {"replicas": 2}}, subresource="scale")
        ClusterSync(adapter).sync_once()
    finally:  # the server is shared: a static pool left short would open other tests' watch batches
        rest.delete(h.NODEPOOL, f"fixed-{unique}")
    pool = NodePool.objects.get(name=f"fixed-{unique}")
    assert (pool.replicas, pool.limits) == (2, {"nodes": "5"})
    world = current_world()
    [written] = [p for p in world["nodePools"] if p["metadata"]["name"] == pool.name]
    assert written["spec"]["replicas"] == 2 and "weight" not in written["spec"]
    [parsed] = [p for p in parse_world(world).node_pools if p.name == pool.name]
    assert parsed.replicas == 2


def test_sync_deletes_what_disappeared(adapter, rest, unique):
    ns = _world(rest, unique)
    sync = ClusterSync(adapter)
    sync.sync_once()
    assert Pod.objects.filter(namespace=ns).count() == 2

    rest.delete(POD, "pending", ns)
    rest.delete(NODE, f"node-{unique}")
    rest.delete(NODECLAIM, f"claim-{unique}")
    stats = sync.sync_once()

    assert not Node.objects.filter(name=f"node-{unique}").exists()
    assert not NodeClaim.objects.filter(name=f"claim-{unique}").exists()
    assert list(Pod.objects.filter(namespace=ns).values_list("name", "node_id")) == [("bound", None)]
    assert stats.deleted["Pod"] >= 1 and stats.deleted["Node"] >= 1 and stats.deleted["NodeClaim"] >= 1


def test_sync_costs_the_same_few_queries_for_more_objects(adapter, rest, unique):
    ns = h.namespace(rest, f"ns-{unique}")
    h.node(rest, f"node-{unique}")

    def queries_after_adding(count, prefix):
        for i in range(count):
            h.pod(rest, ns, f"{prefix}-{i}", node_name=f"node-{unique}")
        Pod.objects.all().delete()
        with CaptureQueriesContext(connection) as captured:
            ClusterSync(adapter, kinds=["Node", "Pod"]).sync_once()
        return len(captured.captured_queries)

    few = queries_after_adding(5, "a")
    many = queries_after_adding(40, "b")
    assert Pod.objects.filter(namespace=ns).count() == 45
    assert many == few <= 30


def test_watch_picks_up_changes(adapter, rest, unique):
    ns = _world(rest, unique)
    sync = ClusterSync(adapter, watch_timeout=10)
    sync.start()
    try:
        # Every kind's first list applied, not just the pods': the later pump counts no list.
        sync.pump(20, until=lambda: sync.synced() and Pod.objects.filter(namespace=ns, name="bound").exists())
        assert Node.objects.get(name=f"node-{unique}").capacity_type == "reserved"

        adapter.demote(nodeclaim=f"claim-{unique}")
        h.pod(rest, ns, "late", node_name=f"node-{unique}", cpu="2")
        h.bind(rest, ns, "pending", f"node-{unique}")  # as the scheduler would
        rest.patch(POD, "bound", {"status": {"phase": "Failed"}}, namespace=ns, subresource="status")
        h.node(rest, f"node2-{unique}", labels={"karpenter.sh/capacity-type": "on-demand"})

        def caught_up():
            names = set(Pod.objects.filter(namespace=ns).values_list("name", flat=True))
            pending = Pod.objects.filter(namespace=ns, name="pending").first()
            return (names == {"late", "pending"} and pending.node_name == f"node-{unique}"
                    and Node.objects.filter(name=f"node2-{unique}").exists()
                    and Node.objects.get(name=f"node-{unique}").capacity_type == "on-demand"
                    and NodeClaim.objects.get(name=f"claim-{unique}").capacity_type == "on-demand")

        stats = sync.pump(20, until=caught_up)
        assert caught_up(), stats.summary()
        assert stats.events >= 5 and stats.lists == 0
        node = Node.objects.get(name=f"node-{unique}")
        assert node.reservation_label == "" and node.reservation is None
        assert not [k for k in node.labels if k.startswith("karpenter.k8s.aws/capacity-reservation")]
        late = Pod.objects.get(namespace=ns, name="late")
        assert late.node == node and late.cpu_request_millicores == 2000
        assert Pod.objects.get(namespace=ns, name="pending").node == node
    finally:
        sync.stop()


class CustomResourcesListedLast(KubeClusterAdapter):
    """The real API server, its custom kinds' lists held back until the test releases them (on a
    quiet machine the core kinds' lists come back first): the wait is the only thing added."""

    def __init__(self, api_client) -> None:
        super().__init__(api_client)
        self.release = threading.Event()

    def list(self, kind):
        if kind in ("EC2NodeClass", "NodePool"):
            self.release.wait(30)
        return super().list(kind)


def test_synced_waits_for_every_kinds_first_list(kube_api_client, rest, unique):
    ns = _world(rest, unique)
    adapter = CustomResourcesListedLast(kube_api_client)
    sync = ClusterSync(adapter, watch_timeout=10)
    sync.start()
    try:
        # The pods arrive while the custom kinds are still being listed: not the whole world yet.
        early = sync.pump(20, until=lambda: Pod.objects.filter(namespace=ns, name="bound").exists())
        assert "Pod" in early.listed and not sync.synced()
        adapter.release.set()
        rest_of_it = sync.pump(20, until=sync.synced)
        assert sync.synced() and {"EC2NodeClass", "NodePool"} <= rest_of_it.listed
        assert NodePool.objects.get(name=f"pool-{unique}").node_class.name == f"nc-{unique}"

        h.pod(rest, ns, "late", node_name=f"node-{unique}")
        later = sync.pump(20, until=lambda: Pod.objects.filter(namespace=ns, name="late").exists())
        assert later.events >= 1 and later.lists == 0
    finally:
        adapter.release.set()
        sync.stop()


def test_stopping_the_watches_is_not_a_lost_server(adapter, rest, unique, caplog):
    h.namespace(rest, f"ns-{unique}")
    sync = ClusterSync(adapter, watch_timeout=30)
    sync.start()
    sync.pump(20, until=sync.synced)
    with caplog.at_level(logging.WARNING, logger="scheduling.adapters.kube.sync"):
        sync.stop()  # shuts the open watches' connections down under their readers
    assert not caplog.records, [r.getMessage() for r in caplog.records]


def test_a_watch_from_an_expired_resource_version_lists_again(adapter, rest, unique, kube_restart):
    old = adapter.list("Node").resource_version
    h.node(rest, f"node-{unique}")
    # The API server serves watches from its watch cache, which reaches back only so far (minutes
    # on a busy cluster); a restarted server's cache starts at the current revision. A watch from
    # before that is answered with 410 Gone.
    kube_restart()
    with pytest.raises(ResourceVersionExpired):
        list(adapter.watch("Node", old, timeout_seconds=5))

    sync = ClusterSync(adapter, kinds=["Node"], watch_timeout=10)
    sync.resource_versions["Node"] = old
    sync.start()
    try:
        stats = sync.pump(20, until=lambda: Node.objects.filter(name=f"node-{unique}").exists())
        assert stats.relists == 1 and stats.lists == 1
        h.node(rest, f"after-{unique}")
        sync.pump(20, until=lambda: Node.objects.filter(name=f"after-{unique}").exists())
        assert Node.objects.filter(name=f"after-{unique}").exists()
    finally:
        sync.stop()


def test_sync_survives_an_api_server_restart(adapter, rest, unique, kube_restart):
    ns = _world(rest, unique)
    sync = ClusterSync(adapter, watch_timeout=30)
    sync.start()
    try:
        sync.pump(20, until=lambda: Pod.objects.filter(namespace=ns, name="bound").exists())

        restart_seconds = kube_restart()
        assert restart_seconds < 30

        h.pod(rest, ns, "after-restart", node_name=f"node-{unique}")
        rest.delete(POD, "pending", ns)
        adapter.demote(node=f"node-{unique}")

        def caught_up():
            names = set(Pod.objects.filter(namespace=ns).values_list("name", flat=True))
            node = Node.objects.get(name=f"node-{unique}")
            return names == {"bound", "after-restart"} and node.capacity_type == "on-demand"

        stats = sync.pump(40, until=caught_up)
        assert caught_up(), stats.summary()
        # The watches broke while the server was down, were resumed, and (the new server's watch
        # cache starting after the old resourceVersions) listed again where needed.
        assert stats.reconnects + stats.relists >= 1
        assert any("cannot reach the Kubernetes API server" in e.message for e in stats.errors), stats.summary()
        assert Pod.objects.get(namespace=ns, name="after-restart").node.name == f"node-{unique}"
    finally:
        sync.stop()


def test_pod_requests_count_init_and_sidecar_containers_and_overhead():
    spec = {
        "containers": [{"resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}},
                       {"resources": {"requests": {"cpu": "250m"}}}],
        "initContainers": [{"resources": {"requests": {"cpu": "2", "memory": "512Mi"}}},
                           {"restartPolicy": "Always", "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}],
        "overhead": {"cpu": "10m", "memory": "1Mi"},
    }
    # cpu: max(750 + 100 sidecar, init 2000) + 10; memory: max(1Gi + 64Mi, 512Mi) + 1Mi
    assert pod_requests(spec) == (2010, 2**30 + 65 * 2**20)


def test_sync_reports_what_it_may_not_read(kube_server, unique):
    from scheduling.adapters.kube.config import client_from_kubeconfig

    limited = KubeClusterAdapter(client_from_kubeconfig(str(kube_server.limited_kubeconfig)))
    stats = ClusterSync(limited).sync_once()
    assert [e.message for e in stats.errors] == [
        f'{kind}: forbidden: karpweb\'s user "karpweb-limited" may not list {plural}; '
        "grant it in karpweb's ClusterRole (docs/kubernetes.md lists the rules)"
        for kind, plural in (("EC2NodeClass", "ec2nodeclasses.karpenter.k8s.aws"), ("NodePool", "nodepools.karpenter.sh"),
                             ("NodeClaim", "nodeclaims.karpenter.sh"), ("Node", "nodes"), ("Pod", "pods"),
                             ("StorageClass", "storageclasses.storage.k8s.io"), ("PersistentVolume", "persistentvolumes"),
                             ("PersistentVolumeClaim", "persistentvolumeclaims"), ("CSINode", "csinodes.storage.k8s.io"),
                             ("NodeOverlay", "nodeoverlays.karpenter.sh"), ("PodDisruptionBudget", "poddisruptionbudgets.policy"),
                             ("DaemonSet", "daemonsets.apps"))
    ]
    assert stats.lists == 0
    limited.close()
    assert not Node.objects.exists()  # nothing was written
