"""One reservation ledger across the fleet (issue #36).

- **Who holds which units** (`record_use`): after the EC2 sync, every usable reservation's used
  units are attributed (scheduling.engine.attribution) to our clusters, our accounts' instances no
  cluster knows, other accounts and unknown, from DescribeInstances of our accounts, every
  cluster's nodes (unscoped: the whole fleet) and, for the reservations our accounts own,
  GetCapacityReservationUsage. One ReservationUse row per reservation per sync. Units lent as
  interruptible capacity are counted apart (`lent`): neither used by the fleet nor free for it.
- **Holds** (`hold_units`, `settle_hold`): before a launch into a reservation, a cluster claims the
  units in one transaction that locks the reservation's row (SELECT ... FOR UPDATE); the claim is
  refused unless (available at the last EC2 read - units launched since it - other clusters' live
  holds) covers them. "Since" compares two moments of the clock, never the start of a step: the
  reservation's `counted_at` (taken just before EC2 was asked for its count, by the sync or the
  refresh after a launch) and the hold's `launched_at` (taken just after EC2 answered the launch).
  A launch answered before the read is in EC2's count; one answered after is subtracted until a
  later read. A launched hold is released when EC2 shows its instance (by id) in the reservation in
  a read made after the launch, or the instance ended; so a slow sync that read EC2 before a launch
  landed never gives its unit away again, and no unit is subtracted twice (a count read after the
  launch already holds it). The engine's world of a cluster sees the reservation's count minus the other
  clusters' live units (`units_held_elsewhere`, read by scheduling/world.py), so a refused plan is
  planned again around them.
- **Contention** (`settle_hold`): a launch refused for capacity into a reservation the ledger called
  free is recorded (ReservationContention); the next sync's attribution says who took the units.
"""

from __future__ import annotations

import datetime
import logging
from collections import defaultdict
from collections.abc import Mapping

from django.db import transaction
from django.db.models import F, OuterRef, Q, Subquery, Sum
from django.utils import timezone

from fleet import scope
from fleet.models import Cluster
from reservations.models import (CapacityReservation, OpenReservationInstance, ReservationContention, ReservationHold,
                                 ReservationInstance, ReservationUse)
from scheduling.adapters.ec2.interface import CloudAPIError
from scheduling.engine.attribution import Attribution, attribute
from scheduling.engine.instances import instance_id
from scheduling.models import Node, NodeClaim

log = logging.getLogger(__name__)

# As upstream's launch timeout (kubernetes-sigs/karpenter pkg/controllers/nodeclaim/lifecycle/liveness.go,
# scheduling/loop/provisioning.py LAUNCH_TIMEOUT): a launch not done by then is not coming.
HOLD_TTL = datetime.timedelta(minutes=5)
# The launch errors that mean someone else took the units.
CONTENTION_CODES = ("ReservationCapacityExceeded", "InsufficientInstanceCapacity")
LIVE_INSTANCE_STATES = ("pending", "running")


# --- who holds which units ------------------------------------------------------------------

