"""Every example NodePool (examples/nodepools/) places its workload on the catalogue karpweb builds
from the EC2 test server, through the product's own paths: EC2 test server -> sync_catalogue and
sync_reservations -> models; the YAML -> the cluster sync's writer -> models; models -> WORLD.json
-> engine. The what-if world under examples/ is kept equal to what scripts/example_world.py builds."""

from __future__ import annotations

import copy
import json
from collections import defaultdict
from datetime import timedelta

import pytest

from scheduling.adapters.ec2.sync import sync_catalogue, sync_reservations
from scheduling.adapters.kube.interface import ObjectList
from scheduling.adapters.kube.sync import ClusterSync
from scheduling.engine import simulate
from scheduling.models import InstanceType
from scheduling.world import current_world
from scripts import example_world
from tests.support.ec2_fixtures import T0, Clock, build_provider, server_config, set_test_credentials
from tests.support.module_rows import rolled_back_at_the_end

pytestmark = pytest.mark.django_db
K = "karpenter.k8s.aws/"
KINDS = (("EC2NodeClass", "ec2NodeClasses"), ("NodePool", "nodePools"), ("Pod", "pods"))


@pytest.fixture(scope="module")
def synced(django_db_setup, django_db_blocker, ec2_server, boto_session):
    """The examples' decisions, made once for the module (tests/support/module_rows.py): syncing
    1,300 instance types and planning on them takes seconds, and every test here only reads the
    outcome."""

    def build() -> dict:
        with pytest.MonkeyPatch.context() as monkeypatch:
            set_test_credentials(monkeypatch)
            return decide(ec2_server, boto_session)

    with rolled_back_at_the_end(django_db_blocker, build) as result:
        yield result


def decide(server, boto_session) -> dict:
    """The examples' decisions on the whole catalogue the test server sells in us-east-1."""
    server.reset()
    clock = Clock(server, T0)
    block = server.add_capacity_block("p5.48xlarge", "us-east-1a", 2, start=T0 - timedelta(minutes=30),
                                      end=T0 + timedelta(days=3), tags={"purpose": "llm-training"})
    # Spot markets for the spot pool's families (the test server has none of its own).
    for family in ("c6i", "c6a", "c7i", "m6i", "m6a", "m7i", "r6i"):
        for size, cpus in (("large", 2), ("xlarge", 4), ("2xlarge", 8), ("4xlarge", 16)):
            for zone in ("us-east-1a", "us-east-1b"):
                server.set_spot_price(f"{family}.{size}", zone, 0.017 * cpus, T0 - timedelta(minutes=10))
    objects = example_world.kubernetes_objects()
    writer = ClusterSync(adapter=None)
    for kind, key in KINDS:
        writer.apply_snapshot(ObjectList(kind, objects[key], "1"))
    provider = build_provider(server_config(server.endpoint_url), clock, [], boto_session, instance_type_patterns=())
    try:
        sync_catalogue(provider, now=clock())
        sync_reservations(provider, now=clock())
    finally:
        server.reset()
    result = simulate(current_world(clock()))
    result["block"] = block
    return result


@pytest.fixture
def decisions(synced):
    """This test's own copy of the decisions (the models behind them are the module's, read-only)."""
    return copy.deepcopy(synced)


def placements(decisions) -> dict[str, list[dict]]:
    by_app = defaultdict(list)
    for claim in decisions["nodeClaims"]:
        for pod in claim["pods"]:
            by_app[pod.split("/")[1].rsplit("-", 1)[0]].append(claim)
    return by_app


@pytest.fixture
def labels_of(decisions):
    """An instance type's labels as the sync stored them: read in one query for the test (the
    pools' options name hundreds of types), looked up by name (an unknown name is a KeyError)."""
    return dict(InstanceType.objects.values_list("name", "labels")).__getitem__


def test_every_example_workload_lands_in_its_pool(decisions):
    assert decisions["unschedulable"] == [] and decisions["deferred"] == [], json.dumps(decisions["unschedulable"], indent=1)
    assert InstanceType.objects.count() > 1300  # the whole catalogue, not a hand-picked one
    where = placements(decisions)
    expected_pools = {"web": "general", "batch": "spot-batch", "api": "multi-arch", "cache": "large",
                      "scratch": "local-nvme", "render": "gpu", "inference": "neuron", "trainer": "p5-capacity-block"}
    for app, pool in expected_pools.items():
        assert where[app] and {claim["nodePool"] for claim in where[app]} == {pool}, app


