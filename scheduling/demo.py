"""The demo world `seed_demo` writes: a small fleet of two AWS accounts and three clusters, three
AZs, real us-east-1 list prices, reservations of every kind (one capacity block ending within the
hour, one idle ODCR, one expired, one no class selects beside on-demand nodes of its type, one
ending in ten days, one the first account shares with the second through RAM, one under a commitment
with idle units beside a full one of the same shape), NodePools and the nodes, node claims and pods
that use them, 15 days of hourly use (the 14 the shrink window needs), and the recommendations
computed from it: every kind appears (shrink, cancel, select, extend, end date, move, split).

The fleet: the first cluster (the default one, named PROD_CLUSTER when it has no name of its own)
holds the single-cluster world as it always was, in the first account; a second cluster in the same
account and a third in the second account each run a small pool, and both run nodes in the shared
reservation (seen by the second account through its ReservationVisibility). Each cluster's rows are
written inside its scope (fleet/scope.py) and carry names no other cluster uses.

Deterministic for a given `now`: every object has a fixed natural key and fixed values, so
seeding twice gives the same world.
"""

import datetime
from decimal import Decimal
import json
import random
from pathlib import Path

from django.db import transaction

from fleet.defaults import DEFAULT_NAME, UNKNOWN_ACCOUNT_ID
from fleet.models import AwsAccount, Cluster
from fleet.scope import cluster_scope, default_cluster, unscoped
from reservations import doctor
from reservations.buying import recompute_buy_advice
from reservations.models import (CapacityBlockFee, CapacityReservation, EC2NodeClass, PriceCommitments, ReservationVisibility,
                                 UtilizationHour, UtilizationSample, record_visibility, used_allocations)
from reservations.utilization import roll_up
from reservations.status import refresh_node_class_status
from scheduling.adapters.ec2.amis import variant_of
from scheduling.adapters.ec2.catalogue import instance_type_info
from scheduling.adapters.ec2.sync import instance_type_row
from scheduling.adapters.kube.sync import pod_requests
from scheduling.claim_hashes import PROVISIONER_LABEL, claim_annotations, claim_expire_after
from scheduling.engine.quantities import CPU, MEMORY, PODS
from scheduling.simulated_network import launched_with
from scheduling.simulated_extensions import block_offerings
from scheduling.models import CapacityType, InstanceType, Node, NodeClaim, NodePool, Offering, Pod, SimulatedInstance
from scheduling.engine.labels import INSTANCE_TYPE, NODEPOOL
from scheduling.engine.nodeclaim import overfull
from scheduling.engine.world import parse_node, parse_pod
from scheduling.world import node_allocatable, pods as world_pods, registered_nodes

ACCOUNT = "123456789012"
SECOND_ACCOUNT = "210987654321"
ACCOUNT_NAMES = {ACCOUNT: "demo-prod", SECOND_ACCOUNT: "demo-research"}
REGION = "us-east-1"
# The first cluster's name when the install gave it none (KARPWEB_CLUSTER_NAME unset: "default").
PROD_CLUSTER = "prod-use1"
# The fleet's other clusters: name -> account.
OTHER_CLUSTERS = {"staging-use1": ACCOUNT, "research-use1": SECOND_ACCOUNT}
# Owned by ACCOUNT, shared with SECOND_ACCOUNT, used by nodes of staging-use1 and research-use1.
SHARED_RESERVATION = "0010"
ZONES = {"us-east-1a": "use1-az1", "us-east-1b": "use1-az2", "us-east-1c": "use1-az4"}

# name: (on-demand $/h in us-east-1, spot offered). Everything else about a type comes from EC2's
# own DescribeInstanceTypes answer (data/demo_instance_types.json), derived as the EC2 sync derives it.
INSTANCE_TYPES = {
    "t3.medium": (0.0416, True),
    "t3.large": (0.0832, True),
    "m5.large": (0.096, True),
    "m5.xlarge": (0.192, True),
    "m5.2xlarge": (0.384, True),
    "m5.4xlarge": (0.768, True),
    "m6i.large": (0.096, True),
    "m6i.xlarge": (0.192, True),
    "m6i.2xlarge": (0.384, True),
    "m7i.large": (0.1008, True),
    "m7g.large": (0.0816, True),
    "m7g.xlarge": (0.1632, True),
    "c5.large": (0.085, True),
    "c5.xlarge": (0.17, True),
    "c6a.large": (0.0765, True),
    "c6a.xlarge": (0.153, True),
    "c6a.48xlarge": (7.344, True),
    "r5.large": (0.126, True),
    "r5.xlarge": (0.252, True),
    "r6i.large": (0.126, True),
    "g5.xlarge": (1.006, True),
    "g5.12xlarge": (5.672, True),
    "p5.48xlarge": (55.04, False),
    "trn2.48xlarge": (44.7, False),
}
DESCRIBED_TYPES = Path(__file__).parent / "data" / "demo_instance_types.json"

HOUR = datetime.timedelta(hours=1)
DAY = datetime.timedelta(days=1)
MINUTE = datetime.timedelta(minutes=1)


def reservation_id(suffix: str) -> str:
    return f"cr-0a1b2c3d4e5f6{suffix}"