def record_use(clouds: Mapping[str, object], now=None) -> dict:
    """Attribute every usable reservation's units across the fleet and keep one ReservationUse per
    reservation. `clouds`: our account id -> its cloud provider (DescribeInstances; and
    GetCapacityReservationUsage for the reservations that account owns). Also settles the holds
    this sync now counts, and explains the contentions still open. Unscoped: the whole fleet."""
    now = now or timezone.now()
    with scope.unscoped():
        reservations = list(CapacityReservation.objects.fleet().usable(now))
        if not reservations:
            ReservationInstance.objects.all().delete()  # no usable reservation holds an instance
            return {"uses_recorded": 0}
        account_instances: dict[str, set[str]] = defaultdict(set)
        in_reservation: dict[str, set[str]] = defaultdict(set)
        observed: dict[str, set[str]] = defaultdict(set)  # what EC2 itself shows in each reservation
        ended: set[str] = set()
        usage: dict[str, dict[str, int]] = {}
        owned = defaultdict(list)
        for r in reservations:
            owned[r.owner_id].append(r.reservation_id)
        answered: set[str] = set()
        members: dict[str, tuple[str, object]] = {}  # instance id -> (account, InstanceMembership) in a reservation
        for account, cloud in clouds.items():
            account_instances.setdefault(account, set())
            try:
                listed = cloud.describe_instances()
                answered.add(account)
            except CloudAPIError as exc:  # an account that does not answer leaves its instances unknown
                log.warning("ledger: DescribeInstances in account %s failed (%s)", account, exc)
                listed = []
            for m in listed:
                if m.state not in LIVE_INSTANCE_STATES:
                    ended.add(m.instance_id)
                    continue
                account_instances[account].add(m.instance_id)
                for rid in (m.reservation_id, m.open_reservation_id):
                    if rid:
                        in_reservation[rid].add(m.instance_id)
                        observed[rid].add(m.instance_id)
                        members[m.instance_id] = (account, m)
            ask = getattr(cloud, "capacity_reservation_usage", None)
            for rid in owned.get(account, []) if ask else []:
                try:
                    usage[rid] = ask(rid)
                except CloudAPIError as exc:  # e.g. not allowed: its other accounts' units stay unknown
                    log.warning("ledger: GetCapacityReservationUsage %s failed (%s)", rid, exc)
        # The instances matched by reservation id: nodes and claims the mirror places in it.
        by_pk = {r.pk: r.reservation_id for r in reservations}
        cluster_instances: dict[str, set[str]] = defaultdict(set)
        for model in (Node, NodeClaim):
            for name, provider_id, reservation_pk in model.objects.fleet().exclude(provider_id="").values_list(
                    "cluster__name", "provider_id", "reservation_id"):
                iid = instance_id(provider_id)
                cluster_instances[name].add(iid)
                if reservation_pk in by_pk:
                    in_reservation[by_pk[reservation_pk]].add(iid)
        for rid, iid in OpenReservationInstance.objects.filter(reservation__in=reservations).values_list(
                "reservation__reservation_id", "instance_id"):
            in_reservation[rid].add(iid)
        cluster_accounts = dict(Cluster.objects.values_list("name", "account__account_id"))
        rows = []
        found: dict[int, Attribution] = {}
        for r in reservations:
            a = attribute(total=r.total_instance_count, available=r.available_instance_count,
                          reservation_instances=in_reservation.get(r.reservation_id, ()),
                          cluster_instances=cluster_instances, cluster_accounts=cluster_accounts,
                          account_instances=account_instances, usage=usage.get(r.reservation_id), lent=r.lent_count)
            found[r.pk] = a
            rows.append(ReservationUse(reservation=r, sampled_at=now, total=a.total, used=a.used, clusters=a.clusters,
                                       our_accounts=a.our_accounts, other_accounts=a.other_accounts, unknown=a.unknown,
                                       lent=a.lent))
        ReservationUse.objects.bulk_create(rows, batch_size=500)
        explained = 0
        for contention in ReservationContention.objects.filter(explained_at__isnull=True, reservation_id__in=list(found)):
            contention.taken_by, contention.explained_at = found[contention.reservation_id].as_dict(), now
            contention.save(update_fields=["taken_by", "explained_at"])
            explained += 1
        settled = settle_counted_holds(now, observed, ended)
        kept = mirror_instances({r.reservation_id: r for r in reservations}, members, answered, now)
    return {"uses_recorded": len(rows), "contentions_explained": explained, "holds_settled": settled,
            "reservation_instances": kept}


