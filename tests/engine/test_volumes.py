"""Persistent volumes as Karpenter's scheduler reads them (issue #49), each case in karpweb's own worlds
after an `It` of kubernetes-sigs/karpenter pkg/controllers/provisioning/scheduling/suite_test.go
(Describe "VolumeUsage" and the volume topology cases): a bound zonal volume keeps its pod in the
volume's zone, an unbound claim follows its StorageClass's allowedTopologies, unusable claims keep the
pod off every node with the reason, and a node's CSI limit caps the volumes its pods attach."""

import pytest

from scheduling.engine import simulate
from tests.engine.builders import instance_type, node, node_class, node_pool, placement, pod, world

ZONES = ("us-east-1a", "us-east-1b", "us-east-1c")
DRIVER = "ebs.csi.aws.com"
BOUND = {"pv.kubernetes.io/bind-completed": "yes"}


def catalogue():
    return [instance_type("m5.large", "2", "8Gi", zones=ZONES, od=0.096),
            instance_type("m5.xlarge", "4", "16Gi", zones=ZONES, od=0.192)]


def storage_class(name, *, zones=None, mode="WaitForFirstConsumer", provisioner=DRIVER, default=False, created=None,
                  terms=None):
    meta = {"name": name}
    if default:
        meta["annotations"] = {"storageclass.kubernetes.io/is-default-class": "true"}
    if created:
        meta["creationTimestamp"] = created
    item = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": meta, "provisioner": provisioner,
            "volumeBindingMode": mode}
    if terms is not None:
        item["allowedTopologies"] = terms
    elif zones:
        item["allowedTopologies"] = [{"matchLabelExpressions": [{"key": "topology.kubernetes.io/zone", "values": list(zones)}]}]
    return item


def volume(name, *, zone_terms=(), driver=DRIVER, local=False, deleting=False, key="topology.kubernetes.io/zone"):
    spec = {"capacity": {"storage": "10Gi"}}
    if driver:
        spec["csi"] = {"driver": driver, "volumeHandle": f"vol-{name}"}
    else:
        spec["nfs"] = {"server": "files.internal", "path": "/exports"}
    if local:
        spec["local"] = {"path": "/mnt/disks/ssd0"}
    if zone_terms:
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": k, "operator": "In", "values": [v]}]} for k, v in zone_terms]}}
    meta = {"name": name}
    if deleting:
        meta["deletionTimestamp"] = "2026-11-21T11:00:00Z"
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": meta, "spec": spec}


def claim(name, *, storage_class=None, volume_name=None, namespace="default", phase=None, deleting=False, annotations=None):
    spec = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}}}
    if storage_class is not None:
        spec["storageClassName"] = storage_class
    if volume_name:
        spec["volumeName"] = volume_name
    meta = {"name": name, "namespace": namespace, "annotations": dict(BOUND if annotations is None and volume_name else annotations or {})}
    if deleting:
        meta["deletionTimestamp"] = "2026-11-21T11:00:00Z"
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta, "spec": spec,
            "status": {"phase": phase or ("Bound" if volume_name else "Pending")}}


def using(item, *claims, ephemeral=None):
    volumes = [{"name": f"data-{i}", "persistentVolumeClaim": {"claimName": c}} for i, c in enumerate(claims)]
    if ephemeral:
        volumes.append({"name": ephemeral, "ephemeral": {"volumeClaimTemplate": {"spec": {"accessModes": ["ReadWriteOnce"]}}}})
    item["spec"]["volumes"] = volumes
    return item


def plan(pods, *, claims=(), volumes=(), classes=(), csi_nodes=None, nodes=(), with_storage=True, **kwargs):
    doc = world(instance_types=catalogue(), node_classes=[node_class("default")], node_pools=[node_pool()], pods=pods,
                nodes=nodes, **kwargs)
    if with_storage:
        doc.update(persistentVolumeClaims=list(claims), persistentVolumes=list(volumes), storageClasses=list(classes))
    if csi_nodes is not None:
        doc["csiNodes"] = csi_nodes
    return simulate(doc)


def zone_of(where):
    kind, found = where
    assert kind == "claim", where
    return found["launch"]["zone"]


def test_a_pod_with_a_bound_zonal_volume_is_planned_in_that_zone():
    decisions = plan([using(pod("db-0"), "data-db-0")], claims=[claim("data-db-0", volume_name="pv-db-0")],
                     volumes=[volume("pv-db-0", zone_terms=[("topology.kubernetes.io/zone", "us-east-1c")])])
    assert zone_of(placement(decisions)["default/db-0"]) == "us-east-1c"


