"""#47 (15): a world whose catalogue holds no instance type (a real cluster beside a simulated or unsynced EC2)
says so in every reason it causes, in plain words, instead of naming a requirement that "rules out every type"."""

from scheduling.engine.explain import EMPTY_CATALOGUE
from scheduling.engine.simulate import simulate
from tests.engine.builders import instance_type, node_pool, pod, world


def test_every_pod_left_pending_by_an_empty_catalogue_says_the_catalogue_is_empty():
    pools = [node_pool("web", requirements=[{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]),
             node_pool("batch")]
    pods = [pod("a", cpu="1"), pod("b", selector={"topology.kubernetes.io/zone": "us-east-1a"})]
    decisions = simulate(world(instance_types=(), node_pools=pools, pods=pods))
    reasons = {entry["pod"]: entry["reason"] for entry in decisions["unschedulable"]}
    assert set(reasons) == {"default/a", "default/b"}
    for reason in reasons.values():
        assert sorted(reason.split("; ")) == [f"nodepool batch: {EMPTY_CATALOGUE}", f"nodepool web: {EMPTY_CATALOGUE}"]
        assert "rules out every type" not in reason


def test_a_catalogue_with_types_keeps_its_own_reasons():
    decisions = simulate(world(instance_types=[instance_type("m5.large", "2", "8Gi")], pods=[pod("a", cpu="64")]))
    assert "catalogue is empty" not in decisions["unschedulable"][0]["reason"]
