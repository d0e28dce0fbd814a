"""The benchmark at a tiny size: its table is consistent (no timing assertions)."""

from collections import Counter

from scheduling import bench
from scheduling.engine import parse_world
from scheduling.bench.__main__ import main


def test_the_diverse_pods_are_upstreams_mix():
    pods = bench.diverse_pods(103)
    groups = Counter(p["metadata"]["name"].rsplit("-", 1)[0] for p in pods)
    assert groups == {"generic": 23, "zonal-spread": 20, "hostname-spread": 20, "zonal-affinity": 20,
                      "hostname-anti-affinity": 20}
    assert pods == bench.diverse_pods(103)  # seeded
    types = bench.instance_types()
    # The catalogue the engine builds from the fake DescribeInstanceTypes answers is upstream's fake one.
    catalogue = {it.name: it for it in parse_world(bench.world([])).instance_types}
    assert len(catalogue) == 400
    assert catalogue["fake-it-9"].capacity == {"cpu": 10_000, "memory": 20 * 2**30, "pods": 100,
                                               "ephemeral-storage": 20 * 2**30}
    assert catalogue["fake-it-9"].labels["karpenter.k8s.aws/instance-cpu"] == "10"
    assert {o["capacityType"] for o in types[0]["offerings"] if o["zone"] == "test-zone-3"} == {"on-demand"}
    prices = [t["offerings"][0]["price"] for t in types]
    assert prices == sorted(prices) and len(set(prices)) == 400


def test_every_pod_is_placed_or_reported_and_cost_is_at_least_the_bound():
    for reserved in (0, 5):
        run = bench.benchmark(250, repeat=1, memory=True, reserved=reserved)
        assert run.placed + run.unplaced == 250
        assert run.nodes > 0 and run.peak_bytes > 0
        if reserved:
            assert 0 < run.reserved_used <= run.reserved_usable
        else:
            assert run.cost >= run.bound > 0
            assert run.generic_cost >= run.generic_bound > 0


def test_the_command_prints_its_tables(capsys):
    assert main(["--sizes", "100,200", "--repeat", "1", "--reservations", "3", "--no-consolidation"]) == 0
    out = capsys.readouterr().out
    assert "pods/s best" in out and "generic cost/bound" in out and "reserved units used / usable" in out
    rows = [line.split() for line in out.splitlines() if line.strip().startswith(("100 ", "200 "))]
    assert len(rows) == 4


def test_the_interleaved_ratio_plans_both_variants_in_turn(capsys):
    from scheduling.bench import interleaved

    plain, reserved = interleaved(100, 2, reserved=3)
    assert len(plain.seconds) == len(reserved.seconds) == 2 and plain.pods == reserved.pods == 100
    assert main(["--interleaved", "--sizes", "100", "--repeat", "1", "--reservations", "3"]) == 0
    out = capsys.readouterr().out
    row = next(line.split() for line in out.splitlines() if line.strip().startswith("100 "))
    assert len(row) == 7 and 0 < float(row[3]) and 0 < float(row[6])
