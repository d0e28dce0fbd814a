"""Issue #49: StorageClasses, PersistentVolumes and their claims, and CSINodes mirrored from the real
kube-apiserver (list and watch) into the world the loop plans with: a pending pod whose claim is bound
to a zonal volume is planned in that zone, one whose claim waits for its first consumer in the zone its
StorageClass allows; before the storage kinds are listed no pod's volumes are read."""

import pytest
from django.utils import timezone

from scheduling.adapters.kube.resources import CSINODE, POD, PV, PVC, STORAGECLASS
from scheduling.adapters.kube.sync import ClusterSync
from scheduling.engine import simulate
from scheduling.models import KubeObject, WatchState
from scheduling.world import current_world
from tests.engine.builders import instance_type
from tests.support.clusters import use_kube_server

from . import helpers as h

pytestmark = [pytest.mark.kube, pytest.mark.django_db]
ZONES = ("us-east-1a", "us-east-1b", "us-east-1c")


def storage(rest, ns, unique):
    rest.create(STORAGECLASS, {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                               "metadata": {"name": f"gp3-b-{unique}"}, "provisioner": "ebs.csi.aws.com",
                               "volumeBindingMode": "WaitForFirstConsumer",
                               "allowedTopologies": [{"matchLabelExpressions": [
                                   {"key": "topology.kubernetes.io/zone", "values": ["us-east-1b"]}]}]})
    rest.create(PV, {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": f"pv-db-{unique}"},
                     "spec": {"capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"],
                              "storageClassName": "", "persistentVolumeReclaimPolicy": "Retain",
                              "csi": {"driver": "ebs.csi.aws.com", "volumeHandle": f"vol-{unique}"},
                              "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                                  {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-east-1c"]}]}]}}}})
    rest.create(PVC, {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                      "metadata": {"name": "data-db", "namespace": ns,
                                   "annotations": {"pv.kubernetes.io/bind-completed": "yes"}},
                      "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "", "volumeName": f"pv-db-{unique}",
                               "resources": {"requests": {"storage": "10Gi"}}}}, namespace=ns)
    rest.create(PVC, {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data-cache", "namespace": ns},
                      "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": f"gp3-b-{unique}",
                               "resources": {"requests": {"storage": "10Gi"}}}}, namespace=ns)
    rest.create(CSINODE, {"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": f"node-{unique}"},
                          "spec": {"drivers": [{"name": "ebs.csi.aws.com", "nodeID": f"i-{unique}",
                                                "allocatable": {"count": 25}}]}})


def pending_with_claim(rest, ns, name, claim):
    rest.create(POD, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns},
                        "spec": {"containers": [{"name": "app", "image": "registry.example/app:1",
                                                 "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}],
                                 "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]}},
                namespace=ns)


def plan_zones(now=None) -> dict:
    world = current_world(now)
    world["instanceTypes"] = [instance_type("m5.large", "2", "8Gi", zones=ZONES, od=0.096)]
    decisions = simulate(world)
    return {pod: claim["launch"]["zone"] for claim in decisions["nodeClaims"] for pod in claim["pods"]}


def test_storage_objects_are_mirrored_and_place_pods_where_their_volumes_are(kube_server, adapter, rest, unique):
    use_kube_server(kube_server)
    ns = h.namespace(rest, f"vol-{unique}")
    h.ec2nodeclass(rest, "default")
    h.nodepool(rest, "default", node_class="default")
    storage(rest, ns, unique)
    pending_with_claim(rest, ns, "db-0", "data-db")
    pending_with_claim(rest, ns, "cache-0", "data-cache")

    stats = ClusterSync(adapter).sync_once()
    assert stats.errors == []
    kinds = dict(KubeObject.objects.values_list("name", "kind"))
    assert kinds[f"pv-db-{unique}"] == "PersistentVolume" and kinds["data-cache"] == "PersistentVolumeClaim"
    assert kinds[f"gp3-b-{unique}"] == "StorageClass" and kinds[f"node-{unique}"] == "CSINode"
    claim = KubeObject.objects.get(kind="PersistentVolumeClaim", namespace=ns, name="data-db").body
    assert claim["kind"] == "PersistentVolumeClaim" and "managedFields" not in claim["metadata"]

    # Not yet recorded as listed: the plan reads no volumes (the pods go wherever is cheapest).
    assert "persistentVolumeClaims" not in current_world()
    WatchState.record(storage_listed_at=timezone.now())
    zones = plan_zones()
    assert zones[f"{ns}/db-0"] == "us-east-1c" and zones[f"{ns}/cache-0"] == "us-east-1b"


def test_the_loops_full_sync_records_the_storage_kinds_and_a_watch_follows_a_new_claim(kube_server, adapter, rest, unique):
    from scheduling.loop import steps

    use_kube_server(kube_server)
    ns = h.namespace(rest, f"vol-{unique}")
    h.ec2nodeclass(rest, "default")
    h.nodepool(rest, "default", node_class="default")
    storage(rest, ns, unique)
    steps.sync_kubernetes()
    assert WatchState.current().storage_listed_at is not None

    sync = ClusterSync(adapter, watch_timeout=5)
    sync.start()
    try:
        sync.pump(timeout=5, until=sync.synced)
        rest.create(PVC, {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "late", "namespace": ns},
                          "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": f"gp3-b-{unique}",
                                   "resources": {"requests": {"storage": "1Gi"}}}}, namespace=ns)
        sync.pump(timeout=10, until=lambda: KubeObject.objects.filter(namespace=ns, name="late").exists())
        rest.patch(PVC, "late", {"metadata": {"finalizers": None}}, namespace=ns)  # no controller-manager runs here
        rest.request("DELETE", PVC.path("late", ns))
        sync.pump(timeout=10, until=lambda: not KubeObject.objects.filter(namespace=ns, name="late").exists())
    finally:
        sync.stop()
    assert not KubeObject.objects.filter(namespace=ns, name="late").exists()
    assert KubeObject.objects.filter(namespace=ns, name="data-cache").exists()


