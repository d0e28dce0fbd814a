"""Reaction benchmark: how long a pending pod waits for its NodeClaim with the watch process.

    createdb -h 127.0.0.1 -U postgres karpweb_reaction
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/karpweb_reaction .venv/bin/python scripts/reaction_bench.py \
        [--nodes 100] [--pods-per-node 10] [--rate 2] [--steady-seconds 30] [--bursts 3] [--burst-size 20]

It starts the real kube-apiserver and etcd the tests use (scripts/kube-apiserver.sh builds it),
fills it with `--nodes` nodes and `--pods-per-node` bound pods each, empties the scratch database
DATABASE_URL names and seeds the simulated EC2 catalogue there, then runs `manage.py watch` as its
own process (control mode, simulated EC2: its launches are NodeClaims in the API server). Then it
creates pending pods at a steady `--rate` per second for `--steady-seconds`, and `--bursts` bursts
of `--burst-size` pods 5 s apart, each pod asking for a NodePool no existing node belongs to, and
watches the NodeClaims appear. It prints p50 / p95 / p99 of pending-to-NodeClaim-created (pod
creation acknowledged by the API server to the NodeClaim's ADDED event), the engine time per
provisioning run (the watch's TaskRun durations), the API server requests per minute the watch
process made during the measurement (the API server's own apiserver_request_total, less the
benchmark's requests) and whether any of them was a LIST, and the watch process's peak memory.
"""

import argparse
import datetime
import http.client
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "karpweb.settings")
os.environ.setdefault("SECRET_KEY", "reaction-bench-only-secret-key-0123456789-abcdefghijklm")
NAMESPACE = "bench"
WATCHED = {"pods", "nodes", "nodeclaims", "nodepools", "ec2nodeclasses"}
POOL = "general"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--pods-per-node", type=int, default=10)
    parser.add_argument("--rate", type=float, default=0.5, help="pending pods per second in the steady phase (under "
                        "one a second, each its own batch; faster, the 1 s idle window stays open up to its 10 s)")
    parser.add_argument("--steady-seconds", type=float, default=30.0)
    parser.add_argument("--bursts", type=int, default=3)
    parser.add_argument("--burst-size", type=int, default=20)
    parser.add_argument("--threads", type=int, default=8, help="parallel requests while filling the cluster")
    args = parser.parse_args()
    if not os.environ.get("DATABASE_URL", "").startswith("postgres"):
        parser.error("set DATABASE_URL to a scratch PostgreSQL database (it is emptied)")

    from tests.kube.conftest import ADMIN_TOKEN, KubeTestServer, apiserver_binary

    workdir = Path(tempfile.mkdtemp(prefix="karpweb-reaction-"))
    server = KubeTestServer(workdir, apiserver_binary(), Path("/usr/bin/etcd"))
    server.start()
    watcher = None
    try:
        os.environ.update(KARPWEB_CLUSTER="kubernetes", KARPWEB_PROVIDER="simulated", KARPWEB_MODE="control",
                          KARPWEB_KARPENTER="absent", KUBECONFIG=str(server.kubeconfig))
        import django

        django.setup()
        from django.core.management import call_command

        from scheduling.adapters.kube.adapter import KubeClusterAdapter
        from scheduling.adapters.kube.config import client_from_kubeconfig
        from scheduling.adapters.kube.crds import install_crds
        from scheduling.adapters.kube.rest import KubeRest

        client = client_from_kubeconfig(str(server.kubeconfig))
        install_crds(client)
        rest, adapter = KubeRest(client), KubeClusterAdapter(client)
        call_command("migrate", verbosity=0)
        call_command("flush", interactive=False, verbosity=0)
        prepare_database(adapter)
        started = time.monotonic()
        fill_cluster(rest, args.nodes, args.pods_per_node, args.threads)
        print(f"cluster: {args.nodes:,} nodes, {args.nodes * args.pods_per_node:,} bound pods "
              f"(filled in {time.monotonic() - started:.0f} s)")

        watcher = subprocess.Popen([sys.executable, str(ROOT / "manage.py"), "watch"], cwd=ROOT, env=os.environ.copy(),
                                   stdout=subprocess.DEVNULL, stderr=open(workdir / "watch.log", "wb"))
        listed = wait_until_listed(args.nodes * args.pods_per_node, watcher)
        print(f"watch process: listed, mirrored and loaded the cluster in {listed:.1f} s")

        claims = NodeClaimTimes(adapter)
        claims.start()
        metrics_before = apiserver_requests(server, ADMIN_TOKEN)
        window = time.monotonic()
        created: dict[str, float] = {}
        own_requests = create_pending(rest, args, created)
        wait_for_claims(created, claims, timeout=60)
        minutes = (time.monotonic() - window) / 60
        metrics_after = apiserver_requests(server, ADMIN_TOKEN)
        claims.stop()
        report(args, created, claims, metrics_before, metrics_after, own_requests, minutes, window, watcher.pid)
    finally:
        if watcher is not None:
            watcher.terminate()
            watcher.wait(30)
        server.stop()
    return 0


