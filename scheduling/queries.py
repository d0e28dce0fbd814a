"""Read-side helpers the pages and the API share."""

from collections import defaultdict
from types import SimpleNamespace

from django.db.models import BigIntegerField, Count, IntegerField, OuterRef, Subquery, Sum
from django.db.models.functions import Coalesce

from scheduling.engine.world import TERMINAL_PHASES  # pods that hold no resources on their node
from fleet.connection import is_aws, is_kubernetes
from scheduling.models import CapacityType, InstanceType, Node, Offering, Pod
from reservations.block_fees import attach_fees, idle_by_source, idle_value


def on_demand_prices(instance_types=None) -> dict[tuple[str, str], float]:
    """{(instance type, zone): on-demand list price}; one query."""
    offerings = Offering.objects.filter(capacity_type=CapacityType.ON_DEMAND, reservation__isnull=True)
    if instance_types is not None:
        offerings = offerings.filter(instance_type__name__in=set(instance_types))
    return {(name, zone): price for name, zone, price in offerings.values_list("instance_type__name", "zone", "price")}


def idle_cost_per_hour(reservation, prices: dict[tuple[str, str], float], now=None) -> float | None:
    """What a reservation's idle units are worth an hour (prepaid: billed used or not): an ODCR's at the on-demand
    list price, a Capacity Block's at its own price per unit-hour (reservations/block_fees.py says which source);
    None when unknown; 0 once it is no longer usable (expired, cancelled, ended: it bills nothing more)."""
    return idle_value(reservation, prices, now).cost


def capacity_totals(reservations, prices: dict[tuple[str, str], float], now=None) -> dict:
    """What the usable ones among these reservations hold: instances used, idle and in all, and the idle
    ones' worth per hour (prepaid: billed used or not; by source in `idle_sources`), with how many have no
    known price. Expired, cancelled or ended reservations are counted apart (`unusable`): they bill nothing
    more; so are those that have not started (`upcoming`)."""
    usable = [r for r in reservations if r.is_usable(now)]
    upcoming = sum(1 for r in reservations if r.is_upcoming(now))  # not started: bills nothing yet either
    attach_fees(usable)
    values = [idle_value(r, prices, now) for r in usable]
    return {
        "reservations": len(usable), "unusable": len(reservations) - len(usable) - upcoming, "upcoming": upcoming,
        "used": sum(r.used_instance_count for r in usable), "idle": sum(r.available_instance_count for r in usable),
        "total": sum(r.total_instance_count for r in usable),
        # Lent as interruptible capacity: gone from the available count, so never in `idle` (nor its cost).
        "lent": sum(r.lent_count for r in usable),
        "idle_cost": sum(v.cost for v in values if v.cost), "unpriced": sum(1 for v in values if v.cost is None),
        "idle_sources": idle_by_source(values),
    }


def count_by(rows, key) -> dict:
    counts = defaultdict(int)
    for row in rows:
        counts[key(row)] += 1
    return dict(counts)


def pod_count():
    """The number of pods on each node, as a subquery the database runs only for the rows it returns
    (a page of 50), not a join and GROUP BY over every node (and again to count them)."""
    pods = Pod.objects.filter(node=OuterRef("pk")).order_by().values("node").annotate(n=Count("pk")).values("n")
    return Coalesce(Subquery(pods, output_field=IntegerField()), 0)


def pod_requests(field: str):
    """The sum of a request field (`cpu_request_millicores`, `memory_request_bytes`) over the pods bound to
    each node that still hold it, as a subquery the database runs only for the rows it returns."""
    pods = (Pod.objects.filter(node=OuterRef("pk")).exclude(phase__in=TERMINAL_PHASES).order_by().values("node")
            .annotate(n=Sum(field)).values("n"))
    return Coalesce(Subquery(pods, output_field=BigIntegerField()), 0)


