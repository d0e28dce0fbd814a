"""Buy advice (issue #50): for each gang of pending accelerator pods in the scope's cluster, the Capacity
Block offerings EC2 quotes (DescribeCapacityBlockOfferings) that would hold every pod of it at once,
cheapest first (scheduling/engine/buying.py decides which hold it). Recomputed at each EC2 sync; the
provider keeps EC2's answers an hour. A row keeps its id while EC2 quotes the same offering for the same gang (an
operator approves the row the page showed); a gang a block was bought for gets no more advice until that block
ends. Buying is reservations/purchases.py's."""

from __future__ import annotations

import datetime
import logging

from django.db import transaction

from reservations.models import BuyAdvice, CapacityBlockPurchase
from scheduling.engine import WorldError, parse_world
from scheduling.engine.buying import (ACCELERATORS, ULTRASERVER_TYPES, accelerator_gangs, admits_type, nodes_needed, options,
                                      parse_offerings, ultraserver_asks)
from scheduling.engine.world import TERMINAL_PHASES
from scheduling.models import Decision, Pod
from scheduling.world import instance_types, pods

log = logging.getLogger(__name__)

BLOCK_HOURS = 24  # the shortest block EC2 sells: what a gang waiting now needs first
TYPES_ASKED = 3  # per gang, the cheapest instance types that hold its largest pod
OPTIONS_KEPT = 3  # per gang, the cheapest offerings that hold it
PLACING_WINDOW = datetime.timedelta(hours=1)  # how far back the plan's decisions about a waiting pod are read
PLACING_KINDS = (Decision.Kind.LAUNCH, Decision.Kind.UNSCHEDULABLE, Decision.Kind.DEFER)


def recompute_buy_advice(cloud, now) -> dict:
    lister = getattr(cloud, "capacity_block_offerings", None)
    if lister is None:
        return {}  # the simulated world sells no Capacity Blocks
    waiting = Pod.objects.filter(node_name="").exclude(phase__in=TERMINAL_PHASES).values_list(
        "namespace", "name", "spec", "created_at")
    asking = {(namespace, name): created for namespace, name, spec, created in waiting if _asks_for_accelerators(spec)}
    keys = set(asking)
    # Only decisions since the oldest of them came (at most PLACING_WINDOW back) can be about them.
    since = max([now - PLACING_WINDOW, *([min(asking.values())] if asking and None not in asking.values() else [])])
    keys -= being_placed(keys, since)  # the last plan gave them a node: no block to buy for them
    if not keys:  # no accelerator pod waits: no catalogue read, no parse (the EC2 step runs every few seconds)
        BuyAdvice.objects.all().delete()
        return {"buy_advice": 0}
    try:
        world = parse_world({"now": now.isoformat(), "pods": pods(keys), "instanceTypes": instance_types()})
    except WorldError as error:
        log.warning("buy advice not recomputed: %s", "; ".join(error.lines()[:3]))
        return {"buy_advice_errors": 1}
    types = {it.name: it for it in world.instance_types}
    bought = _gangs_with_a_block(now)
    rows = []
    for gang in accelerator_gangs(world.pods):
        if (gang.namespace, gang.name[:300]) in bought:
            continue  # its block is bought: it waits for the block's start
        offers = []
        for it in _types_for(gang, types.values()):
            count = nodes_needed(gang.pods, it.allocatable, len(gang.pods))
            if count is not None:
                offers += _offerings(lister, it.name, count)
        rows += [_row(option, now) for option in options(gang, offers, types, now)[:OPTIONS_KEPT]]
    _replace(rows)
    return {"buy_advice": len(rows)}


def _offerings(lister, instance_type: str, count: int) -> list:
    """EC2's offerings of `count` instances of the type; UltraServers of it where EC2 sells the type only so."""
    if instance_type not in ULTRASERVER_TYPES:
        return parse_offerings(lister(instance_type, count, BLOCK_HOURS))
    found = []
    for ultraserver, how_many in ultraserver_asks(instance_type, count):
        found += parse_offerings(lister(instance_type, count, BLOCK_HOURS, ultraserver_type=ultraserver,
                                        ultraserver_count=how_many))
    return found


