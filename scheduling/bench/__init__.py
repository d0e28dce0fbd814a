"""Karpenter's scheduling benchmark, reproduced against karpweb's engine (`python -m scheduling.bench`).

The shape is upstream's benchmark (kubernetes-sigs/karpenter
`pkg/controllers/provisioning/scheduling/scheduling_benchmark_test.go`):

  * 400 instance types (`fake.InstanceTypes(400)`): type i has i+1 vCPU, 2(i+1) GiB and 10(i+1)
    pods; offerings spot in test-zone-1 and test-zone-2, on-demand in test-zone-1, -2 and -3. Prices
    are the fake provider's `PriceFromResources`: 0.1 per vCPU + 0.1 per 10^9 bytes of memory, the
    same for every offering of a type (so monotone in size, and the cost of a vCPU is the same on
    every type). Node overhead as the fake provider's: kube-reserved 100m CPU and 10Mi, no eviction
    threshold.
  * One NodePool, no requirements and no limits.
  * The diverse pod mix in five equal groups (`makeDiversePods`, the five the issue names): generic,
    zonal topology spread (maxSkew 1, DoNotSchedule), hostname topology spread (the same), zonal
    pod affinity and hostname pod anti-affinity; the remainder of the division is generic. CPU from
    {100m, 250m, 500m, 1000m, 1500m}, memory from {100, 256, 512, 1024, 2048, 4096}Mi. Labels as
    upstream's: generic and spread pods carry `my-label` (a..g at random) and select `my-label` (a
    value drawn independently, so a pod often spreads against other pods than itself); affinity
    pods carry `my-affinity` and require affinity to a random `my-affinity` value (self-affinity
    when the two draws agree, which is what lets the first pod of a value seed a zone);
    anti-affinity pods are all `app: nginx` and repel each other per hostname. Seed 42
    (Python's `random`, so not the same draws as Go's `math/rand`; the distribution is the same).
  * The reservations variant adds 50 ODCRs of assorted small types (1 to 16 vCPU), zones and counts.

Cost: the plan's price per hour (each claim's launch price) against a lower bound: the cheapest
price per vCPU times the vCPU requested, and the same for memory; the larger of the two. Node
overhead and rounding up to whole instance types are what separate the two.
"""

from __future__ import annotations

import gc
import random
import statistics
import time
import tracemalloc
import uuid
from dataclasses import dataclass, field

from scheduling.engine import parse_world, plan
from scheduling.engine.quantities import CPU, MEMORY

ZONES = ("test-zone-1", "test-zone-2", "test-zone-3")
SPOT_ZONES = ZONES[:2]
INSTANCE_TYPES = 400
CPUS = (100, 250, 500, 1000, 1500)
MEMORIES = (100, 256, 512, 1024, 2048, 4096)
LABEL_VALUES = "abcdefg"
GROUPS = ("generic", "zonal-spread", "hostname-spread", "zonal-affinity", "hostname-anti-affinity")
SEED = 42
ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"
GIB = 2**30


def price(cpu: int, memory_gib: int) -> float:
    """The fake provider's PriceFromResources: 0.1 per vCPU + 0.1 per 10^9 bytes of memory."""
    return round(0.1 * cpu + 0.1 * memory_gib * GIB / 1e9, 6)


def instance_types(count: int = INSTANCE_TYPES) -> list[dict]:
    """Each type's name and offerings; its shape comes from `described_types` (as from EC2)."""
    types = []
    for i in range(count):
        cost = price(i + 1, 2 * (i + 1))
        offerings = [{"capacityType": "spot", "zone": z, "price": cost} for z in SPOT_ZONES]
        offerings += [{"capacityType": "on-demand", "zone": z, "price": cost} for z in ZONES]
        types.append({"name": f"fake-it-{i}", "offerings": offerings})
    return types


