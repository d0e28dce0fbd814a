"""The reaction benchmark's cluster written straight into the database, in bulk (seconds at 5,000
nodes): the demo world (one cluster) plus `nodes` registered nodes of a pool karpweb does not manage,
`pods_per_node` bound pods each, `in_flight` NodeClaims karpweb launched whose nodes have not
registered, and `pending` pods no existing node is in the pool of (scripts/reaction_bench.py makes
the same shape through the kube-apiserver). For the loop's query-count guard
(tests/loop/test_run_cost_flat.py) and for profiling a provisioning run and a lifecycle pass
without an API server."""

from __future__ import annotations

import datetime

from django.core.management import call_command
from django.utils import timezone

from scheduling.claim_hashes import PROVISIONER_LABEL
from scheduling.models import Node, NodeClaim, NodePool, Pod

NAMESPACE = "bench"


def seed_reaction_world(nodes: int, pods_per_node: int = 10, in_flight: int = 20, pending: int = 5) -> None:
    call_command("seed_demo", "--one-cluster")
    add_cluster(nodes, pods_per_node, in_flight, pending)


def add_cluster(nodes: int, pods_per_node: int = 10, in_flight: int = 20, pending: int = 5, *, first: int = 0) -> None:
    """`first`: the first node's (and its pods') number, to grow a world already seeded."""
    now = timezone.now()
    pool = NodePool.objects.select_related("node_class").get(name="general")
    made = Node.objects.bulk_create([
        Node(name=f"existing-{i:05d}", uid=f"existing-uid-{i}", provider_id=f"aws:///us-east-1a/i-{i:017x}",
             labels={"kubernetes.io/hostname": f"existing-{i:05d}", "karpenter.sh/nodepool": "existing"},
             allocatable_cpu_millicores=15890, allocatable_memory_bytes=61 * 2**30, allocatable_pods=110, ready=True,
             conditions=[{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
             created_at=now - datetime.timedelta(days=1), synced_at=now)
        for i in range(first, first + nodes)], batch_size=2000)
    Pod.objects.bulk_create([
        Pod(namespace=NAMESPACE, name=f"bound-{i:06d}", uid=f"bound-uid-{i}", node=node, node_name=node.name,
            phase="Running", cpu_request_millicores=100, memory_request_bytes=256 * 2**20, labels={"app": "bench"},
            spec=_spec("100m"), created_at=now, synced_at=now)
        for i, node in enumerate((node for node in made for _ in range(pods_per_node)), first * pods_per_node)],
        batch_size=5000)
    NodeClaim.objects.bulk_create([
        NodeClaim(name=f"general-flight{i:03d}", uid=f"flight-uid-{i}", node_pool=pool, node_class=pool.node_class,
                  instance_type="m5.large", zone="us-east-1a", capacity_type="on-demand",
                  labels={PROVISIONER_LABEL: "karpweb", "karpenter.sh/nodepool": pool.name},
                  provider_id=f"aws:///us-east-1a/i-f{i:016x}", created_at=now, launched_at=now, synced_at=now,
                  conditions=[{"type": "Launched", "status": "True", "reason": "Launched"}])
        for i in range(in_flight)])
    Pod.objects.bulk_create([
        Pod(namespace=NAMESPACE, name=f"steady-{i:05d}", uid=f"steady-uid-{i}", phase="Pending",
            cpu_request_millicores=1500, memory_request_bytes=256 * 2**20, labels={"app": "bench"},
            spec={**_spec("1500m"), "nodeSelector": {"karpenter.sh/nodepool": pool.name}}, created_at=now, synced_at=now)
        for i in range(pending)])


def _spec(cpu: str) -> dict:
    return {"containers": [{"name": "app", "image": "registry.example/app:1",
                            "resources": {"requests": {"cpu": cpu, "memory": "256Mi"}}}]}