def paid_prices(instance_types) -> dict[tuple[str, str, str], float]:
    """{(instance type, zone, capacity type): list price $/h} of the on-demand and spot offerings of these
    types (a list or a queryset of names); one query. Reserved capacity has no price here: it is prepaid."""
    offerings = Offering.objects.filter(capacity_type__in=(CapacityType.ON_DEMAND, CapacityType.SPOT),
                                        reservation__isnull=True, instance_type__name__in=instance_types)
    return {(name, zone, kind): price for name, zone, kind, price in
            offerings.values_list("instance_type__name", "zone", "capacity_type", "price")}


PREPAID = "prepaid"


def node_cost_per_hour(node, prices: dict[tuple[str, str, str], float]) -> float | str | None:
    """What a node costs an hour: its offering's list price for on-demand and spot, PREPAID for a reserved
    node (its reservation is billed used or not: running it costs nothing more), None when unknown."""
    if node.capacity_type == CapacityType.RESERVED:
        return PREPAID
    return prices.get((node.instance_type, node.zone, node.capacity_type))


def priced_node_groups(groups) -> tuple[float, dict, int, int]:
    """(list $/h, the prices, reserved nodes, unpriced nodes) of (instance type, zone, capacity type,
    node count) groups: a reserved node is prepaid, a node with no known price is counted apart."""
    groups = list(groups)
    prices = paid_prices({name for name, _zone, _kind, _n in groups})
    cost, reserved, unpriced = 0.0, 0, 0
    for name, zone, kind, n in groups:
        price = node_cost_per_hour(SimpleNamespace(instance_type=name, zone=zone, capacity_type=kind), prices)
        if price == PREPAID:
            reserved += n
        elif price is None:
            unpriced += n
        else:
            cost += price * n
    return cost, prices, reserved, unpriced


def node_totals(nodes) -> dict:
    """Over a queryset of nodes: how many, what the paid ones cost an hour at list price (and how many are
    reserved, prepaid, or have no known price), and their CPU and memory requested against allocatable, with
    the `prices` (paid_prices) of their types for their rows. Four queries whatever the number of nodes."""
    # The nodes alone, without the page's annotations (a subquery per node) or joins.
    nodes = Node.objects.filter(pk__in=nodes.order_by().values("pk"))
    allocatable = nodes.aggregate(n=Count("pk"), cpu=Sum("allocatable_cpu_millicores"),
                                             memory=Sum("allocatable_memory_bytes"))
    requested = (Pod.objects.filter(node__in=nodes.values("pk")).exclude(phase__in=TERMINAL_PHASES)
                 .aggregate(cpu=Sum("cpu_request_millicores"), memory=Sum("memory_request_bytes")))
    groups = list(nodes.values_list("instance_type", "zone", "capacity_type").annotate(n=Count("pk")))
    cost, prices, reserved, unpriced = priced_node_groups(groups)
    return {"nodes": allocatable["n"], "cost": cost, "prices": prices, "reserved": reserved, "unpriced": unpriced,
            "cpu_requested": requested["cpu"] or 0, "cpu_allocatable": allocatable["cpu"] or 0,
            "memory_requested": requested["memory"] or 0, "memory_allocatable": allocatable["memory"] or 0}


def catalogue_notice() -> str:
    """What the overview says when the EC2 catalogue the engine plans with is not AWS's: empty (every pending pod
    is then unschedulable), or the simulated EC2's beside a real cluster. Empty when it is AWS's."""
    if not is_aws() and not is_kubernetes():
        return ""  # the simulated world's own catalogue (the demo's): nothing to warn of, and no query
    if not InstanceType.objects.exists():
        source = ("EC2 is simulated (KARPWEB_PROVIDER=simulated) and holds no catalogue" if not is_aws()
                  else "the EC2 sync has not run yet, or it failed (see the loop's health)")
        return (f"The instance-type catalogue is empty: {source}. karpweb knows no instance type to launch, so every "
                "pending pod is unschedulable until EC2 reports some.")
    if not is_aws() and is_kubernetes():
        return ("EC2 is simulated (KARPWEB_PROVIDER=simulated) beside a real cluster: the instance types, prices and "
                "reservations karpweb plans with are the simulated world's, not your AWS account's.")
    return ""
