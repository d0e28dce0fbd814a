"""Fleet scale benchmark: per-cluster loop step time as clusters are added to one PostgreSQL.

    createdb -h 127.0.0.1 -U postgres karpweb_fleet
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/karpweb_fleet .venv/bin/python scripts/fleet_bench.py \
        [--clusters 1,10,50] [--nodes 1000] [--pods-per-node 5] [--reservations 120] [--rounds 1] [--sample N]

It empties the scratch database DATABASE_URL names, then grows a simulated fleet in it: two AWS
accounts in one region, `--reservations` reservations (half owned by each account, a third of each
account's shared with the other through RAM), and clusters of `--nodes` nodes each (alternating
between the accounts), each with 3 EC2NodeClasses, 3 NodePools, a NodeClaim and a simulated instance
per node, `--pods-per-node` running pods per node and 20 pending pods (6 vCPU: no node of theirs
fits them, so every provisioning run plans new ones); 30 % of the nodes run in the reservations
their account sees. Rows are written with bulk_create (not the demo's per-object path); the first
cluster is the fleet's default.

At each fleet size it runs the loop as the Celery worker runs it, through the same task function
(scheduling.tasks.cluster_step: the cluster's scope, its lease, its TaskRun): `sync_ec2` once per
(account, region) (scheduling.tasks.targets), then `sync_kubernetes`, `provision` and `lifecycle` on
each cluster (or on `--sample` of them), in observe mode (recorded, nothing acted on: the world stays
the same size). It prints per step kind the median and p95 of the wall-clock time, of the worker's
CPU time (this process's: time.process_time) and, when PostgreSQL runs on this machine, of the
database backend's CPU time; and the median database queries and rows (returned or written) per
step. Flat per-cluster figures from 1 to 50 clusters mean a cluster's step reads only its own rows
(tests/fleet/test_scale_bench.py checks that in the SQL). The EC2 sync's run serves every cluster of
its (account, region): its time grows with them, and is printed per cluster served too.

`--measure-only` skips the seeding and measures the fleet already in the database (after a run).
"""

import argparse
import datetime
import os
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "karpweb.settings")
os.environ.setdefault("SECRET_KEY", "fleet-bench-only-secret-key-0123456789-abcdefghijklmnopq")

ACCOUNTS = {"111111111111": "fleet-a", "222222222222": "fleet-b"}
REGION = "us-east-1"
ZONES = {"us-east-1a": "use1-az1", "us-east-1b": "use1-az2", "us-east-1c": "use1-az4"}
# The node types (all in the demo's catalogue), by the pool that runs them.
NODE_TYPES = ["m5.large", "m5.xlarge", "m6i.large", "m6i.xlarge", "c6a.large", "c5.large", "r5.large", "m7i.large"]
RESERVED_SHARE = 0.3
PENDING_PER_CLUSTER = 20
UNITS_PER_RESERVATION = 200  # room for 50 clusters' reserved nodes in 120 reservations
TEAMS = ("web", "batch")
# Each cluster's EC2NodeClasses (reservation selector terms) and NodePools, as in the demo world.
NODE_CLASSES = {"default": [{"tags": {"team": "web"}}], "batch": [{"tags": {"team": "batch"}}], "spot": []}
NODE_POOLS = {  # name: (weight, class, capacity types, share of the nodes)
    "web": (20, "default", ["reserved", "on-demand"], 0.4),
    "general": (10, "batch", ["reserved", "on-demand", "spot"], 0.4),
    "batch": (0, "spot", ["spot", "on-demand"], 0.2),
}
STEPS = ("sync_kubernetes", "provision", "lifecycle")  # per cluster, as the beat schedules them
EC2_STEP = "sync_ec2"  # per (account, region)


def empty_database() -> None:
    from django.core.management import call_command
    from django.db import connection

    if connection.vendor != "postgresql":
        sys.exit("fleet_bench.py: DATABASE_URL must name a PostgreSQL scratch database (it is emptied)")
    call_command("migrate", verbosity=0)
    call_command("flush", interactive=False, verbosity=0)
    _forget_caches()


