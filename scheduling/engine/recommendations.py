"""What to do about a reservation, from its measured use: pure functions over hourly utilization and
what karpweb knows of the world (which classes select it, which nodes could use it). No Django, no
boto3: the loop feeds them rows, a what-if world can feed them its own.

Kinds, each with its reasoning in words and its money. One rule for money: a recurring saving is
per month (730 hours) at what the units would otherwise cost as on-demand instances: the list price, or a
Savings Plan's rate where the account has one for the type (``ReservationFacts.price_basis``, said in the
figure's words and ``details["priceBasis"]``; engine/commitments.py); a one-off cost or loss is a one-off amount; the two are never
summed. Every recommendation says which its money is (``details["money"]``: ``monthly``, ``one-off``
or ``warning``) and where the figure comes from (``details["moneyBasis"]``).

* ``shrink``: an ODCR whose peak use stayed at or below k for the window (14 days) can hold k plus a
  headroom (one instance or 10 %, whichever is more), never fewer than run in it now. Not a
  Capacity Block: EC2 cannot change one.
* ``cancel``: an ODCR under 20 % used for 7 days that no EC2NodeClass selects, or whose selecting
  NodePools have no pods that could use it. Saves its idle units (what runs in it would run on-demand).
* ``select``: an idle reservation that matches running on-demand nodes while no EC2NodeClass selects
  it: selecting it moves those nodes' cost into prepaid units.
* ``extend``: a Capacity Block whose nodes carry pods that will not finish before the drain (no
  completion estimate counts as not finishing); the extension offerings EC2 has, beside the cost of
  losing the work (the block's nodes x hours since their pods started). Its money is one-off: the
  extension's upfront fee against the one-off loss of work; it saves nothing a month. Only before the
  drain and while the block's nodes are there; one whose cheapest fee exceeds the work it protects is
  "not advised" (``details["advised"]``).

Every basis multiplies out to the figure shown: the price as shown (4 places), the hours as shown (one
decimal), one rounding to the cent, in Decimal.
* ``lend``: idle units of an ODCR the fleet owns with no end date, forecast to stay idle and not
  wanted by the fleet itself (no select, move or split for it), lent as interruptible capacity (scheduling/engine/lending.py has the rule; karpweb reclaims them as soon as a
  pod of the fleet could use them). Nothing saved that karpweb can count (``warning``): the owner pays
  for the reservation either way, and what a borrower pays is not known to karpweb.
* ``end-date``: an ODCR ending within the warning window (14 days) whose recent use says it is still
  needed: a warning (nothing saved; the money is what the used instances cost per month).

Commitments and ownership rule some of these out. No cancel, and no shrink, split or move below the
committed count, before a commitment's end (CommitmentInfo: EC2 holds the reservation to it); neither on a reservation another
account shares with us (only its owner may), on the source of an interruptible allocation (it would
reclaim a borrower's units), nor below what the fleet uses (the ledger: any cluster or account; a
cancel only where the fleet uses none of it). Where a committed reservation holds units above both its
commitment and what its use needs, two kinds put them where they are used instead of shrinking them
away (alternatives to that shrink: one choice; never a Capacity Block: EC2 can neither split nor move one):

* ``move``: N of those units go to reservation Y of the same shape (instance type, platform, zone,
  tenancy, placement group and end time: EC2's rule for MoveCapacityReservationInstances, and the
  same owner) that a cluster uses while it runs on-demand nodes of that type and zone beyond Y's
  free units. Saves what those nodes cost a month (each destination's need is given out once).
* ``split``: the rest are split off into a reservation of their own
  (CreateCapacityReservationBySplitting) to share through AWS RAM with an account of the fleet that
  does not see the reservation; it saves what that account's on-demand nodes of the type and zone cost
  a month when there are such nodes, else it is a warning whose money is what the idle units cost.

Both say what their units cost a month now (``idleCostPerMonth``), what is saved
(``savings_per_month``) and what stays idle (``stillIdleCostPerMonth``): the first is the sum of the
other two.
"""

