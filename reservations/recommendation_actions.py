"""Applying a recommendation (control mode, an operator): ModifyCapacityReservation (shrink, end
date), CancelCapacityReservation, PurchaseCapacityBlockExtension, CreateInterruptibleCapacityReservationAllocation
(lend), CreateCapacityReservationBySplitting
(split: the new reservation's id is kept in the recommendation's details, and the page gives the AWS
RAM command that shares it; karpweb creates no share), MoveCapacityReservationInstances (move), and for select the EC2NodeClass's
capacityReservationSelectorTerms gaining an id term (through the selector-term editor's save). Each apply is claimed with a
conditional UPDATE under the reservation's row lock (two clicks or two workers act once; the other
alternatives for the reservation are superseded in the same transaction, so of two alternatives applied
at once one wins and the other is refused), then its evidence is recomputed from the mirror (refused,
naming what changed, when it no longer holds; applied at the recomputed figure otherwise), refused when
the reservation changed at EC2 since it was computed, and recorded in the audit log. Observe mode
applies nothing: it shows the AWS CLI command that would."""

from __future__ import annotations

import json
import shlex

from django.db import transaction
from django.db.models import F
from django.db.models.functions import Greatest
from django.utils import timezone

from fleet.access import check_may_change_reservation
from fleet.scope import several_clusters
from reservations.block_fees import record_extension_paid
from reservations.models import CapacityReservation, EC2NodeClass, Recommendation
from reservations.selector_terms import InvalidSelectorTerms, SelectorTermConflict, save_selector_terms
from scheduling.adapters.ec2.interface import CloudAPIError
from scheduling.audit import record_change
from scheduling.models import AuditEntry, Mode
from scheduling.modes import control_refusal, global_mode

APPLICABLE = (Recommendation.Kind.SHRINK, Recommendation.Kind.CANCEL, Recommendation.Kind.EXTEND,
              Recommendation.Kind.END_DATE, Recommendation.Kind.SELECT, Recommendation.Kind.SPLIT, Recommendation.Kind.MOVE,
              Recommendation.Kind.LEND)


# An extension dearer than the work it protects is bought only when the operator says so, in so many words.
CONFIRM_NOT_ADVISED = "confirmNotAdvised"
NOT_ADVISED = ("the cheapest extension costs more than the work it protects (not advised); "
               "confirm that the work is worth it to buy it anyway")


