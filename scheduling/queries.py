"""Read-side helpers the pages and the API share."""

from collections import defaultdict

from django.db.models import Count, IntegerField, OuterRef, Subquery
from django.db.models.functions import Coalesce

from scheduling.models import CapacityType, Offering, Pod


def on_demand_prices(instance_types=None) -> dict[tuple[str, str], float]:
    """{(instance type, zone): on-demand list price}; one query."""
    offerings = Offering.objects.filter(capacity_type=CapacityType.ON_DEMAND, reservation__isnull=True)
    if instance_types is not None:
        offerings = offerings.filter(instance_type__name__in=set(instance_types))
    return {(name, zone): price for name, zone, price in offerings.values_list("instance_type__name", "zone", "price")}


def idle_cost_per_hour(reservation, prices: dict[tuple[str, str], float]) -> float | None:
    """List price of a reservation's idle instances, per hour; None when the price is unknown."""
    price = prices.get((reservation.instance_type, reservation.availability_zone))
    if price is None:
        same_type = [p for (name, _zone), p in prices.items() if name == reservation.instance_type]
        price = min(same_type) if same_type else None
    return None if price is None else price * reservation.available_instance_count


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
