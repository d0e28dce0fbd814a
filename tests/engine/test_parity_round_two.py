"""Issue #49, the eight causes: each case in karpweb's own worlds after an `It` of
kubernetes-sigs/karpenter (pkg/controllers/provisioning/scheduling/{suite,topology}_test.go and
pkg/controllers/disruption/{suite,emptiness,consolidation,drift}_test.go), run through `simulate`."""

from scheduling.engine import simulate
from tests.engine.builders import NOW, instance_type, node, node_class, node_pool, placement, pod, world

ZONES = ("us-east-1a", "us-east-1b")


def catalogue():
    return [instance_type("small-type", "1", "2Gi", zones=ZONES, od=0.05),
            instance_type("large-type", "4", "16Gi", zones=ZONES, od=0.2)]


def plan(pods, **kwargs):
    kwargs.setdefault("instance_types", catalogue())
    return simulate(world(node_classes=[node_class("default")], pods=pods, **kwargs))


# 1. deprecated labels (upstream NormalizedLabels; suite_test "should launch pods with different
#    instance type node selectors on different instances") ------------------------------------------


def test_deprecated_instance_type_label_selects_like_the_current_one():
    decisions = plan([pod("old", selector={"beta.kubernetes.io/instance-type": "small-type"}),
                      pod("new", selector={"node.kubernetes.io/instance-type": "large-type"})])
    where = placement(decisions)
    assert where["default/old"][0] == "claim" and where["default/new"][0] == "claim"
    assert where["default/old"][1]["name"] != where["default/new"][1]["name"]
    assert where["default/old"][1]["launch"]["instanceType"] == "small-type"
    assert where["default/new"][1]["launch"]["instanceType"] == "large-type"


def test_deprecated_zone_region_arch_os_labels_are_read_as_their_current_names():
    terms = [{"matchExpressions": [
        {"key": "failure-domain.beta.kubernetes.io/zone", "operator": "In", "values": ["us-east-1b"]},
        {"key": "failure-domain.beta.kubernetes.io/region", "operator": "Exists"},
        {"key": "beta.kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
        {"key": "beta.kubernetes.io/os", "operator": "In", "values": ["linux"]},
    ]}]
    its = [instance_type(t["name"], t["cpu"], t["memory"], zones=ZONES, labels={"topology.kubernetes.io/region": "us-east-1"})
           for t in catalogue()]
    where = placement(plan([pod("zonal", terms=terms)], instance_types=its))
    assert where["default/zonal"][0] == "claim", where["default/zonal"]
    assert where["default/zonal"][1]["launch"]["zone"] == "us-east-1b"


def test_deprecated_label_selects_an_existing_node_by_its_current_label():
    existing = node("n1", labels={"node.kubernetes.io/instance-type": "large-type", "karpenter.sh/nodepool": "default",
                                  "topology.kubernetes.io/zone": "us-east-1a"})
    where = placement(plan([pod("p", selector={"beta.kubernetes.io/instance-type": "large-type"})], nodes=[existing]))
    assert where["default/p"] == ("node", "n1")
