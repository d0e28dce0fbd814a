"""Load test: gunicorn on loopback, a world of 5,000 nodes and 500 reservations, concurrent
clients on the main pages and the API for a bounded time; prints p50 / p95 / p99 and requests/s.

    createdb -h 127.0.0.1 -U postgres karpweb_load
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/karpweb_load .venv/bin/python scripts/loadtest.py \
        [--nodes 5000] [--reservations 500] [--clients 8] [--seconds 30] [--workers 3]
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/karpweb_fleet .venv/bin/python scripts/loadtest.py --fleet

`--fleet` builds nothing: it drives the fleet pages and the all-clusters lists (no cluster chosen)
on the fleet scripts/fleet_bench.py left in its database (50 clusters of 1,000 nodes by default).

It builds the world once in the (empty, PostgreSQL) database DATABASE_URL names and reuses it after:
the demo world, the reservations with a day of raw samples at the loop's 30 s rate (1.44 M rows) and
a month of hourly roll-ups, a NodeClaim and 10 pods per node, 500 pending pods, 20,000 decisions.
Latency is measured by the client, so it includes loopback HTTP and the wait for a free gunicorn
worker (more clients than workers); the server time (gunicorn's request time, from its access log:
from the worker taking the request to the last byte) is printed beside it, and the CPU time the
worker spent on each request (gunicorn hooks around it), which compares across machines, with the
median count of fresh memory pages the worker faulted in for it (a few dozen normally; thousands
mean the interpreter maps and unmaps memory in a loop: see docs/operations.md#performance).
"""

import argparse
import datetime
import http.client
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ZONES = ["us-east-1a", "us-east-1b", "us-east-1c"]
TYPES = ["m5.large", "m5.xlarge", "c6a.large", "r5.large", "g5.12xlarge", "p5.48xlarge"]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "karpweb.settings")
os.environ.setdefault("SECRET_KEY", "load-test-only-secret-key-0123456789-abcdefghijklmnop")
os.environ.setdefault("ALLOWED_HOSTS", "127.0.0.1,localhost")
# The load is one user's: the API's rate limit would answer 429 instead of measuring the pages.
os.environ.setdefault("KARPWEB_API_RATE", "off")

PAGES = ["/", "/reservations/", "/reservations/?reservation_type=capacity-block", "/reservations/?q=cr-load0000000001",
         "/capacity-blocks/", "/nodepools/", "/nodes/", "/nodes/?capacity_type=reserved", "/nodeclaims/", "/pods/",
         "/pods/?pending=true", "/decisions/", "/reservations/cr-load000000000001/", "/fleet/"]
# The fleet's own pages and every list with no cluster chosen (the whole fleet's rows), on the fleet
# scripts/fleet_bench.py seeds (its clusters are named fleet-000, fleet-001, ...).
FLEET_PAGES = ["/fleet/", "/fleet/clusters/", "/fleet/accounts/", "/fleet/clusters/fleet-000/",
               "/fleet/accounts/111111111111/", "/", "/nodes/", "/nodes/?capacity_type=reserved", "/nodeclaims/", "/pods/",
               "/pods/?pending=true", "/nodepools/", "/nodeclasses/", "/reservations/", "/decisions/"]
FLEET_API = ["/api/v1/clusters/", "/api/v1/accounts/", "/api/v1/nodes/", "/api/v1/pods/", "/api/v1/nodepools/",
             "/api/v1/capacity-reservations/", "/api/v1/decisions/"]
API = ["/api/v1/capacity-reservations/", "/api/v1/nodes/", "/api/v1/nodepools/", "/api/v1/decisions/", "/api/v1/pods/",
       "/api/v1/alarms/"]
PODS_PER_NODE = 10
PENDING_PODS = 500
DECISIONS = 20_000
# A request that faults in this many fresh pages (4 KiB each) maps and unmaps memory in a loop.
THRASH_FAULTS = 1000
SYNC_SECONDS = 30  # the beat schedule's EC2 sync: one raw sample per reservation each time
RAW_HOURS = 24
HOURLY_DAYS = 30