def described_types(count: int = INSTANCE_TYPES) -> list[dict]:
    """The fake types as DescribeInstanceTypes would answer, so the benchmark builds its catalogue
    the way the EC2 sync does (engine.ec2types.derive): i+1 vCPU, 2(i+1) GiB, and one ENI with
    10(i+1)-1 addresses, which the VPC CNI formula turns into upstream's 10(i+1) pods."""
    return [{"InstanceType": f"fake-it-{i}", "VCpuInfo": {"DefaultVCpus": i + 1},
             "MemoryInfo": {"SizeInMiB": 2048 * (i + 1)}, "ProcessorInfo": {"SupportedArchitectures": ["x86_64"]},
             "NetworkInfo": {"MaximumNetworkInterfaces": 1, "Ipv4AddressesPerInterface": 10 * (i + 1) - 1},
             "SupportedUsageClasses": ["on-demand", "spot"]} for i in range(count)]


def reservations(count: int, seed: int = SEED) -> list[dict]:
    """`count` ODCRs of assorted small types (1 to 16 vCPU), zones and unit counts."""
    rnd = random.Random(f"reservations-{seed}")
    return [{"CapacityReservationId": f"cr-{k:04x}", "InstanceType": f"fake-it-{rnd.randrange(16)}",
             "AvailabilityZone": rnd.choice(ZONES), "AvailableInstanceCount": rnd.randint(1, 4),
             "InstanceMatchCriteria": "targeted", "Tags": [{"Key": "bench", "Value": "yes"}]} for k in range(count)]


class _Draws:
    """Upstream's random helpers, on a seeded Python RNG."""

    def __init__(self, seed: int):
        self.rnd = random.Random(seed)
        self.uids = random.Random(f"uids-{seed}")

    def label(self) -> str:
        return self.rnd.choice(LABEL_VALUES)

    def requests(self) -> dict:
        return {"cpu": f"{self.rnd.choice(CPUS)}m", "memory": f"{self.rnd.choice(MEMORIES)}Mi"}

    def uid(self) -> str:
        return str(uuid.UUID(int=self.uids.getrandbits(128), version=4))


def _pod(draws: _Draws, group: str, index: int) -> dict:
    spec: dict = {}
    if group == "generic":
        labels = {"my-label": draws.label()}
    elif group in ("zonal-spread", "hostname-spread"):
        labels = {"my-label": draws.label()}
        spec["topologySpreadConstraints"] = [{
            "maxSkew": 1, "topologyKey": ZONE if group == "zonal-spread" else HOSTNAME,
            "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"my-label": draws.label()}}}]
    elif group == "zonal-affinity":
        labels = {"my-affinity": draws.label()}
        spec["affinity"] = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
            "labelSelector": {"matchLabels": {"my-affinity": draws.label()}}, "topologyKey": ZONE}]}}
    else:
        labels = {"app": "nginx"}
        spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
            "labelSelector": {"matchLabels": {"app": "nginx"}}, "topologyKey": HOSTNAME}]}}
    spec["containers"] = [{"name": "app", "resources": {"requests": draws.requests()}}]
    return {"metadata": {"name": f"{group}-{index}", "namespace": "default", "uid": draws.uid(), "labels": labels},
            "spec": spec}


def diverse_pods(count: int, seed: int = SEED) -> list[dict]:
    """`count` pods: five equal groups, the remainder generic (upstream `makeDiversePods`)."""
    draws = _Draws(seed)
    each = count // len(GROUPS)
    pods = [_pod(draws, group, i) for group in GROUPS for i in range(each)]
    pods += [_pod(draws, "generic", each + i) for i in range(count - len(pods))]
    return pods


def world(pods: list[dict], reserved: int = 0) -> dict:
    node_class = {"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "default"},
                  "spec": {"kubelet": {"kubeReserved": {"cpu": "100m", "memory": "10Mi", "ephemeral-storage": "0"},
                                       "evictionHard": {"memory.available": "0", "nodefs.available": "0%"}}}}
    if reserved:
        node_class["spec"]["capacityReservationSelectorTerms"] = [{"tags": {"bench": "yes"}}]
    pool = {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
            "spec": {"template": {"spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass",
                                                            "name": "default"}, "requirements": []}}}}
    # The fake provider takes no VM overhead off: neither does the benchmark, to stay upstream's shape.
    return {"now": "2026-11-21T12:00:00Z", "describeInstanceTypes": {"InstanceTypes": described_types()},
            "vmMemoryOverheadPercent": 0, "instanceTypes": instance_types(),
            "capacityReservations": reservations(reserved) if reserved else [],
            "ec2NodeClasses": [node_class], "nodePools": [pool], "nodes": [], "pods": pods}


