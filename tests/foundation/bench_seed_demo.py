"""Not collected (no test_ prefix): run explicitly to measure seed_demo (issue #35).
    python -m pytest -p no:cacheprovider -n 0 -q -s tests/foundation/bench_seed_demo.py
RUNS=5 by default; PROFILE=1 prints a pyinstrument profile of one seeding of an empty database."""

import collections
import os
import re
import statistics
import time

import pytest
from django.core.management import call_command
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from fleet.scope import forget_default

pytestmark = pytest.mark.django_db

NOW = "2026-11-21T12:00:00Z"


def _kind(sql: str) -> str:
    sql = sql.strip()
    if "SAVEPOINT" in sql[:30]:
        return sql.split(" \"")[0].split(" s")[0]
    verb = sql.split()[0]
    table = re.search(r'(?:FROM|INTO|UPDATE)\s+"(\w+)"', sql)
    return f"{verb} {table.group(1) if table else '?'}"


def _seed_in_savepoint(*args):
    sid = transaction.savepoint()
    connection.queries_log.clear()  # CaptureQueriesContext counts by index in a log of at most 9,000
    with CaptureQueriesContext(connection) as ctx:
        start, cpu = time.perf_counter(), time.process_time()
        call_command("seed_demo", *args, now=NOW)
        elapsed, cpu = (time.perf_counter() - start) * 1000, (time.process_time() - cpu) * 1000
    transaction.savepoint_rollback(sid)
    forget_default()
    return elapsed, ctx.captured_queries, cpu


def _report(label, runs):
    times = [t for t, _, _ in runs]
    cpus = [c for _, _, c in runs]
    queries = runs[-1][1]
    print(f"\n{label}: wall median {statistics.median(times):.0f} ms (all {[round(t) for t in times]}), "
          f"process CPU median {statistics.median(cpus):.0f} ms (all {[round(c) for c in cpus]}), {len(queries)} queries")
    for kind, n in collections.Counter(_kind(q["sql"]) for q in queries).most_common(25):
        print(f"    {n:5d} {kind}")


def test_measure_seed_demo():
    runs = int(os.environ.get("RUNS", "5"))
    cold = _seed_in_savepoint()
    print(f"\ncold (first in process): {cold[0]:.0f} ms wall, {cold[2]:.0f} ms CPU, {len(cold[1])} queries")
    _report("empty database", [_seed_in_savepoint() for _ in range(runs)])
    _report("empty database, --one-cluster", [_seed_in_savepoint("--one-cluster") for _ in range(runs)])
    call_command("seed_demo", now=NOW)
    forget_default()
    _report("over its own world (again)", [_seed_in_savepoint() for _ in range(runs)])


@pytest.mark.skipif(not os.environ.get("PROFILE"), reason="PROFILE=1")
def test_profile_seed_demo():
    from pyinstrument import Profiler

    _seed_in_savepoint()  # warm: imports, caches
    profiler = Profiler(interval=0.0005)
    profiler.start()
    call_command("seed_demo", now=NOW)
    profiler.stop()
    print(profiler.output_text(unicode=False, color=False, show_all=False))


def test_print_digests():
    """What tests/foundation/test_seed_demo_world.py pins (run on the code whose world is the reference)."""
    import pprint

    from fleet.scope import forget_default
    from tests.foundation.test_seed_demo_world import one_hash, seeded

    def fresh(*sequence):
        sid = transaction.savepoint()
        for args in sequence:
            world = seeded(*args)
        transaction.savepoint_rollback(sid)
        forget_default()
        return world

    print("\nFLEET_WORLD = ", end="")
    pprint.pprint(fresh(()), width=120)
    print("ONE_CLUSTER_WORLD = ", end="")
    pprint.pprint(fresh(("--one-cluster",)), width=120)
    over = {}
    for first, then in [((), ()), ((), ("--one-cluster",)), (("--one-cluster",), ())]:
        over[f"{' '.join(first)} then {' '.join(then)}"] = one_hash(fresh(first, then))
    print("OVER_A_SEEDED_WORLD = ", end="")
    pprint.pprint(over, width=120)
    print("again, fleet: ", one_hash(fresh(())), " one-cluster: ", one_hash(fresh(("--one-cluster",))))


@pytest.mark.skipif(not os.environ.get("CPROFILE"), reason="CPROFILE=1")
def test_cpu_profile_seed_demo():
    """Process CPU only (the machine's other load left out): cProfile timed by process_time."""
    import cProfile
    import pstats

    _seed_in_savepoint()
    profiler = cProfile.Profile(time.process_time)
    profiler.enable()
    call_command("seed_demo", now=NOW)
    profiler.disable()
    stats = pstats.Stats(profiler)
    stats.sort_stats("cumulative").print_stats(r"demo\.py|utilization|recommendations|doctor|status|bulk_create|bulk_update|execute", 45)