def build_world(nodes: int, reservations: int) -> None:
    """The demo world plus `reservations` reservations with a day of raw samples at the loop's rate
    and a month of hourly roll-ups, `nodes` nodes with a NodeClaim and 10 pods each, pending pods
    and 20,000 decisions. PostgreSQL only: the samples are generated in SQL (1.44 M rows)."""
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    from scheduling.models import Node

    if connection.vendor != "postgresql":
        sys.exit("loadtest.py: DATABASE_URL must name a PostgreSQL scratch database")
    call_command("migrate", verbosity=0)
    existing = Node.objects.filter(name__endswith=".load.internal").count()
    if existing == nodes:
        print(f"reusing the world: {nodes} nodes, {reservations} reservations")
        return
    if Node.objects.exists():
        sys.exit("loadtest.py: the database holds another world: point DATABASE_URL at an empty scratch database")
    call_command("seed_demo")
    started = time.perf_counter()
    made = _reservations(reservations)
    _samples(made)
    _nodes_claims_and_pods(nodes, made)
    _decisions(made)
    from scheduling import totals

    totals.refresh_all()  # the running totals the pages read, as the loop's next step would count them
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")  # what autovacuum would have done to a database that grew this way
    print(f"built in {time.perf_counter() - started:.0f} s: {nodes} nodes, {reservations} reservations")


def _reservations(count):
    from django.utils import timezone

    from reservations.models import CapacityReservation

    now, rng = timezone.now(), random.Random(5)
    return CapacityReservation.objects.bulk_create([
        CapacityReservation(
            reservation_id=f"cr-load{index:012x}", owner_id="123456789012", instance_type=rng.choice(TYPES),
            availability_zone=rng.choice(ZONES), total_instance_count=(total := rng.randint(1, 20)),
            available_instance_count=rng.randint(0, total), tags={"team": rng.choice(["web", "ml", "batch"])},
            reservation_type="capacity-block" if index % 5 == 0 else "default",
            end_date=now + datetime.timedelta(hours=rng.randint(1, 72)) if index % 5 == 0 else None, last_seen=now,
        )
        for index in range(count)
    ], batch_size=500)


def _samples(made):
    """A day of raw samples, one per reservation per sync, then the roll-up the loop runs; older hours
    directly as hourly rows (their raw samples would be pruned at 7 days anyway)."""
    from django.db import connection
    from django.utils import timezone

    from reservations.models import hour_of
    from reservations.utilization import roll_up, roll_up_recent

    now = timezone.now()
    ids = [r.pk for r in made]
    per_day = RAW_HOURS * 3600 // SYNC_SECONDS
    with connection.cursor() as cursor:
        cursor.execute("""
            INSERT INTO reservations_utilizationsample (reservation_id, sampled_at, used, available, total)
            SELECT r.id, %s - s * interval '1 second' * %s, u.used, r.total_instance_count - u.used, r.total_instance_count
            FROM reservations_capacityreservation r CROSS JOIN generate_series(0, %s - 1) s
            CROSS JOIN LATERAL (SELECT LEAST(r.total_instance_count, GREATEST(0,
                r.total_instance_count - r.available_instance_count + (s / 120 + r.id) %% 3 - 1)) AS used) u
            WHERE r.id = ANY(%s)""", [now, SYNC_SECONDS, per_day, ids])
        cursor.execute("""
            INSERT INTO reservations_utilizationhour (reservation_id, hour, samples, first_sampled_at, used, available,
                total, share_sum, share_samples)
            SELECT r.id, h, 120, h, u.used, r.total_instance_count - u.used, r.total_instance_count,
                120.0 * u.used / r.total_instance_count, 120
            FROM reservations_capacityreservation r
            CROSS JOIN generate_series(%s::timestamptz, %s::timestamptz, interval '1 hour') h
            CROSS JOIN LATERAL (SELECT GREATEST(0, r.total_instance_count - r.available_instance_count
                - (extract(epoch FROM h)::bigint / 3600 + r.id) %% 2)::float AS used) u
            WHERE r.id = ANY(%s)""",
            [hour_of(now - datetime.timedelta(days=HOURLY_DAYS)), hour_of(now - datetime.timedelta(hours=RAW_HOURS + 1)), ids])
    started = time.perf_counter()
    hours = roll_up(since=now - datetime.timedelta(hours=RAW_HOURS))
    print(f"roll-up of {len(ids) * per_day:,} raw samples into {hours:,} hours: {time.perf_counter() - started:.1f} s")
    started = time.perf_counter()
    hours = roll_up_recent(now)
    print(f"one sync's roll-up (the current hour, {hours} reservations): {(time.perf_counter() - started) * 1000:.0f} ms")