def _reservations(now):
    """(id suffix, type, zone, kind, match, total, used, end, tags, ultraserver, state)."""
    return [
        ("0001", "m5.large", "us-east-1a", "default", "targeted", 10, 6, None, {"team": "web"}, "", "active"),
        ("0002", "m5.xlarge", "us-east-1b", "default", "targeted", 4, 0, None, {"team": "web"}, "", "active"),
        # Ends in ten days while still used: the end-date warning.
        ("0003", "c6a.large", "us-east-1a", "default", "open", 6, 3, now + 10 * DAY, {"team": "batch"}, "", "active"),
        ("0004", "c6a.48xlarge", "us-east-1c", "default", "targeted", 1, 1, None, {"team": "batch"}, "", "active"),
        ("0005", "g5.12xlarge", "us-east-1b", "capacity-block", "targeted", 2, 2, now + 41 * MINUTE, {"team": "ml"}, "", "active"),
        ("0006", "p5.48xlarge", "us-east-1a", "capacity-block", "targeted", 2, 1, now + 3 * DAY, {"team": "ml"}, "", "active"),
        ("0007", "trn2.48xlarge", "us-east-1c", "capacity-block", "targeted", 4, 2, now + 5 * HOUR, {"team": "ml"}, "trn2u.48xlarge", "active"),
        # Expired yesterday with one node still in it (its last use, as EC2 last reported it).
        ("0008", "r5.large", "us-east-1c", "default", "targeted", 2, 1, now - DAY, {"team": "web"}, "", "expired"),
        # No class selects it while two on-demand m5.xlarge of the web pool run in its zone: select (or cancel) it.
        ("0009", "m5.xlarge", "us-east-1c", "default", "targeted", 3, 0, None, {"team": "data"}, "", "active"),
        # Shared through RAM with the second account: two clusters in two accounts run in it.
        (SHARED_RESERVATION, "m6i.large", "us-east-1b", "default", "targeted", 6, 4, None, {"team": "shared"}, "", "active"),
    ]


NODE_CLASSES = {
    "default": [{"tags": {"team": "web"}}, {"id": "cr-0a1b2c3d4e5f60003"}],
    "ml": [{"tags": {"team": "ml"}, "ownerID": ACCOUNT}],
    "batch": [{"tags": {"team": "batch"}}, {"instanceMatchCriteria": "open"}],
}

# GPU nodes are tainted so that only pods asking for accelerators land on them.
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}

# The other clusters' classes and pools (names no other cluster uses: the console's pages find an
# object by its name across the fleet).
OTHER_NODE_CLASSES = {
    "staging-use1": {"staging": [{"id": reservation_id(SHARED_RESERVATION)}]},
    # The second term names a tag no reservation carries: the reservation doctor's selector-matches-nothing.
    "research-use1": {"research": [{"id": reservation_id(SHARED_RESERVATION)}, {"tags": {"team": "research-gpu"}}]},
}
OTHER_NODE_POOLS = {
    "staging-use1": {"staging-web": (10, "staging", ["reserved", "on-demand"], [
        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}], {"cpu": "100"}),
        # The open-reservation trap: its class selects a reservation (so launches skip open ones) but not
        # the open 0003, and it allows on-demand only, so its c6a.large run paid beside 0003's idle units.
        "staging-batch": (5, "staging", ["on-demand"], [
            {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["c6a"]}], {"cpu": "50"})},
    "research-use1": {"research-batch": (10, "research", None, [], {"cpu": "200"})},
}
OTHER_NODE_PLANS = {
    "staging-use1": [
        ("staging-web", "m6i.large", "us-east-1b", "reserved", SHARED_RESERVATION, 2),
        ("staging-web", "m5.large", "us-east-1a", "on-demand", "", 1),
        ("staging-batch", "c6a.large", "us-east-1a", "on-demand", "", 2),
    ],
    "research-use1": [
        ("research-batch", "m6i.large", "us-east-1b", "reserved", SHARED_RESERVATION, 2),
        ("research-batch", "c5.large", "us-east-1c", "spot", "", 1),
    ],
}
# Each cluster's nodes on a network of their own: ip-10-<n>-... and i-<n>... (no name twice in the fleet).
NETWORKS = {"staging-use1": 1, "research-use1": 2}
APPS = {"web": "web", "general": "worker", "gpu-reserved": "trainer", "staging-web": "staging-api", "staging-batch": "batch-job",
        "research-batch": "notebook"}
OTHER_PENDING = {
    "staging-use1": [("staging-api-pending-0", {"cpu": 500, "memory": 1024}, "staging-api")],
    "research-use1": [("notebook-pending-0", {"cpu": 2000, "memory": 4096}, "notebook")],
}

NODE_POOLS = {
    # name: (weight, node class, capacity types or None for all, extra requirements, limits)
    "gpu-reserved": (50, "ml", ["reserved"], [
        {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["g5", "p5", "trn2"]}],
        {"cpu": "2000", "memory": "16000Gi"}),
    "web": (20, "default", ["reserved", "on-demand"], [
        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}], {"cpu": "400"}),
    "general": (0, "batch", None, [], {"cpu": "1000"}),
}


