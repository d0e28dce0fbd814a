"""The watch process's kept world: after any sequence of creates, updates and deletes of pods and
nodes, each handed over as ClusterSync hands them (the keys a batch of events touched, or a kind
listed in full), the kept world plans exactly what a fresh rebuild from the database plans, and a
change it was never told of is found by `check`, counted and repaired."""

import datetime

import pytest
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduling.adapters.kube.sync import SyncStats
from scheduling.engine.simulate import simulate
from scheduling.loop.engine_run import parse_readable
from scheduling.loop.keptworld import MISMATCH, KeptWorld
from scheduling.models import Decision, EventCount, Node, Pod
from scheduling.world import current_world
from tests.factories.scheduling import InstanceTypeFactory, NodeFactory, NodePoolFactory, OfferingFactory, PodFactory

pytestmark = pytest.mark.django_db
NOW = datetime.datetime(2026, 11, 25, 12, 0, tzinfo=datetime.timezone.utc)


@pytest.fixture
def small_world(db):
    for name, cpu in (("m5.large", 2000), ("m5.xlarge", 4000)):
        it = InstanceTypeFactory(name=name, cpu_millicores=cpu, memory_bytes=cpu * 4 * 2**20)
        OfferingFactory(instance_type=it, zone="us-east-1a", price=cpu / 20000)
    pool = NodePoolFactory(name="general", limits={})
    NodeFactory(name="node-a", node_pool=pool)
    PodFactory(name="bound", node_name="node-a", phase="Running")
    return pool


def pod_spec(cpu: str) -> dict:
    return {"containers": [{"name": "app", "resources": {"requests": {"cpu": cpu, "memory": "256Mi"}}}]}


def changed(kind: str, *keys) -> SyncStats:
    stats = SyncStats()
    stats.touched[kind] = set(keys)
    return stats


def listed(kind: str) -> SyncStats:
    stats = SyncStats()
    stats.listed.add(kind)
    return stats


def fresh_plan(now):
    return simulate(parse_readable(current_world(now))[0])


OPERATIONS = st.lists(st.tuples(
    st.sampled_from(["create pod", "bind pod", "unbind pod", "relabel pod", "resize pod", "finish pod", "delete pod",
                     "create node", "taint node", "delete node", "relist pods", "relist nodes", "bad pod"]),
    st.integers(0, 5), st.sampled_from(["100m", "700m", "1500m", "3"])), min_size=1, max_size=12)


def apply_operation(kept: KeptWorld, operation: str, index: int, cpu: str) -> None:
    pod_name, node_name = f"p{index}", f"n{index}"
    pod = Pod.objects.filter(namespace="default", name=pod_name).first()
    node = Node.objects.filter(name=node_name).first()
    if operation in ("create pod", "bad pod") and pod is None:
        spec = pod_spec("lots" if operation == "bad pod" else cpu)
        PodFactory(name=pod_name, spec=spec, labels={"app": "web"})
    elif operation == "bind pod" and pod and node:
        pod.node_name = node_name
        pod.save()
    elif operation == "unbind pod" and pod:
        pod.node_name = ""
        pod.save()
    elif operation == "relabel pod" and pod:
        pod.labels = {"app": f"web-{cpu}"}
        pod.save()
    elif operation == "resize pod" and pod:
        pod.spec = pod_spec(cpu)
        pod.save()
    elif operation == "finish pod" and pod:
        pod.phase = "Succeeded"
        pod.save()
    elif operation == "delete pod" and pod:
        pod.delete()
    elif operation == "create node" and node is None:
        NodeFactory(name=node_name, node_pool=NodePoolFactory(name="general"))
    elif operation == "taint node" and node:
        node.taints = [{"key": "dedicated", "value": cpu, "effect": "NoSchedule"}]
        node.save()
    elif operation == "delete node" and node:
        node.delete()
    if operation == "relist pods":  # after a 410 Gone: changes whose events were lost, then a full list
        Pod.objects.filter(name=pod_name).update(spec=pod_spec(cpu))
        kept.apply(listed("Pod"))
    elif operation == "relist nodes":
        Node.objects.filter(name=node_name).update(unschedulable=True)
        kept.apply(listed("Node"))
    elif "pod" in operation:
        kept.apply(changed("Pod", ("default", pod_name)))
    else:
        kept.apply(changed("Node", (node_name,)))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(operations=OPERATIONS)
