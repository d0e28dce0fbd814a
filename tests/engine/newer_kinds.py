"""One WORLD.json that uses every kind added for issue #49 (volumes, PodDisruptionBudgets, NodeOverlays,
default topology spread and its Services and controllers), for tests that mutate worlds at random."""

from tests.engine.builders import instance_type, node, node_class, node_pool, pod, world


def kitchen_sink() -> dict:
    db = pod("db-0", cpu="500m", labels={"app": "db"})
    db["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": "data-db-0"}},
                             {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}]
    db["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "db", "controller": True}]
    web = pod("web-0", cpu="500m", labels={"app": "web"}, node="n1")
    doc = world(instance_types=[instance_type("m5.large", "2", "8Gi", zones=("us-east-1a", "us-east-1b"), spot=0.03)],
                node_classes=[node_class("default")], node_pools=[node_pool()],
                nodes=[node("n1", labels={"topology.kubernetes.io/zone": "us-east-1a"})], pods=[db, web])
    doc.update({
        "persistentVolumeClaims": [
            {"metadata": {"name": "data-db-0", "namespace": "default", "annotations": {"pv.kubernetes.io/bind-completed": "yes"}},
             "spec": {"volumeName": "pv-1", "storageClassName": "gp3"}, "status": {"phase": "Bound"}},
            {"metadata": {"name": "db-0-scratch", "namespace": "default"}, "spec": {"storageClassName": "gp3"}}],
        "persistentVolumes": [{"metadata": {"name": "pv-1"}, "spec": {"csi": {"driver": "ebs.csi.aws.com"}, "nodeAffinity": {
            "required": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-east-1b"]}]}]}}}}],
        "storageClasses": [{"metadata": {"name": "gp3"}, "provisioner": "ebs.csi.aws.com",
                            "volumeBindingMode": "WaitForFirstConsumer",
                            "allowedTopologies": [{"matchLabelExpressions": [
                                {"key": "topology.kubernetes.io/zone", "values": ["us-east-1b"]}]}]}],
        "csiNodes": [{"metadata": {"name": "n1"}, "spec": {"drivers": [{"name": "ebs.csi.aws.com", "allocatable": {"count": 2}}]}}],
        "podDisruptionBudgets": [{"metadata": {"name": "web", "namespace": "default"},
                                  "spec": {"selector": {"matchLabels": {"app": "web"}}}, "status": {"disruptionsAllowed": 0}}],
        "nodeOverlays": [{"metadata": {"name": "spot"}, "spec": {"requirements": [
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}], "priceAdjustment": "-10%",
            "capacity": {"example.com/fpga": "1"}, "weight": 5}}],
        "defaultTopologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                                              "whenUnsatisfiable": "ScheduleAnyway"}],
        "services": [{"metadata": {"name": "db", "namespace": "default"}, "spec": {"selector": {"app": "db"}}}],
        "statefulSets": [{"metadata": {"name": "db", "namespace": "default"},
                          "spec": {"selector": {"matchLabels": {"app": "db"}, "matchExpressions": [
                              {"key": "tier", "operator": "DoesNotExist"}]}}}],
    })
    return doc
