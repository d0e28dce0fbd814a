"""Taking lent units back (the owner's side of interruptible capacity, scheduling/engine/lending.py).

- **For pending pods** (`reclaim_for_pending`, run by provisioning before its plan whenever pods wait):
  the plan from the world with every lent unit counted back; the units it puts into a lending
  reservation beyond its free ones are reclaimed at once. So the reclaim is asked for in the first
  provisioning run that sees the pod; EC2 gives free lent units back at once and a borrower's two
  minutes after its warning, and the pod is placed into them once the count shows them.
- **Before a forecast peak** (`reclaim_before_peaks`, run by the EC2 step): units the forecast (the
  same hour on the past days) says the fleet uses within the next hour beyond what is not lent.

Control mode: UpdateInterruptibleCapacityReservationAllocation with the smaller target (an absolute
target: a retry asks for the same thing), claimed first with a conditional UPDATE of the mirror's target
(of two workers, one reclaims), recorded as an applied ``reclaim`` Recommendation and a Decision.
Observe mode: an open ``reclaim`` Recommendation with the AWS CLI command, and a recommended Decision.
"""

from __future__ import annotations

import copy
import datetime
from collections import defaultdict

from django.db import transaction
from django.utils import timezone

from fleet.scope import working_cluster
from reservations.models import CapacityReservation, Recommendation, UtilizationHour
from scheduling.adapters.ec2.interface import CloudAPIError
from scheduling.engine import lending
from scheduling.engine.recommendations import Policy
from scheduling.engine.simulate import simulate
from scheduling.loop.engine_run import parse_readable
from scheduling.loop.recording import PendingDecision, record
from scheduling.models import Decision, Mode
from scheduling.modes import control_refusal, global_mode

FORECAST_DAYS = Policy.lend_forecast_days  # the same hour on this many past days makes the forecast


def lenders() -> list[CapacityReservation]:
    """Active reservations (of the scope) that lend units and could reclaim some."""
    found = CapacityReservation.objects.filter(state=CapacityReservation.State.ACTIVE).exclude(interruptible_allocation={})
    return [r for r in found.order_by("reservation_id") if r.lent_target > 0]


def reclaim_for_pending(cloud, world: dict, now=None) -> dict:
    """`world`: the engine world provisioning plans from (a dict, as scheduling.world builds it), or a function
    of `now` building it (only called when something is lent)."""
    now = now or timezone.now()
    lending_now = {r.reservation_id: r for r in lenders()}
    if not lending_now or not hasattr(cloud, "reclaim_lent_units"):
        return {}
    world = world(now) if callable(world) else world
    what_if = copy.deepcopy(world)
    free = {}
    for item in what_if.get("capacityReservations") or []:
        r = lending_now.get(item.get("CapacityReservationId"))
        if r is not None:  # units already being reclaimed are on their way back: as good as free
            free[r.reservation_id] = int(item.get("AvailableInstanceCount") or 0) + r.reclaiming
            item["AvailableInstanceCount"] = free[r.reservation_id] + r.lent_target
    parsed, _ = parse_readable(what_if)  # what it cannot read, provisioning's own run records
    planned = defaultdict(list)
    for claim in simulate(parsed, disruptions=False)["nodeClaims"]:
        rid = claim["launch"].get("reservationID")
        if rid in free:
            planned[rid].append(claim)
    reclaimed = 0
    for rid, claims in sorted(planned.items()):
        r = lending_now[rid]
        count = lending.reclaim_for_plan(r.lent_target, len(claims), free[rid])
        if count:
            pods = sorted(p for claim in claims for p in claim["pods"])
            why = (f"pending pod{'s' if len(pods) != 1 else ''} {', '.join(pods[:3])}{' and more' if len(pods) > 3 else ''} "
                   f"could use {count} of its {r.lent_target} lent unit{'s' if r.lent_target != 1 else ''} "
                   f"({free[rid]} free or coming back)")
            reclaimed += reclaim(cloud, r, count, why, now, {"pods": pods})
    return {"units_reclaimed": reclaimed} if planned else {}


