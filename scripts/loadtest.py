"""Load test: gunicorn on loopback, a world of 5,000 nodes and 500 reservations, concurrent
clients on the main pages and the API for a bounded time; prints p50 / p95 / p99 and requests/s.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/karpweb_load .venv/bin/python scripts/loadtest.py \
        [--nodes 5000] [--reservations 500] [--clients 8] [--seconds 30] [--workers 3]

It creates (or reuses) the world in the database DATABASE_URL names: point it at a scratch database.
Latency is measured by the client, so it includes loopback HTTP and the wait for a free gunicorn
worker (more clients than workers); the server time (gunicorn's request time, from its access log:
from the worker taking the request to the last byte) is printed beside it.
"""

import argparse
import datetime
import http.client
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "karpweb.settings")
os.environ.setdefault("SECRET_KEY", "load-test-only-secret")
os.environ.setdefault("ALLOWED_HOSTS", "127.0.0.1,localhost")
# The load is one user's: the API's rate limit would answer 429 instead of measuring the pages.
os.environ.setdefault("KARPWEB_API_RATE", "off")

PAGES = ["/", "/reservations/", "/reservations/?reservation_type=capacity-block", "/capacity-blocks/",
         "/nodepools/", "/nodes/", "/nodes/?capacity_type=reserved", "/nodeclaims/", "/decisions/"]
API = ["/api/v1/capacity-reservations/", "/api/v1/nodes/", "/api/v1/nodepools/", "/api/v1/decisions/"]


def build_world(nodes: int, reservations: int) -> None:
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import transaction
    from django.utils import timezone

    from reservations.models import CapacityReservation, UtilizationSample
    from scheduling.models import Node, NodePool

    call_command("migrate", verbosity=0)
    if Node.objects.count() >= nodes and CapacityReservation.objects.count() >= reservations:
        print(f"reusing the world: {Node.objects.count()} nodes, {CapacityReservation.objects.count()} reservations")
        return
    call_command("seed_demo")
    now = timezone.now()
    rng = random.Random(5)
    zones = ["us-east-1a", "us-east-1b", "us-east-1c"]
    types = ["m5.large", "m5.xlarge", "c6a.large", "r5.large", "g5.12xlarge", "p5.48xlarge"]
    with transaction.atomic():
        made = []
        for index in range(reservations):
            total = rng.randint(1, 20)
            block = index % 5 == 0
            made.append(CapacityReservation(
                reservation_id=f"cr-load{index:012x}", owner_id="123456789012", instance_type=rng.choice(types),
                availability_zone=rng.choice(zones), total_instance_count=total,
                available_instance_count=rng.randint(0, total), tags={"team": rng.choice(["web", "ml", "batch"])},
                reservation_type="capacity-block" if block else "default",
                end_date=now + datetime.timedelta(hours=rng.randint(1, 72)) if block else None, last_seen=now,
            ))
        made = CapacityReservation.objects.bulk_create(made, batch_size=500)
        UtilizationSample.objects.bulk_create([
            UtilizationSample(reservation=r, sampled_at=now - datetime.timedelta(hours=h), used=r.used_instance_count,
                              available=r.available_instance_count, total=r.total_instance_count)
            for r in made for h in range(0, 48, 4)
        ], batch_size=2000)
        pools = list(NodePool.objects.all())
        Node.objects.bulk_create([
            Node(name=f"ip-10-9-{i // 250}-{i % 250}.load.internal", node_pool=rng.choice(pools),
                 instance_type=rng.choice(types), zone=rng.choice(zones),
                 capacity_type=rng.choice(["reserved", "on-demand", "spot"]),
                 reservation=rng.choice(made) if i % 3 == 0 else None, allocatable_cpu_millicores=1920,
                 allocatable_memory_bytes=7 * 2**30, provider_id=f"aws:///us-east-1a/i-{i:017x}", ready=True,
                 created_at=now)
            for i in range(nodes)
        ], batch_size=1000)
    print(f"built: {nodes} nodes, {reservations} reservations")