from __future__ import annotations

import datetime
import math
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal

from .commitments import LIST, at_basis, basis_words
from . import lending

SHRINK, CANCEL, SELECT, EXTEND, END_DATE = "shrink", "cancel", "select", "extend", "end-date"
SPLIT, MOVE, LEND = "split", "move", "lend"
KINDS = (SHRINK, CANCEL, SELECT, EXTEND, END_DATE, SPLIT, MOVE, LEND)
HOURS_PER_MONTH = 730
CENT, TENTH, PRICE_PLACES = Decimal("0.01"), Decimal("0.1"), Decimal("0.0001")
MONTHLY, ONE_OFF, WARNING = "monthly", "one-off", "warning"


@dataclass(frozen=True)
class Policy:
    shrink_window_days: int = 14
    headroom_instances: int = 1
    headroom_percent: float = 10.0
    cancel_window_days: int = 7
    cancel_below: float = 0.20
    end_date_warning_days: int = 14
    still_needed_above: float = 0.50  # mean use over the cancel window that says "still needed"
    coverage: float = 0.9  # share of the window's hours that must have samples before anything is said
    lend_idle_hours: int = 24  # units idle this long (and forecast to stay idle) may be lent (scheduling/engine/lending.py)
    lend_margin_instances: int = 1  # kept back beyond the forecast peak
    lend_forecast_days: int = 7  # the past days whose same hours make the forecast


@dataclass(frozen=True)
class Hour:
    start: datetime.datetime
    used: float  # mean
    total: float  # mean
    peak: float | None = None  # the most used at one sample, when known

    @property
    def high(self) -> float:
        return self.used if self.peak is None else max(self.peak, self.used)


@dataclass(frozen=True)
class ExtensionOffering:
    offering_id: str
    hours: int
    upfront_fee: float
    currency: str = "USD"


@dataclass(frozen=True)
class ReservationFacts:
    reservation_id: str
    instance_type: str
    zone: str
    reservation_type: str  # default | capacity-block
    state: str
    total: int
    used_now: int
    price_per_hour: float | None  # what one on-demand instance costs an hour, at price_basis
    end: datetime.datetime | None = None
    price_basis: str = "list"  # "list" or "savings-plan" (engine/commitments.py effective_on_demand)
    hours: tuple[Hour, ...] = ()
    selected_by: tuple[str, ...] = ()  # EC2NodeClasses whose status names it
    pools_could_use: bool = False  # a selecting NodePool has pods that could run in it
    matching_paid_nodes: tuple[str, ...] = ()  # running on-demand nodes of its type and zone
    node_class_of_paid_nodes: str = ""  # where a selector term would go
    unfinished_work: tuple[tuple[str, datetime.datetime | None], ...] = ()  # (pod, started) on the block's nodes
    block_nodes: int = 0
    drain_at: datetime.datetime | None = None
    extension_offerings: tuple[ExtensionOffering, ...] = ()
    # The fleet ledger (reservations/ledger.py): cancel and modify need the owner to be one of the
    # fleet's accounts; no shrink below what the whole fleet uses (our clusters, our accounts, other
    # accounts, unknown); no cancel while another account sees it through a share or uses it.
    owned_by_us: bool = True
    fleet_used: int = 0
    other_accounts: tuple[str, ...] = ()
    paid_nodes_by_cluster: tuple[tuple[str, int], ...] = ()  # (cluster, its on-demand nodes of the type and zone)
    # Commitment (CommitmentInfo): no cancel, no shrink below committed_count, before commitment_end.
    committed_count: int | None = None
    commitment_end: datetime.datetime | None = None
    lends_interruptible: bool = False  # the source of an interruptible allocation
    interruptible: bool = False  # itself an interruptible reservation (borrowed capacity)
    # The shape MoveCapacityReservationInstances compares (with instance_type, zone and end), and its owner.
    owner: str = ""
    platform: str = "Linux/UNIX"
    tenancy: str = "default"
    placement_group: str = ""
    # (cluster whose EC2NodeClass selects it, that cluster's on-demand nodes of its type and zone): the need a move meets.
    cluster_demand: tuple[tuple[str, int], ...] = ()
    # (account, cluster, on-demand nodes of its type and zone) of fleet accounts that do not see it: whom a split serves.
    share_candidates: tuple[tuple[str, str, int], ...] = ()


