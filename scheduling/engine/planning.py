"""From a World to a provisioning plan: EC2NodeClass reservations, catalogs, NodePool templates,
the ledger, the scheduler run and the finalised node claims.

`plan(world)` is what the provisioning task and `simulate` run. The builders are separate so
that consolidation (which reschedules the pods of candidate nodes in fallback mode) can reuse
them with other nodes and pods.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .catalog import Catalog
from .gcpause import cyclic_gc_paused
from .cluster import NodePool, Pod, World
from .instancetypes import reserved_offering
from .labels import INITIALIZED, INSTANCE_LABELS, REGISTERED
from .launch import FinalClaim, finalize
from .ledger import ReservationLedger, ReservedMode
from .nodeclaim import ExistingNode, PoolTemplate, sum_requests
from .overlays import OverlayStatus, overlay_catalogs
from .quantities import ResourceList
from .requirements import Requirement
from .scheduler import PoolLimits, Results, Scheduler
from .selectors import NodeClassReservations, resolve_node_class, selects_once_active
from .static import dynamic_templates, static_claims
from .taints import untolerated


@dataclass(slots=True)
class Plan:
    world: World
    node_classes: dict[str, NodeClassReservations]
    templates: list[PoolTemplate]
    results: Results
    claims: list[FinalClaim] = field(default_factory=list)
    overlays: list[OverlayStatus] = field(default_factory=list)  # each NodeOverlay's status


def resolve_node_classes(world: World) -> dict[str, NodeClassReservations]:
    return {
        nc.name: resolve_node_class(nc.name, nc.selector_terms, world.reservations, world.now,
                                    world.reservation_groups, enabled=world.reserved_capacity)
        for nc in world.node_classes
    }


def instance_keys(world: World) -> frozenset[str]:
    """Labels instance types define: the well-known ones and any the world's types carry."""
    keys = set(INSTANCE_LABELS)
    for it in world.instance_types:
        keys.update(it.labels)
    return frozenset(keys)


def build_catalogs(world: World, resolved: dict[str, NodeClassReservations]) -> dict[str, Catalog]:
    """One catalog per EC2NodeClass: its kubelet overhead and the reservations it selects."""
    keys = instance_keys(world)
    by_name = {it.name: it for it in world.instance_types}
    catalogs = {}
    for nc in world.node_classes:
        reserved: dict[str, list] = {}
        for reservation in resolved[nc.name].reservations + upcoming_for(world, nc):
            it = by_name.get(reservation.instance_type)
            if it is not None:
                reserved.setdefault(it.name, []).append(reserved_offering(it, reservation, world.now))
        types = [it.for_node_class(nc.kubelet, nc.shape, reserved.get(it.name, ())) for it in world.instance_types]
        catalogs[nc.name] = Catalog([it for it in types if it is not None], keys)
    return catalogs


def upcoming_for(world: World, nc) -> list:
    """The reservations that have not started (scheduled, assessing, ...) that the class's terms will select
    once they are active: offerings that are never available, so that a pod's reason says when one starts
    (the class's status lists only active ones, as upstream's)."""
    if not world.reserved_capacity:
        return []
    return [r for r in world.reservations
            if r.is_upcoming(world.now) and selects_once_active(nc.selector_terms, r, world.reservation_groups)]


def build_templates(world: World, catalogs: dict[str, Catalog],
                    resolved: dict[str, NodeClassReservations]) -> tuple[list[PoolTemplate], list[OverlayStatus]]:
    """The NodePools' templates, each with its class's catalog as the NodeOverlays leave it for the
    pool, and each overlay's status."""
    templates = []
    not_ready = {nc.name: nc.not_ready for nc in world.node_classes if nc.not_ready}
    pool_catalogs, statuses = overlay_catalogs(world.node_pools, catalogs, world.node_overlays)
    for pool in world.node_pools:
        problem = _pool_problem(pool, resolved) or (
            f"EC2NodeClass {pool.node_class} is not ready ({not_ready[pool.node_class]})" if pool.node_class in not_ready else None)
        template = PoolTemplate(pool, pool_catalogs.get(pool.name), ResourceList(), problem)
        template.daemon_overhead = daemon_overhead(world, template)
        templates.append(template)
    return templates, statuses