@transaction.atomic
def seed(now: datetime.datetime, fleet: bool = True) -> None:
    """The demo fleet; `fleet=False`: its first cluster and account only (a single-cluster install)."""
    with unscoped():
        first, others, accounts = _seed_fleet(fleet)
        types = _seed_catalogue(now)
        with cluster_scope(first):
            reservations = _seed_reservations(now, types)
            reservations.update(_seed_committed_reservations(now, fleet, types))  # move and split (#37)
        # The owner's account shares one with the second: RAM, as EC2 reports it to the second account.
        if fleet:
            ReservationVisibility.objects.update_or_create(
                reservation=reservations[reservation_id(SHARED_RESERVATION)], account=accounts[SECOND_ACCOUNT],
                defaults={"shared": True})
        with cluster_scope(first):
            node_classes = _seed_node_classes(now, NODE_CLASSES)
            pools = _seed_node_pools(now, node_classes, NODE_POOLS)
            nodes = _seed_nodes(now, pools, reservations, _node_plan() + COMMITTED_NODE_PLANS[FIRST], types=types)
            _seed_pods(now, nodes, _pending_pods())
            refuse_overfull_nodes()
            refresh_node_class_status(now)
        for cluster in others:
            with cluster_scope(cluster):
                node_classes = _seed_node_classes(now, _with_committed_terms(cluster.name, OTHER_NODE_CLASSES[cluster.name]))
                pools = _seed_node_pools(now, node_classes, OTHER_NODE_POOLS[cluster.name])
                nodes = _seed_nodes(now, pools, reservations,
                                    OTHER_NODE_PLANS[cluster.name] + COMMITTED_NODE_PLANS.get(cluster.name, []),
                                    network=NETWORKS[cluster.name], types=types)
                pending = [(name, _pod_spec(size["cpu"], size["memory"]), app)
                           for name, size, app in OTHER_PENDING[cluster.name]]
                _seed_pods(now, nodes, pending)
                refuse_overfull_nodes()
                refresh_node_class_status(now)
        _seed_samples(now, reservations)
        _seed_commitments(now, fleet)
        _seed_recommendations(now)
        for cluster in [first, *others]:  # the reservation doctor and buy advice, as after an EC2 sync
            with cluster_scope(cluster):
                doctor.examine(None, now)
                recompute_buy_advice(_BlockSeller(now), now)  # Capacity Blocks for the waiting GPU gang
        # The running totals the fleet's pages read, as each cluster's loop step would count them (scheduling/totals.py).
        from scheduling import totals

        for cluster in [first, *others]:
            totals.refresh(cluster)


class OverfullNode(ValueError):
    """The demo would bind pods to a node that cannot hold them."""


def refuse_overfull_nodes() -> None:
    """Every node of the scope's cluster holds what its pods request, by the allocatable the engine and
    the kubelet compute (kube-reserved, system-reserved, eviction threshold: engine/overhead.py): a
    world Kubernetes could not run is refused, naming each node that holds too much."""
    by_node: dict[str, list] = {}
    for item in world_pods():
        pod = parse_pod(item)
        if pod is not None and pod.node_name:
            by_node.setdefault(pod.node_name, []).append(pod)
    problems = []
    for item in registered_nodes():
        node = parse_node(item)
        why = overfull(node, by_node.get(node.name, ()))
        if why:
            problems.append(f"node {node.name} ({node.labels.get(INSTANCE_TYPE, '?')}, NodePool "
                            f"{node.labels.get(NODEPOOL, '?')}): {why}")
    if problems:
        raise OverfullNode("the demo world binds more pods to a node than it can hold:\n  " + "\n  ".join(problems))


def _seed_fleet(fleet: bool = True) -> tuple[Cluster, list[Cluster], dict[str, AwsAccount]]:
    """The two accounts and three clusters. The first cluster is the install's default one (its
    world is the single-cluster demo), moved into the first account; an account nobody named (the
    placeholder a fresh install starts with) goes once no cluster is in it."""
    accounts = {}
    for account_id, name in ACCOUNT_NAMES.items() if fleet else [(ACCOUNT, ACCOUNT_NAMES[ACCOUNT])]:
        accounts[account_id], _ = AwsAccount.objects.get_or_create(
            account_id=account_id, defaults={"name": name, "regions": [REGION]})
    first = default_cluster()
    changed = {"account": accounts[ACCOUNT], "region": REGION, "connection": Cluster.Connection.SIMULATED}
    if first.name == DEFAULT_NAME:
        changed["name"] = PROD_CLUSTER
    if any(getattr(first, field) != value for field, value in changed.items()):
        for field, value in changed.items():
            setattr(first, field, value)
        first.save()
    AwsAccount.objects.filter(account_id=UNKNOWN_ACCOUNT_ID, clusters=None).delete()
    others = [Cluster.objects.update_or_create(name=name, defaults={
        "account": accounts[account_id], "region": REGION, "connection": Cluster.Connection.SIMULATED})[0]
        for name, account_id in OTHER_CLUSTERS.items()] if fleet else []
    return first, others, accounts


# What the accounts already pay for, as an EC2 sync would have read it (reservations/commitments.py): demo-prod's
# EC2 Instance Savings Plan prices its on-demand c5.xlarge (its hourly commitment is that node's rate, spent by it);
# demo-research's zonal Reserved Instance makes an on-demand m6i.large in us-east-1b free at the margin.
SAVINGS_PLAN_DISCOUNT = Decimal("0.72")  # the plan's rate against the list price


def _commitments(account_id: str) -> dict:
    if account_id == ACCOUNT:
        rate = float((Decimal(str(INSTANCE_TYPES["c5.xlarge"][0])) * SAVINGS_PLAN_DISCOUNT).quantize(Decimal("0.0001")))
        plan = {"savingsPlanId": "sp-0demo0prod0c5", "savingsPlanType": "EC2Instance", "commitment": rate,
                "rates": [{"instanceType": "c5.xlarge", "rate": rate}]}
        return {"reserved_instances": [], "savings_plans": [plan]}
    ri = {"ReservedInstancesId": "ri-0demo-research-m6i", "InstanceType": "m6i.large", "AvailabilityZone": "us-east-1b",
          "InstanceCount": 1, "Scope": "Availability Zone", "State": "active", "OfferingClass": "standard",
          "End": "2027-06-30T00:00:00Z"}
    return {"reserved_instances": [ri], "savings_plans": []}


def _seed_commitments(now, fleet: bool) -> None:
    if not fleet:  # a fleet of one: the second account is gone, and so is what it paid for
        PriceCommitments.objects.filter(account_id=SECOND_ACCOUNT, region=REGION).delete()
    for account_id in (ACCOUNT, SECOND_ACCOUNT) if fleet else (ACCOUNT,):
        PriceCommitments.objects.update_or_create(account_id=account_id, region=REGION,
                                                  defaults={**_commitments(account_id), "list_prices_because": [],
                                                            "read_at": now})


