"""Issue #49: the loop's world carries the DaemonSets (as their newest pods show them), so their
overhead on new nodes counts in the loop as in `simulate`, DaemonSets selecting
`karpenter.sh/initialized` included."""

import pytest

from scheduling.engine import parse_world
from scheduling.world import current_world
from tests.factories.scheduling import PodFactory

pytestmark = pytest.mark.django_db


def daemon_pod(name, node, cpu, key):
    """A DaemonSet's pod as the DaemonSet controller writes it: its template's node affinity with
    the controller's `matchFields metadata.name` pin added to each term."""
    spec = {"nodeName": node,
            "containers": [{"name": "agent", "resources": {"requests": {"cpu": cpu}}}],
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{
                "matchExpressions": [{"key": key, "operator": "In", "values": ["true"]}],
                "matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}}}}
    return PodFactory(namespace="kube-system", name=name, node_name=node, phase="Running", owner_kind="DaemonSet",
                      owner_name=name.rsplit("-", 1)[0], labels={"app": "agent"}, spec=spec)


def test_the_loops_world_holds_each_daemon_set_once_without_the_node_pin():
    daemon_pod("agent-a", "node-a", "1", "karpenter.sh/initialized")
    daemon_pod("agent-b", "node-b", "1", "karpenter.sh/initialized")
    daemon_pod("logger-a", "node-a", "250m", "karpenter.sh/registered")
    PodFactory(name="web-0")

    world = current_world()
    assert [(d["metadata"]["namespace"], d["metadata"]["name"]) for d in world["daemonSets"]] == [
        ("kube-system", "agent"), ("kube-system", "logger")]
    parsed = parse_world(world)
    agent = parsed.daemon_sets[0].pod
    assert agent.requests["cpu"] == 1000
    # The node pin is gone: the DaemonSet's own term is what a new node must satisfy.
    assert [sorted(r.key for r in alt) for alt in agent.alternatives] == [["karpenter.sh/initialized"]]