def _pool_problem(pool: NodePool, resolved: dict[str, NodeClassReservations]) -> str | None:
    status = resolved.get(pool.node_class)
    if status is None:
        return f"EC2NodeClass {pool.node_class} not found"
    if not status.valid:
        return f"EC2NodeClass {pool.node_class} has invalid capacityReservationSelectorTerms"
    return None


def daemon_overhead(world: World, template: PoolTemplate) -> ResourceList:
    """Requests of the DaemonSets that would run on this NodePool's nodes (upstream: those that
    tolerate its taints and whose node selection is compatible with its requirements). A new node
    will carry `karpenter.sh/registered` and `karpenter.sh/initialized`, so a DaemonSet selecting
    them counts (upstream adds both to the NodeClaimTemplate's requirements for this check only:
    they never reach a claim)."""
    if template.catalog is None:
        return ResourceList()
    requirements = template.requirements.intersect([Requirement.single(REGISTERED, "true"),
                                                    Requirement.single(INITIALIZED, "true")])
    pods = [ds.pod for ds in world.daemon_sets
            if untolerated(template.taints, ds.pod.tolerations) is None
            and any(requirements.compatible(alt, template.catalog.well_known) is None
                    for alt in ds.pod.alternatives)]
    return sum_requests(pods)


def build_existing(world: World, pods: list[Pod] | None = None) -> list[ExistingNode]:
    """Nodes that can take pods (not being deleted), with the pods bound to them."""
    bound: dict[str, list[Pod]] = {}
    for pod in world.pods if pods is None else pods:
        if pod.node_name:
            bound.setdefault(pod.node_name, []).append(pod)
    return [ExistingNode(node, bound.get(node.name, ()), seq)
            for seq, node in enumerate(world.nodes) if not node.deleting]


def displaced_by_deletion(world: World) -> list[Pod]:
    """The pods of nodes being deleted that need a place again: upstream's provisioner schedules
    them with the pending pods (StatefulSet pods too, while they terminate), so their replacement
    capacity is planned at once rather than after they are evicted."""
    deleting = {node.name for node in world.nodes if node.deleting}
    if not deleting:
        return []
    return [pod for pod in world.pods if pod.node_name in deleting and pod.reschedulable]


def build_ledger(templates: list[PoolTemplate]) -> ReservationLedger:
    offerings = (o for t in templates if t.catalog is not None and t.problem is None
                 for it in t.catalog.instance_types for o in it.offerings if o.reserved)
    return ReservationLedger.from_offerings(offerings)


def build_limits(world: World, templates: list[PoolTemplate]) -> dict[str, PoolLimits]:
    """NodePool limits against the capacity of the NodePool's existing nodes."""
    limits = {}
    for template in templates:
        if template.pool.limits is None:
            continue
        nodes = [n for n in world.nodes if n.nodepool == template.name]
        used = sum_capacity(nodes)
        used["nodes"] = len(nodes)
        limits[template.name] = PoolLimits(template.pool.limits, used)
    return limits


def sum_capacity(nodes) -> ResourceList:
    total = ResourceList()
    for node in nodes:
        total = total.add(node.capacity)
    return total


def plan(world: World, mode: ReservedMode = ReservedMode.STRICT) -> Plan:
    with cyclic_gc_paused():  # a plan makes no cycles: the collector would only walk the world
        resolved = resolve_node_classes(world)
        catalogs = build_catalogs(world, resolved)
        templates, overlays = build_templates(world, catalogs, resolved)
        dynamic = dynamic_templates(templates)  # pending pods never get claims from a static NodePool
        scheduler = Scheduler(dynamic, build_existing(world), build_ledger(templates), mode,
                              build_limits(world, dynamic), namespaces=world.namespaces)
        results = scheduler.solve(world.pending_pods() + displaced_by_deletion(world))
        # After the pods: a static pool's claims take only the reserved units the pods left free.
        static = static_claims(world, templates, results.ledger, scheduler.namer.next, scheduler.next_seq)
        claims = [finalize(claim) for claim in results.claims + static]
        return Plan(world, resolved, templates, results, claims, overlays)