class _BlockSeller:
    """The simulated EC2's Capacity Block offerings, from the demo's moment."""

    def __init__(self, now):
        self.now = now

    def capacity_block_offerings(self, instance_type, instance_count, hours, *, ultraserver_type="", **_):
        return [] if ultraserver_type else block_offerings(instance_type, instance_count, hours, self.now)


def _seed_recommendations(now):
    """What the loop's hourly recompute would say, at once: the simulated EC2 sells the extensions."""
    from reservations.recommendations import recompute
    from scheduling.simulated_extensions import extension_offerings

    recompute(now, extension_offerings=extension_offerings)


def described_types() -> dict[str, dict]:
    """The demo's DescribeInstanceTypes answers, by name."""
    return {raw["InstanceType"]: raw for raw in json.loads(DESCRIBED_TYPES.read_text())["InstanceTypes"]}


def _seed_catalogue(now):
    described = described_types()
    rows = [instance_type_row(instance_type_info(described[name]), now) for name in INSTANCE_TYPES]
    types = _upsert(InstanceType.objects, ("name",), [InstanceType(**row) for row in rows],
                    [field for field in rows[0] if field != "name"])
    offerings = []
    for instance_type, (name, (price, spot)) in zip(types, INSTANCE_TYPES.items()):
        for zone, zone_id in ZONES.items():
            offerings.append(Offering(instance_type=instance_type, capacity_type=CapacityType.ON_DEMAND, zone=zone,
                                      reservation=None, zone_id=zone_id, price=price, available=True, updated_at=now))
            if spot:
                # Spot runs at 30-45 % of list, varying by pool; fixed per (type, zone).
                discount = random.Random(f"{name}/{zone}").uniform(0.30, 0.45)
                offerings.append(Offering(instance_type=instance_type, capacity_type=CapacityType.SPOT, zone=zone,
                                          reservation=None, zone_id=zone_id, price=round(price * discount, 4),
                                          available=True, updated_at=now))
    _upsert(Offering.objects.filter(reservation=None), ("instance_type", "capacity_type", "zone", "reservation"),
            offerings, ["zone_id", "price", "available", "updated_at"])
    return {it.name: it for it in types}


def _upsert(queryset, key: tuple[str, ...], objects: list, fields: list[str]) -> list:
    """What `update_or_create(<key fields>, defaults=<fields>)` does for each of `objects` (unsaved rows,
    looked up by their `key` fields in `queryset`), in a few queries instead of several per row: a row
    found gets `fields` written and keeps its other columns (read back onto the object, as update_or_create
    returns it); the others are bulk-created in the order given, so they get their primary keys in the order
    seeding them one by one gave them. The first key field must not be None. Returns `objects`, saved."""
    if not objects:
        return objects
    model = queryset.model
    keys = [model._meta.get_field(name).attname for name in key]
    written = {*keys, *(model._meta.get_field(name).attname for name in fields)}
    found = {tuple(row[k] for k in keys): row for row in queryset.filter(
        **{f"{keys[0]}__in": {getattr(obj, keys[0]) for obj in objects}}).values(*(f.attname for f in model._meta.concrete_fields))}
    existing, new = [], []
    for obj in objects:
        row = found.get(tuple(getattr(obj, k) for k in keys))
        if row is None:
            new.append(obj)
            continue
        for column, value in row.items():
            if column not in written:
                setattr(obj, column, value)
        obj._state.adding, obj._state.db = False, queryset.db
        existing.append(obj)
    if existing:
        queryset.bulk_update(existing, fields)
    if new:
        queryset.bulk_create(new)
    return objects


def _upsert_reservations(rows: list[dict]) -> dict:
    """Reservations (each row: the reservation's fields) by id, as update_or_create by reservation_id would
    write them (the rows share their fields); the post_save signal's record_visibility is the caller's."""
    objects = _upsert(CapacityReservation.objects.fleet(), ("reservation_id",),
                      [CapacityReservation(**row) for row in rows], [field for field in rows[0] if field != "reservation_id"])
    return {r.reservation_id: r for r in objects}


def _upsert_reserved_offerings(now, reservations: dict, types: dict, available) -> None:
    """The offering of each reservation (priced at its type's on-demand price / 10,000,000, as Karpenter
    models them); `available(reservation)` says whether it is."""
    _upsert(Offering.objects, ("reservation",), [
        Offering(reservation=r, instance_type=types[r.instance_type], capacity_type=CapacityType.RESERVED,
                 zone=r.availability_zone, zone_id=ZONES[r.availability_zone],
                 price=INSTANCE_TYPES[r.instance_type][0] / 10_000_000, available=available(r), updated_at=now)
        for r in reservations.values()], ["instance_type", "capacity_type", "zone", "zone_id", "price", "available", "updated_at"])


# What the trn2 Capacity Block cost up front (4 units for its 53 hours: $30.00 per unit-hour, against the
# $44.70 on-demand list price): its idle units are valued at that (reservations/block_fees.py).
BLOCK_FEES = {"0007": Decimal("6360.00")}