def test_the_kept_world_plans_as_a_fresh_rebuild(small_world, operations):
    Pod.objects.filter(name__startswith="p").exclude(name="bound").delete()
    Node.objects.exclude(name="node-a").delete()
    kept = KeptWorld()
    kept.world(NOW)
    for operation, index, cpu in operations:
        apply_operation(kept, operation, index, cpu)
    assert simulate(kept.world(NOW)) == fresh_plan(NOW)
    assert kept.check() == {}


def test_a_run_parses_only_what_changed(small_world):
    for index in range(20):
        PodFactory(name=f"p{index}", spec=pod_spec("500m"))
    kept = KeptWorld()
    kept.world(NOW)
    parsed = kept.parses
    assert parsed == 22  # 21 pods and the node, once
    kept.world(NOW)
    assert kept.parses == parsed  # nothing changed: nothing parsed again
    Pod.objects.filter(name="p3").update(spec=pod_spec("3"))
    kept.apply(changed("Pod", ("default", "p3")))
    assert kept.parses == parsed + 1
    assert simulate(kept.world(NOW)) == fresh_plan(NOW)


def test_an_unreadable_pod_is_left_out_with_a_decision(small_world):
    kept = KeptWorld()
    kept.world(NOW)
    PodFactory(name="odd", spec=pod_spec("lots"))
    kept.apply(changed("Pod", ("default", "odd")))
    world = kept.world(NOW)
    assert "default/odd" not in {pod.key for pod in world.pods}
    skipped = Decision.objects.get(outcome=Decision.Outcome.SKIPPED)
    assert skipped.subject == "pod default/odd" and "cpu" in skipped.reason


def test_a_missed_change_is_found_counted_and_repaired(small_world, client):
    PodFactory(name="web", spec=pod_spec("500m"))
    kept = KeptWorld()
    kept.world(NOW)
    Pod.objects.filter(name="web").update(spec=pod_spec("3"))  # no event: the kept world does not know
    PodFactory(name="web-2", spec=pod_spec("500m"))
    assert kept.check() == {"Pod": 2}
    assert EventCount.objects.get(name=MISMATCH, label="Pod").value == 2
    assert kept.check() == {}  # reloaded
    assert simulate(kept.world(NOW)) == fresh_plan(NOW)
    assert 'karpweb_kept_world_mismatches_total{kind="Pod"} 2.0' in client.get("/metrics").content.decode()


def test_the_small_kinds_are_read_fresh_for_every_run(small_world):
    PodFactory(name="big", spec=pod_spec("3"))
    kept = KeptWorld()
    before = simulate(kept.world(NOW))
    assert [claim["instanceTypeOptions"] for claim in before["nodeClaims"]] == [["m5.xlarge"]]
    it = InstanceTypeFactory(name="m5.2xlarge", cpu_millicores=8000, memory_bytes=32 * 2**30)
    OfferingFactory(instance_type=it, zone="us-east-1a", price=0.01)  # a new, cheaper type: no event needed
    after = simulate(kept.world(timezone.now()))
    assert after["nodeClaims"][0]["instanceTypeOptions"][0] == "m5.2xlarge"


def test_the_lifecycle_pass_on_the_kept_world_decides_and_acts_as_on_the_database(demo):
    """The watch process runs drain, demotion, consolidation and drift on the world it keeps: the
    engine run it acts on equals the one rebuilt from the database (DescribeInstances included)."""
    from scheduling.loop import backends, disruption, steps

    kept = KeptWorld()
    now = timezone.now()
    cloud = backends.cloud()
    membership = disruption.instance_membership(cloud)
    assert membership and len(kept.world(now, membership).instances) == len(membership)  # EC2's word on each node
    from_kept = disruption.engine_decisions(cloud, now, kept.world)
    assert from_kept == disruption.engine_decisions(cloud, now)
    assert from_kept["disruptions"] and from_kept["demotions"]  # the demo has an idle node and an expired ODCR node
    counts = steps.lifecycle(now, world_at=kept.world)
    assert counts["demote_acted"] == 1 and counts["consolidate_planned"] >= 1