def _nodes_claims_and_pods(count, made):
    from django.utils import timezone

    from scheduling.models import Node, NodeClaim, NodePool, Pod

    now, rng = timezone.now(), random.Random(7)
    pools = list(NodePool.objects.all())
    shapes = []
    for i in range(count):
        capacity_type = rng.choice(["reserved", "on-demand", "spot"])
        reservation = rng.choice(made) if capacity_type == "reserved" else None
        shapes.append(dict(node_pool=rng.choice(pools), instance_type=reservation.instance_type if reservation else rng.choice(TYPES),
                           zone=reservation.availability_zone if reservation else rng.choice(ZONES),
                           capacity_type=capacity_type, reservation=reservation,
                           reservation_label=reservation.reservation_id if reservation else "",
                           provider_id=f"aws:///us-east-1a/i-{i:017x}", created_at=now - datetime.timedelta(hours=i % 72)))
    claims = NodeClaim.objects.bulk_create([
        NodeClaim(name=f"load-{i:05d}", node_name=f"ip-10-9-{i // 250}-{i % 250}.load.internal", launched_at=shape["created_at"],
                  registered_at=shape["created_at"], initialized_at=shape["created_at"], synced_at=now, **shape)
        for i, shape in enumerate(shapes)
    ], batch_size=1000)
    nodes = Node.objects.bulk_create([
        Node(name=claim.node_name, node_claim=claim, allocatable_cpu_millicores=1920, allocatable_memory_bytes=7 * 2**30,
             allocatable_pods=110, ready=True, synced_at=now, **shape)
        for claim, shape in zip(claims, shapes)
    ], batch_size=1000)
    pods = [Pod(namespace=f"team-{i % 20}", name=f"app-{i:06d}", uid=f"load-pod-{i}", node=node, node_name=node.name,
                phase="Running", cpu_request_millicores=150, memory_request_bytes=256 * 2**20, labels={"app": f"app-{i % 300}"},
                spec=pod_spec("150m", "256Mi"), owner_kind="ReplicaSet", owner_name=f"app-{i % 300}-5d8f7c",
                created_at=now, synced_at=now)
            for i, node in enumerate(node for node in nodes for _ in range(PODS_PER_NODE))]
    pods += [Pod(namespace="team-pending", name=f"waiting-{i:04d}", uid=f"load-pending-{i}", phase="Pending",
                 cpu_request_millicores=500, memory_request_bytes=2**30, labels={"app": "waiting"},
                 spec=pod_spec("500m", "1Gi"), created_at=now, synced_at=now)
             for i in range(PENDING_PODS)]
    Pod.objects.bulk_create(pods, batch_size=2000)


def pod_spec(cpu: str, memory: str) -> dict:
    return {"containers": [{"name": "app", "image": "app:1", "resources": {"requests": {"cpu": cpu, "memory": memory}}}]}


def _decisions(made):
    from django.utils import timezone

    from scheduling.models import Decision, NodePool

    now, rng = timezone.now(), random.Random(11)
    pools = list(NodePool.objects.all())
    kinds = [choice for choice, _ in Decision.Kind.choices]
    Decision.objects.bulk_create([
        Decision(created_at=now - datetime.timedelta(seconds=30 * i), kind=rng.choice(kinds), mode="control",
                 subject=f"load decision {i}", reason="launched into a free reserved unit", node_pool=rng.choice(pools),
                 reservation=rng.choice(made) if i % 2 else None)
        for i in range(DECISIONS)
    ], batch_size=2000)


def fleet_world() -> tuple[int, int]:
    """The fleet scripts/fleet_bench.py left in the database: (nodes, reservations); refused without one."""
    import django

    django.setup()
    from fleet.models import Cluster
    from reservations.models import CapacityReservation
    from scheduling.models import Node

    clusters = Cluster.objects.count()
    if clusters < 2 or not Cluster.objects.filter(name="fleet-000").exists():
        sys.exit("loadtest.py --fleet: DATABASE_URL holds no fleet; run scripts/fleet_bench.py on it first")
    nodes, reservations = Node.objects.fleet().count(), CapacityReservation.objects.fleet().count()
    print(f"the fleet: {clusters} clusters, {nodes:,} nodes, {reservations} reservations")
    return nodes, reservations


