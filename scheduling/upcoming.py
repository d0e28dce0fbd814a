"""Reservations that have not started yet (future-dated ODCRs, purchased capacity blocks), and who will
use each from its start: the NodePools whose EC2NodeClass will select it and whose requirements allow its
type and zone, and the pods (pending, or on paid nodes) it could hold then, as the pod pages reason
(scheduling/pod_placement.py, the engine's `why_not_reserved`). The overview and the reservation's page
show it; karpweb plans with the reservation only from its start (scheduling/engine/reservations.py)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from django.db.models import Q

from reservations.models import CapacityReservation
from scheduling.engine.explain import COULD_USE, ReservedUnit
from scheduling.engine.labels import ON_DEMAND, SPOT
from scheduling.engine.requirements import Requirements
from scheduling.models import NodePool, Pod
from scheduling.pod_placement import (NODEPOOL_LABEL, pool_requirements, reserved_units, upcoming_reservations,
                                      why_not_reserved_in)
from scheduling.nodepool_health import node_class_name

# The pods looked at per page view: enough for any overview, bounded for a cluster of 50,000.
MAX_PODS = 2000


@dataclass
class UpcomingUse:
    reservation: CapacityReservation
    seconds_until_start: int | None
    pools: list[NodePool] = field(default_factory=list)
    pending_pods: int = 0
    paid_pods: int = 0  # on on-demand or spot nodes: consolidation moves them in from the start, within budgets

    @property
    def pods(self) -> int:
        return self.pending_pods + self.paid_pods


def upcoming_uses(now, reservations: list[CapacityReservation] | None = None) -> list[UpcomingUse]:
    """For each reservation that has not started (or these), who will use it from its start."""
    reservations = upcoming_reservations(now) if reservations is None else reservations
    if not reservations:
        return []
    units = reserved_units(now)
    by_id = {u.reservation_id: u for u in units}
    pools = list(NodePool.objects.select_related("node_class").order_by("-weight", "name"))
    uses = []
    for r in reservations:
        unit = by_id.get(r.reservation_id)
        use = UpcomingUse(r, r.seconds_until_start(now))
        use.pools = [p for p in pools if unit is not None and pool_would_use(p, unit)]
        uses.append(use)
    _count_pods(uses, units, pools)
    return uses


def pool_would_use(pool: NodePool, unit: ReservedUnit) -> bool:
    """The pool's EC2NodeClass will select it, and the pool's requirements (capacity type included) allow a node of it."""
    if node_class_name(pool) not in unit.selected_by:
        return False
    labels = {**unit.labels, **(pool.labels or {}), NODEPOOL_LABEL: pool.name}
    requirements = pool_requirements(pool)
    return Requirements([r for r in requirements if r.key in labels]).first_mismatch(labels) is None


def _count_pods(uses: list[UpcomingUse], units: list[ReservedUnit], pools: list[NodePool]) -> None:
    """Per reservation, the pods not in reserved capacity (pending, or on paid nodes) that a node of it would
    hold through one of the pools that will use it: the same reasoning as the pod pages, on it alone as if started."""
    by_id = {u.reservation_id: dataclasses.replace(u, not_started="") for u in units if u.not_started}
    paid = Q(node__capacity_type__in=(ON_DEMAND, SPOT))
    pending = Q(node__isnull=True, node_name="", phase="Pending")
    pods = list(Pod.objects.filter(paid | pending).exclude(owner_kind="DaemonSet").select_related("node__node_pool").order_by("namespace", "name")[:MAX_PODS])
    for use in uses:
        unit = by_id.get(use.reservation.reservation_id)
        if unit is None or not use.pools:
            continue
        for pod in pods:
            candidates = [pod.node.node_pool] if pod.node_id else use.pools
            if any(pool in use.pools and why_not_reserved_in(pod, pool, [unit]).blocker == COULD_USE for pool in candidates):
                if pod.node_id:
                    use.paid_pods += 1
                else:
                    use.pending_pods += 1