def reclaim_before_peaks(cloud, now=None) -> dict:
    """Units the forecast says the fleet uses within the next hour beyond what is not lent."""
    now = now or timezone.now()
    lending_now = lenders()
    if not lending_now or not hasattr(cloud, "reclaim_lent_units"):
        return {}
    since = now - datetime.timedelta(days=FORECAST_DAYS + 1)
    hours = defaultdict(list)
    for row in UtilizationHour.objects.filter(reservation__in=lending_now, hour__gte=since) \
            .values("reservation_id", "hour", "used", "peak_used"):
        hours[row["reservation_id"]].append(lending.UseHour(row["hour"], max(row["used"], row["peak_used"] or 0)))
    reclaimed = 0
    for r in lending_now:
        count, peak = lending.reclaim_for_forecast(total=r.total_instance_count, lent=r.lent_target,
                                                   hours=tuple(hours[r.pk]), now=now, days=FORECAST_DAYS)
        if count:
            why = (f"the forecast (the same hour on the last {FORECAST_DAYS} days) is {peak} units used within the next "
                   f"hour, {count} more than the {r.total_instance_count - r.lent_target} not lent")
            reclaimed += reclaim(cloud, r, count, why, now, {"forecastPeak": peak})
    return {"units_reclaimed_for_peaks": reclaimed}


def reclaim(cloud, r: CapacityReservation, count: int, why: str, now, details: dict) -> int:
    """Reclaim `count` units of `r` once (control mode), or say so (observe mode); returns the units reclaimed."""
    seen, target = r.lent_target, r.lent_target - count
    reason = (f"{r.reservation_id} lends {seen} unit{'s' if seen != 1 else ''} as interruptible capacity"
              f"{f' ({r.lent_to})' if r.lent_to else ''}: {why}; reclaiming {count} (target {target})")
    subject = f"reservation {r.reservation_id}"
    fields = dict(kind=Recommendation.Kind.RECLAIM, reservation=r, target_count=target, savings_per_month=0.0,
                  seen_total=r.total_instance_count, computed_at=now,
                  details={**details, "count": count, "from": seen, "lentTo": r.lent_to, "money": "warning",
                           "moneyBasis": "nothing saved: the lent units come back to the fleet"})
    if global_mode() != Mode.CONTROL or control_refusal():
        with transaction.atomic():  # one open reclaim per reservation: the newest count, kept while it holds
            open_ones = Recommendation.objects.select_for_update().filter(
                reservation=r, kind=Recommendation.Kind.RECLAIM, state=Recommendation.State.OPEN)
            if not open_ones.filter(target_count=target).exists():
                open_ones.delete()
                Recommendation.objects.create(reason=reason + " (observe mode: run the command shown)", **fields)
        record([PendingDecision(kind=Decision.Kind.STATUS, subject=subject, reason=reason, mode=Mode.OBSERVE,
                                reservation=r, details=fields["details"])], now)
        return 0
    allocation = r.interruptible_allocation or {}
    # The claim: the mirror's target moves from what this worker saw, once; another worker's UPDATE finds nothing.
    claimed = CapacityReservation.objects.fleet().filter(
        pk=r.pk, interruptible_allocation__TargetInstanceCount=seen).update(
        interruptible_allocation={**allocation, "TargetInstanceCount": target, "Status": "updating"})
    if not claimed:
        return 0
    decision = PendingDecision(kind=Decision.Kind.STATUS, subject=subject, reason=reason, mode=Mode.CONTROL,
                               reservation=r, details=fields["details"])
    cloud = _owners(cloud, r)
    try:
        answer = cloud.reclaim_lent_units(r.reservation_id, target)
    except CloudAPIError as exc:
        CapacityReservation.objects.fleet().filter(pk=r.pk, interruptible_allocation__TargetInstanceCount=target).update(
            interruptible_allocation=allocation)  # nothing changed at EC2: the next run tries again
        Recommendation.objects.create(reason=reason, state=Recommendation.State.FAILED, error=f"{exc.code}: {exc.message}",
                                      **fields)
        decision.outcome, decision.error = Decision.Outcome.FAILED, f"{exc.code}: {exc.message}"
        record([decision], now)
        return 0
    Recommendation.objects.create(reason=reason, state=Recommendation.State.APPLIED, applied_at=now,
                                  applied_by="karpweb (loop)",
                                  **fields)
    decision.outcome = Decision.Outcome.ACTED
    record([decision], now)
    _mirror_answer(cloud, r, answer)
    return count


def _owners(cloud, r: CapacityReservation):
    """Only the owner reclaims: this run's cloud when its account owns `r` (or nothing says otherwise), else a
    cluster of the owner's account's (scheduling.loop.backends.cloud_for_reservation)."""
    if r.owner_account_id is None or r.owner_account_id == working_cluster().account_id:
        return cloud
    from scheduling.loop.backends import cloud_for_reservation

    return cloud_for_reservation(r)


def _mirror_answer(cloud, r: CapacityReservation, answer: dict) -> None:
    """The reservation as EC2 has it right after the reclaim (units free at once are back in its count), so the
    plan that follows can use them; the simulated EC2 has changed the row already."""
    if getattr(cloud, "keeps_reservations_in_database", False):
        return
    from scheduling.adapters.ec2.sync import refresh_reservations

    refresh_reservations(cloud, [r.reservation_id])
