"""`python -m scheduling.bench [--sizes 1000,5000,10000,20000] [--repeat 3] [--quick] [--no-memory]
[--no-reserved] [--consolidation | --no-consolidation] [--profile SIZE] [--interleaved]`

Prints Karpenter's scheduling benchmark (see scheduling/bench/__init__.py) against karpweb's
engine: pods per second (best and median of the repeats, and per second of the process's own CPU
time, which other load on the machine does not inflate), nodes, plan cost against the lower
bound (all pods, and the generic group planned on its own), peak memory; then the same mix with
50 reservations and the reserved units used; then the consolidation benchmark if it exists.
"""

from __future__ import annotations

import argparse
import importlib
import resource
import sys

from . import benchmark, interleaved

GO_REFERENCE = {1000: 1290, 2000: 1300, 5000: 1340, 10000: 1230, 20000: 990}  # pods/s, PR #2486


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scheduling.bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,5000,10000,20000", help="pod counts, comma-separated")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per size (best and median are shown)")
    parser.add_argument("--quick", action="store_true", help="CI smoke: 500 and 1000 pods, one run each")
    parser.add_argument("--no-memory", action="store_true", help="skip the tracemalloc run")
    parser.add_argument("--no-reserved", action="store_true", help="skip the reservations variant")
    parser.add_argument("--reservations", type=int, default=50, help="reservations in the second variant")
    parser.add_argument("--consolidation", dest="consolidation", action="store_true", default=None,
                        help="also run the consolidation benchmark (default: run it when it exists)")
    parser.add_argument("--no-consolidation", dest="consolidation", action="store_false")
    parser.add_argument("--profile", type=int, metavar="SIZE", help="cProfile one run of SIZE pods instead of the table")
    parser.add_argument("--interleaved", action="store_true",
                        help="only the reserved / plain ratio, the two variants planned in turn (for noisy hosts)")
    args = parser.parse_args(argv)
    sizes = [500, 1000] if args.quick else [int(s) for s in args.sizes.split(",") if s.strip()]
    repeat = 1 if args.quick else max(1, args.repeat)
    if args.profile:
        return profile(args.profile)
    if args.interleaved:
        return ratios(sizes, repeat, args.reservations)

    print(f"karpweb scheduling benchmark: 400 instance types, diverse pods in 5 groups, seed 42, "
          f"{repeat} run(s) per size, Python {sys.version.split()[0]}")
    print()
    header = ("pods", "pods/s best", "pods/s median", "pods/CPU-s", "Go ref", "nodes", "unplaced", "cost $/h",
              "bound $/h", "cost/bound", "generic cost/bound", "peak MiB")
    rows, runs = [], []
    for size in sizes:
        run = benchmark(size, repeat, memory=not args.no_memory)
        runs.append(run)
        rows.append((f"{size:,}", f"{run.best:,.0f}", f"{run.median:,.0f}", f"{run.cpu_best:,.0f}",
                     f"{GO_REFERENCE.get(size, '-'):,}"
                     if size in GO_REFERENCE else "-", f"{run.nodes:,}", f"{run.unplaced:,}", f"{run.cost:,.2f}",
                     f"{run.bound:,.2f}", f"{run.ratio:.3f}", f"{run.generic_ratio:.3f}",
                     f"{run.peak_bytes / 2**20:,.1f}" if run.peak_bytes is not None else "-"))
        if run.unplaced or run.placed + run.unplaced != size:
            print(f"  note: {size} pods: {run.placed} placed, {run.unplaced} reported unplaced")
    print_table(header, rows)
    if len(sizes) > 1 and sizes[0] < sizes[-1]:
        first, last = runs[0], runs[-1]
        print()
        print(f"growth, time per pod at {last.pods:,} pods / at {first.pods:,} (1.00 = linear): "
              f"{first.best / last.best:.2f} wall-clock, {first.cpu_best / last.cpu_best:.2f} CPU time (best runs)")

    if not args.no_reserved:
        print()
        print(f"with {args.reservations} reservations (assorted types of 1-16 vCPU, 1-4 units each):")
        rows = []
        for size in sizes:
            run = benchmark(size, repeat, memory=False, reserved=args.reservations)
            rows.append((f"{size:,}", f"{run.best:,.0f}", f"{run.median:,.0f}", f"{run.cpu_best:,.0f}", f"{run.nodes:,}",
                         f"{run.unplaced:,}", f"{run.reserved_used} / {run.reserved_usable}", f"{run.cost:,.2f}"))
        print_table(("pods", "pods/s best", "pods/s median", "pods/CPU-s", "nodes", "unplaced",
                     "reserved units used / usable", "cost $/h"), rows)

    if args.consolidation is not False:
        print()
        consolidation(required=bool(args.consolidation), repeat=repeat)
    print()
    print(f"process peak RSS: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:,.0f} MiB")
    return 0


def ratios(sizes: list[int], repeat: int, reservations: int) -> int:
    print(f"reserved / plain: the mix alone and with {reservations} reservations planned in turn, {repeat} time(s) "
          f"each per size, Python {sys.version.split()[0]}")
    print()
    rows = []
    for size in sizes:
        plain, reserved = interleaved(size, repeat, reservations)
        rows.append((f"{size:,}", f"{plain.best:,.0f}", f"{reserved.best:,.0f}", f"{reserved.best / plain.best:.2f}",
                     f"{plain.median:,.0f}", f"{reserved.median:,.0f}", f"{reserved.median / plain.median:.2f}"))
    print_table(("pods", "plain best", "reserved best", "ratio", "plain median", "reserved median", "ratio"), rows)
    return 0


def print_table(header: tuple, rows: list[tuple]) -> None:
    widths = [max(len(str(h)), *(len(str(r[i])) for r in rows)) for i, h in enumerate(header)]
    print("  ".join(str(h).rjust(w) for h, w in zip(header, widths)))
    print("  ".join("-" * w for w in widths))
    for row in rows:
        print("  ".join(str(c).rjust(w) for c, w in zip(row, widths)))


def consolidation(required: bool, repeat: int) -> None:
    """The consolidation benchmark (issue 5), when its module exists."""
    try:
        module = importlib.import_module("scheduling.engine.consolidation_bench")
    except ImportError:
        print("consolidation: scheduling.engine.consolidation_bench is not available" +
              (" (asked for with --consolidation)" if required else ""))
        return
    try:
        figure = module.bench_consolidation(repeat=repeat)
    except TypeError:  # an older signature without `repeat`
        figure = module.bench_consolidation()
    text = str(figure)
    print(text if text.startswith("consolidation") else f"consolidation: {text}")


def profile(size: int) -> int:
    """cProfile of one plan (for a sampling profile: `pyinstrument -m scheduling.bench --profile N`
    shows the same run)."""
    import cProfile
    import pstats

    from scheduling.engine import parse_world, plan

    from . import diverse_pods, world
    parsed = parse_world(world(diverse_pods(size)))
    profiler = cProfile.Profile()
    profiler.runcall(plan, parsed)
    pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
    return 0


if __name__ == "__main__":
    sys.exit(main())
