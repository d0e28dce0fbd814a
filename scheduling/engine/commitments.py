"""Prices that know the account's commitments: zonal Reserved Instances and Savings Plans.

WORLD.json's optional `commitments` (written by the EC2 sync, docs/simulate-interface.md):

    {"reservedInstances": [DescribeReservedInstances items: InstanceType, AvailabilityZone,
                           InstanceCount, Scope, State, ReservedInstancesId, OfferingClass, End],
     "savingsPlans": [{"savingsPlanId", "savingsPlanType", "commitment" ($ an hour),
                       "rates": [{"instanceType", "rate"}]}],
     "listPricesBecause": ["no permission to read ..."]}   # what could not be read

The rules (docs/console.md, "Which price each figure uses"):

* A zonal RI (Scope "Availability Zone") is a finite offering at no marginal cost: EC2 bills the
  first InstanceCount on-demand instances of its type in its zone against it. Its units not yet
  covered (count less the running on-demand nodes of that type and zone, oldest first covered) make
  the on-demand offering of that type and zone cost the on-demand price / RESERVED_PRICE_DIVISOR
  (free, but ordered like list prices, as reserved units are), basis "reserved-instance"; a node it
  covers costs $0 at the margin (consolidation: like a node in an open reservation). A plan that
  launches more than the uncovered units in one run pays list for the excess, and those launches'
  figures say list (spend_reserved_instance_units); the count is read again at the next sync. Regional RIs (Scope "Region") are left out:
  their discount floats to any matching instance in the region and is no placement's to count on.
* A Savings Plan's rate for a type replaces the on-demand price where it is cheaper (basis
  "savings-plan"), while the plan's hourly commitment is not yet spent by the fleet's running
  on-demand nodes at the plan's rates; once it is, new launches pay list (the simple rule: the
  commitment is filled by what runs now, in node age order, not re-optimised per hour).
* Nothing read (no `commitments`, or no permission): every price is the list price, as before.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Iterable

from .instancetypes import RESERVED_PRICE_DIVISOR, InstanceType
from .labels import CAPACITY_TYPE, INSTANCE_TYPE, ON_DEMAND, ZONE

LIST = "list"
SAVINGS_PLAN = "savings-plan"
RESERVED_INSTANCE = "reserved-instance"
RESERVATION = "reservation"
BASES = (LIST, SAVINGS_PLAN, RESERVED_INSTANCE, RESERVATION)
BASIS_WORDS = {LIST: "list price", SAVINGS_PLAN: "Savings Plan rate", RESERVED_INSTANCE: "Reserved Instance ($0 at the margin)",
               RESERVATION: "reservation (prepaid)"}
ZONAL_SCOPE = "Availability Zone"


@dataclass(frozen=True)
class ZonalReservedInstance:
    id: str
    instance_type: str
    zone: str
    count: int
    offering_class: str = ""
    end: str = ""


@dataclass(frozen=True)
class SavingsPlan:
    id: str
    plan_type: str
    commitment: float  # dollars an hour
    rates: dict[str, float]  # instance type -> rate an hour (Linux/UNIX, shared tenancy, this region)


@dataclass
class Commitments:
    reserved_instances: list[ZonalReservedInstance] = field(default_factory=list)
    savings_plans: list[SavingsPlan] = field(default_factory=list)
    list_prices_because: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not self.reserved_instances and not self.savings_plans


@dataclass
class Coverage:
    """What the commitments cover in one world: the nodes a zonal RI pays for, and each node's price basis."""

    covered_nodes: set[str] = field(default_factory=set)  # on-demand nodes billed against a zonal RI
    node_basis: dict[str, tuple[float, str]] = field(default_factory=dict)  # node -> (effective price, basis)
    uncovered_units: dict[tuple[str, str], int] = field(default_factory=dict)  # (type, zone) -> RI units free
    spent_plans: set[str] = field(default_factory=set)  # plans whose commitment the running nodes fill