# measuring ---------------------------------------------------------------------------------------


@dataclass
class Run:
    pods: int
    seconds: list[float] = field(default_factory=list)
    cpu_seconds: list[float] = field(default_factory=list)  # process CPU time: what contention does not inflate
    nodes: int = 0
    placed: int = 0
    unplaced: int = 0
    cost: float = 0.0
    bound: float = 0.0
    generic_cost: float = 0.0
    generic_bound: float = 0.0
    peak_bytes: int | None = None
    reserved_used: int = 0
    reserved_usable: int = 0

    @property
    def best(self) -> float:
        return self.pods / min(self.seconds)

    @property
    def median(self) -> float:
        return self.pods / statistics.median(self.seconds)

    @property
    def cpu_best(self) -> float:
        return self.pods / min(self.cpu_seconds)

    @property
    def ratio(self) -> float:
        return self.cost / self.bound if self.bound else float("nan")

    @property
    def generic_ratio(self) -> float:
        return self.generic_cost / self.generic_bound if self.generic_bound else float("nan")


def lower_bound(doc: dict, parsed=None) -> float:
    """The cheapest price per vCPU times the vCPU requested, the same for memory; the larger."""
    parsed = parsed or parse_world(doc)
    per_cpu = min(o.price / (it.capacity[CPU] / 1000) for it in parsed.instance_types for o in it.offerings)
    per_gib = min(o.price / (it.capacity[MEMORY] / GIB) for it in parsed.instance_types for o in it.offerings)
    cpu = sum(p.requests.get(CPU, 0) for p in parsed.pods) / 1000
    memory = sum(p.requests.get(MEMORY, 0) for p in parsed.pods) / GIB
    return max(per_cpu * cpu, per_gib * memory)


def measure(doc: dict, repeat: int = 1, memory: bool = False) -> tuple[Run, object]:
    """Plan the world `repeat` times (parsing is not timed, as upstream builds its pods before the
    timer); the outcome of the last run. With `memory`, one more run under tracemalloc."""
    count = len(doc["pods"])
    run = Run(count)
    result = None
    for _ in range(repeat):
        result = parsed = None
        gc.collect()  # every run starts from the same heap: the last run's garbage is not this one's cost
        parsed = parse_world(doc)
        started, cpu = time.perf_counter(), time.process_time()
        result = plan(parsed)
        run.seconds.append(time.perf_counter() - started)
        run.cpu_seconds.append(time.process_time() - cpu)
    results = result.results
    run.nodes = len(result.claims)
    run.placed = sum(len(c.claim.pods) for c in result.claims) + len(results.bindings)
    run.unplaced = len(results.failures)
    run.cost = sum(c.offering.price for c in result.claims)
    run.bound = lower_bound(doc, parsed)
    reserved = [c for c in result.claims if c.offering.reserved]
    run.reserved_used = len(reserved)
    run.reserved_usable = sum(r["AvailableInstanceCount"] for r in doc.get("capacityReservations", []))
    if memory:
        parsed = parse_world(doc)
        tracemalloc.start()
        plan(parsed)
        run.peak_bytes = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return run, result


def generic_only(pods: list[dict]) -> list[dict]:
    return [p for p in pods if p["metadata"]["name"].startswith("generic-")]


def benchmark(size: int, repeat: int = 3, memory: bool = True, reserved: int = 0) -> Run:
    """One row of the table: the mixed run (timed `repeat` times) and the generic group alone."""
    pods = diverse_pods(size)
    run, _ = measure(world(pods, reserved), repeat, memory)
    if not reserved:
        generic, _ = measure(world(generic_only(pods)))
        run.generic_cost, run.generic_bound = generic.cost, generic.bound
    return run


def interleaved(size: int, repeat: int, reserved: int) -> tuple[Run, Run]:
    """The plain mix and the same with reservations, planned one after the other `repeat` times:
    on a noisy host both variants meet the same moments, so their ratio holds where pods/s do not."""
    pods = diverse_pods(size)
    docs = (world(pods), world(pods, reserved))
    runs = (Run(size), Run(size))
    for _ in range(repeat):
        for doc, run in zip(docs, runs):
            one, _ = measure(doc)
            run.seconds += one.seconds
            run.cpu_seconds += one.cpu_seconds
    return runs