def time_loop_steps(rounds: int) -> None:
    """Each loop step on this world in observe mode (nothing acted on), best of `rounds`; every timed
    run rolled back so the world stays as built."""
    from django.db import transaction

    from scheduling.loop import steps
    from scheduling.world import current_world

    from django.conf import settings

    settings.KARPWEB_MODE = "observe"
    steps.status()  # conditions written once, as a running loop has them: the timed runs write only changes
    timings: dict[str, list[float]] = {}
    for _ in range(rounds):
        for name, step in (("current_world (models -> WORLD.json)", current_world), ("sync_ec2", steps.sync_ec2),
                           ("sync_kubernetes", steps.sync_kubernetes), ("provision", steps.provision),
                           ("consolidate", steps.consolidate), ("expire_capacity_blocks", steps.expire_capacity_blocks),
                           ("demote", steps.demote), ("status", steps.status),
                           ("lifecycle (the four above, one engine run)", steps.lifecycle)):
            with transaction.atomic():
                started = time.perf_counter()
                step()
                timings.setdefault(name, []).append(time.perf_counter() - started)
                transaction.set_rollback(True)
    print(f"\nloop steps, observe mode, best of {rounds} (seconds):")
    for name, values in timings.items():
        print(f"  {name:44} {min(values):6.2f}")


def credentials() -> tuple[str, str]:
    from django.contrib.auth import get_user_model
    from django.contrib.sessions.backends.db import SessionStore
    from accounts.tokens import create_token

    user, _ = get_user_model().objects.get_or_create(username="loadtest", defaults={"is_superuser": True, "is_staff": True})
    session = SessionStore()
    session["_auth_user_id"] = str(user.pk)
    session["_auth_user_backend"] = "django.contrib.auth.backends.ModelBackend"
    session["_auth_user_hash"] = user.get_session_auth_hash()
    session.create()
    return session.session_key, create_token(user)[1]


def client(port, paths, headers, deadline, results, errors, once=False):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    rng = random.Random(threading.get_ident())
    while time.monotonic() < deadline:
        if once:
            deadline = 0
        path = rng.choice(paths)
        started = time.perf_counter()
        try:
            connection.request("GET", path, headers=headers)
            response = connection.getresponse()
            response.read()
        except OSError as exc:
            errors.append(f"{path}: {exc}")
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            continue
        elapsed = (time.perf_counter() - started) * 1000
        if response.status != 200:
            errors.append(f"{path}: HTTP {response.status}")
        results.setdefault(path.split("?")[0] if path.startswith("/api") else path, []).append(elapsed)


def read_access_log(path, skip=0, column=0) -> dict[str, list[float]]:
    """One figure per request and path, keyed as the clients key their results: the access log's
    microseconds (as ms), or the CPU log's microseconds (column 0, as ms) or page faults (column 1)."""
    figures: dict[str, list[float]] = {}
    for line in Path(path).read_text().splitlines()[skip:]:
        request, *values = line.split(" ")
        path_only, _, query = request.partition("?")
        key = path_only if path_only.startswith("/api") or not query else f"{path_only}?{query}"
        figures.setdefault(key, []).append(int(values[column]) / (1000 if column == 0 else 1))
    return figures


def cpu_hooks() -> tuple[str, str]:
    """A gunicorn config whose hooks log each request's CPU time in its worker (a sync worker serves
    one request at a time, so the process's CPU clock is the request's): comparable across machines
    where wall-clock times are not. PostgreSQL's own CPU is not in it. Returns (log, config) paths."""
    log = tempfile.NamedTemporaryFile(prefix="karpweb-load-cpu-", suffix=".log", delete=False)
    log.close()
    config = tempfile.NamedTemporaryFile("w", prefix="karpweb-load-hooks-", suffix=".py", delete=False)
    config.write(
        "import resource, time\n"
        "def pre_request(worker, req):\n"
        "    worker.karpweb_cpu = time.process_time()\n"
        "    worker.karpweb_faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt\n"
        "def post_request(worker, req, environ, resp):\n"
        f"    with open({log.name!r}, 'a') as out:\n"
        "        micros = int((time.process_time() - worker.karpweb_cpu) * 1e6)\n"
        "        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - worker.karpweb_faults\n"
        "        out.write(f\"{req.path}?{req.query or ''} {micros} {faults}\\n\")\n")
    config.close()
    return log.name, config.name