def parse_commitments(value: Any, problem) -> Commitments:
    """WORLD.json `commitments`; `problem(path, message)` reports what is wrong."""
    found = Commitments()
    if value is None:
        return found
    if not isinstance(value, dict):
        problem("commitments", "expected an object")
        return found
    for i, item in enumerate(value.get("reservedInstances") or []):
        path = f"commitments.reservedInstances[{i}]"
        if not isinstance(item, dict):
            problem(path, "expected an object")
            continue
        if item.get("Scope", ZONAL_SCOPE) != ZONAL_SCOPE or item.get("State", "active") != "active":
            continue  # regional RIs float across the region: no placement's to count on
        count = item.get("InstanceCount")
        if not item.get("InstanceType") or not item.get("AvailabilityZone") or not isinstance(count, int) or count < 0:
            problem(path, "needs InstanceType, AvailabilityZone and a whole InstanceCount of 0 or more")
            continue
        found.reserved_instances.append(ZonalReservedInstance(
            str(item.get("ReservedInstancesId") or ""), item["InstanceType"], item["AvailabilityZone"], count,
            str(item.get("OfferingClass") or ""), str(item.get("End") or "")))
    for i, item in enumerate(value.get("savingsPlans") or []):
        path = f"commitments.savingsPlans[{i}]"
        try:
            rates = {str(r["instanceType"]): float(r["rate"]) for r in item.get("rates") or []}
            commitment = float(item.get("commitment") or 0)
        except (AttributeError, KeyError, TypeError, ValueError):
            problem(path, "needs a commitment ($ an hour) and rates of {instanceType, rate}")
            continue
        found.savings_plans.append(SavingsPlan(str(item.get("savingsPlanId") or ""), str(item.get("savingsPlanType") or ""),
                                               commitment, rates))
    found.list_prices_because = [str(reason) for reason in value.get("listPricesBecause") or []]
    return found


def _on_demand_nodes(nodes: Iterable) -> list:
    """Running on-demand nodes, oldest first (EC2 bills the longest-running against a commitment first
    in karpweb's simple rule; it is a billing-time choice AWS does not expose)."""
    running = [n for n in nodes if not n.deleting and n.labels.get(CAPACITY_TYPE) == ON_DEMAND]
    return sorted(running, key=lambda n: (n.created.timestamp() if n.created else 0.0, n.name))


def cover(instance_types: list[InstanceType], nodes: Iterable, commitments: Commitments
          ) -> tuple[list[InstanceType], Coverage]:
    """The instance types with their on-demand offerings at the effective price (and basis), and
    what the commitments cover among the running nodes. No commitments: the types unchanged."""
    coverage = Coverage()
    if commitments.empty:
        return instance_types, coverage
    by_name = {it.name: it for it in instance_types}
    units: dict[tuple[str, str], int] = {}
    for ri in commitments.reserved_instances:
        units[(ri.instance_type, ri.zone)] = units.get((ri.instance_type, ri.zone), 0) + ri.count
    plan_use = {plan.id: 0.0 for plan in commitments.savings_plans}
    for node in _on_demand_nodes(nodes):
        key = (node.labels.get(INSTANCE_TYPE, ""), node.labels.get(ZONE, ""))
        if units.get(key, 0) > 0:
            units[key] -= 1
            coverage.covered_nodes.add(node.name)
            coverage.node_basis[node.name] = (0.0, RESERVED_INSTANCE)
            continue
        plan, rate = _plan_with_room(commitments.savings_plans, plan_use, key[0])
        if plan is not None:
            plan_use[plan.id] += rate
            coverage.node_basis[node.name] = (rate, SAVINGS_PLAN)
        elif key[0] in by_name:
            coverage.node_basis[node.name] = (by_name[key[0]].on_demand_price(key[1]), LIST)
    coverage.uncovered_units = {key: left for key, left in units.items() if left > 0}
    coverage.spent_plans = {plan.id for plan in commitments.savings_plans if plan_use[plan.id] >= plan.commitment}
    return [_priced(it, coverage, commitments) for it in instance_types], coverage


def _plan_with_room(plans: list[SavingsPlan], use: dict[str, float], instance_type: str):
    """The plan with the cheapest rate for the type whose commitment is not yet spent (None, 0 when none)."""
    open_plans = [(p.rates[instance_type], p.id, p) for p in plans
                  if instance_type in p.rates and use[p.id] < p.commitment]
    if not open_plans:
        return None, 0.0
    rate, _, plan = min(open_plans)
    return plan, rate