def test_general_purpose_pool_takes_current_c_m_r_on_x86(decisions, labels_of):
    for claim in placements(decisions)["web"]:
        for name in claim["instanceTypeOptions"]:
            labels = labels_of(name)
            assert labels[K + "instance-category"] in {"c", "m", "r"}, name
            assert int(labels[K + "instance-generation"]) > 4 and labels["kubernetes.io/arch"] == "amd64", name
        assert claim["launch"]["capacityType"] in {"on-demand", "spot"}


def test_spot_pool_keeps_four_families_open(decisions, labels_of):
    for claim in placements(decisions)["batch"]:
        assert claim["launch"]["capacityType"] == "spot"
        families = {labels_of(name)[K + "instance-family"] for name in claim["instanceTypeOptions"]}
        assert families <= {"c6i", "c6a", "c7i", "m6i", "m6a", "m7i", "r6i"} and len(families) >= 4
        assert all(int(labels_of(name)[K + "instance-cpu"]) <= 16 for name in claim["instanceTypeOptions"])


def test_multi_arch_pool_uses_gte_and_lte(decisions, labels_of):
    arches = set()
    for claim in placements(decisions)["api"]:
        for name in claim["instanceTypeOptions"]:
            labels = labels_of(name)
            assert int(labels[K + "instance-generation"]) >= 7 and int(labels[K + "instance-cpu"]) <= 8, name
            assert labels[K + "instance-capability-flex"] == "false", name
            arches.add(labels["kubernetes.io/arch"])
    assert arches == {"amd64", "arm64"}


def test_large_pool_by_instance_cpu(decisions, labels_of):
    for claim in placements(decisions)["cache"]:
        assert claim["launch"]["capacityType"] == "on-demand"
        assert all(int(labels_of(name)[K + "instance-cpu"]) > 31 for name in claim["instanceTypeOptions"])


def test_local_nvme_pool_holds_what_only_a_raid0_instance_store_holds(decisions, labels_of):
    for claim in placements(decisions)["scratch"]:
        for name in claim["instanceTypeOptions"]:
            labels = labels_of(name)
            assert int(labels[K + "instance-local-nvme"]) >= 400 and int(labels[K + "instance-network-bandwidth"]) >= 10000


def test_gpu_and_neuron_pools(decisions, labels_of):
    where = placements(decisions)
    for claim in where["render"]:
        assert all(labels_of(n)[K + "instance-gpu-manufacturer"] == "nvidia" for n in claim["instanceTypeOptions"])
        assert all(int(labels_of(n)[K + "instance-gpu-count"]) <= 4 for n in claim["instanceTypeOptions"])
    for claim in where["inference"]:
        assert all(labels_of(n)[K + "instance-accelerator-name"] == "inferentia2" for n in claim["instanceTypeOptions"])


def test_gpu_and_efa_pods_land_in_the_p5_capacity_block_and_nowhere_else(decisions):
    claims = placements(decisions)["trainer"]
    assert len(claims) == 2
    for claim in claims:
        assert claim["instanceTypeOptions"] == ["p5.48xlarge"]
        assert claim["launch"]["capacityType"] == "reserved"
        assert claim["launch"]["reservationID"] == decisions["block"]
        assert claim["launch"]["reservationType"] == "capacity-block"


def test_the_what_if_world_is_the_yaml_and_places_every_pod():
    path = example_world.EXAMPLES / "world.json"
    assert json.loads(path.read_text()) == json.loads(json.dumps(example_world.world())), (
        "examples/nodepools/world.json is stale: run scripts/example_world.py > examples/nodepools/world.json")
    result = simulate(json.loads(path.read_text()))
    assert result["unschedulable"] == [] and result["deferred"] == []
    assert {claim["nodePool"] for claim in result["nodeClaims"]} == {
        "general", "spot-batch", "multi-arch", "large", "local-nvme", "gpu", "neuron", "p5-capacity-block"}