def percentile(values, share):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--reservations", type=int, default=500)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=int, default=30)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--port", type=int, default=8791)
    parser.add_argument("--loop-steps", type=int, default=0, metavar="ROUNDS",
                        help="time each loop step on the world (best of ROUNDS) instead of the HTTP load")
    parser.add_argument("--fleet", action="store_true", help="the fleet pages and all-clusters lists on the fleet "
                        "scripts/fleet_bench.py seeded in DATABASE_URL (builds nothing)")
    args = parser.parse_args()
    pages, api = PAGES, API
    if args.fleet:
        args.nodes, args.reservations = fleet_world()
        pages, api = FLEET_PAGES, FLEET_API
    else:
        build_world(args.nodes, args.reservations)
    if args.loop_steps:
        time_loop_steps(args.loop_steps)
        return
    session, token = credentials()
    subprocess.run([sys.executable, "manage.py", "collectstatic", "--no-input", "-v", "0"], cwd=ROOT, check=True)
    access_log = tempfile.NamedTemporaryFile(prefix="karpweb-load-", suffix=".log", delete=False)
    access_log.close()
    cpu_log, hooks = cpu_hooks()
    server = subprocess.Popen([str(Path(sys.executable).parent / "gunicorn"), "karpweb.wsgi", "-b", f"127.0.0.1:{args.port}",
                               "-c", hooks, "--workers", str(args.workers), "--log-level", "warning",
                               "--access-logfile", access_log.name, "--access-logformat", "%(U)s?%(q)s %(D)s"], cwd=ROOT)
    try:
        for _ in range(100):
            try:
                http.client.HTTPConnection("127.0.0.1", args.port, timeout=1).request("GET", "/healthz")
                break
            except OSError:
                time.sleep(0.2)
        page_headers = {"Cookie": f"sessionid={session}", "Host": "127.0.0.1"}
        api_headers = {"Authorization": f"Token {token}", "Host": "127.0.0.1", "Accept": "application/json"}
        # Warm-up, not measured: every path a few times, so each worker has imported and connected.
        warm_deadline = time.monotonic() + 3600
        for _ in range(args.workers * 2):
            for paths, headers in ((pages, page_headers), (api, api_headers)):
                for path in paths:
                    client(args.port, [path], headers, warm_deadline, {}, [], once=True)
        warm_lines = len(Path(access_log.name).read_text().splitlines())
        warm_cpu_lines = len(Path(cpu_log).read_text().splitlines())
        results, errors = {}, []
        deadline = time.monotonic() + args.seconds
        threads = [threading.Thread(target=client, args=(args.port, pages if i % 2 == 0 else api,
                                                          page_headers if i % 2 == 0 else api_headers, deadline, results, errors))
                   for i in range(args.clients)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        server.terminate()
        server.wait(10)
    server_times = read_access_log(access_log.name, skip=warm_lines)
    cpu_times = read_access_log(cpu_log, skip=warm_cpu_lines)
    faults = read_access_log(cpu_log, skip=warm_cpu_lines, column=1)
    for name in (access_log.name, cpu_log, hooks):
        os.unlink(name)
    total = sum(len(v) for v in results.values())
    print(f"\n{args.clients} clients x {args.seconds} s, gunicorn {args.workers} workers, {args.nodes} nodes, "
          f"{args.reservations} reservations: {total} requests, {total / args.seconds:.1f} req/s, {len(errors)} errors")
    print(f"Python {platform.python_version()}")
    print(f"{'':47} {'client (ms)':>26} {'server (ms)':>26} {'worker CPU (ms)':>17} {'faults':>7}")
    print(f"{'path':40} {'n':>6} {'p50':>8} {'p95':>8} {'p99':>8} {'p50':>8} {'p95':>8} {'p99':>8} {'mean':>8} {'p95':>8} "
          f"{'median':>7}")
    for path, values in sorted(results.items()):
        server = server_times.get(path) or [float("nan")]
        cpu = cpu_times.get(path) or [float("nan")]
        print(f"{path:40} {len(values):6} {statistics.median(values):8.1f} {percentile(values, .95):8.1f} "
              f"{percentile(values, .99):8.1f} {statistics.median(server):8.1f} {percentile(server, .95):8.1f} "
              f"{percentile(server, .99):8.1f} {statistics.fmean(cpu):8.1f} {percentile(cpu, .95):8.1f} "
              f"{statistics.median(faults.get(path) or [float('nan')]):7.0f}")
    page_p95 = {path: percentile(server_times[path], .95) for path in pages if path in server_times}
    if page_p95:
        worst = max(page_p95, key=page_p95.get)
        print(f"pages: worst server p95 {page_p95[worst]:.1f} ms ({worst}); goal under 100 ms")
    thrashing = sorted(path for path, counts in faults.items() if statistics.median(counts) > THRASH_FAULTS)
    if thrashing:
        print(f"{', '.join(thrashing)}: over {THRASH_FAULTS} page faults a request: CPython's data-stack chunk "
              "thrash (gh-142183, fixed in 3.13.13), see docs/operations.md#performance")
    if errors:
        print("errors (first 5):", *errors[:5], sep="\n  ")


if __name__ == "__main__":
    main()