def test_a_volumes_zone_and_the_pods_own_zone_selector_that_disagree_leave_it_unschedulable_saying_both():
    decisions = plan([using(pod("db-0", selector={"topology.kubernetes.io/zone": "us-east-1a"}), "data-db-0")],
                     claims=[claim("data-db-0", volume_name="pv-db-0")],
                     volumes=[volume("pv-db-0", zone_terms=[("topology.kubernetes.io/zone", "us-east-1b")])])
    kind, reason = placement(decisions)["default/db-0"]
    assert kind == "unschedulable" and "volumes' topology" in reason and "us-east-1b" in reason


def test_an_unbound_claim_follows_its_storage_classes_allowed_topologies():
    decisions = plan([using(pod("cache-0"), "data-cache-0")], claims=[claim("data-cache-0", storage_class="gp3-b")],
                     classes=[storage_class("gp3-b", zones=["us-east-1b"])])
    assert zone_of(placement(decisions)["default/cache-0"]) == "us-east-1b"


def test_pods_whose_volumes_allow_two_zones_spread_across_them_under_zonal_anti_affinity():
    """Each term of a volume's node affinity is an alternative (ORed), as in upstream's "should schedule
    pods using a PV with multiple zones"."""
    pods = []
    for i in range(2):
        item = using(pod(f"ledger-{i}", anti_affinity=True), f"data-ledger-{i}")
        item["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]["topologyKey"] = \
            "topology.kubernetes.io/zone"
        pods.append(item)
    both = [("topology.kubernetes.io/zone", "us-east-1a"), ("topology.kubernetes.io/zone", "us-east-1c")]
    decisions = plan(pods, claims=[claim(f"data-ledger-{i}", volume_name=f"pv-ledger-{i}") for i in range(2)],
                     volumes=[volume(f"pv-ledger-{i}", zone_terms=both) for i in range(2)])
    where = placement(decisions)
    zones = {zone_of(where["default/ledger-0"]), zone_of(where["default/ledger-1"])}
    assert zones == {"us-east-1a", "us-east-1c"}


def test_of_two_volumes_the_combination_that_agrees_is_kept():
    """Upstream's "a valid multi-volume topology alternative remains after pruning disjoint branches"."""
    first = storage_class("first", terms=[
        {"matchLabelExpressions": [{"key": "topology.kubernetes.io/zone", "values": ["us-east-1a"]}]},
        {"matchLabelExpressions": [{"key": "topology.kubernetes.io/zone", "values": ["us-east-1b"]}]}])
    second = storage_class("second", terms=[
        {"matchLabelExpressions": [{"key": "topology.kubernetes.io/zone", "values": ["us-east-1b"]},
                                   {"key": "node.kubernetes.io/instance-type", "values": ["m5.xlarge"]}]},
        {"matchLabelExpressions": [{"key": "topology.kubernetes.io/zone", "values": ["us-east-1c"]}]}])
    decisions = plan([using(pod("etl-0"), "a", "b")], claims=[claim("a", storage_class="first"), claim("b", storage_class="second")],
                     classes=[first, second])
    _, found = placement(decisions)["default/etl-0"]
    assert found["launch"]["zone"] == "us-east-1b" and found["launch"]["instanceType"] == "m5.xlarge"


def test_a_local_volumes_hostname_is_ignored_so_the_pod_can_get_a_new_node():
    pv = volume("pv-scratch", local=True, zone_terms=[("kubernetes.io/hostname", "ip-10-0-0-1.ec2.internal"),
                                                      ("topology.kubernetes.io/zone", "us-west-2a")])
    decisions = plan([using(pod("scratch-0"), "scratch")], claims=[claim("scratch", volume_name="pv-scratch")], volumes=[pv])
    assert placement(decisions)["default/scratch-0"][0] == "claim"


@pytest.mark.parametrize("claims, volumes, classes, words", [
    ([], [], [], "persistentvolumeclaim default/data does not exist"),
    ([claim("data", storage_class="gp3", deleting=True)], [], [storage_class("gp3")], "is being deleted"),
    ([claim("data", volume_name="pv-1", phase="Lost")], [volume("pv-1")], [], "is Lost"),
    ([claim("data", volume_name="pv-1")], [volume("pv-1", deleting=True)], [], "pv-1, which is being deleted"),
    ([claim("data", volume_name="pv-1", annotations={}, phase="Pending")], [volume("pv-1")], [], "not bound yet"),
    ([claim("data", storage_class="")], [], [], "names no storageclass"),
    ([claim("data", storage_class="gp3")], [], [], "storageclass gp3 does not exist"),
    ([claim("data", storage_class="io2")], [], [storage_class("io2", mode="Immediate")], "binds Immediately"),
])
def test_a_claim_kube_scheduler_would_reject_keeps_the_pod_off_every_node_with_the_reason(claims, volumes, classes, words):
    decisions = plan([using(pod("app-0"), "data")], claims=claims, volumes=volumes, classes=classes,
                     nodes=[node("roomy", labels={"topology.kubernetes.io/zone": "us-east-1a"})])
    kind, reason = placement(decisions)["default/app-0"]
    assert kind == "unschedulable" and words in reason and not decisions["nodeClaims"]


def test_an_ephemeral_volume_uses_the_claim_kubernetes_makes_and_the_newest_default_class():
    older = storage_class("standard", zones=["us-east-1a"], default=True, created="2025-01-01T00:00:00Z")
    newer = storage_class("gp3", zones=["us-east-1c"], default=True, created="2026-01-01T00:00:00Z")
    decisions = plan([using(pod("job-0"), ephemeral="scratch")], claims=[claim("job-0-scratch")], classes=[older, newer])
    assert zone_of(placement(decisions)["default/job-0"]) == "us-east-1c"


def test_a_world_without_claims_does_not_read_volumes():
    decisions = plan([using(pod("legacy-0"), "never-listed")], with_storage=False)
    assert placement(decisions)["default/legacy-0"][0] == "claim"


def csi_node(name, count, driver=DRIVER):
    return {"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": name},
            "spec": {"drivers": [{"name": driver, "nodeID": f"i-{name}", "allocatable": {"count": count}}]}}