@dataclass(frozen=True)
class Recommendation:
    kind: str
    reservation_id: str
    reason: str
    savings_per_month: float  # dollars at the reservation's price basis; 0 for a warning
    target_count: int | None = None
    end_date: datetime.datetime | None = None
    details: dict = field(default_factory=dict)


def recommend(facts: list[ReservationFacts], now: datetime.datetime, policy: Policy = Policy()) -> list[Recommendation]:
    found: list[Recommendation] = []
    for reservation in facts:
        if reservation.state not in ("active", "scheduled"):
            continue
        per_reservation = [r for r in (cancel(reservation, now, policy), select(reservation), extend(reservation, now),
                                       end_date(reservation, now, policy), lend(reservation, now, policy)) if r is not None]
        if not any(r.kind == CANCEL for r in per_reservation):
            per_reservation.append(shrink(reservation, now, policy))
        found += [r for r in per_reservation if r is not None]
    found += relocate(facts, now, policy)
    basis = {f.reservation_id: f.price_basis for f in facts}
    for r in found:  # each figure says its price when it is not the list price (absent: list)
        if basis.get(r.reservation_id, LIST) != LIST:
            r.details["priceBasis"] = basis[r.reservation_id]
    # Idle units the fleet itself can use (select, move, split) are not lent to others.
    used_better = {r.reservation_id for r in found if r.kind in (SELECT, MOVE, SPLIT)}
    found = [r for r in found if r.kind != LEND or r.reservation_id not in used_better]
    return sorted(found, key=lambda r: (-r.savings_per_month, r.kind, r.reservation_id))


def _window(reservation: ReservationFacts, now: datetime.datetime, days: int, coverage: float) -> list[Hour] | None:
    """The window's hours, or None when too few hours have samples to say anything."""
    since = now - datetime.timedelta(days=days)
    hours = [h for h in reservation.hours if since <= h.start < now]
    return hours if len(hours) >= coverage * days * 24 else None


def shown_price(price_per_hour: float | None) -> Decimal:
    """The hourly price as every basis shows it (4 places): the figures are computed from this one."""
    return Decimal(str(price_per_hour or 0.0)).quantize(PRICE_PLACES, ROUND_HALF_UP)


def cents(amount: Decimal) -> float:
    """The one rounding of a figure (to the cent), from the Decimal product of what its basis shows."""
    return float(amount.quantize(CENT, ROUND_HALF_UP))


def _money(units: float, reservation: ReservationFacts) -> float:
    return cents(Decimal(units) * shown_price(reservation.price_per_hour) * HOURS_PER_MONTH)


def _monthly_basis(units: int, what: str, reservation: ReservationFacts) -> str:
    """Where a monthly figure comes from, e.g. "2 idle m5.large x $0.0960/h on-demand list price x 730 h"."""
    if reservation.price_per_hour is None:
        return f"{units} {what} {reservation.instance_type}: no list price known, so no dollar figure"
    return (f"{units} {what} {reservation.instance_type} x ${shown_price(reservation.price_per_hour):,}/h {_price_words(reservation)} "
            f"x {HOURS_PER_MONTH} h a month")


def _price_words(reservation: ReservationFacts) -> str:
    """The hourly price's name in a basis: "on-demand list price" or "Savings Plan rate"."""
    return "on-demand list price" if reservation.price_basis == LIST else basis_words(reservation.price_basis)