def _gangs_with_a_block(now) -> set[tuple[str, str]]:
    return set(CapacityBlockPurchase.objects.filter(state=CapacityBlockPurchase.State.PURCHASED, end__gt=now)
               .values_list("namespace", "gang"))


def _replace(rows: list[BuyAdvice]) -> None:
    """This sync's advice in place of the last: a row EC2 still quotes keeps its id (its figures refreshed)."""
    fields = ["pods", "instance_type", "availability_zone", "instance_count", "nodes_used", "ultraserver_type", "start",
              "end", "hours", "upfront_fee", "computed_at"]
    with transaction.atomic():
        kept = {(row.namespace, row.gang, row.offering_id) for row in rows}
        stale = [pk for pk, *key in BuyAdvice.objects.values_list("pk", "namespace", "gang", "offering_id")
                 if tuple(key) not in kept]
        BuyAdvice.objects.filter(pk__in=stale).delete()
        BuyAdvice.objects.bulk_create(rows, update_conflicts=True, update_fields=fields,
                                      unique_fields=["cluster", "namespace", "gang", "offering_id"])


def being_placed(keys: set, since) -> set:
    """The waiting pods whose latest provisioning decision placed them (a launch planned or recommended for
    them, not failed): the plan found them room, so they are no gang a Capacity Block would have to hold.
    A pod the plan found no room for (unschedulable, deferred), or not planned yet, is not among them."""
    if not keys:
        return set()
    wanted = {f"{namespace}/{name}" for namespace, name in keys}
    latest: dict[str, bool] = {}
    decisions = (Decision.objects.filter(kind__in=PLACING_KINDS, created_at__gte=since)
                 .order_by("created_at", "pk").values_list("kind", "outcome", "objects_involved"))
    for kind, outcome, involved in decisions:
        pods = (involved or {}).get("pods") if isinstance(involved, dict) else None
        for pod in pods if isinstance(pods, list) else ():
            if pod in wanted:
                latest[pod] = kind == Decision.Kind.LAUNCH and outcome != Decision.Outcome.FAILED
    return {tuple(pod.split("/", 1)) for pod, placed in latest.items() if placed}


def _asks_for_accelerators(spec) -> bool:
    """Whether a pod's containers request (or limit) an accelerator, read from its spec without parsing it."""
    spec = spec if isinstance(spec, dict) else {}
    for container in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
        resources = container.get("resources") if isinstance(container, dict) else None
        for amounts in (resources or {}).get("requests"), (resources or {}).get("limits"):
            if isinstance(amounts, dict) and any(str(amounts.get(name, "0")) not in ("0", "") for name in ACCELERATORS):
                return True
    return False


def _types_for(gang, types) -> list:
    """The cheapest instance types its pods' node selection admits whose room holds the gang's largest accelerator
    request."""
    wanted = {name: max(p.requests.get(name, 0) for p in gang.pods) for name in ACCELERATORS}
    wanted = {name: amount for name, amount in wanted.items() if amount}
    fitting = [it for it in types if all(it.allocatable.get(name, 0) >= amount for name, amount in wanted.items())
               and admits_type(gang, it)]
    return sorted(fitting, key=lambda it: (it.on_demand_price(), it.name))[:TYPES_ASKED]


def _row(option, now) -> BuyAdvice:
    offering, gang = option.offering, option.gang
    return BuyAdvice(namespace=gang.namespace, gang=gang.name[:300], pods=[p.key for p in gang.pods],
                     offering_id=offering.offering_id, instance_type=offering.instance_type,
                     availability_zone=offering.zone, instance_count=offering.count, nodes_used=option.nodes,
                     start=offering.start, end=offering.end, hours=offering.hours, upfront_fee=offering.fee,
                     ultraserver_type=offering.ultraserver_type, computed_at=now)