def credentials() -> tuple[str, str]:
    from django.contrib.auth import get_user_model
    from django.contrib.sessions.backends.db import SessionStore
    from rest_framework.authtoken.models import Token

    user, _ = get_user_model().objects.get_or_create(username="loadtest", defaults={"is_superuser": True, "is_staff": True})
    session = SessionStore()
    session["_auth_user_id"] = str(user.pk)
    session["_auth_user_backend"] = "django.contrib.auth.backends.ModelBackend"
    session["_auth_user_hash"] = user.get_session_auth_hash()
    session.create()
    return session.session_key, Token.objects.get_or_create(user=user)[0].key


def client(port, paths, headers, deadline, results, errors):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    rng = random.Random(threading.get_ident())
    while time.monotonic() < deadline:
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


def read_access_log(path) -> dict[str, list[float]]:
    """gunicorn's request times (microseconds) per path, keyed as the clients key their results."""
    times: dict[str, list[float]] = {}
    for line in Path(path).read_text().splitlines():
        request, _, micros = line.rpartition(" ")
        path_only, _, query = request.partition("?")
        key = path_only if path_only.startswith("/api") or not query else f"{path_only}?{query}"
        times.setdefault(key, []).append(int(micros) / 1000)
    return times


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
    args = parser.parse_args()
    build_world(args.nodes, args.reservations)
    session, token = credentials()
    subprocess.run([sys.executable, "manage.py", "collectstatic", "--no-input", "-v", "0"], cwd=ROOT, check=True)
    access_log = tempfile.NamedTemporaryFile(prefix="karpweb-load-", suffix=".log", delete=False)
    access_log.close()
    server = subprocess.Popen([str(Path(sys.executable).parent / "gunicorn"), "karpweb.wsgi", "-b", f"127.0.0.1:{args.port}",
                               "--workers", str(args.workers), "--log-level", "warning",
                               "--access-logfile", access_log.name, "--access-logformat", "%(U)s?%(q)s %(D)s"], cwd=ROOT)
    try:
        for _ in range(100):
            try:
                http.client.HTTPConnection("127.0.0.1", args.port, timeout=1).request("GET", "/healthz")
                break
            except OSError:
                time.sleep(0.2)
        results, errors = {}, []
        deadline = time.monotonic() + args.seconds
        page_headers = {"Cookie": f"sessionid={session}", "Host": "127.0.0.1"}
        api_headers = {"Authorization": f"Token {token}", "Host": "127.0.0.1", "Accept": "application/json"}
        threads = [threading.Thread(target=client, args=(args.port, PAGES if i % 2 == 0 else API,
                                                          page_headers if i % 2 == 0 else api_headers, deadline, results, errors))
                   for i in range(args.clients)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        server.terminate()
        server.wait(10)
    server_times = read_access_log(access_log.name)
    os.unlink(access_log.name)
    total = sum(len(v) for v in results.values())
    print(f"\n{args.clients} clients x {args.seconds} s, gunicorn {args.workers} workers, {args.nodes} nodes, "
          f"{args.reservations} reservations: {total} requests, {total / args.seconds:.1f} req/s, {len(errors)} errors")
    print(f"{'':47} {'client (ms)':>26} {'server (ms)':>26}")
    print(f"{'path':40} {'n':>6} {'p50':>8} {'p95':>8} {'p99':>8} {'p50':>8} {'p95':>8} {'p99':>8}")
    for path, values in sorted(results.items()):
        server = server_times.get(path) or [float("nan")]
        print(f"{path:40} {len(values):6} {statistics.median(values):8.1f} {percentile(values, .95):8.1f} "
              f"{percentile(values, .99):8.1f} {statistics.median(server):8.1f} {percentile(server, .95):8.1f} "
              f"{percentile(server, .99):8.1f}")
    if errors:
        print("errors (first 5):", *errors[:5], sep="\n  ")


if __name__ == "__main__":
    main()
