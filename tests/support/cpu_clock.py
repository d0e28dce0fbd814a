"""What each test costs in CPU rather than in wall time (a busy machine stretches wall time, not CPU):
a pytest plugin, off unless named, for measuring the suite (docs/benchmark.md, "The suite's time").

    python -m pytest -p tests.support.cpu_clock -n 1 ...       # rows into var/cpu-clock/ (KARPWEB_CPU_CLOCK_DIR)
    python -m tests.support.cpu_clock var/cpu-clock            # CPU seconds per directory and the costliest tests

Per test (set-up, call and tear-down): the CPU of the test process and of every process under it
(servers it started, reaped or still running: read from /proc), and of the PostgreSQL backend that
serves the test's connection; wall time beside them. Linux only.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest

TICK = os.sysconf("SC_CLK_TCK")


def _stat(pid) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2:].split()  # fields from the 3rd on: the name may hold spaces


def tree_cpu() -> float:
    """CPU seconds of this process, its reaped children and every live descendant (with theirs)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    reaped = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = own.ru_utime + own.ru_stime + reaped.ru_utime + reaped.ru_stime
    children = defaultdict(list)
    for name in os.listdir("/proc"):
        if name.isdigit() and (fields := _stat(name)):
            children[int(fields[1])].append((int(name), fields))
    stack = [os.getpid()]
    while stack:
        for pid, fields in children.get(stack.pop(), ()):
            total += sum(int(x) for x in fields[11:15]) / TICK  # utime stime cutime cstime
            stack.append(pid)
    return total


def backend_cpu() -> tuple[int | None, float]:
    """(pid, CPU seconds) of the PostgreSQL backend behind Django's default connection, if one is open."""
    try:
        from django.db import connection
    except ImportError:
        return None, 0.0
    raw = connection.connection
    if raw is None or connection.vendor != "postgresql":
        return None, 0.0
    pid = raw.info.backend_pid
    fields = _stat(pid)
    return (pid, (int(fields[11]) + int(fields[12])) / TICK) if fields else (None, 0.0)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    cpu, wall, (backend, db) = tree_cpu(), time.perf_counter(), backend_cpu()
    yield
    cpu_after, wall_after, (backend_after, db_after) = tree_cpu(), time.perf_counter(), backend_cpu()
    db_cost = db_after - db if backend == backend_after else db_after  # a new connection: all of its CPU
    row = {"test": item.nodeid, "cpu": round(cpu_after - cpu, 4), "db": round(db_cost, 3),
           "wall": round(wall_after - wall, 4)}
    folder = Path(os.environ.get("KARPWEB_CPU_CLOCK_DIR", "var/cpu-clock"))
    folder.mkdir(parents=True, exist_ok=True)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    with open(folder / f"{worker}-{os.getpid()}.jsonl", "a") as rows:
        rows.write(json.dumps(row) + "\n")


def summary(folder: str, top: int = 25) -> None:
    rows = [json.loads(line) for path in Path(folder).glob("*.jsonl") for line in path.open()]
    per_directory = defaultdict(lambda: [0, 0.0, 0.0, 0.0])
    for row in rows:
        parts = row["test"].split("/")
        directory = "/".join(parts[:2]) if parts[0] == "tests" else parts[0]
        totals = per_directory[directory]
        totals[0] += 1
        totals[1] += row["cpu"]
        totals[2] += row["db"]
        totals[3] += row["wall"]
    print(f"{'directory':24} {'tests':>6} {'CPU s':>8} {'DB CPU s':>9} {'wall s':>8}")
    for directory, (count, cpu, db, wall) in sorted(per_directory.items(), key=lambda kv: -kv[1][1]):
        print(f"{directory:24} {count:6} {cpu:8.1f} {db:9.1f} {wall:8.1f}")
    print(f"{'all':24} {len(rows):6} {sum(r['cpu'] for r in rows):8.1f} {sum(r['db'] for r in rows):9.1f} "
          f"{sum(r['wall'] for r in rows):8.1f}")
    print(f"\nthe {top} costliest tests (CPU s, DB CPU s, wall s):")
    for row in sorted(rows, key=lambda r: -(r["cpu"] + r["db"]))[:top]:
        print(f"{row['cpu']:7.2f} {row['db']:6.2f} {row['wall']:7.2f}  {row['test']}")


if __name__ == "__main__":
    summary(sys.argv[1] if len(sys.argv) > 1 else "var/cpu-clock")