def _forget_caches() -> None:
    from fleet.scope import forget_default
    from scheduling.loop import backends

    forget_default()  # the process's one kept list of clusters (and so the default)
    backends.forget()


def seed_shared(now: datetime.datetime, reservations: int) -> None:
    """The accounts, the catalogue (the demo's instance types and prices) and the reservations."""
    from fleet.models import AwsAccount
    from reservations.models import CapacityReservation, ReservationVisibility
    from scheduling.demo import INSTANCE_TYPES, _seed_catalogue
    from scheduling.models import CapacityType, InstanceType, Offering

    accounts = [AwsAccount.objects.create(account_id=account_id, name=name, regions=[REGION])
                for account_id, name in ACCOUNTS.items()]
    _seed_catalogue(now)
    rng = random.Random(3)
    made = CapacityReservation.objects.fleet().bulk_create([
        CapacityReservation(
            reservation_id=f"cr-fleet{index:09x}", owner_id=(owner := accounts[index % 2]).account_id,
            owner_account=owner, region=REGION,
            arn=f"arn:aws:ec2:{REGION}:{owner.account_id}:capacity-reservation/cr-fleet{index:09x}",
            instance_type=rng.choice(NODE_TYPES), availability_zone=(zone := rng.choice(list(ZONES))),
            availability_zone_id=ZONES[zone], total_instance_count=UNITS_PER_RESERVATION,
            available_instance_count=UNITS_PER_RESERVATION, instance_match_criteria="targeted",
            reservation_type="default", create_date=now - datetime.timedelta(days=60),
            start_date=now - datetime.timedelta(days=60), tags={"team": TEAMS[index // 2 % 2]}, last_seen=now)
        for index in range(reservations)])
    visibilities = [ReservationVisibility(reservation=r, account=accounts[i % 2], shared=False) for i, r in enumerate(made)]
    # A third of each account's reservations shared with the other account through RAM.
    visibilities += [ReservationVisibility(reservation=r, account=accounts[(i + 1) % 2], shared=True)
                     for i, r in enumerate(made) if i % 3 == 0]
    ReservationVisibility.objects.bulk_create(visibilities)
    types = {it.name: it for it in InstanceType.objects.all()}
    Offering.objects.bulk_create([
        Offering(reservation=r, instance_type=types[r.instance_type], capacity_type=CapacityType.RESERVED,
                 zone=r.availability_zone, zone_id=r.availability_zone_id,
                 price=INSTANCE_TYPES[r.instance_type][0] / 10_000_000, available=True, updated_at=now)
        for r in made])


def seed_clusters(now: datetime.datetime, first: int, last: int, nodes: int, pods_per_node: int) -> None:
    """Clusters number `first` to `last - 1`, each with its classes, pools, nodes and pods."""
    from django.db import connection, transaction

    from fleet.models import AwsAccount, Cluster
    from reservations.models import CapacityReservation

    accounts = list(AwsAccount.objects.filter(account_id__in=ACCOUNTS).order_by("account_id"))
    for index in range(first, last):
        with transaction.atomic():
            cluster = Cluster.objects.create(name=f"fleet-{index:03d}", account=accounts[index % 2], region=REGION,
                                             mode="observe", karpenter=Cluster.Karpenter.ABSENT,
                                             # As an install that grew from one cluster (unless one is already).
                                             is_default=index == 0 and not Cluster.objects.filter(is_default=True).exists())
            visible = list(CapacityReservation.objects.fleet().visible_to(cluster).order_by("reservation_id"))
            _seed_cluster(now, cluster, index, visible, nodes, pods_per_node)
    with transaction.atomic():
        _recount_reservations()
    from scheduling import totals

    for index in range(first, last):  # the running totals the fleet's pages read, as a loop step counts them
        totals.refresh(Cluster.objects.get(name=f"fleet-{index:03d}"))
    with connection.cursor() as cursor:
        # What autovacuum does to tables that grew this way (VACUUM cannot run in a test's transaction).
        cursor.execute("ANALYZE" if connection.in_atomic_block else "VACUUM ANALYZE")
    _forget_caches()


def _seed_cluster(now, cluster, index, visible, nodes, pods_per_node) -> None:
    from reservations.models import EC2NodeClass
    from scheduling.adapters.ec2.amis import variant_of
    from scheduling.claim_hashes import PROVISIONER_LABEL, claim_annotations, claim_expire_after
    from scheduling.engine.quantities import CPU, MEMORY, PODS
    from scheduling.models import InstanceType, Node, NodeClaim, NodePool, Pod, SimulatedInstance
    from scheduling.simulated_network import launched_with
    from scheduling.world import node_allocatable

    rng = random.Random(index)
    spec = {"role": "KarpenterNodeRole-fleet", "amiSelectorTerms": [{"alias": "al2023@latest"}],
            "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "fleet"}}],
            "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "fleet"}}]}
    classes = {c.name: c for c in EC2NodeClass.objects.bulk_create([
        EC2NodeClass(cluster=cluster, name=name, uid=f"fleet-{index}-class-{name}", capacity_reservation_selector_terms=terms,
                     spec=spec, created_at=now - datetime.timedelta(days=90), synced_at=now)
        for name, terms in NODE_CLASSES.items()])}
    pools = {p.name: p for p in NodePool.objects.bulk_create([
        NodePool(cluster=cluster, name=name, uid=f"fleet-{index}-pool-{name}", weight=weight, node_class=classes[klass],
                 node_class_ref={"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": klass},
                 requirements=[{"key": "karpenter.sh/capacity-type", "operator": "In", "values": types}],
                 limits={"cpu": "100000"}, created_at=now - datetime.timedelta(days=90), synced_at=now)
        for name, (weight, klass, types, _) in NODE_POOLS.items()])}
    types = {it.name: it for it in InstanceType.objects.all()}
    selected = {name: [r for r in visible if any(r.tags.get("team") == t.get("tags", {}).get("team") for t in terms)]
                for name, terms in NODE_CLASSES.items()}
    plan = [name for name, (_, _, _, share) in NODE_POOLS.items() for _ in range(round(nodes * share))][:nodes]
    plan += ["general"] * (nodes - len(plan))
    claims, node_rows, instances, used = [], [], [], 0
    for sequence, pool_name in enumerate(plan):
        pool = pools[pool_name]
        options = selected[pool.node_class.name]
        reservation = None
        if "reserved" in pool.requirements[0]["values"] and options and rng.random() < RESERVED_SHARE / 0.8:
            reservation = options[used % len(options)]
            used += 1
        capacity_type = "reserved" if reservation else rng.choice([t for t in pool.requirements[0]["values"] if t != "reserved"])
        itype = reservation.instance_type if reservation else rng.choice(NODE_TYPES)
        zone = reservation.availability_zone if reservation else rng.choice(list(ZONES))
        name = f"ip-10-{index % 250}-{sequence // 250}-{sequence % 250 + 4}.c{index}.internal"
        claim_name = f"c{index}-{pool_name}-{sequence:05d}"
        instance_id = f"i-{index:05x}{sequence:012x}"
        labels = {**types[itype].labels, "karpenter.sh/nodepool": pool_name, "karpenter.sh/capacity-type": capacity_type,
                  "topology.kubernetes.io/zone": zone, "topology.k8s.aws/zone-id": ZONES[zone],
                  "kubernetes.io/hostname": name}
        if reservation:
            labels.update({"karpenter.k8s.aws/capacity-reservation-id": reservation.reservation_id,
                           "karpenter.k8s.aws/capacity-reservation-type": "default",
                           "karpenter.k8s.aws/capacity-reservation-interruptible": "false"})
        launched = now - datetime.timedelta(hours=rng.randint(2, 400))
        image, subnet, groups = launched_with(dict(spec), zone, types[itype].arch, variant_of(types[itype].labels or {}))
        room = node_allocatable(types[itype], pool.node_class)
        shape = dict(cluster=cluster, node_pool=pool, instance_type=itype, zone=zone, capacity_type=capacity_type,
                     reservation=reservation, reservation_label=reservation.reservation_id if reservation else "")
        claims.append(NodeClaim(
            name=claim_name, uid=f"fleet-claim-{index}-{sequence}", node_class=pool.node_class,
            labels={**labels, PROVISIONER_LABEL: "karpweb"}, annotations=claim_annotations(pool),
            expire_after=claim_expire_after(pool), requirements=pool.requirements,
            provider_id=f"aws:///{zone}/{instance_id}", node_name=name, image_id=image, created_at=launched,
            launched_at=launched + datetime.timedelta(seconds=20), registered_at=launched + datetime.timedelta(seconds=45),
            initialized_at=launched + datetime.timedelta(seconds=60), synced_at=now,
            conditions=[{"type": c, "status": "True", "reason": c, "message": "",
                         "lastTransitionTime": launched.strftime("%Y-%m-%dT%H:%M:%SZ")}
                        for c in ("Initialized", "Launched", "Ready", "Registered")], **shape))
        node_rows.append(Node(
            name=name, uid=f"fleet-node-{index}-{sequence}", labels=labels, annotations={"karpenter.sh/nodepool-hash": "fleet"},
            taints=[], allocatable_cpu_millicores=room[CPU], allocatable_memory_bytes=room[MEMORY],
            allocatable_pods=room[PODS], allocatable_extended={}, provider_id=f"aws:///{zone}/{instance_id}", ready=True,
            created_at=launched + datetime.timedelta(seconds=45), synced_at=now, **shape))
        instances.append(SimulatedInstance(
            cluster=cluster, instance_id=instance_id, client_token=claim_name, instance_type=itype, zone=zone,
            state="running", launched_at=launched, capacity_type=capacity_type,
            reservation_id=reservation.reservation_id if reservation else "", reservation_type="default" if reservation else "",
            image_id=image, subnet_id=subnet, security_group_ids=groups))
    claims = NodeClaim.objects.bulk_create(claims, batch_size=1000)
    for node, claim in zip(node_rows, claims):
        node.node_claim = claim
    node_rows = Node.objects.bulk_create(node_rows, batch_size=1000)
    SimulatedInstance.objects.bulk_create(instances, batch_size=1000)
    pods = [_pod(now, cluster, f"team-{i % 10}", f"app-{i:06d}", node, rng.choice([100, 200, 250]), rng.choice([256, 512]))
            for i, node in enumerate(node for node in node_rows for _ in range(pods_per_node))]
    pods += [_pod(now, cluster, "team-pending", f"waiting-{i:03d}", None, 6000, 8192) for i in range(PENDING_PER_CLUSTER)]
    Pod.objects.bulk_create(pods, batch_size=2000)


def _pod(now, cluster, namespace, name, node, cpu_m, memory_mi):
    from scheduling.models import Pod

    spec = {"containers": [{"name": "app", "image": "app:1",
                            "resources": {"requests": {"cpu": f"{cpu_m}m", "memory": f"{memory_mi}Mi"}}}]}
    return Pod(cluster=cluster, namespace=namespace, name=name, uid=f"fleet-pod-{cluster.pk}-{namespace}-{name}", node=node,
               node_name=node.name if node else "", phase="Running" if node else "Pending", cpu_request_millicores=cpu_m,
               memory_request_bytes=memory_mi * 2**20, labels={"app": f"{name.split('-')[0]}-{int(name.rsplit('-', 1)[1]) % 50}"}, spec=spec,
               owner_kind="ReplicaSet", owner_name=f"{namespace}-5d8f7c", created_at=now, synced_at=now)


def _recount_reservations() -> None:
    """Each reservation's available count: its units less the fleet's nodes in it (as EC2 would say)."""
    from django.db.models import Count

    from reservations.models import CapacityReservation
    from scheduling.models import Node

    used = dict(Node.objects.fleet().filter(reservation__isnull=False).values_list("reservation").annotate(n=Count("pk"))
                .order_by())
    for reservation in CapacityReservation.objects.fleet().only("pk", "total_instance_count"):
        CapacityReservation.objects.fleet().filter(pk=reservation.pk).update(
            available_instance_count=max(0, reservation.total_instance_count - used.get(reservation.pk, 0)),
            capacity_allocations=[{"AllocationType": "used", "Count": used.get(reservation.pk, 0)}])


class Meter:
    """Wall-clock, this process's CPU, the database backend's CPU and the queries of one step."""

    def __init__(self):
        from django.db import connection

        self.connection = connection
        self.queries = self.rows = 0
        self._backend_stat = None

    def _count(self, execute, sql, params, many, context):
        self.queries += 1
        result = execute(sql, params, many, context)
        self.rows += max(context["cursor"].rowcount, 0)  # rows returned (or written): what the step read
        return result

    def backend_cpu(self) -> float | None:
        """The PostgreSQL backend's CPU seconds (/proc/<pid>/stat), when it runs on this machine."""
        if self.connection.vendor != "postgresql":
            return None
        if self._backend_stat is None:
            self.connection.ensure_connection()
            with self.connection.cursor() as cursor:
                cursor.execute("SELECT pg_backend_pid()")
                self._backend_stat = Path(f"/proc/{cursor.fetchone()[0]}/stat")
        try:
            fields = self._backend_stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            return None
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def measure(self, run) -> dict:
        self.queries = self.rows = 0
        db_before = self.backend_cpu()
        wall, cpu = time.perf_counter(), time.process_time()
        with self.connection.execute_wrapper(self._count):
            run()
        figures = {"wall": time.perf_counter() - wall, "cpu": time.process_time() - cpu, "queries": self.queries,
                   "rows": self.rows}
        db_after = self.backend_cpu()
        if db_before is not None and db_after is not None:
            figures["db_cpu"] = db_after - db_before
        return figures


def run_round(clusters, meter: Meter, steps=STEPS) -> dict[str, list[dict]]:
    """One beat interval's steps, as the worker runs them: sync_ec2 per (account, region), then each
    cluster's steps, each through scheduling.tasks.cluster_step (scope, lease, TaskRun)."""
    from scheduling import tasks

    figures: dict[str, list[dict]] = {}
    for target in tasks.targets(EC2_STEP):
        figures.setdefault(EC2_STEP, []).append(meter.measure(lambda: _step(tasks, EC2_STEP, target)))
    for cluster in clusters:
        for name in steps:
            figures.setdefault(name, []).append(meter.measure(lambda: _step(tasks, name, cluster)))
    return figures


def _step(tasks, name, cluster) -> None:
    counts = tasks.cluster_step(name, cluster.pk)
    if not isinstance(counts, dict) or counts.get("skipped"):
        raise RuntimeError(f"{name} on {cluster.name}: {counts}")


def measure(size: int, rounds: int, sample: int | None, meter: Meter) -> dict[str, list[dict]]:
    from fleet.models import Cluster

    clusters = list(Cluster.objects.select_related("account").order_by("name"))
    if sample and sample < len(clusters):  # spread over the fleet: both accounts, old and new clusters
        clusters = [clusters[round(i * (len(clusters) - 1) / max(sample - 1, 1))] for i in range(sample)]
    figures: dict[str, list[dict]] = {}
    for _ in range(rounds):
        for name, values in run_round(clusters, meter).items():
            figures.setdefault(name, []).extend(values)
    return figures


def percentile(values, share):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def report(size: int, figures: dict[str, list[dict]], nodes: int) -> list[tuple]:
    rows = []
    for name, runs in figures.items():
        wall = [r["wall"] * 1000 for r in runs]
        cpu = [r["cpu"] * 1000 for r in runs]
        db = [r["db_cpu"] * 1000 for r in runs if "db_cpu" in r]
        rows.append((f"{size}", name, f"{len(runs)}", f"{statistics.median(wall):,.0f}", f"{percentile(wall, .95):,.0f}",
                     f"{statistics.median(cpu):,.0f}", f"{percentile(cpu, .95):,.0f}",
                     f"{statistics.median(db):,.0f}" if db else "-", f"{percentile(db, .95):,.0f}" if db else "-",
                     f"{statistics.median(r['queries'] for r in runs):,.0f}",
                     f"{statistics.median(r['rows'] for r in runs):,.0f}"))
    return rows


HEADER = ("clusters", "step", "runs", "wall p50 ms", "wall p95 ms", "worker CPU p50 ms", "worker CPU p95 ms",
          "DB CPU p50 ms", "DB CPU p95 ms", "queries p50",
          "rows p50")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clusters", default="1,10,50", help="fleet sizes to measure at, comma-separated, increasing")
    parser.add_argument("--nodes", type=int, default=1000, help="nodes per cluster")
    parser.add_argument("--pods-per-node", type=int, default=5)
    parser.add_argument("--reservations", type=int, default=120)
    parser.add_argument("--rounds", type=int, default=1, help="rounds of every step at each size")
    parser.add_argument("--sample", type=int, default=None, help="time the per-cluster steps on this many clusters "
                        "spread over the fleet (default: every cluster)")
    parser.add_argument("--measure-only", action="store_true", help="measure the fleet already in the database")
    args = parser.parse_args(argv)
    sizes = sorted({int(s) for s in args.clusters.split(",") if s.strip()})
    if not sizes or sizes[0] < 1:
        parser.error("--clusters: one or more fleet sizes of at least 1, e.g. 1,10,50")
    if not os.environ.get("DATABASE_URL", "").startswith("postgres"):
        parser.error("set DATABASE_URL to a scratch PostgreSQL database (it is emptied)")
    # Observe mode: every step records what it would do and acts on nothing, so each round sees the same world.
    os.environ.setdefault("KARPWEB_MODE", "observe")
    import django

    django.setup()
    from django.utils import timezone

    from fleet.models import Cluster

    meter = Meter()
    print(f"karpweb fleet benchmark: {args.nodes:,} nodes, {args.nodes * args.pods_per_node + PENDING_PER_CLUSTER:,} pods "
          f"per cluster, {args.reservations} reservations in 2 accounts, observe mode, Python {sys.version.split()[0]}")
    cpu_started, rows = time.process_time(), []
    if args.measure_only:
        sizes = [Cluster.objects.count()]
    else:
        now = timezone.now()
        started = time.perf_counter()
        empty_database()
        seed_shared(now, args.reservations)
        print(f"emptied and seeded the catalogue and reservations in {time.perf_counter() - started:.1f} s")
    seeded = 0
    for size in sizes:
        if not args.measure_only:
            started = time.perf_counter()
            seed_clusters(now, seeded, size, args.nodes, args.pods_per_node)
            print(f"seeded clusters {seeded + 1}-{size} in {time.perf_counter() - started:.1f} s")
            seeded = size
        # A first round unmeasured: the first run of each step writes the conditions and samples a running loop has.
        measure(size, 1, args.sample, meter)
        started = time.perf_counter()
        figures = measure(size, args.rounds, args.sample, meter)
        print(f"measured {size} cluster(s) in {time.perf_counter() - started:.1f} s")
        rows += report(size, figures, args.nodes)
        print_table(HEADER, rows[-len(figures):])
        ec2 = figures.get(EC2_STEP, [])
        if ec2:  # one run per (account, region) serves that pair's clusters
            served = size / len(ec2)
            print(f"{EC2_STEP}: {len(ec2)} run(s), each for {served:,.1f} clusters: "
                  f"{statistics.median(r['cpu'] for r in ec2) * 1000 / served:,.0f} ms worker CPU per cluster served")
    print()
    print_table(HEADER, rows)
    print(f"\nthis process's CPU (the worker's side, seeding included): {time.process_time() - cpu_started:,.1f} s; "
          f"load average {' / '.join(f'{v:.1f}' for v in os.getloadavg())} on {os.cpu_count()} cores")
    return 0


def print_table(header, rows) -> None:
    widths = [max(len(str(h)), *(len(str(r[i])) for r in rows)) for i, h in enumerate(header)]
    print("  ".join(str(h).rjust(w) for h, w in zip(header, widths)))
    print("  ".join("-" * w for w in widths))
    for row in rows:
        print("  ".join(str(c).rjust(w) for c, w in zip(row, widths)))


if __name__ == "__main__":
    sys.exit(main())