def test_node_overlays_are_mirrored_and_change_the_plans_price(kube_server, adapter, rest, unique):
    """A NodeOverlay written to the cluster (the CRD in deploy/crds) reaches the world the loop plans with."""
    from scheduling.adapters.kube.resources import NODEOVERLAY

    use_kube_server(kube_server)
    ns = h.namespace(rest, f"ovl-{unique}")
    h.ec2nodeclass(rest, "default")
    h.nodepool(rest, "default", node_class="default")
    rest.create(POD, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-0", "namespace": ns},
                      "spec": {"containers": [{"name": "app", "image": "registry.example/app:1",
                                               "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}]}},
                namespace=ns)
    rest.create(NODEOVERLAY, {"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay",
                              "metadata": {"name": f"m5-commitment-{unique}"},
                              "spec": {"requirements": [{"key": "node.kubernetes.io/instance-type", "operator": "In",
                                                         "values": ["m5.large"]}], "priceAdjustment": "-30%"}})
    assert ClusterSync(adapter).sync_once().errors == []
    world = current_world()
    assert [o["metadata"]["name"] for o in world["nodeOverlays"]] == [f"m5-commitment-{unique}"]
    world["instanceTypes"] = [instance_type("m5.large", "2", "8Gi", zones=ZONES, od=0.096),
                              instance_type("c5.large", "2", "4Gi", zones=ZONES, od=0.085)]
    decisions = simulate(world)
    (claim,) = [c for c in decisions["nodeClaims"] if f"{ns}/web-0" in c["pods"]]
    assert claim["launch"]["instanceType"] == "m5.large" and claim["launch"]["price"] == pytest.approx(0.0672)
    assert decisions["nodeOverlays"][0]["ready"] is True


def test_a_cluster_that_does_not_serve_node_overlays_syncs_without_an_error(kube_server, adapter, rest, unique, monkeypatch):
    """NodeOverlay is alpha upstream: most clusters have no CRD for it. Its list answers 404 (here: a
    plural the real API server does not serve), which is "none", not a failed sync or a watch retrying."""
    from scheduling.adapters.kube import resources

    use_kube_server(kube_server)
    monkeypatch.setitem(resources.BY_KIND, "NodeOverlay",
                        resources.Resource("NodeOverlay", "karpenter.sh", "v1alpha1", "nodeoverlaysnotserved"))
    KubeObject.objects.create(kind="NodeOverlay", name="left-over", body={"metadata": {"name": "left-over"}})
    stats = ClusterSync(adapter).sync_once()
    assert stats.errors == [] and not KubeObject.objects.filter(kind="NodeOverlay").exists()
    sync = ClusterSync(adapter, kinds=["NodeOverlay"], watch_timeout=5)
    sync.start()
    try:
        sync.pump(timeout=10, until=sync.synced)
        assert sync.synced() and sync.stats.errors == []
    finally:
        sync.stop()


def test_pod_disruption_budgets_are_mirrored_in_the_served_version_and_block_eviction(kube_server, adapter, rest, unique):
    """The test server (v1.20) serves policy/v1beta1 only: the adapter reads that version there, v1 where
    served. A budget that allows no disruption now makes the engine refuse its pods' eviction; the watch
    brings the disruption controller's next status (one allowed) and the refusal goes."""
    from scheduling.engine import parse_world
    from scheduling.engine.pdbs import eviction_blocked

    use_kube_server(kube_server)
    ns = h.namespace(rest, f"pdb-{unique}")
    h.node(rest, f"node-{unique}")
    h.pod(rest, ns, "db-0", node_name=f"node-{unique}", labels={"app": "db"})
    h.pdb(rest, ns, "db", {"app": "db"}, disruptions_allowed=0, healthy=1)

    def blocked():
        parsed = parse_world({**current_world(), "instanceTypes": []})
        pods = [p for p in parsed.pods if p.namespace == ns]
        return eviction_blocked(pods, parsed.pod_disruption_budgets)

    assert ClusterSync(adapter).sync_once().errors == []
    assert blocked() == f"PodDisruptionBudget {ns}/db allows no disruption now (pod {ns}/db-0)"
    sync = ClusterSync(adapter, kinds=["PodDisruptionBudget"], watch_timeout=5)
    sync.start()
    try:
        sync.pump(timeout=10, until=sync.synced)
        h.set_pdb_status(rest, ns, "db", disruptions_allowed=1, healthy=2)
        sync.pump(timeout=10, until=lambda: blocked() is None)
    finally:
        sync.stop()
    assert blocked() is None


def test_default_spread_sources_are_mirrored_when_configured_and_spread_the_plan(kube_server, adapter, rest, unique,
                                                                                  settings):
    """KARPWEB_DEFAULT_TOPOLOGY_SPREAD_CONSTRAINTS set: Services and ReplicaSets are mirrored (their selectors only)
    and three pending replicas of one ReplicaSet are planned in three zones, as kube-scheduler will spread them."""
    from scheduling.adapters.kube.resources import REPLICASET, SERVICE
    from scheduling.adapters.kube.sync import mirrored_kinds

    assert "ReplicaSet" not in mirrored_kinds(), "not read unless default constraints are configured"
    settings.KARPWEB_DEFAULT_TOPOLOGY_SPREAD_CONSTRAINTS = [
        {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule"}]
    use_kube_server(kube_server)
    ns = h.namespace(rest, f"spread-{unique}")
    h.ec2nodeclass(rest, "default")
    h.nodepool(rest, "default", node_class="default")
    template = {"metadata": {"labels": {"app": "web", "pod-template-hash": "7c9d"}},
                "spec": {"containers": [{"name": "app", "image": "registry.example/app:1"}]}}
    replica_set = rest.create(REPLICASET, {"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                           "metadata": {"name": "web-7c9d", "namespace": ns},
                                           "spec": {"replicas": 3, "selector": {"matchLabels": template["metadata"]["labels"]},
                                                    "template": template}}, namespace=ns)
    rest.create(SERVICE, {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": ns},
                          "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}}, namespace=ns)
    owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7c9d",
             "uid": replica_set["metadata"]["uid"], "controller": True}
    for i in range(3):
        h.pod(rest, ns, f"web-7c9d-{i}", labels=template["metadata"]["labels"], owner=owner, node_selector={},
              cpu="200m", memory="256Mi")
    assert ClusterSync(adapter).sync_once().errors == []
    body = KubeObject.objects.get(kind="ReplicaSet", namespace=ns, name="web-7c9d").body
    assert body["spec"] == {"selector": {"matchLabels": {"app": "web", "pod-template-hash": "7c9d"}}}
    assert "template" not in body["spec"], "trimmed to its selector"
    zones = plan_zones()
    assert {zones[f"{ns}/web-7c9d-{i}"] for i in range(3)} == set(ZONES)
    rest.request("DELETE", SERVICE.path("web", ns))


def test_a_daemon_set_with_no_pod_yet_counts_on_new_nodes(kube_server, adapter, rest, unique):
    """The loop knew a DaemonSet only from its pods; one whose pods have not come yet (no controller runs on
    this test server, so none ever do) is now read from its mirrored template, as upstream reads DaemonSets."""
    from scheduling.adapters.kube.resources import DAEMONSET

    use_kube_server(kube_server)
    ns = h.namespace(rest, f"ds-{unique}")
    h.ec2nodeclass(rest, "default")
    h.nodepool(rest, "default", node_class="default")
    labels = {"app": f"agent-{unique}"}
    rest.create(DAEMONSET, {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent", "namespace": ns},
                            "spec": {"selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels}, "spec": {
                                "containers": [{"name": "agent", "image": "registry.example/agent:1",
                                                "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}}}}, namespace=ns)
    rest.create(POD, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "app-0", "namespace": ns},
                      "spec": {"containers": [{"name": "app", "image": "registry.example/app:1",
                                               "resources": {"requests": {"cpu": "1500m", "memory": "1Gi"}}}]}},
                namespace=ns)
    assert ClusterSync(adapter).sync_once().errors == []
    world = current_world()
    assert [d["metadata"]["name"] for d in world["daemonSets"] if d["metadata"]["namespace"] == ns] == ["agent"]
    world["instanceTypes"] = [instance_type("m5.large", "2", "8Gi", zones=ZONES, od=0.096),
                              instance_type("m5.xlarge", "4", "16Gi", zones=ZONES, od=0.192)]
    (claim,) = [c for c in simulate(world)["nodeClaims"] if f"{ns}/app-0" in c["pods"]]
    assert claim["launch"]["instanceType"] == "m5.xlarge", "1.5 CPU of pod and 1 of DaemonSet do not fit 2 CPUs"
