"""Planning pauses the cyclic garbage collector (scheduling/engine/gcpause.py). That is free only
while the engine makes no reference cycles: a run must leave nothing for the collector, and the
collector must be as it was before the run."""

import gc

import pytest

from scheduling import bench
from scheduling.engine.consolidation_bench import bench_world
from scheduling.engine.simulate import simulate
from scheduling.engine.world import parse_world


@pytest.mark.parametrize("world", [bench.world(bench.diverse_pods(600), reserved=20), bench_world(nodes=60)],
                         ids=["pending pods and reservations", "consolidation"])
def test_a_run_leaves_no_cycles(world):
    parsed = parse_world(world)
    gc.collect()
    out = simulate(parsed)
    assert (out["nodeClaims"] or out["disruptions"]) and gc.isenabled()
    del out
    assert gc.collect() == 0  # nothing the cyclic collector would have had to free


def test_the_collector_is_left_as_it_was():
    parsed = parse_world(bench.world(bench.diverse_pods(50)))
    gc.disable()
    try:
        simulate(parsed)
        assert not gc.isenabled()  # the caller had paused it: still paused
    finally:
        gc.enable()
    simulate(parsed)
    assert gc.isenabled()