def prepare_database(adapter) -> None:
    """The simulated EC2 catalogue; Karpenter's absence read once (control needs a first look)."""
    from django.utils import timezone

    from scheduling.demo import _seed_catalogue
    from scheduling.loop.coexistence import check_karpenter

    _seed_catalogue(timezone.now())
    check_karpenter(adapter, timezone.now())


def fill_cluster(rest, nodes: int, pods_per_node: int, threads: int) -> None:
    from tests.kube import helpers as h

    h.namespace(rest, NAMESPACE)
    h.ec2nodeclass(rest, "default")
    rest.create(h.NODEPOOL, {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": POOL},
                             "spec": {"template": {"spec": {
                                 "nodeClassRef": {**h.NODE_CLASS_REF, "name": "default"},
                                 "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In",
                                                   "values": ["on-demand"]}]}}}})

    def node(index: int) -> None:
        name = f"existing-{index:05d}"
        rest.create(h.NODE, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {
            "kubernetes.io/hostname": name, "karpenter.sh/nodepool": "existing"}},
            "spec": {"providerID": f"aws:///us-east-1a/i-{index:017x}"}})
        rest.patch(h.NODE, name, {"status": {
            "capacity": {"cpu": "16", "memory": "64Gi", "pods": "110"},
            "allocatable": {"cpu": "15890m", "memory": "61Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "",
                            "lastHeartbeatTime": "2026-11-25T00:00:00Z", "lastTransitionTime": "2026-11-25T00:00:00Z"}],
        }}, subresource="status")

    def bound_pod(index: int) -> None:
        rest.create(h.POD, pod_body(f"bound-{index:06d}", node_name=f"existing-{index % nodes:05d}"), namespace=NAMESPACE)

    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(node, range(nodes)))
        list(pool.map(bound_pod, range(nodes * pods_per_node)))


def pod_body(name: str, node_name: str | None = None) -> dict:
    spec = {"containers": [{"name": "app", "image": "registry.example/app:1",
                            "resources": {"requests": {"cpu": "100m" if node_name else "1500m", "memory": "256Mi"}}}]}
    if node_name:
        spec["nodeName"] = node_name
    else:
        # No existing node is in the pool, and an in-flight claim has no room for another: each pod
        # waits for a NodeClaim of its own (or of its burst).
        spec["nodeSelector"] = {"karpenter.sh/nodepool": POOL}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NAMESPACE,
                                                            "labels": {"app": "bench"}}, "spec": spec}


def wait_until_listed(pods: int, watcher, timeout: float = 1800) -> float:
    from scheduling.models import WatchState

    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if watcher.poll() is not None:
            raise SystemExit(f"manage.py watch exited with {watcher.returncode}")
        if WatchState.current().kept_objects >= pods:  # its world loaded, not only the rows written
            return time.monotonic() - started
        time.sleep(0.5)
    raise SystemExit("the watch process did not mirror the cluster in time")