def _seed_reservations(now, types: dict):
    rows = []
    for suffix, itype, zone, kind, match, total, used, end, tags, ultraserver, state in _reservations(now):
        rid = reservation_id(suffix)
        rows.append(dict(
            reservation_id=rid,
            arn=f"arn:aws:ec2:{REGION}:{ACCOUNT}:capacity-reservation/{rid}", owner_id=ACCOUNT, region=REGION,
            instance_type=itype, availability_zone=zone, availability_zone_id=ZONES[zone],
            total_instance_count=total, available_instance_count=total - used, state=state,
            instance_match_criteria=match, reservation_type=kind, create_date=now - 60 * DAY,
            start_date=now - (2 * DAY if kind == "capacity-block" else 60 * DAY), end_date=end,
            end_date_type="limited" if end else "unlimited", ultraserver_type=ultraserver, tags=tags,
            capacity_allocations=used_allocations(used), last_seen=now,
        ))
    reservations = _upsert_reservations(rows)
    for suffix, fee in BLOCK_FEES.items():  # EC2 reports no block's fee: an administrator entered it
        CapacityBlockFee.objects.update_or_create(reservation_id=reservation_id(suffix), defaults={"block_fee": fee})
    _upsert_reserved_offerings(now, reservations, types, lambda r: r.is_usable(now) and r.total_instance_count > r.used_instance_count)
    reservations.update(_seed_future_reservation(now, types))
    # Seen by the first cluster's account (their owner): what its EC2 sync records.
    record_visibility([r.pk for r in reservations.values()])
    return reservations


# A future-dated ODCR (issue #37): scheduled, starting in four days with a two-week commitment. The batch
# class's tags will select it for the general pool, whose spot m6i.xlarge pods it could then hold.
FUTURE_RESERVATION = "0011"


def _seed_future_reservation(now, types: dict) -> dict:
    rid, start = reservation_id(FUTURE_RESERVATION), now + 4 * DAY
    reservations = _upsert_reservations([dict(
        reservation_id=rid,
        arn=f"arn:aws:ec2:{REGION}:{ACCOUNT}:capacity-reservation/{rid}", owner_id=ACCOUNT, region=REGION,
        instance_type="m6i.xlarge", availability_zone="us-east-1b", availability_zone_id=ZONES["us-east-1b"],
        total_instance_count=3, available_instance_count=3, state=CapacityReservation.State.SCHEDULED,
        instance_match_criteria="targeted", reservation_type="default", create_date=now - 2 * DAY, start_date=start,
        end_date=None, end_date_type="unlimited", tags={"team": "batch"}, committed_instance_count=3,
        commitment_end_date=start + 14 * DAY, delivery_preference="fixed", last_seen=now,
    )])
    _upsert_reserved_offerings(now, reservations, types, lambda r: False)
    return reservations