class ApplyRefused(Exception):
    """Why this apply does not happen, naming the field where there is one (forms and API show it)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message

    @property
    def status(self) -> int:
        """409 when the world changed or karpweb may not act; 400 for what the request itself got wrong."""
        return 400 if self.field in ("offering", "end_date", "kind", CONFIRM_NOT_ADVISED) else 409


def cli_command(rec: Recommendation, *, offering_id: str | None = None, end_date=None) -> str:
    """The exact AWS CLI command that applies it (observe mode shows this instead of a button)."""
    rid = shlex.quote(rec.reservation.reservation_id)
    if rec.kind == Recommendation.Kind.SHRINK:
        return f"aws ec2 modify-capacity-reservation --capacity-reservation-id {rid} --instance-count {rec.target_count}"
    if rec.kind == Recommendation.Kind.CANCEL:
        return f"aws ec2 cancel-capacity-reservation --capacity-reservation-id {rid}"
    if rec.kind == Recommendation.Kind.SPLIT:
        return (f"aws ec2 create-capacity-reservation-by-splitting --source-capacity-reservation-id {rid} "
                f"--instance-count {rec.details.get('count')}")
    if rec.kind == Recommendation.Kind.MOVE:
        return (f"aws ec2 move-capacity-reservation-instances --source-capacity-reservation-id {rid} "
                f"--destination-capacity-reservation-id {shlex.quote(rec.details.get('destination') or '')} "
                f"--instance-count {rec.details.get('count')}")
    if rec.kind == Recommendation.Kind.LEND:
        return (f"aws ec2 create-interruptible-capacity-reservation-allocation --capacity-reservation-id {rid} "
                f"--instance-count {rec.details.get('count')} --client-token {shlex.quote(_client_token(rec))}")
    if rec.kind == Recommendation.Kind.RECLAIM:
        return (f"aws ec2 update-interruptible-capacity-reservation-allocation --capacity-reservation-id {rid} "
                f"--target-instance-count {rec.target_count}")
    if rec.kind == Recommendation.Kind.END_DATE:
        when = (end_date or "YYYY-MM-DDTHH:MM:SSZ")
        when = when.strftime("%Y-%m-%dT%H:%M:%SZ") if hasattr(when, "strftime") else when
        return (f"aws ec2 modify-capacity-reservation --capacity-reservation-id {rid} --end-date-type limited "
                f"--end-date {shlex.quote(when)}")
    if rec.kind == Recommendation.Kind.EXTEND:
        offers = rec.details.get("offerings") or []
        offer = offering_id or (offers[0]["offering_id"] if offers else "OFFERING-ID")
        return (f"aws ec2 purchase-capacity-block-extension --capacity-reservation-id {rid} "
                f"--capacity-block-extension-offering-id {shlex.quote(offer)}")
    patch = [{"op": "add", "path": "/spec/capacityReservationSelectorTerms/-", "value": _select_term(rec)}]
    return (f"kubectl patch ec2nodeclass {shlex.quote(rec.details.get('nodeClass') or 'NAME')} --type json "
            f"-p {shlex.quote(json.dumps(patch, separators=(',', ':')))}")


def share_command(rec: Recommendation) -> str:
    """After a split: the AWS RAM command that shares the new reservation (karpweb creates no share)."""
    arn = rec.details.get("newReservationArn") or "NEW-RESERVATION-ARN"
    name = f"karpweb-{rec.details.get('newReservationId') or rec.reservation.reservation_id}-split"
    return (f"aws ram create-resource-share --name {shlex.quote(name)} --resource-arns {shlex.quote(arn)} "
            f"--principals {shlex.quote(rec.details.get('shareWith') or 'ACCOUNT-ID')}")


def _select_term(rec: Recommendation) -> dict:
    return rec.details.get("term") or {"id": rec.reservation.reservation_id}


def apply(rec_id: int, *, seen_computed_at, user, source: str, cloud, offering_id: str | None = None,
          end_date=None, confirm_not_advised: bool = False) -> Recommendation:
    """Apply one recommendation once. Raises ApplyRefused with the field and the reason. `cloud`: the
    provider, or a function of the reservation giving the one that may act on it (its owner's)."""
    if global_mode() != Mode.CONTROL:
        refusal = control_refusal()
        raise ApplyRefused("mode", "karpweb is in observe mode" + (f" ({refusal})" if refusal else "")
                           + ": it changes no reservation or EC2NodeClass; run the command shown instead")
    rec = Recommendation.objects.select_related("reservation").filter(pk=rec_id).first()
    if rec is None:
        raise ApplyRefused("id", f"recommendation {rec_id} does not exist (recomputed since?); reload the page")
    check_may_change_reservation(rec.reservation)
    if rec.kind not in APPLICABLE:
        raise ApplyRefused("kind", f"a {rec.get_kind_display()} recommendation cannot be applied here")
    if rec.kind == Recommendation.Kind.SELECT and not _node_classes(rec).exists():
        raise ApplyRefused("nodeClass", f"EC2NodeClass {rec.details.get('nodeClass') or '(none named)'} does not exist; "
                                        "add the term in another class's selector-term editor")
    if rec.kind == Recommendation.Kind.EXTEND and not offering_id:
        raise ApplyRefused("offering", "choose one of the extension offerings")
    if rec.kind == Recommendation.Kind.EXTEND and offering_id not in {o["offering_id"] for o in rec.details.get("offerings") or []}:
        raise ApplyRefused("offering", f"{offering_id!r} is not one of this recommendation's extension offerings")
    if rec.kind == Recommendation.Kind.END_DATE and (end_date is None or end_date <= timezone.now()):
        raise ApplyRefused("end_date", "give the new end date, in the future")
    if not rec.advised and not confirm_not_advised:
        raise ApplyRefused(CONFIRM_NOT_ADVISED, NOT_ADVISED)
    if not claim(rec, seen_computed_at):
        return rec  # already applied (or being applied) by the first click
    reservation = rec.reservation
    if callable(cloud):
        cloud = cloud(reservation)
    try:
        recomputed = _recheck(cloud, rec)
        if not recomputed.details.get("advised", True) and not confirm_not_advised:
            raise ApplyRefused("evidence", f"{reservation.reservation_id} changed since this was computed: "
                                           f"{NOT_ADVISED}")
        _check_unchanged(cloud, rec)
        _act(cloud, rec, reservation, offering_id, end_date, user=user, source=source)
    except (ApplyRefused, CloudAPIError) as exc:
        message = exc.message if isinstance(exc, ApplyRefused) else f"{exc.code}: {exc.message}"
        Recommendation.objects.filter(pk=rec.pk).update(state=Recommendation.State.FAILED, error=message)
        # Nothing was done: the alternatives this one set aside are open advice again.
        Recommendation.objects.filter(superseded_by=rec, state=Recommendation.State.SUPERSEDED).update(
            state=Recommendation.State.OPEN, superseded_by=None)
        if isinstance(exc, ApplyRefused):
            raise
        raise ApplyRefused("reservation", f"EC2 refused: {message}") from None
    now = timezone.now()
    figures = _recomputed_figures(rec, recomputed)
    Recommendation.objects.filter(pk=rec.pk).update(state=Recommendation.State.APPLIED, applied_at=now,
                                                    applied_by=user.get_username() if user else "", **figures)
    rec.refresh_from_db()
    record_change(user=user, source=source, obj=reservation, action=AuditEntry.Action.CHANGE,
                  changes=_changes(rec, offering_id, end_date))
    destination = CapacityReservation.objects.fleet().filter(reservation_id=rec.details.get("destination") or "").first()
    if rec.kind == Recommendation.Kind.MOVE and destination is not None:
        seen = rec.details.get("destinationSeenTotal")
        record_change(user=user, source=source, obj=destination, action=AuditEntry.Action.CHANGE,
                      changes={"total_instance_count": [seen, seen + rec.details["count"]],
                               "moved_from": [None, f"{reservation.reservation_id} ({rec.details['count']} instances)"]})
    return rec


def claim(rec: Recommendation, seen_computed_at) -> bool:
    """Open -> applying, once: under the reservation's row lock, so that of two clicks or workers applying it,
    or two alternatives for the same reservation, one wins. The alternatives are one choice: the others
    open for the reservation are superseded in the same transaction (page, API and audit show it).
    False: it was applied (or is being applied) already."""
    changed = _reservations_changed(rec)
    with transaction.atomic():
        list(CapacityReservation.objects.fleet().select_for_update().filter(pk__in=changed).order_by("pk"))
        claimed = Recommendation.objects.filter(pk=rec.pk, state=Recommendation.State.OPEN,
                                                computed_at=seen_computed_at).update(state=Recommendation.State.APPLYING)
        if claimed:
            Recommendation.objects.filter(reservation_id__in=changed, state=Recommendation.State.OPEN) \
                .exclude(pk=rec.pk).update(state=Recommendation.State.SUPERSEDED, superseded_by=rec,
                                           error=f"superseded: {rec.get_kind_display()} (#{rec.pk}) was applied")
            return True
    rec.refresh_from_db()
    if rec.state in (Recommendation.State.APPLIED, Recommendation.State.APPLYING):
        return False
    if rec.state == Recommendation.State.SUPERSEDED:
        chosen = rec.superseded_by
        raise ApplyRefused("state", f"{rec.reservation.reservation_id}: "
                                    f"{chosen.get_kind_display() if chosen else 'another recommendation'}"
                                    f"{f' (#{chosen.pk})' if chosen else ''} was applied to it instead; this alternative "
                                    "is superseded")
    raise ApplyRefused("computed_at", "the recommendation changed since the page was read; reload it")


def _reservations_changed(rec: Recommendation) -> list[int]:
    """The reservations applying `rec` changes: its own, and a move's destination (whose advice was
    computed for its old size)."""
    changed = [rec.reservation_id]
    if rec.kind == Recommendation.Kind.MOVE and rec.details.get("destination"):
        changed += CapacityReservation.objects.fleet().filter(reservation_id=rec.details["destination"]) \
            .values_list("pk", flat=True)
    return changed


def _recheck(cloud, rec: Recommendation):
    """The evidence recomputed from the mirror now: refused (409) naming what changed when it no longer
    supports this action; else the recomputed recommendation, whose figures are the ones applied."""
    from reservations.recommendations import current_claim

    offerings = getattr(cloud, "capacity_block_extension_offerings", None) if rec.kind == Recommendation.Kind.EXTEND else None
    now = timezone.now()
    recomputed, facts = current_claim(rec, now, offerings)
    if recomputed is None:
        raise ApplyRefused("evidence", f"{rec.reservation.reservation_id} changed since this was computed: "
                                       f"{what_changed(rec, facts, now)}; nothing was applied")
    details, was = recomputed.details, rec.details or {}
    differs = [(what, before, after) for what, before, after in (
        ("target count", rec.target_count, recomputed.target_count), ("count", was.get("count"), details.get("count")),
        ("destination", was.get("destination"), details.get("destination")),
        ("EC2NodeClass", was.get("nodeClass"), details.get("nodeClass"))) if before != after]
    if differs:
        words = "; ".join(f"its {what} is now {after} (was {before})" for what, before, after in differs)
        raise ApplyRefused("evidence", f"{rec.reservation.reservation_id} changed since this was computed: {words}; "
                                       "reload the page")
    return recomputed


def what_changed(rec: Recommendation, facts, now) -> str:
    """Why the recomputed evidence no longer supports `rec`, in words."""
    if facts is None:
        return f"it is {rec.reservation.get_state_display()} now, no longer active"
    details = rec.details or {}
    if rec.kind == Recommendation.Kind.EXTEND:
        if facts.drain_at is not None and now >= facts.drain_at:
            return (f"the Capacity Block drained at {facts.drain_at:%Y-%m-%d %H:%M} UTC, "
                    f"{int((now - facts.drain_at).total_seconds() // 60)} minutes ago: its work is already lost")
        if not facts.block_nodes:
            return "its nodes are gone: no work is left for an extension to protect"
        return "no pod on its nodes has unfinished work before the drain now"
    if rec.kind in (Recommendation.Kind.SELECT, Recommendation.Kind.CANCEL) and facts.selected_by:
        return f"EC2NodeClass {', '.join(facts.selected_by)} selects it now"
    if rec.kind == Recommendation.Kind.SELECT:
        counted = details.get("nodes") or []
        gone = sorted(set(counted) - set(facts.matching_paid_nodes))
        if gone:
            return (f"the on-demand node{'s' if len(gone) != 1 else ''} it counted ({', '.join(gone)}) "
                    f"{'are' if len(gone) != 1 else 'is'} gone")
        return f"it has no idle unit now ({facts.used_now} of {facts.total} used)"
    if rec.kind == Recommendation.Kind.CANCEL and facts.fleet_used:
        return f"the fleet uses {facts.fleet_used} of its instances now"
    if facts.commitment_end is not None and facts.commitment_end > now and facts.committed_count:
        return (f"committed {facts.committed_count} until {facts.commitment_end:%Y-%m-%d}, it has {facts.total} instances: "
                f"the commitment no longer allows this")
    return f"recomputing its evidence from the mirror gives no {rec.get_kind_display()} for it now"


def _recomputed_figures(rec: Recommendation, recomputed) -> dict:
    """The figures as recomputed at apply time; where the money moved, the details say from what."""
    if recomputed is None or (recomputed.savings_per_month == rec.savings_per_month
                              and recomputed.details.get("lostWork") == (rec.details or {}).get("lostWork")):
        return {}
    details = dict(recomputed.details, **{k: v for k, v in (rec.details or {}).items() if k.startswith("new")})
    details["computedFigure"] = {"savingsPerMonth": rec.savings_per_month, "lostWork": (rec.details or {}).get("lostWork")}
    return {"savings_per_month": recomputed.savings_per_month, "reason": recomputed.reason, "details": details}


def _check_unchanged(cloud, rec: Recommendation) -> None:
    """EC2's reservation now, against what the recommendation saw."""
    live = cloud.reservations_by_id([rec.reservation.reservation_id])
    if not live:
        raise ApplyRefused("reservation", f"{rec.reservation.reservation_id} is no longer known to EC2")
    total, end = int(live[0].get("TotalInstanceCount") or 0), live[0].get("EndDate")
    if total != rec.seen_total or _second(end) != _second(rec.seen_end_date):
        raise ApplyRefused("reservation", f"{rec.reservation.reservation_id} changed since this was computed "
                                          f"(from {rec.seen_total} to {total} instances); reload the page")
    if rec.kind == Recommendation.Kind.MOVE:
        destination = rec.details.get("destination") or ""
        there = cloud.reservations_by_id([destination]) if destination else []
        seen = rec.details.get("destinationSeenTotal")
        if not there or there[0].get("State", "active") != "active" or int(there[0].get("TotalInstanceCount") or 0) != seen:
            now = f"{int(there[0].get('TotalInstanceCount') or 0)} instances, {there[0].get('State', 'active')}" if there else "gone"
            raise ApplyRefused("reservation", f"the destination {destination} changed since this was computed "
                                              f"(from {seen} instances to {now}); reload the page")


def _act(cloud, rec: Recommendation, reservation: CapacityReservation, offering_id, end_date, *, user, source) -> None:
    if rec.kind == Recommendation.Kind.SHRINK:
        cloud.modify_reservation(reservation.reservation_id, instance_count=rec.target_count)
        CapacityReservation.objects.filter(pk=reservation.pk).update(total_instance_count=rec.target_count)
    elif rec.kind == Recommendation.Kind.CANCEL:
        cloud.cancel_reservation(reservation.reservation_id)
        CapacityReservation.objects.filter(pk=reservation.pk).update(state=CapacityReservation.State.CANCELLED)
    elif rec.kind == Recommendation.Kind.END_DATE:
        cloud.modify_reservation(reservation.reservation_id, end_date=end_date)
        CapacityReservation.objects.filter(pk=reservation.pk).update(end_date=end_date)
    elif rec.kind == Recommendation.Kind.SELECT:
        _select(rec, user, source)
    elif rec.kind == Recommendation.Kind.SPLIT:
        count = rec.details["count"]
        new = cloud.split_reservation(reservation.reservation_id, count, client_token=_client_token(rec))
        _resize(cloud, reservation.reservation_id, -count)
        rec.details.update(newReservationId=new.get("CapacityReservationId", ""), newReservationArn=new.get("CapacityReservationArn", ""))
        Recommendation.objects.filter(pk=rec.pk).update(details=rec.details)
    elif rec.kind == Recommendation.Kind.LEND:
        _lend(cloud, rec, reservation)
    elif rec.kind == Recommendation.Kind.MOVE:
        count = rec.details["count"]
        cloud.move_reservation_instances(reservation.reservation_id, rec.details["destination"], count,
                                         client_token=_client_token(rec))
        _resize(cloud, reservation.reservation_id, -count)
        _resize(cloud, rec.details["destination"], count)
    else:
        bought = cloud.purchase_capacity_block_extension(offering_id, reservation.reservation_id)
        record_extension_paid(reservation.reservation_id, bought.get("UpfrontFee"))  # the block's price includes it


def _lend(cloud, rec: Recommendation, reservation: CapacityReservation) -> None:
    """The interruptible allocation; the mirror follows at once (the next EC2 sync confirms it, with the new
    interruptible reservation's id)."""
    count = rec.details["count"]
    answer = cloud.lend_reservation_units(reservation.reservation_id, count, client_token=_client_token(rec))
    if getattr(cloud, "keeps_reservations_in_database", False):
        return  # the simulated EC2 has changed the row already
    allocation = {"InstanceCount": count, "TargetInstanceCount": int(answer.get("TargetInstanceCount") or count),
                  "Status": answer.get("Status") or "pending", "InterruptionType": answer.get("InterruptionType") or "adhoc"}
    CapacityReservation.objects.filter(pk=reservation.pk).update(
        interruptible_allocation=allocation, available_instance_count=Greatest(F("available_instance_count") - count, 0))


def _client_token(rec: Recommendation) -> str:
    """One per recommendation: EC2 answers a retried split or move with the first one's result."""
    return f"karpweb-{rec.kind}-{rec.pk}-{rec.computed_at:%Y%m%d%H%M%S}"


def _resize(cloud, reservation_id: str, delta: int) -> None:
    """The mirror follows at once (the next EC2 sync confirms it); the simulated EC2 has changed the rows already."""
    if getattr(cloud, "keeps_reservations_in_database", False):
        return
    CapacityReservation.objects.fleet().filter(reservation_id=reservation_id).update(
        total_instance_count=Greatest(F("total_instance_count") + delta, 0),
        available_instance_count=Greatest(F("available_instance_count") + delta, 0))


def _select(rec: Recommendation, user, source) -> None:
    """The id term added to the class's terms (kept if already there), saved as the editor saves: validated,
    conflict-safe on the class's version, audited on the class."""
    node_class = _node_classes(rec).get()
    terms = list(node_class.capacity_reservation_selector_terms or [])
    if _select_term(rec) not in terms:
        terms.append(_select_term(rec))
    try:
        save_selector_terms(node_class, terms, node_class.resource_version, user=user, source=source)
    except (InvalidSelectorTerms, SelectorTermConflict) as exc:
        raise ApplyRefused("nodeClass", f"EC2NodeClass {node_class.name}: {exc}") from None


def _changes(rec: Recommendation, offering_id, end_date) -> dict:
    changes = _action_changes(rec, offering_id, end_date)
    computed = (rec.details or {}).get("computedFigure")
    if computed:  # applied at the figure recomputed from the mirror now, not the one first computed
        changes["recomputed_figure"] = ([computed["savingsPerMonth"], rec.savings_per_month] if rec.kind != Recommendation.Kind.EXTEND
                                        else [computed["lostWork"], (rec.details or {}).get("lostWork")])
    return changes


def _action_changes(rec: Recommendation, offering_id, end_date) -> dict:
    if rec.kind == Recommendation.Kind.SHRINK:
        return {"total_instance_count": [rec.seen_total, rec.target_count], "recommendation": [None, rec.reason]}
    if rec.kind == Recommendation.Kind.CANCEL:
        return {"state": ["active", "cancelled"], "recommendation": [None, rec.reason]}
    if rec.kind == Recommendation.Kind.END_DATE:
        return {"end_date": [rec.seen_end_date.isoformat() if rec.seen_end_date else None, end_date.isoformat()]}
    if rec.kind == Recommendation.Kind.SELECT:
        return {"selected_by": [None, rec.details.get("nodeClass")], "recommendation": [None, rec.reason]}
    if rec.kind == Recommendation.Kind.SPLIT:
        return {"total_instance_count": [rec.seen_total, rec.seen_total - rec.details["count"]],
                "split_off": [None, f"{rec.details.get('newReservationId')} ({rec.details['count']} instances)"],
                "recommendation": [None, rec.reason]}
    if rec.kind == Recommendation.Kind.LEND:
        return {"lent_count": [0, rec.details["count"]], "recommendation": [None, rec.reason]}
    if rec.kind == Recommendation.Kind.MOVE:
        return {"total_instance_count": [rec.seen_total, rec.seen_total - rec.details["count"]],
                "moved_to": [None, f"{rec.details['destination']} ({rec.details['count']} instances)"],
                "recommendation": [None, rec.reason]}
    return {"capacity_block_extension": [None, offering_id], "recommendation": [None, rec.reason]}


def _second(moment):
    return moment.replace(microsecond=0) if moment else None


def _node_classes(rec: Recommendation):
    """The EC2NodeClass a *select* names, in the cluster it names (two clusters may each have one of that
    name); in the scope's cluster, or the only one, when it names none."""
    found = EC2NodeClass.objects.filter(name=rec.details.get("nodeClass") or "")
    cluster = rec.details.get("cluster")
    return found.filter(cluster__name=cluster) if cluster and several_clusters() else found