class NodeClaimTimes:
    """When each NodeClaim appeared (its ADDED event, read as the benchmark's own watch)."""

    def __init__(self, adapter) -> None:
        self.adapter, self.added, self._stop = adapter, {}, threading.Event()
        self.requests = 1  # the one watch (plus one list below)

    def start(self) -> None:
        listing = self.adapter.list("NodeClaim")
        self.requests += 1
        self.version = listing.resource_version
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        from scheduling.adapters.kube.errors import ClusterError

        while not self._stop.is_set():
            try:
                for event in self.adapter.watch("NodeClaim", self.version, timeout_seconds=5):
                    self.version = event.resource_version or self.version
                    if event.type == "ADDED":
                        self.added.setdefault(event.object["metadata"]["name"], time.time())
            except ClusterError:
                if self._stop.is_set():
                    return  # the API server is going away at the end
                raise
            self.requests += 1

    def stop(self) -> None:
        self._stop.set()


def create_pending(rest, args, created: dict[str, float]) -> int:
    from tests.kube import helpers as h

    def create(name: str) -> None:
        rest.create(h.POD, pod_body(name), namespace=NAMESPACE)
        created[name] = time.time()

    interval, index = 1 / args.rate, 0
    started = time.monotonic()
    while time.monotonic() - started < args.steady_seconds:
        create(f"steady-{index:05d}")
        index += 1
        time.sleep(max(0.0, started + index * interval - time.monotonic()))
    with ThreadPoolExecutor(args.burst_size) as pool:
        for burst in range(args.bursts):
            time.sleep(5)
            list(pool.map(create, [f"burst-{burst}-{i:03d}" for i in range(args.burst_size)]))
    return len(created)


def wait_for_claims(created: dict[str, float], claims: NodeClaimTimes, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and len(claim_of_pods()) < len(created):
        time.sleep(1)


def claim_of_pods() -> dict[str, str]:
    """Pod name -> the NodeClaim its launch decision created (the decision names both)."""
    from scheduling.models import Decision

    found = {}
    for details in Decision.objects.filter(kind=Decision.Kind.LAUNCH).values_list("details", flat=True):
        for key in (details or {}).get("pods", []):
            found[key.split("/", 1)[-1]] = (details or {}).get("name", "")
    return found


def apiserver_requests(server, token: str) -> dict[tuple[str, str], float]:
    """apiserver_request_total by (verb, resource), from the API server's /metrics."""
    from scheduling.adapters.kube.config import cluster_tls_context

    context = cluster_tls_context(ca_file=str(server.pki["ca"]))  # the test CA fails 3.13's strict default
    connection = http.client.HTTPSConnection("127.0.0.1", server.port, context=context, timeout=30)
    connection.request("GET", "/metrics", headers={"Authorization": f"Bearer {token}"})
    text = connection.getresponse().read().decode()
    totals: dict[tuple[str, str], float] = {}
    for line in text.splitlines():
        if line.startswith("apiserver_request_total{"):
            labels = dict(re.findall(r'(\w+)="([^"]*)"', line))
            key = (labels.get("verb", ""), labels.get("resource", ""))
            totals[key] = totals.get(key, 0.0) + float(line.rsplit(" ", 1)[1])
    return totals


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(share * (len(ordered) - 1))))]


