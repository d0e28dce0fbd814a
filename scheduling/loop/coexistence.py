"""Beside a running Karpenter: every Kubernetes sync asks the cluster whether Karpenter is the active
controller and keeps the answer in the ControllerGuard row that scheduling.modes reads. A change is
a decision in words and a log line; Karpenter going away never switches karpweb to control by itself
(an operator allows it, audited), so a flapping signal cannot make two controllers."""

import logging

from django.conf import settings
from django.db import transaction

from fleet import connection
from fleet.scope import cluster_scope
from scheduling.audit import diff, record_change
from scheduling.engine.coexistence import PRESENT, assess
from scheduling.loop.recording import PendingDecision, record
from scheduling.models import AuditEntry, ControllerGuard, Decision, Mode
from scheduling.modes import control_refusal, global_mode, may_allow_control

log = logging.getLogger(__name__)
SUBJECT = "Karpenter"


class ControlNotAllowed(Exception):
    """Control cannot be allowed now; the message says why."""


def check_karpenter(cluster, now) -> dict:
    presence = assess(cluster.karpenter_signals(settings.KARPWEB_KARPENTER_LEASE_NAME), now,
                      connection.karpenter())
    with transaction.atomic():
        ControllerGuard.current()
        guard = ControllerGuard.found(for_update=True)
        first, was_live = guard.checked_at is None, guard.karpenter_live
        guard.karpenter_live, guard.reason, guard.checked_at = presence.live, presence.reason, now
        if presence.live:
            guard.last_live_at = now
        guard.save()
    if first or was_live != presence.live:
        refusal = control_refusal()
        words = presence.reason + (f". Control is refused: {refusal}" if refusal and refusal != presence.reason else "")
        log.warning("Karpenter check: %s", words)
        record([PendingDecision(kind=Decision.Kind.STATUS, subject=SUBJECT, reason=words, mode=global_mode(),
                                outcome=Decision.Outcome.ACTED)], now)
    return {"karpenter_live": int(presence.live)}


def allow_control(user, source: str, now) -> ControllerGuard:
    """An operator lets karpweb control again after Karpenter went away: audited, and refused while
    Karpenter runs or before karpweb has looked."""
    with transaction.atomic():
        guard = ControllerGuard.found(for_update=True)
        if not may_allow_control():
            raise ControlNotAllowed(control_refusal() or "karpweb may already control this cluster")
        changes = diff({"control_allowed_at": guard.control_allowed_at, "control_allowed_by": guard.control_allowed_by},
                       {"control_allowed_at": now, "control_allowed_by": user.get_username()})
        guard.control_allowed_at, guard.control_allowed_by = now, user.get_username()
        guard.save(update_fields=["control_allowed_at", "control_allowed_by"])
        record_change(user=user, source=source, obj=guard, action=AuditEntry.Action.CHANGE, changes=changes)
    log.warning("%s allowed karpweb to control the cluster (Karpenter not running: %s)", user.get_username(), guard.reason)
    record([PendingDecision(kind=Decision.Kind.OVERRIDE, subject=SUBJECT, mode=global_mode(),
                            outcome=Decision.Outcome.ACTED,
                            reason=f"{user.get_username()} allowed karpweb to control the cluster: {guard.reason}")], now)
    return guard


def refuse_loosening(cluster, *, karpenter: str | None, mode: str | None) -> None:
    """Raises ControlNotAllowed when a change of `cluster`'s row would let karpweb control while
    Karpenter runs there (its Lease live at the last check): mode control, or karpenter absent or
    auto. Changes toward observe or present are always taken. Every path that writes the row asks."""
    loosens = (mode == Mode.CONTROL and mode != cluster.mode) or (
        karpenter is not None and karpenter != PRESENT and karpenter != cluster.karpenter)
    if not loosens:
        return
    with cluster_scope(cluster):
        guard = ControllerGuard.found()
    if guard is not None and guard.karpenter_live:
        raise ControlNotAllowed(f"Karpenter runs in cluster {cluster.name} ({guard.reason}); karpenter and mode stay "
                                "as they are while it does")