def _seed_node_classes(now, classes):
    fields = ["uid", "capacity_reservation_selector_terms", "spec", "created_at", "synced_at"]
    return {node_class.name: node_class for node_class in _upsert(EC2NodeClass.objects, ("name",), [
        EC2NodeClass(
            name=name, uid=f"demo-nodeclass-{name}", capacity_reservation_selector_terms=terms,
            spec={"role": "KarpenterNodeRole-demo", "amiSelectorTerms": [{"alias": "al2023@latest"}],
                  "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
                  "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}]},
            created_at=now - 90 * DAY, synced_at=now)
        for name, terms in classes.items()], fields)}


def _seed_node_pools(now, node_classes, node_pools):
    pools = []
    for name, (weight, node_class, capacity_types, extra, limits) in node_pools.items():
        requirements = list(extra)
        if capacity_types:
            requirements.insert(0, {"key": "karpenter.sh/capacity-type", "operator": "In", "values": capacity_types})
        pools.append(NodePool(
            name=name, uid=f"demo-nodepool-{name}", weight=weight, node_class=node_classes[node_class],
            node_class_ref={"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": node_class},
            requirements=requirements, limits=limits, created_at=now - 90 * DAY, synced_at=now,
            taints=[GPU_TAINT] if name == "gpu-reserved" else [],
            conditions=[{"type": "Ready", "status": "True", "reason": "Ready", "message": "",
                         "lastTransitionTime": (now - 90 * DAY).strftime("%Y-%m-%dT%H:%M:%SZ")}],
        ))
    fields = ["uid", "weight", "node_class", "node_class_ref", "requirements", "limits", "created_at", "synced_at",
              "taints", "conditions"]
    return {pool.name: pool for pool in _upsert(NodePool.objects, ("name",), pools, fields)}


def _node_plan():
    """(pool, instance type, zone, capacity type, reservation suffix or '', count)."""
    return [
        ("web", "m5.large", "us-east-1a", "reserved", "0001", 6),
        ("general", "c6a.large", "us-east-1a", "reserved", "0003", 3),
        ("general", "c6a.48xlarge", "us-east-1c", "reserved", "0004", 1),
        ("gpu-reserved", "g5.12xlarge", "us-east-1b", "reserved", "0005", 2),
        ("gpu-reserved", "p5.48xlarge", "us-east-1a", "reserved", "0006", 1),
        ("gpu-reserved", "trn2.48xlarge", "us-east-1c", "reserved", "0007", 2),
        # Still labelled reserved although its reservation expired yesterday: a demotion candidate.
        ("web", "r5.large", "us-east-1c", "reserved", "0008", 1),
        ("web", "m5.xlarge", "us-east-1c", "on-demand", "", 2),
        ("general", "c5.xlarge", "us-east-1b", "on-demand", "", 1),
        ("general", "m6i.xlarge", "us-east-1b", "spot", "", 3),
        ("general", "m7i.large", "us-east-1c", "spot", "", 2),
    ]


def _seed_nodes(now, pools, reservations, plan, network=0, types=None):
    rng = random.Random(7 + network)
    claims, nodes, instances = [], [], []
    sequence = 0
    types = types or {it.name: it for it in InstanceType.objects.all()}
    shapes = {it.name: (it.arch, variant_of(it.labels or {})) for it in types.values()}
    for pool_name, itype, zone, capacity_type, suffix, count in plan:
        pool = pools[pool_name]
        room = node_allocatable(types[itype], pool.node_class)
        reservation = reservations.get(reservation_id(suffix)) if suffix else None
        # What the simulated EC2 launches this shape with from the class as seeded (its newest image, its
        # zone's subnet, its groups): the first lifecycle pass finds nothing drifted.
        image, subnet, groups = launched_with(dict(pool.node_class.spec or {}), zone, *shapes[itype])
        annotations, expire_after = claim_annotations(pool), claim_expire_after(pool)
        # The simulated EC2's view of the same instance: an ended reservation no longer holds it.
        held = reservation is not None and reservation.is_usable(now)
        for _ in range(count):
            sequence += 1
            claim_name = f"{pool_name}-{''.join(rng.choice('abcdefghjkmnpqrstvwxz2456789') for _ in range(5))}"
            node_name = f"ip-10-{network}-{sequence // 250}-{sequence % 250 + 4}.ec2.internal"
            instance_id = f"i-{network}{sequence:016x}"
            provider_id = f"aws:///{zone}/{instance_id}"
            # As Karpenter labels a node: every label of its type, then its offering and pool.
            labels = {
                **types[itype].labels,
                "karpenter.sh/nodepool": pool_name, "karpenter.sh/capacity-type": capacity_type,
                "topology.kubernetes.io/zone": zone, "topology.k8s.aws/zone-id": ZONES[zone],
                "kubernetes.io/hostname": node_name,
            }
            if reservation:
                labels.update({
                    "karpenter.k8s.aws/capacity-reservation-id": reservation.reservation_id,
                    "karpenter.k8s.aws/capacity-reservation-type": reservation.reservation_type,
                    "karpenter.k8s.aws/capacity-reservation-interruptible": "false",
                })
            launched = now - datetime.timedelta(hours=rng.randint(2, 400))
            if reservation is not None:
                # Launched into the reservation while it was usable: never before it started, never after it ended.
                launched = max(launched, reservation.start_date + 5 * MINUTE)
                if reservation.end_date is not None and reservation.end_date < now:
                    launched = min(launched, reservation.end_date - DAY)
            # karpweb runs the demo world in control mode: its loop launched these claims, as create_claim
            # writes them (its label, the hash annotations drift reads, expireAfter), not Karpenter.
            claim = NodeClaim(
                name=claim_name,
                uid=f"demo-claim-{network}-{sequence}" if network else f"demo-claim-{sequence}", node_pool=pool, node_class=pool.node_class, instance_type=itype,
                zone=zone, capacity_type=capacity_type, reservation=reservation,
                reservation_label=reservation.reservation_id if reservation else "",
                labels={**labels, PROVISIONER_LABEL: "karpweb"}, annotations=dict(annotations),
                expire_after=expire_after,
                requirements=pool.requirements, provider_id=provider_id, node_name=node_name,
                image_id=image, created_at=launched, launched_at=launched + 20 * datetime.timedelta(seconds=1),
                registered_at=launched + datetime.timedelta(seconds=45),
                initialized_at=launched + datetime.timedelta(seconds=60), synced_at=now,
                conditions=[{"type": c, "status": "True", "reason": c, "message": "",
                             "lastTransitionTime": launched.strftime("%Y-%m-%dT%H:%M:%SZ")}
                            for c in ("Initialized", "Launched", "Ready", "Registered")],
            )
            claims.append(claim)
            nodes.append(Node(
                name=node_name,
                uid=f"demo-node-{network}-{sequence}" if network else f"demo-node-{sequence}", node_pool=pool, node_claim=claim, instance_type=itype, zone=zone,
                capacity_type=capacity_type, reservation=reservation,
                reservation_label=reservation.reservation_id if reservation else "", labels=labels,
                annotations={"karpenter.sh/nodepool-hash": "demo"}, taints=pool.taints,
                allocatable_cpu_millicores=room[CPU], allocatable_memory_bytes=room[MEMORY], allocatable_pods=room[PODS],
                allocatable_extended={k: v for k, v in room.items() if "/" in k}, provider_id=provider_id, ready=True, unschedulable=False,
                created_at=launched + datetime.timedelta(seconds=45), synced_at=now,
            ))
            instances.append(SimulatedInstance(
                instance_id=instance_id,
                client_token=claim_name, instance_type=itype, zone=zone, state="running", launched_at=launched,
                capacity_type=capacity_type if held or capacity_type != "reserved" else CapacityType.ON_DEMAND,
                reservation_id=reservation.reservation_id if held else "",
                reservation_type=reservation.reservation_type if held else "",
                image_id=image, subnet_id=subnet, security_group_ids=groups,
            ))
    _upsert(NodeClaim.objects, ("name",), claims, CLAIM_FIELDS)
    for node in nodes:
        node.node_claim = node.node_claim  # the claim's primary key, now that it has one
    _upsert(Node.objects, ("name",), nodes, NODE_FIELDS)
    _upsert(SimulatedInstance.objects, ("instance_id",), instances, INSTANCE_FIELDS)
    return nodes


# What update_or_create wrote (its defaults) into a claim, a node and a simulated instance found by name.
CLAIM_FIELDS = ["uid", "node_pool", "node_class", "instance_type", "zone", "capacity_type", "reservation",
                "reservation_label", "labels", "annotations", "expire_after", "requirements", "provider_id", "node_name",
                "image_id", "created_at", "launched_at", "registered_at", "initialized_at", "synced_at", "conditions"]
NODE_FIELDS = ["uid", "node_pool", "node_claim", "instance_type", "zone", "capacity_type", "reservation",
               "reservation_label", "labels", "annotations", "taints", "allocatable_cpu_millicores",
               "allocatable_memory_bytes", "allocatable_pods", "allocatable_extended", "provider_id", "ready",
               "unschedulable", "created_at", "synced_at"]
INSTANCE_FIELDS = ["client_token", "instance_type", "zone", "state", "launched_at", "capacity_type", "reservation_id",
                   "reservation_type", "image_id", "subnet_id", "security_group_ids"]


def _pod_spec(cpu_m, mem_mi, node_selector=None, gpus=0, accelerator="nvidia.com/gpu"):
    requests = {"cpu": f"{cpu_m}m", "memory": f"{mem_mi}Mi"}
    if gpus:
        requests[accelerator] = str(gpus)
    spec = {"containers": [{"name": "app", "image": "demo", "resources": {"requests": requests}}]}
    if gpus:
        spec["tolerations"] = [GPU_TOLERATION]
    if node_selector:
        spec["nodeSelector"] = node_selector
    return spec


def _pending_pods():
    """The first cluster's pending pods: (name, spec, app)."""
    return [
        ("web-pending-0", _pod_spec(1000, 2048, {"karpenter.sh/capacity-type": "reserved"}), "web"),
        ("web-pending-1", _pod_spec(1000, 2048), "web"),
        ("web-pending-2", _pod_spec(500, 1024), "web"),
        ("worker-pending-0", _pod_spec(2000, 4096), "worker"),
        ("worker-pending-1", _pod_spec(250, 512, {"kubernetes.io/arch": "arm64"}), "worker"),
        ("trainer-pending-0", _pod_spec(96000, 1048576, {"karpenter.k8s.aws/capacity-reservation-type": "capacity-block"}, gpus=8), "trainer"),
        # Its gang's second pod: block 0006 has one free unit, for the first; nothing holds this one (buy advice).
        ("trainer-pending-1", _pod_spec(96000, 1048576, {"karpenter.k8s.aws/capacity-reservation-type": "capacity-block"}, gpus=8), "trainer"),
    ]


def _seed_pods(now, nodes, pending):
    """The cluster's pods: a few on each node, the pending ones, and one pinned to each node that holds one
    (_memory_pods); the demo pods it no longer has (an older demo's) go."""
    rng = random.Random(11)
    pods = []
    for index, node in enumerate(nodes):
        pool = node.labels["karpenter.sh/nodepool"]
        app = APPS[pool]
        # A node holding a pinned pool pod (PINNED_POOL_PODS) has room for one small pod beside it.
        per_node = 1 if pool == "gpu-reserved" or pool in PINNED_POOL_PODS else 3
        for slot in range(per_node):
            name = f"{app}-{index:03d}{slot}"
            cpu = 1000 if pool == "gpu-reserved" else rng.choice([250, 500])
            gpus = 1 if pool == "gpu-reserved" else 0
            # Trainium nodes advertise Neuron devices, not GPUs.
            accelerator = "aws.amazon.com/neuron" if node.instance_type.startswith("trn") else "nvidia.com/gpu"
            spec = _pod_spec(cpu, rng.choice([256, 512, 1024]), gpus=gpus, accelerator=accelerator)
            pods.append(_pod(now, name, node, spec, {"app": app}))
    for name, spec, app in pending:
        pods.append(_pod(now, name, None, spec, {"app": app}))
    pods += _memory_pods(now, nodes)
    Pod.objects.filter(namespace="default", uid__startswith="demo-pod-").exclude(
        name__in=[pod.name for pod in pods]).delete()
    _upsert(Pod.objects.filter(namespace="default"), ("name", "namespace"), pods, POD_FIELDS)


POD_FIELDS = ["uid", "node", "node_name", "phase", "cpu_request_millicores", "memory_request_bytes", "labels", "spec",
              "owner_kind", "owner_name", "created_at", "synced_at"]


def _pod(now, name, node, spec, labels) -> Pod:
    cpu, memory = pod_requests(spec)
    return Pod(
        namespace="default", name=name,
        uid=f"demo-pod-{name}", node=node, node_name=node.name if node else "",
        phase="Running" if node else "Pending", cpu_request_millicores=cpu,
        memory_request_bytes=memory, labels=labels, spec=spec,
        owner_kind="ReplicaSet", owner_name=f"{labels['app']}-5d8f7c", created_at=now - 3 * HOUR, synced_at=now,
    )


HISTORY = 15 * DAY  # the shrink window (14 days) and then some
BUSY_HOURS = range(9, 17)  # UTC: one more instance runs in a used reservation by day


def _seed_samples(now, reservations):
    """15 days of hourly samples (a block's only since it started, an ended one's until it ended): a used reservation runs one more
    instance by day than now, an idle one stays idle; the last sample is what runs now."""
    UtilizationSample.objects.filter(reservation__in=reservations.values()).delete()
    UtilizationHour.objects.filter(reservation__in=reservations.values()).delete()
    samples = []
    hours = int(HISTORY / HOUR)
    for reservation in reservations.values():
        total, used_now = reservation.total_instance_count, reservation.used_instance_count
        for hours_ago in range(hours, -1, -1):
            at = now - hours_ago * HOUR
            if reservation.start_date and at < reservation.start_date:
                continue
            if reservation.end_date and at > reservation.end_date:
                continue  # EC2 reports no use of an ended reservation
            busy = hours_ago > 0 and used_now > 0 and at.hour in BUSY_HOURS
            used = min(total, used_now + (1 if busy else 0))
            samples.append(UtilizationSample(reservation=reservation, sampled_at=at, used=used, available=total - used,
                                             total=total))
    UtilizationSample.objects.bulk_create(samples, batch_size=2000)
    roll_up(since=now - HISTORY - HOUR)


# --- Commitments and ownership (issue #37): a committed reservation with idle units, a move and a split ---
#
# 0012: the first cluster's web pool holds 12 r6i.large in us-east-1a, 8 of them committed (CommitmentInfo) for
# six more weeks; it runs 2 (3 by day). EC2 refuses a cancel, or a shrink, split or move below 8, before the
# commitment ends: the 4 units above the commitment can be shrunk away, or (the same choice) put to work:
# 0013: the same shape (type, platform, zone, tenancy, no placement group, no end; one owner), full, selected by
# staging-use1's class while that cluster runs 3 on-demand r6i.large beside it: *move* 3 units there.
# research-use1 (the second account, which does not see 0012) runs one on-demand r6i.large in that zone:
# *split* the last idle unit off and share it with that account.
# Every r6i.large runs a memory-heavy pod pinned to the type and kept off spot, so consolidation keeps the on-demand
# ones until moved or shared units are there to take them (else the loop's next recompute finds no need to meet),
# and moves nothing out of the two reservations.
COMMITTED_SOURCE, MOVE_DESTINATION = "0012", "0013"
COMMITTED_TYPE, COMMITTED_ZONE = "r6i.large", "us-east-1a"
FIRST = "first"  # COMMITTED_NODE_PLANS' key for the first cluster (its name is the install's)
COMMITTED_NODE_PLANS = {
    FIRST: [("web", COMMITTED_TYPE, COMMITTED_ZONE, "reserved", COMMITTED_SOURCE, 2)],
    "staging-use1": [("staging-web", COMMITTED_TYPE, COMMITTED_ZONE, "reserved", MOVE_DESTINATION, 2),
                     ("staging-web", COMMITTED_TYPE, COMMITTED_ZONE, "on-demand", "", 3)],
    "research-use1": [("research-batch", COMMITTED_TYPE, COMMITTED_ZONE, "on-demand", "", 1)],
}
# The classes' extra terms: staging's class selects the destination by id.
COMMITTED_TERMS = {"staging-use1": {"staging": [{"id": reservation_id(MOVE_DESTINATION)}]}}
MEMORY_POD = {"cpu": 500, "memory": 10 * 1024}  # Mi: fits an r6i.large beside the node's three small pods, nothing smaller


def _committed_reservations(now) -> list[dict]:
    """The two rows (the destination only in the fleet: staging-use1 runs what uses it)."""
    started = now - 30 * DAY
    return [
        dict(suffix=COMMITTED_SOURCE, total=12, used=2, tags={"team": "web"}, create_date=started - 7 * DAY,
             start_date=started, committed_instance_count=8, commitment_end_date=now + 6 * 7 * DAY,
             delivery_preference="fixed"),
        dict(suffix=MOVE_DESTINATION, total=2, used=2, tags={"team": "staging"}, create_date=now - 60 * DAY,
             start_date=now - 60 * DAY),
    ]


def _seed_committed_reservations(now, fleet: bool, types: dict) -> dict:
    rows = []
    for row in _committed_reservations(now)[: 2 if fleet else 1]:
        rid, total, used = reservation_id(row.pop("suffix")), row.pop("total"), row.pop("used")
        rows.append(dict(
            reservation_id=rid,
            arn=f"arn:aws:ec2:{REGION}:{ACCOUNT}:capacity-reservation/{rid}", owner_id=ACCOUNT, region=REGION,
            instance_type=COMMITTED_TYPE, availability_zone=COMMITTED_ZONE, availability_zone_id=ZONES[COMMITTED_ZONE],
            total_instance_count=total, available_instance_count=total - used, state="active",
            instance_match_criteria="targeted", reservation_type="default", end_date=None, end_date_type="unlimited",
            capacity_allocations=used_allocations(used), last_seen=now, **row))
    # The rows differ in their fields (only the source has a commitment): each written as update_or_create wrote it.
    reservations = {}
    for row in rows:
        reservations.update(_upsert_reservations([row]))
    _upsert_reserved_offerings(now, reservations, types, lambda r: r.total_instance_count > r.used_instance_count)
    record_visibility([r.pk for r in reservations.values()])  # the owner's account sees them, as its EC2 sync records
    return reservations


def _with_committed_terms(cluster_name: str, classes: dict) -> dict:
    extra = COMMITTED_TERMS.get(cluster_name, {})
    return {name: terms + extra.get(name, []) for name, terms in classes.items()}


# Pods that hold a node of one type: pinned to the type and kept off spot (reserved or on-demand),
# each too big to share a node, so consolidation keeps those nodes and the advice they show holds:
# the r6i.large beside the committed reservations (move and split), the staging-batch c6a.large
# beside the open 0003 (the open-reservation trap).
PINNED_PODS = {COMMITTED_TYPE: ("cache", MEMORY_POD)}  # by instance type, in every cluster
PINNED_POOL_PODS = {"staging-batch": ("batch-hold", {"cpu": 1200, "memory": 2048})}  # by NodePool


def _memory_pods(now, nodes) -> list[Pod]:
    """One pod pinned to the type on each node of a PINNED_PODS type or a PINNED_POOL_PODS pool."""
    pods = []
    for node in nodes:
        pinned = PINNED_PODS.get(node.instance_type) or PINNED_POOL_PODS.get(node.node_pool.name if node.node_pool else "")
        if pinned:
            app, size = pinned
            spec = _pod_spec(size["cpu"], size["memory"], {"node.kubernetes.io/instance-type": node.instance_type})
            # Not to be interrupted: reserved or on-demand, never spot (research's pool allows spot).
            spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "karpenter.sh/capacity-type", "operator": "In",
                                       "values": ["reserved", "on-demand"]}]}]}}}
            pods.append(_pod(now, f"{app}-{node.name.split('.')[0]}", node, spec, {"app": app}))
    return pods