def mirror_instances(reservations: Mapping[str, CapacityReservation], members: Mapping[str, tuple[str, object]],
                     answered: set[str], now) -> int:
    """Keep ReservationInstance as the accounts that answered list them: one row per live instance in
    a usable reservation (with the node whose providerID names it), and none for an instance those
    accounts no longer list there. Returns the rows kept."""
    nodes = {}
    for name, cluster_id, provider_id in Node.objects.fleet().exclude(provider_id="").values_list(
            "name", "cluster_id", "provider_id"):
        nodes[instance_id(provider_id)] = (name, cluster_id)
    first_seen = dict(ReservationInstance.objects.filter(instance_id__in=list(members)).values_list(
        "instance_id", "first_seen"))
    rows = []
    for iid, (account, m) in members.items():
        reservation = reservations.get(m.reservation_id or m.open_reservation_id)
        if reservation is None:  # a reservation no longer usable: its instances are not its units now
            continue
        node_name, cluster_id = nodes.get(iid, ("", None))
        rows.append(ReservationInstance(
            instance_id=iid, reservation=reservation, account_id=account, instance_type=m.instance_type,
            availability_zone=m.zone, state=m.state, open_matching=not m.reservation_id, launched_at=m.launch_time,
            node_name=node_name, cluster_id=cluster_id, first_seen=first_seen.get(iid, now), last_seen=now))
    ReservationInstance.objects.bulk_create(
        rows, batch_size=500, update_conflicts=True, unique_fields=["instance_id"],
        update_fields=["reservation", "account_id", "instance_type", "availability_zone", "state", "open_matching",
                       "launched_at", "node_name", "cluster", "last_seen"])
    ReservationInstance.objects.filter(account_id__in=answered).exclude(
        instance_id__in=[row.instance_id for row in rows]).delete()
    ReservationInstance.objects.exclude(reservation__in=list(reservations.values())).delete()
    return len(rows)


def latest_use(reservation: CapacityReservation) -> ReservationUse | None:
    return reservation.uses.order_by("-sampled_at").first()


def latest_uses(reservation_pks) -> dict[int, ReservationUse]:
    """The newest ReservationUse of each reservation (one query)."""
    # A subquery rather than DISTINCT ON: the same one query under SQLite (`./karpweb.sh run`'s default).
    newest = ReservationUse.objects.filter(reservation_id=OuterRef("reservation_id")).order_by("-sampled_at").values("pk")[:1]
    rows = ReservationUse.objects.filter(reservation_id__in=list(reservation_pks), pk=Subquery(newest))
    return {row.reservation_id: row for row in rows}


# --- holds ----------------------------------------------------------------------------------

def _live(now) -> Q:
    """Holds whose units EC2's count (as karpweb last read it) does not hold yet: held and not
    expired, or launched after the moment that count was asked for (a clock frozen by a test makes
    the two equal: a read made after the launch then holds it, as one made after it does)."""
    launched = Q(state=ReservationHold.State.LAUNCHED)
    return (Q(state=ReservationHold.State.HELD, expires_at__gt=now)
            | launched & (Q(reservation__counted_at__isnull=True) | Q(launched_at__isnull=True))
            | launched & Q(launched_at__gt=F("reservation__counted_at")))


def units_held_elsewhere(cluster_id: int | None, now=None) -> dict[int, int]:
    """Reservation pk -> units not free for `cluster_id` beyond the last sync's count: other clusters'
    live holds, and every cluster's units launched since the sync (the world of `cluster_id`
    subtracts them from the available count, as ledger_free does)."""
    now = now or timezone.now()
    holds = ReservationHold.objects.filter(_live(now))
    if cluster_id is not None:
        holds = holds.filter(Q(state=ReservationHold.State.LAUNCHED) | ~Q(cluster_id=cluster_id))
    return dict(holds.values("reservation_id").annotate(units=Sum("units")).values_list("reservation_id", "units"))


def ledger_free(reservation: CapacityReservation, cluster_id: int, now) -> int:
    """Units free for `cluster_id`: available at the last sync, minus the units launched since it
    (every cluster's), minus other clusters' live holds."""
    live = ReservationHold.objects.filter(_live(now), reservation=reservation)
    taken = live.filter(Q(state=ReservationHold.State.LAUNCHED) | ~Q(cluster_id=cluster_id)).aggregate(
        units=Sum("units"))["units"] or 0
    # Below 0 only when a launch landed while its count was being read (both then hold the unit): none free.
    return max(0, reservation.available_instance_count - taken)


def launchable_units(reservation_id: str, now=None) -> int | None:
    """The units a launch may count on in a reservation, as the mirror and the ledger know them: EC2's
    count at its last read less every cluster's units launched since; None for a reservation karpweb
    has no row of. What a worker's provider starts from when it has no count of its own (its
    ReservationAvailability's fallback: scheduling/loop/backends.py)."""
    now = now or timezone.now()
    row = CapacityReservation.objects.fleet().filter(reservation_id=reservation_id).first()
    if row is None:
        return None
    if row.state != "active":
        return 0
    launched = ReservationHold.objects.filter(_live(now), reservation=row, state=ReservationHold.State.LAUNCHED).aggregate(
        units=Sum("units"))["units"] or 0
    return max(0, row.available_instance_count - launched)


