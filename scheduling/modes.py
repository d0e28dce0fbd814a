"""observe (record decisions as recommendations) or control (act): global, overridable per NodePool,
and never control while Karpenter controls the cluster (two controllers would launch twice for one
NodeClaim and consolidate against each other)."""

from fleet import connection
from fleet.connection import is_kubernetes
from scheduling.engine.coexistence import ABSENT, DECLARED_PRESENT, PRESENT
from scheduling.models import ControllerGuard, Mode


def configured_mode() -> str:
    """KARPWEB_MODE as set (or the scope's cluster's own mode), before the Karpenter guard."""
    return connection.mode()


def global_mode() -> str:
    return _guarded(configured_mode())


def effective_mode(node_pool, refusal: str | None = None) -> str:
    """The pool's mode, else the global one; observe while control is refused. `refusal`: a
    control_refusal() the caller already has (a list of pools asks once)."""
    return _guarded((node_pool.mode if node_pool is not None and node_pool.mode else None) or configured_mode(), refusal)


def _guarded(mode: str, refusal: str | None = None) -> str:
    # Only a would-be control mode reads the guard: observe costs no query.
    if mode != Mode.CONTROL:
        return mode
    return Mode.OBSERVE if (control_refusal() if refusal is None else refusal) else mode


def control_refusal() -> str:
    """Why karpweb may not act on this cluster now, in words; "" when it may."""
    if connection.karpenter() == ABSENT:
        return ""
    if connection.karpenter() == PRESENT:
        return DECLARED_PRESENT
    if not is_kubernetes():
        return ""  # the simulated world runs no Karpenter
    guard = ControllerGuard.found()
    if guard is None or guard.checked_at is None:
        return "karpweb has not yet checked whether Karpenter runs in this cluster (the next Kubernetes sync does)"
    if guard.karpenter_live:
        return guard.reason
    if guard.last_live_at and not (guard.control_allowed_at and guard.control_allowed_at > guard.last_live_at):
        return (f"Karpenter ran in this cluster until {guard.last_live_at:%Y-%m-%d %H:%M:%S} UTC and is not running now "
                f"({guard.reason}); karpweb stays in observe until an operator allows control")
    return ""


def may_allow_control() -> bool:
    """An operator may let karpweb control when Karpenter was seen before but is not running now."""
    if connection.karpenter() != "auto" or not is_kubernetes():
        return False
    guard = ControllerGuard.found()
    return guard is not None and guard.checked_at is not None and not guard.karpenter_live and bool(control_refusal())


def controller_status() -> dict:
    """What the pages say about who controls the cluster (no query on the simulated world)."""
    refusal = control_refusal()
    return {"control_refusal": refusal, "configured_mode": configured_mode(),
            "may_allow_control": bool(refusal) and may_allow_control()}


MODES = [choice for choice, _label in Mode.choices]