def savings_plan_rate(commitments: Commitments, instance_type: str, spent: set[str] = frozenset()) -> float | None:
    """The cheapest rate any plan with room left gives the type (None when none does)."""
    rates = [p.rates[instance_type] for p in commitments.savings_plans if instance_type in p.rates and p.id not in spent]
    return min(rates, default=None)


def _priced(it: InstanceType, coverage: Coverage, commitments: Commitments) -> InstanceType:
    rate = savings_plan_rate(commitments, it.name, coverage.spent_plans)
    offerings = []
    for o in it.offerings:
        if o.capacity_type == ON_DEMAND and o.reservation is None:
            if coverage.uncovered_units.get((it.name, o.zone), 0) > 0:
                o = replace(o, price=o.price / RESERVED_PRICE_DIVISOR, basis=RESERVED_INSTANCE, list_price=o.price)
            elif rate is not None and rate < o.price:
                o = replace(o, price=rate, basis=SAVINGS_PLAN, list_price=o.price)
        offerings.append(o)
    return InstanceType(it.name, it.capacity, it.labels, tuple(offerings), it.allocatable, it.instance_store_gb)


def effective_on_demand(list_price: float | None, instance_type: str, commitments: Commitments) -> tuple[float | None, str]:
    """What one on-demand instance of the type would otherwise cost an hour, and that price's basis:
    the cheapest Savings Plan rate below the list price, else the list price (recommendations' money:
    units a reservation gives up are paid as on-demand, where an RI's count is already spent)."""
    rate = savings_plan_rate(commitments, instance_type)
    if rate is not None and (list_price is None or rate < list_price):
        return rate, SAVINGS_PLAN
    return list_price, LIST


def basis_words(basis: str) -> str:
    return BASIS_WORDS.get(basis, basis)


def reserved_instance_units(commitments: Commitments, instance_type: str, zone: str) -> int:
    return sum(ri.count for ri in commitments.reserved_instances if ri.instance_type == instance_type and ri.zone == zone)


def paid_price(list_price: float | None, instance_type: str, zone: str, capacity_type: str, commitments: Commitments,
               rank: int) -> tuple[float | None, str]:
    """What one paid instance costs an hour and on which basis (the Karpenter audit's figures): an on-demand
    instance that is the `rank`-th (1: the oldest) running of its type and zone is billed against a zonal
    RI while the RIs there have that many units ($0), else at the cheapest Savings Plan rate below list,
    else list; spot at its own price (basis "list": the price the offering lists)."""
    if capacity_type != ON_DEMAND:
        return list_price, LIST
    if rank <= reserved_instance_units(commitments, instance_type, zone):
        return 0.0, RESERVED_INSTANCE
    return effective_on_demand(list_price, instance_type, commitments)


def at_basis(basis: str) -> str:
    """How a figure says its price: "at list price", "at the Savings Plan rate", ..."""
    return {LIST: "at list price", SAVINGS_PLAN: "at the Savings Plan rate",
            RESERVED_INSTANCE: "at $0 (a zonal Reserved Instance pays for it)",
            RESERVATION: "at $0 (a reservation's prepaid unit)"}.get(basis, f"at {basis}")


def spend_reserved_instance_units(claims: list[tuple], coverage: Coverage | None) -> list[dict]:
    """A plan's launches (offering, claim as written) priced by a zonal RI take its uncovered units in order;
    those beyond them pay list again, and their figure says so (the planner saw the offering at $0 for the
    whole run: the count is read again at the next sync)."""
    left = dict(coverage.uncovered_units) if coverage is not None else {}
    written = []
    for offering, claim in claims:
        launch = claim["launch"]
        if launch.get("priceBasis") == RESERVED_INSTANCE:
            key = (launch["instanceType"], launch["zone"])
            if left.get(key, 0) > 0:
                left[key] -= 1
            else:
                launch["price"] = offering.at_list
                del launch["priceBasis"]
        written.append(claim)
    return written