def history_days(hours: tuple[Hour, ...] | list[Hour], now: datetime.datetime, window_days: int,
                 coverage: float = Policy.coverage) -> tuple[int, bool]:
    """(whole days of hourly samples within the last `window_days`, whether that is enough): what
    "not enough history yet (N of 14 days)" says; enough is what `_window` asks for."""
    since = now - datetime.timedelta(days=window_days)
    count = sum(1 for h in hours if since <= h.start < now)
    return min(window_days, count // 24), count >= coverage * window_days * 24


def needed_days(reservation_type: str, policy: Policy = Policy()) -> int | None:
    """Days of history the use-based kinds need for this reservation (None: none applies, e.g. a Capacity Block)."""
    return None if reservation_type == "capacity-block" else max(policy.shrink_window_days, policy.cancel_window_days)


def headroom(k: int, policy: Policy) -> int:
    return max(policy.headroom_instances, math.ceil(k * policy.headroom_percent / 100))


def committed(reservation: ReservationFacts, now: datetime.datetime) -> int | None:
    """The committed count while the commitment runs (None: no commitment now)."""
    if reservation.commitment_end is None or reservation.commitment_end <= now:
        return None
    return reservation.committed_count or 0


def _commitment_words(reservation: ReservationFacts, now: datetime.datetime) -> str:
    return (f"committed until {reservation.commitment_end:%Y-%m-%d %H:%M} UTC for {committed(reservation, now)} "
            f"instance{'s' if committed(reservation, now) != 1 else ''}")


def _needed(reservation: ReservationFacts, now: datetime.datetime, policy: Policy) -> tuple[int, int] | None:
    """(the window's peak k, what the use needs: k plus the headroom, never below what runs in it now or
    what the fleet uses), or None without enough history."""
    hours = _window(reservation, now, policy.shrink_window_days, policy.coverage)
    if hours is None:
        return None
    k = math.ceil(max(h.high for h in hours) - 1e-9)
    return k, max(k + headroom(k, policy), reservation.used_now, reservation.fleet_used)


def _changeable(reservation: ReservationFacts) -> bool:
    """Ours to modify at all: an ODCR of ours that lends no interruptible capacity and is not itself the
    interruptible reservation lent units sit in (they come back by a reclaim, not a shrink or cancel)."""
    return (reservation.reservation_type != "capacity-block" and reservation.owned_by_us and not reservation.lends_interruptible
            and not reservation.interruptible)


def shrink(reservation: ReservationFacts, now: datetime.datetime, policy: Policy) -> Recommendation | None:
    if not _changeable(reservation):
        return None
    use = _needed(reservation, now, policy)
    if use is None:
        return None
    k, needed = use
    floor = committed(reservation, now) or 0
    target = max(needed, floor)
    if target >= reservation.total:
        return None
    freed = reservation.total - target
    held = (f"; the commitment ({_commitment_words(reservation, now)}) keeps {target - needed} more"
            if floor > needed else "")
    return Recommendation(
        SHRINK, reservation.reservation_id, savings_per_month=_money(freed, reservation), target_count=target,
        reason=(f"{reservation.reservation_id} ({reservation.total} x {reservation.instance_type} in {reservation.zone}) used "
                f"at most {k} instance{'s' if k != 1 else ''} in the last {policy.shrink_window_days} days; {needed} "
                f"({k} plus a headroom of {needed - k}) would do{held}, freeing {freed} idle instance{'s' if freed != 1 else ''}"),
        details={"peak": k, "from": reservation.total, "money": MONTHLY,
                 "moneyBasis": _monthly_basis(freed, "idle", reservation)})


def cancel(reservation: ReservationFacts, now: datetime.datetime, policy: Policy) -> Recommendation | None:
    if not _changeable(reservation) or reservation.other_accounts or reservation.fleet_used > 0 \
            or committed(reservation, now) is not None:
        return None
    hours = _window(reservation, now, policy.cancel_window_days, policy.coverage)
    if hours is None:
        return None
    total = sum(h.total for h in hours)
    share = sum(h.used for h in hours) / total if total else 0.0
    if share >= policy.cancel_below:
        return None
    if reservation.selected_by and reservation.pools_could_use:
        return None
    why = ("no EC2NodeClass selects it" if not reservation.selected_by else
           f"EC2NodeClass {', '.join(reservation.selected_by)} selects it but no pod of its NodePools could use it")
    idle = reservation.total - reservation.used_now
    return Recommendation(
        CANCEL, reservation.reservation_id, savings_per_month=_money(idle, reservation),
        reason=(f"{reservation.reservation_id} ({reservation.total} x {reservation.instance_type} in {reservation.zone}) was "
                f"{share:.0%} used over the last {policy.cancel_window_days} days and {why}; cancelling it stops paying for "
                f"{idle} idle instance{'s' if idle != 1 else ''}"),
        details={"utilization": round(share, 4), "money": MONTHLY, "moneyBasis": _monthly_basis(idle, "idle", reservation)})


def select(reservation: ReservationFacts) -> Recommendation | None:
    free = reservation.total - reservation.used_now
    if reservation.selected_by or free <= 0 or not reservation.matching_paid_nodes:
        return None
    moved = min(free, len(reservation.matching_paid_nodes))
    nodes = ", ".join(reservation.matching_paid_nodes[:5]) + (" and more" if len(reservation.matching_paid_nodes) > 5 else "")
    # The cluster with the most on-demand nodes of the type and zone (of those whose account sees it).
    cluster = min(reservation.paid_nodes_by_cluster, key=lambda c: (-c[1], c[0]))[0] if reservation.paid_nodes_by_cluster else ""
    where = f" in cluster {cluster}" if cluster else ""
    return Recommendation(
        SELECT, reservation.reservation_id, savings_per_month=_money(moved, reservation),
        reason=(f"{reservation.reservation_id} has {free} idle {reservation.instance_type} in {reservation.zone} while on-demand "
                f"node{'s' if len(reservation.matching_paid_nodes) != 1 else ''} {nodes} of that type and zone run beside it"
                f"{where} and no EC2NodeClass selects it; selecting it lets consolidation move them into prepaid units"),
        details={"term": {"id": reservation.reservation_id}, "nodeClass": reservation.node_class_of_paid_nodes, "cluster": cluster,
                 "nodes": list(reservation.matching_paid_nodes), "money": MONTHLY,
                 "moneyBasis": _monthly_basis(moved, "on-demand", reservation) + ", paid now and prepaid once selected"})


def extend(reservation: ReservationFacts, now: datetime.datetime) -> Recommendation | None:
    """Only while the block is before its drain and its nodes still carry the work: after the drain the
    work is already lost and an extension protects nothing."""
    if reservation.reservation_type != "capacity-block" or not reservation.unfinished_work or reservation.drain_at is None \
            or now >= reservation.drain_at or reservation.block_nodes <= 0:
        return None
    started = [s for _, s in reservation.unfinished_work if s is not None]
    # The hours as shown (one decimal): the figure is nodes x these hours x the price shown, rounded once.
    hours_of_work = Decimal(str(max(((now - min(started)).total_seconds() / 3600) if started else 0.0, 0.0))) \
        .quantize(TENTH, ROUND_HALF_UP)
    price = shown_price(reservation.price_per_hour)
    lost = cents(reservation.block_nodes * hours_of_work * price)
    offers = sorted(reservation.extension_offerings, key=lambda o: (o.upfront_fee, -o.hours))
    cheapest = offers[0] if offers else None
    # An extension that costs more than the work it protects is not advised: shown on request, never as open advice.
    advised = cheapest is None or Decimal(str(cheapest.upfront_fee)) <= Decimal(str(lost))
    times = (f"{Decimal(str(cheapest.upfront_fee)) / Decimal(str(lost)):.1f}" if cheapest and lost else "")
    pods = ", ".join(p for p, _ in reservation.unfinished_work[:5]) + (" and more" if len(reservation.unfinished_work) > 5 else "")
    offer_words = (f"EC2 offers {len(offers)} extension{'s' if len(offers) != 1 else ''}, the cheapest {cheapest.hours} h for "
                   f"${cheapest.upfront_fee:,.2f}" if cheapest else "EC2 offers no extension now")
    verdict = ("" if advised else
               f". Not advised: the cheapest extension costs {f'{times} times' if times else 'more than'} the work it protects")
    nodes = f"{reservation.block_nodes} node{'s' if reservation.block_nodes != 1 else ''}"
    # One-off money only: the extension's fee against the work lost once; nothing recurs, so nothing a month.
    return Recommendation(
        EXTEND, reservation.reservation_id, savings_per_month=0.0,
        reason=(f"Capacity Block {reservation.reservation_id} drains at {reservation.drain_at:%Y-%m-%d %H:%M} UTC while pods {pods} "
                f"have no completion estimate before it; losing their work is a one-off loss of about ${lost:,.2f} {at_basis(reservation.price_basis)} "
                f"({nodes} x {hours_of_work} h); {offer_words}{verdict}"),
        details={"lostWork": lost, "offerings": [o.__dict__ for o in offers], "money": ONE_OFF,
                 "oneOffCost": cheapest.upfront_fee if cheapest else None, "advised": advised,
                 "drainAt": reservation.drain_at.isoformat(), "blockNodes": reservation.block_nodes,
                 "moneyBasis": (f"one-off: the work lost is {nodes} x {hours_of_work} h x ${price:,}/h {_price_words(reservation)} "
                                f"= ${lost:,.2f}; "
                                + (f"the cheapest extension is EC2's upfront fee of ${cheapest.upfront_fee:,.2f} for "
                                   f"{cheapest.hours} h" if cheapest else "EC2 offers no extension to buy now"))})


def end_date(reservation: ReservationFacts, now: datetime.datetime, policy: Policy) -> Recommendation | None:
    if reservation.reservation_type == "capacity-block" or reservation.end is None:
        return None
    if not now <= reservation.end <= now + datetime.timedelta(days=policy.end_date_warning_days):
        return None
    hours = _window(reservation, now, policy.cancel_window_days, 0.5)
    total = sum(h.total for h in hours or [])
    share = sum(h.used for h in hours or []) / total if total else 0.0
    if share < policy.still_needed_above:
        return None
    return Recommendation(
        END_DATE, reservation.reservation_id, savings_per_month=0.0, end_date=reservation.end,
        reason=(f"{reservation.reservation_id} ends at {reservation.end:%Y-%m-%d %H:%M} UTC, in "
                f"{(reservation.end - now).days} days, but was {share:.0%} used over the last {policy.cancel_window_days} days: "
                f"move its end date or its {reservation.used_now} running instance{'s' if reservation.used_now != 1 else ''} "
                f"lose their prepaid capacity (${_money(reservation.used_now, reservation):,.2f} a month {at_basis(reservation.price_basis)})"),
        details={"utilization": round(share, 4), "money": WARNING,
                 "moneyBasis": "a warning, nothing saved; at stake: " + _monthly_basis(reservation.used_now, "running", reservation)})


def _same_shape(a: ReservationFacts, b: ReservationFacts) -> bool:
    """EC2's rule for MoveCapacityReservationInstances: both ours (one owner), active ODCRs of one instance
    type, platform, zone, tenancy, placement group and end time."""
    return (a.reservation_id != b.reservation_id and a.owner == b.owner and b.owned_by_us and b.state == "active"
            and b.reservation_type != "capacity-block"
            and (a.instance_type, a.platform, a.zone, a.tenancy, a.placement_group, a.end)
            == (b.instance_type, b.platform, b.zone, b.tenancy, b.placement_group, b.end))


def _need(destination: ReservationFacts) -> int:
    """On-demand nodes of its type and zone in the clusters that select it, beyond its free units."""
    return max(sum(n for _, n in destination.cluster_demand) - (destination.total - destination.used_now), 0)


def relocate(facts: list[ReservationFacts], now: datetime.datetime, policy: Policy) -> list[Recommendation]:
    """Move and split for the idle units a commitment keeps; each destination's need is given out once
    (sources in id order), so two moves never claim the same on-demand nodes."""
    need = {f.reservation_id: _need(f) for f in facts}
    found = []
    for reservation in sorted(facts, key=lambda f: f.reservation_id):
        floor = committed(reservation, now)
        if reservation.state != "active" or not _changeable(reservation) or floor is None:
            continue
        use = _needed(reservation, now, policy)
        if use is None:
            continue
        _, needed = use
        # What neither the use nor the commitment keeps: a split or move never leaves the reservation below
        # its committed count (EC2 holds the commitment to it); EC2 splits at most total - 1 units.
        idle = min(reservation.total - max(needed, floor), reservation.total - 1)
        if idle <= 0:
            continue
        destinations = sorted((f for f in facts if _same_shape(reservation, f) and need[f.reservation_id] > 0),
                              key=lambda f: (-need[f.reservation_id], f.reservation_id))
        moved = 0
        if destinations:
            destination = destinations[0]
            moved = min(idle, need[destination.reservation_id])
            need[destination.reservation_id] -= moved
            found.append(_move(reservation, destination, moved, idle, needed, now))
        if idle - moved > 0:
            found.append(_split(reservation, idle - moved, idle, needed, now,
                                after_move=destinations[0].reservation_id if moved else ""))
    return found


def _relocation_money(reservation: ReservationFacts, count: int, covered: int, basis: str) -> tuple[float, dict]:
    cost, saved = _money(count, reservation), _money(covered, reservation)
    return saved, {"count": count, "coveredUnits": covered, "idleCostPerMonth": cost,
                   "stillIdleCostPerMonth": round(cost - saved, 2), "money": MONTHLY if covered else WARNING,
                   "moneyBasis": basis}


def _move(reservation: ReservationFacts, destination: ReservationFacts, count: int, idle: int, needed: int,
          now: datetime.datetime) -> Recommendation:
    cluster = min(destination.cluster_demand, key=lambda c: (-c[1], c[0]))[0]
    saved, details = _relocation_money(reservation, count, count, _monthly_basis(count, "on-demand", reservation)
                                       + f" that cluster {cluster} pays for today and the moved units cover")
    details.update(destination=destination.reservation_id, cluster=cluster, idleUnits=idle, needed=needed,
                   destinationNeed=_need(destination), destinationSeenTotal=destination.total)
    return Recommendation(
        MOVE, reservation.reservation_id, savings_per_month=saved, details=details,
        reason=(f"{reservation.reservation_id} ({reservation.total} x {reservation.instance_type} in {reservation.zone}) is "
                f"{_commitment_words(reservation, now)}, which no split or move may go below, and its use needs {needed}: the "
                f"{idle} instance{'s' if idle != 1 else ''} above both cost ${_money(idle, reservation):,.2f} a month. "
                f"Move {count} to {destination.reservation_id} (the same shape), which cluster {cluster} uses while it runs "
                f"{sum(n for _, n in destination.cluster_demand)} on-demand {reservation.instance_type} there beside its "
                f"{destination.total - destination.used_now} free unit{'s' if destination.total - destination.used_now != 1 else ''}"
                f": that saves ${saved:,.2f} a month"))


def _split(reservation: ReservationFacts, count: int, idle: int, needed: int, now: datetime.datetime,
           after_move: str = "") -> Recommendation:
    by_account: dict[str, int] = {}
    clusters: dict[str, list[str]] = {}
    for account, cluster, nodes in reservation.share_candidates:
        by_account[account] = by_account.get(account, 0) + nodes
        clusters.setdefault(account, []).append(cluster)
    account = min(by_account, key=lambda a: (-by_account[a], a)) if by_account else ""
    covered = min(count, by_account.get(account, 0))
    if covered:
        basis = (_monthly_basis(covered, "on-demand", reservation) + f" that account {account} (cluster "
                 f"{', '.join(sorted(clusters[account]))}) pays for today and the shared units cover")
        whom = (f"share it with account {account}, whose cluster{'s' if len(clusters[account]) != 1 else ''} "
                f"{', '.join(sorted(clusters[account]))} run{'' if len(clusters[account]) != 1 else 's'} {by_account[account]} "
                f"on-demand {reservation.instance_type} there: that saves ${_money(covered, reservation):,.2f} a month")
    else:
        basis = "a warning, nothing saved until another account uses them; at stake: " + _monthly_basis(count, "idle", reservation)
        whom = ("share it (AWS RAM) with an account that can use it; no account of the fleet that lacks it runs "
                f"on-demand {reservation.instance_type} in {reservation.zone} now, so nothing is saved yet")
    saved, details = _relocation_money(reservation, count, covered, basis)
    details.update(shareWith=account, idleUnits=idle, needed=needed)
    return Recommendation(
        SPLIT, reservation.reservation_id, savings_per_month=saved, details=details,
        reason=(f"{reservation.reservation_id} ({reservation.total} x {reservation.instance_type} in {reservation.zone}) is "
                f"{_commitment_words(reservation, now)}, which no split or move may go below, and its use needs {needed}: "
                f"{idle} idle instance{'s' if idle != 1 else ''} above both. "
                + (f"Beyond the {idle - count} that {after_move} takes (the move), " if after_move else
                   "No reservation of the same shape that a cluster uses needs them (Capacity Blocks can be neither split "
                   "nor moved into): ")
                + f"{count} idle instance{'s' if count != 1 else ''} {'cost' if count != 1 else 'costs'} "
                f"${_money(count, reservation):,.2f} a month. Split {count} off into a new reservation and {whom}"))


def lendable(reservation: ReservationFacts) -> bool:
    """EC2 lends only from an active ODCR with no end date; karpweb only from one the fleet owns that lends nothing yet."""
    return (reservation.state == "active" and reservation.reservation_type != "capacity-block" and reservation.end is None
            and reservation.owned_by_us and not reservation.interruptible and not reservation.lends_interruptible)


def lend(reservation: ReservationFacts, now: datetime.datetime, policy: Policy) -> Recommendation | None:
    if not lendable(reservation):
        return None
    found = lending.lend_count(
        total=reservation.total, free_now=reservation.total - reservation.used_now, used_now=reservation.used_now,
        fleet_used=reservation.fleet_used, hours=tuple(lending.UseHour(h.start, h.high) for h in reservation.hours), now=now,
        idle_hours=policy.lend_idle_hours, forecast_days=policy.lend_forecast_days, margin=policy.lend_margin_instances,
        coverage=policy.coverage)
    if found is None:
        return None
    count, peak = found
    plural = "s" if count != 1 else ""
    return Recommendation(
        LEND, reservation.reservation_id, savings_per_month=0.0,
        reason=(f"{reservation.reservation_id} ({reservation.total} x {reservation.instance_type} in {reservation.zone}, no end "
                f"date) used at most {peak} instance{'s' if peak != 1 else ''} in the last {policy.lend_idle_hours} hours and, "
                f"forecast from the same hours of the last {policy.lend_forecast_days} days, will not need more: lend {count} "
                f"idle instance{plural} as interruptible capacity (keeping {policy.lend_margin_instances} spare); karpweb "
                f"reclaims them as soon as a pod of the fleet could use them"),
        details={"count": count, "peak": peak, "idleHours": policy.lend_idle_hours, "money": WARNING,
                 "lentCostPerMonth": _money(count, reservation),
                 "moneyBasis": ("nothing karpweb can count: the reservation is paid for whether its units are lent or idle, "
                                "and what a borrower pays is not known to karpweb; for context: "
                                + _monthly_basis(count, "lent", reservation))})