def report(args, created, claims, before, after, own_requests, minutes, window_start, watcher_pid) -> None:
    from scheduling.models import TaskRun

    owners = claim_of_pods()
    waited = {pod: claims.added[owners[pod]] - at for pod, at in created.items() if owners.get(pod) in claims.added}
    latencies = list(waited.values())
    # A pod that fits a NodeClaim still launching is planned onto it (as Karpenter nominates it):
    # its wait ends with the first provisioning run that started after it and finished.
    finished = sorted((run.started_at.timestamp(), run.finished_at.timestamp()) for run in TaskRun.objects.filter(
        task="provision", status=TaskRun.Status.SUCCEEDED, finished_at__isnull=False))
    nominated = []
    for pod, at in created.items():
        if owners.get(pod) not in claims.added:
            later = [end for start, end in finished if start >= at]
            if later:
                nominated.append(later[0] - at)
                waited[pod] = later[0] - at
    waits = latencies + nominated
    print(f"pending pods: {len(created)} ({args.rate:g}/s for {args.steady_seconds:g} s, then {args.bursts} bursts of "
          f"{args.burst_size}): {len(latencies)} got a new NodeClaim, {len(nominated)} were planned onto one still "
          f"launching, {len(created) - len(waits)} neither")
    if waits:
        print(f"pending -> NodeClaim: p50 {percentile(waits, .5):.2f} s, p95 {percentile(waits, .95):.2f} s, "
              f"p99 {percentile(waits, .99):.2f} s, max {max(waits):.2f} s")
    latencies = waits
    slowest = sorted(waited, key=waited.get, reverse=True)[:3]
    print("  slowest: " + ", ".join(f"{pod} {waited[pod]:.2f} s ({'new claim ' + owners[pod] if owners.get(pod) in claims.added else 'nominated'})"
                                    for pod in slowest))
    since = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(minutes=minutes + 0.1)
    runs = [run.duration.total_seconds() for run in TaskRun.objects.filter(task="provision", started_at__gte=since,
                                                                          status=TaskRun.Status.SUCCEEDED)
            if run.duration]
    if runs:
        print(f"provisioning runs: {len(runs)}, each {statistics.median(runs):.2f} s median, "
              f"{max(runs):.2f} s max (engine, database and launches)")
    passes = [run.duration.total_seconds() for run in TaskRun.objects.filter(task="lifecycle", started_at__gte=since,
                                                                            status=TaskRun.Status.SUCCEEDED)
              if run.duration]
    if passes:  # the watch process's lifecycle pass on its kept world, every KARPWEB_LIFECYCLE_SECONDS
        print(f"lifecycle passes: {len(passes)}, each {statistics.median(passes):.2f} s median, {max(passes):.2f} s max")
    delta = {key: after.get(key, 0.0) - before.get(key, 0.0) for key in set(after) | set(before)}
    by_verb: dict[str, float] = {}
    for (verb, _resource), count in delta.items():
        by_verb[verb] = by_verb.get(verb, 0.0) + count
    by_verb["POST"] = by_verb.get("POST", 0.0) - own_requests  # the benchmark's pods
    by_verb["WATCH"] = by_verb.get("WATCH", 0.0) - (claims.requests - 2)  # its NodeClaim watches (list before)
    # LISTs of the kinds the watch follows (the API server's own admission plugins list others).
    lists = sorted(resource for (verb, resource), count in delta.items()
                   if verb == "LIST" and count > 0 and resource in WATCHED)
    by_verb["LIST"] = sum(count for (verb, resource), count in delta.items() if verb == "LIST" and resource in WATCHED)
    total = sum(max(0.0, count) for count in by_verb.values())
    print(f"API server requests by the watch process: {total / minutes:,.0f} a minute "
          f"({', '.join(f'{verb} {max(0, count):,.0f}' for verb, count in sorted(by_verb.items()) if count > 0)} "
          f"in {minutes:.1f} min); LIST after the first list: {max(0, by_verb['LIST']):.0f} ({', '.join(lists)})")
    status = Path(f"/proc/{watcher_pid}/status").read_text()
    peak = int(re.search(r"VmHWM:\s+(\d+) kB", status).group(1)) / 1024
    print(f"watch process peak memory: {peak:,.0f} MiB")
    json.dump({"latencies": latencies}, open(Path(tempfile.gettempdir()) / "karpweb-reaction.json", "w"))


if __name__ == "__main__":
    sys.exit(main())
