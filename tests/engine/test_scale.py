"""Guards against quadratic behaviour: Karpenter's benchmark shape (400 instance types) with and
without reservations. Issue 4 brings the full benchmark; these only catch regressions."""

import random
import time

from scheduling.engine import parse_world, plan


def benchmark_world(pods: int, reservations: int) -> dict:
    rnd = random.Random(42)
    types = []
    for i in range(400):
        offerings = [{"capacityType": "on-demand", "zone": z, "price": 0.05 * (i + 1)} for z in ("z1", "z2", "z3")]
        offerings += [{"capacityType": "spot", "zone": z, "price": 0.02 * (i + 1)} for z in ("z1", "z2")]
        types.append({"name": f"t{i}", "cpu": i + 1, "memory": f"{2 * (i + 1)}Gi", "pods": 10 * (i + 1), "offerings": offerings})
    crs = [{"CapacityReservationId": f"cr-{k}", "InstanceType": f"t{rnd.randrange(16)}", "AvailabilityZone": "z1",
            "AvailableInstanceCount": 3, "Tags": [{"Key": "t", "Value": "x"}]} for k in range(reservations)]
    pending = [{"metadata": {"name": f"p{k}", "uid": f"{k:08d}"}, "spec": {"containers": [{"resources": {"requests": {
        "cpu": rnd.choice(["100m", "250m", "500m", "1000m", "1500m"]),
        "memory": f"{rnd.choice([100, 256, 512, 1024, 2048, 4096])}Mi"}}}]}} for k in range(pods)]
    return {"now": "2026-11-21T12:00:00Z", "instanceTypes": types, "capacityReservations": crs,
            "ec2NodeClasses": [{"metadata": {"name": "d"}, "spec": {"capacityReservationSelectorTerms": [{"tags": {"t": "x"}}]}}],
            "nodePools": [{"metadata": {"name": "p"}, "spec": {"template": {"spec": {"nodeClassRef": {"name": "d"}}}}}],
            "pods": pending}


def test_ten_thousand_pods_over_400_instance_types_and_50_reservations():
    world = parse_world(benchmark_world(10_000, 50))
    started = time.perf_counter()
    result = plan(world)
    elapsed = time.perf_counter() - started
    assert not result.results.failures
    reserved = sum(1 for c in result.claims if c.offering.reserved)
    assert reserved == 150  # every unit of the 50 x 3 is used
    assert elapsed < 30, f"{elapsed:.1f}s for 10,000 pods"
