"""Applying a recommendation (control mode, an operator): ModifyCapacityReservation (shrink, end
date), CancelCapacityReservation, PurchaseCapacityBlockExtension, CreateCapacityReservationBySplitting
(split: the new reservation's id is kept in the recommendation's details, and the page gives the AWS
RAM command that shares it; karpweb creates no share), MoveCapacityReservationInstances (move), and for select the EC2NodeClass's
capacityReservationSelectorTerms gaining an id term (through the selector-term editor's save). Each apply is claimed with a
conditional UPDATE (two clicks or two workers act once), refused when the recommendation or the
reservation changed since the page was read, and recorded in the audit log. Observe mode applies
nothing: it shows the AWS CLI command that would."""

from __future__ import annotations

import json
import shlex

from django.db.models import F
from django.db.models.functions import Greatest
from django.utils import timezone

from fleet.access import check_may_change_reservation
from fleet.scope import several_clusters
from reservations.models import CapacityReservation, EC2NodeClass, Recommendation
from reservations.selector_terms import InvalidSelectorTerms, SelectorTermConflict, save_selector_terms
from scheduling.adapters.ec2.interface import CloudAPIError
from scheduling.audit import record_change
from scheduling.models import AuditEntry, Mode
from scheduling.modes import control_refusal, global_mode

APPLICABLE = (Recommendation.Kind.SHRINK, Recommendation.Kind.CANCEL, Recommendation.Kind.EXTEND,
              Recommendation.Kind.END_DATE, Recommendation.Kind.SELECT, Recommendation.Kind.SPLIT, Recommendation.Kind.MOVE)


class ApplyRefused(Exception):
    """Why this apply does not happen, naming the field where there is one (forms and API show it)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message

    @property
    def status(self) -> int:
        """409 when the world changed or karpweb may not act; 400 for what the request itself got wrong."""
        return 400 if self.field in ("offering", "end_date", "kind") else 409


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
          end_date=None) -> Recommendation:
    """Apply one recommendation once. Raises ApplyRefused with the field and the reason."""
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
    # The claim: only the first of two clicks (or workers) moves it from open to applying.
    claimed = Recommendation.objects.filter(pk=rec.pk, state=Recommendation.State.OPEN, computed_at=seen_computed_at) \
        .update(state=Recommendation.State.APPLYING)
    if not claimed:
        rec.refresh_from_db()
        if rec.state in (Recommendation.State.APPLIED, Recommendation.State.APPLYING):
            return rec  # already applied (or being applied) by the first click
        raise ApplyRefused("computed_at", "the recommendation changed since the page was read; reload it")
    reservation = rec.reservation
    try:
        _check_unchanged(cloud, rec)
        _act(cloud, rec, reservation, offering_id, end_date, user=user, source=source)
    except (ApplyRefused, CloudAPIError) as exc:
        message = exc.message if isinstance(exc, ApplyRefused) else f"{exc.code}: {exc.message}"
        Recommendation.objects.filter(pk=rec.pk).update(state=Recommendation.State.FAILED, error=message)
        if isinstance(exc, ApplyRefused):
            raise
        raise ApplyRefused("reservation", f"EC2 refused: {message}") from None
    now = timezone.now()
    Recommendation.objects.filter(pk=rec.pk).update(state=Recommendation.State.APPLIED, applied_at=now,
                                                    applied_by=user.get_username() if user else "")
    record_change(user=user, source=source, obj=reservation, action=AuditEntry.Action.CHANGE,
                  changes=_changes(rec, offering_id, end_date))
    destination = CapacityReservation.objects.fleet().filter(reservation_id=rec.details.get("destination") or "").first()
    if rec.kind == Recommendation.Kind.MOVE and destination is not None:
        seen = rec.details.get("destinationSeenTotal")
        record_change(user=user, source=source, obj=destination, action=AuditEntry.Action.CHANGE,
                      changes={"total_instance_count": [seen, seen + rec.details["count"]],
                               "moved_from": [None, f"{reservation.reservation_id} ({rec.details['count']} instances)"]})
    rec.refresh_from_db()
    return rec


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
    elif rec.kind == Recommendation.Kind.MOVE:
        count = rec.details["count"]
        cloud.move_reservation_instances(reservation.reservation_id, rec.details["destination"], count,
                                         client_token=_client_token(rec))
        _resize(cloud, reservation.reservation_id, -count)
        _resize(cloud, rec.details["destination"], count)
    else:
        cloud.purchase_capacity_block_extension(offering_id, reservation.reservation_id)


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