def hold_units(reservation_id: str, units: int = 1, claim_name: str = "", now=None) -> tuple[ReservationHold | None, bool]:
    """Claim `units` of a reservation for the working cluster's launch: (the hold, True); (None,
    False) when the ledger has not that many free (other clusters hold or launched them); (None,
    True) for a reservation karpweb has no row of (EC2 decides) and for a launch into none (no id).
    One transaction, the reservation's row locked: two clusters claiming the last unit at once get it once."""
    if not reservation_id:
        return None, True
    now = now or timezone.now()
    cluster = scope.working_cluster()
    with transaction.atomic():
        reservation = CapacityReservation.objects.fleet().select_for_update().filter(reservation_id=reservation_id).first()
        if reservation is None:
            return None, True
        free = ledger_free(reservation, cluster.pk, now)
        if free < units:
            log.info("ledger: %s has %d free unit(s) for cluster %s, %d wanted: not held", reservation_id, free,
                     cluster.name, units)
            return None, False
        hold = ReservationHold.objects.create(reservation=reservation, cluster=cluster, units=units,
                                              claim_name=claim_name[:253], created_at=now, updated_at=now,
                                              expires_at=now + HOLD_TTL)
        hold.free_when_held = free
        return hold, True


def settle_hold(hold: ReservationHold | None, result=None, *, claim_name: str = "", counted: bool = False,
                now=None) -> None:
    """After the launch: launched (counted until EC2's count is read after this moment) or released
    (the launch failed or raised, `result` None; or `counted`: the cloud already took the unit from
    the reservation's row, as the simulated world does). A failure for capacity on units the ledger
    called free is contention. `launched_at` is the clock now, not `now` (a step's start): EC2 has
    answered, so a count read from here on holds the unit."""
    if hold is None:
        return
    now = now or timezone.now()
    ok = result is not None and result.ok
    state = ReservationHold.State.LAUNCHED if ok and not counted else ReservationHold.State.RELEASED
    ReservationHold.objects.filter(pk=hold.pk).update(
        state=state, updated_at=now, claim_name=(claim_name or hold.claim_name)[:253],
        launched_at=timezone.now() if ok else None, instance_id=(getattr(result, "instance_id", None) or "")[:32])
    codes = {result.error_code, *(e.code for e in getattr(result, "errors", []) or [])} if result is not None else set()
    code = next((c for c in CONTENTION_CODES if c in codes), None)
    if not ok and code:
        ReservationContention.objects.create(
            reservation_id=hold.reservation_id, cluster_id=hold.cluster_id, created_at=now, units_wanted=hold.units,
            ledger_free=getattr(hold, "free_when_held", hold.units), error_code=code)


def settle_counted_holds(now, observed: Mapping[str, set[str]] | None = None, ended: set[str] = frozenset()) -> int:
    """After a sync: a launched hold is over once EC2's count was read after its launch and EC2 shows
    its instance in the reservation (`observed`: reservation id -> live instance ids, from
    DescribeInstances) or the instance ended; one EC2 never showed is over HOLD_TTL after the read
    that counts it (an account whose DescribeInstances failed). Expired held units are over too."""
    launched = ReservationHold.objects.filter(
        state=ReservationHold.State.LAUNCHED, launched_at__lte=F("reservation__counted_at")).select_related("reservation")
    over = [hold.pk for hold in launched.only("pk", "instance_id", "launched_at", "reservation__reservation_id",
                                              "reservation__counted_at")
            if hold.instance_id in (observed or {}).get(hold.reservation.reservation_id, ()) or hold.instance_id in ended
            or hold.reservation.counted_at - hold.launched_at > HOLD_TTL]
    released = ReservationHold.objects.filter(pk__in=over).update(state=ReservationHold.State.RELEASED, updated_at=now)
    expired = ReservationHold.objects.filter(state=ReservationHold.State.HELD, expires_at__lte=now).update(
        state=ReservationHold.State.RELEASED, updated_at=now)
    return released + expired