def existing(name):
    return node(name, cpu="64", memory="256Gi", labels={"topology.kubernetes.io/zone": "us-east-1a",
                                                      "karpenter.sh/nodepool": "default",
                                                      "node.kubernetes.io/instance-type": "m5.xlarge",
                                                      "karpenter.sh/capacity-type": "on-demand"})


def test_a_nodes_csi_limit_sends_the_pods_beyond_it_to_a_new_node():
    """Upstream's "should launch multiple nodes if required due to volume limits": a node that may attach
    10 volumes holds 5 pods of two claims each; the sixth needs another node."""
    gp3 = storage_class("gp3", zones=["us-east-1a"])
    pods, claims = [], []
    for i in range(6):
        claims += [claim(f"a-{i}", storage_class="gp3"), claim(f"b-{i}", storage_class="gp3")]
        pods.append(using(pod(f"worker-{i}"), f"a-{i}", f"b-{i}"))
    decisions = plan(pods, claims=claims, classes=[gp3], nodes=[existing("big")], csi_nodes=[csi_node("big", 10)])
    where = placement(decisions)
    on_node = [key for key, (kind, _) in where.items() if kind == "node"]
    assert len(on_node) == 5 and len(decisions["nodeClaims"]) == 1
    assert zone_of(next(w for w in where.values() if w[0] == "claim")) == "us-east-1a"


def test_one_claim_shared_by_many_pods_counts_once_and_a_non_csi_volume_not_at_all():
    """Upstream's "should launch a single node if all pods use the same PVC" and "should not fail for NFS
    volumes"."""
    shared = claim("shared", volume_name="pv-shared")
    nfs = claim("files", volume_name="pv-files", storage_class="")
    pods = [using(pod(f"reader-{i}"), "shared", "files") for i in range(40)]
    decisions = plan(pods, claims=[shared, nfs],
                     volumes=[volume("pv-shared", zone_terms=[("topology.kubernetes.io/zone", "us-east-1a")]),
                              volume("pv-files", driver=None)],
                     nodes=[existing("big")], csi_nodes=[csi_node("big", 1)])
    assert all(kind == "node" for kind, _ in placement(decisions).values())


def test_bad_storage_objects_are_named_by_their_path():
    from scheduling.engine.world import WorldError, parse_world

    doc = world(instance_types=catalogue(), pods=[])
    doc.update(storageClasses=[{"metadata": {"name": "x"}, "provisioner": DRIVER, "volumeBindingMode": "Lazy"}],
               persistentVolumeClaims=["not an object"],
               csiNodes=[{"metadata": {"name": "n"}, "spec": {"drivers": [{"name": DRIVER, "allocatable": {"count": -1}}]}}])
    with pytest.raises(WorldError) as raised:
        parse_world(doc)
    lines = "\n".join(raised.value.lines())
    assert "storageClasses[0].volumeBindingMode" in lines and "persistentVolumeClaims[0]" in lines
    assert "csiNodes[0].spec.drivers[0].allocatable.count" in lines
