"""Why a pod could not be placed, in an operator's words.

Explanations are only built for pods that failed, so they can afford to look again at every
instance type: which ones match the constraints, which have room, which offerings are available.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .catalog import Catalog
from .cluster import Pod
from .labels import ARCH, CAPACITY_TYPE, INSTANCE_TYPE, ON_DEMAND, OS, RESERVED, SPOT, ZONE
from .nodeclaim import NO_INSTANCE_TYPE, PoolTemplate, Rejection
from .quantities import CPU, PODS, ResourceList
from .requirements import IN, Requirement, Requirements
from .scheduler import Failure

_SHORT_NAMES = {ZONE: "zone", CAPACITY_TYPE: "capacity-type", INSTANCE_TYPE: "instance-type", ARCH: "arch", OS: "os"}
_MAX_REASONS = 3


# Why nothing can launch when the world knows no instance type at all: said in plain words, not as the
# requirements that "rule out every type" of an empty list.
EMPTY_CATALOGUE = ("no instance type is known: the instance-type catalogue is empty (EC2 has reported none: the "
                   "EC2 sync has not run or failed, or karpweb runs with a simulated EC2 that holds no catalogue)")


def failure_reason(failure: Failure, pool_count: int, catalogue_empty: bool = False,
                   static_pools: tuple[str, ...] = ()) -> str:
    """Why a pod got no place; `pool_count` counts the NodePools that launch for pods, `static_pools`
    names those that launch only for their replicas."""
    pod = failure.pod
    if pod.volume_problem:
        return pod.volume_problem
    if not pod.alternatives and pod.volume_terms is not None and pod.strict_alternatives:
        return ("no node can satisfy both its volumes' topology (" + " or ".join(map(str, pod.volume_terms))
                + ") and its node selector or affinity")
    if not pod.alternatives:
        return "its required node affinity has no term that can match a node"
    rejections = failure.rejections
    if failure.deferred:
        rejections = [(t, r) for t, r in rejections if r.reserved_held]
    if not rejections:
        if static_pools and not failure.deferred:
            return (f"no existing node has room for it and no NodePool launches for pods: static NodePool(s) "
                    f"{', '.join(static_pools)} launch only for their spec.replicas")
        return "no existing node has room for it and there is no NodePool to launch one"
    parts = [(template.name, EMPTY_CATALOGUE if catalogue_empty and rejection.kind == NO_INSTANCE_TYPE
              else pool_reason(template, pod, rejection)) for template, rejection in rejections]
    if pool_count == 1 and len(parts) == 1:
        return parts[0][1]
    return "; ".join(f"nodepool {name}: {reason}" for name, reason in parts)


def pool_reason(template: PoolTemplate, pod: Pod, rejection: Rejection) -> str:
    if rejection.kind != NO_INSTANCE_TYPE or template.catalog is None:
        return rejection.reason
    requests = template.daemon_overhead.add(pod.requests)
    for alternative in pod.alternatives:
        if template.requirements.compatible(alternative, template.catalog.well_known) is None:
            requirements = template.requirements.intersect(alternative)
            return no_instance_type(template, requirements, alternative, requests)
    return rejection.reason


def no_instance_type(template: PoolTemplate, requirements: Requirements, pod_requirements: Requirements,
                     requests: ResourceList) -> str:
    catalog = template.catalog
    wanted = describe_requests(requests, template.daemon_overhead)
    pod_constraints = describe_constraints(pod_requirements, catalog)
    constraints = pod_constraints or describe_constraints(template.requirements, catalog)
    matching = [(it, catalog.compatible_offerings(it, requirements)) for it in catalog.matching(requirements)]
    matching = [(it, offers) for it, offers in matching if offers]
    if not matching:
        return _nothing_matches(template, requirements, pod_requirements, pod_constraints, constraints)
    fitting = [(it, offers) for it, offers in matching if requests.fits(it.allocatable)]
    if not fitting:
        missing = [n for n in requests if requests[n] > 0 and not any(it.allocatable.get(n) for it in catalog.instance_types)]
        if missing:
            return f"no instance type offers {', '.join(sorted(missing))} (EC2NodeClass {template.pool.node_class})"
        if constraints and any(requests.fits(it.allocatable) for it in catalog.instance_types):
            blockers = _blockers(catalog, template.requirements, pod_requirements, requests)
            return f"no instance type satisfies {wanted} with {constraints}" + (f": {blockers}" if blockers else "")
        return f"no instance type has room for {wanted}{_largest(matching, requests)}"
    reasons = sorted({o.unavailable_reason if o.reserved else f"{it.name} {o.unavailable_reason}"
                      for it, offers in fitting for o in offers if not o.available})
    if reasons:
        extra = f" (and {len(reasons) - _MAX_REASONS} more)" if len(reasons) > _MAX_REASONS else ""
        return "; ".join(reasons[:_MAX_REASONS]) + extra
    return f"no instance type satisfies {wanted}" + (f" with {constraints}" if constraints else "")


def _nothing_matches(template: PoolTemplate, requirements: Requirements, pod_requirements: Requirements,
                     pod_constraints: str, constraints: str) -> str:
    capacity_type = requirements.get(CAPACITY_TYPE)
    reserved_only = capacity_type is not None and not capacity_type.has(ON_DEMAND) and not capacity_type.has(SPOT)
    if reserved_only and capacity_type.has(RESERVED):
        return f"no reservation selected by EC2NodeClass {template.pool.node_class} matches" + (
            f" {pod_constraints}" if pod_constraints else " this NodePool")
    blockers = _blockers(template.catalog, template.requirements, pod_requirements)
    if blockers:
        whose = "the NodePool's requirements" if "the pod's" not in blockers else "the NodePool and the pod together"
        return f"no instance type matches {whose}: {blockers}"
    return f"no instance type offers {constraints}" if constraints else "no instance type matches this NodePool"


def _blockers(catalog: Catalog, pool: Requirements, pod: Requirements, requests: ResourceList | None = None) -> str:
    """The requirements that empty the candidate list, named with where they come from: each one
    without which some type would do; failing that, the one at which the list ran empty. Empty when
    the pod's own constraints alone explain it (the caller names those already)."""
    named = [("NodePool", r) for r in pool if r.key in catalog.relevant_keys]
    named += [("pod", r) for r in pod if r.key in catalog.relevant_keys and pool.get(r.key) != r]

    def count(reqs: list) -> int:
        combined = Requirements(reqs)
        return sum(1 for it in catalog.matching(combined)
                   if catalog.compatible_offerings(it, combined) and (requests is None or requests.fits(it.allocatable)))

    single = []
    for index, (origin, req) in enumerate(named):
        left = count([r for i, (_, r) in enumerate(named) if i != index])
        if left:
            single.append(f"without the {origin}'s {_short(req)}, {left} instance type(s) would")
    if single:
        text = "; ".join(single[:_MAX_REASONS])
        return text if "the NodePool's" in text else ""
    for index in range(len(named)):
        if not count([r for _, r in named[:index + 1]]):
            origin, req = named[index]
            return f"the {origin}'s {_short(req)} rules out every type the requirements before it leave"
    return ""


def _short(req) -> str:
    return str(req).replace(req.key, _SHORT_NAMES.get(req.key, req.key), 1)


def _largest(matching, requests: ResourceList) -> str:
    names = [n for n in requests if n != PODS and requests[n]] or [CPU]
    best = max((it for it, _ in matching), key=lambda it: tuple(it.allocatable.get(n, 0) for n in names))
    return f" (largest: {best.name} with {best.allocatable.format(names)} allocatable)"


def describe_requests(requests: ResourceList, overhead: ResourceList) -> str:
    shown = ResourceList({n: a for n, a in requests.items() if n != PODS})
    text = shown.format() or "its requests"
    extra = ResourceList({n: a for n, a in overhead.items() if n != PODS})
    if extra.format():
        text += f" (including DaemonSet overhead {extra.format()})"
    return text


def describe_constraints(requirements: Requirements, catalog: Catalog) -> str:
    """The requirements that pick instance types and offerings: `zone us-east-1c`, ..."""
    parts = []
    for req in sorted(requirements, key=lambda r: r.key):
        if req.key not in catalog.relevant_keys:
            continue
        name = _SHORT_NAMES.get(req.key, req.key)
        if req.operator == IN and len(req.values) == 1:
            parts.append(f"{name} {next(iter(req.values))}")
        else:
            parts.append(str(req).replace(req.key, name, 1))
    return ", ".join(parts)


# --- "Why not reserved?" for one pod: where it could run in reserved capacity, or what stands in the way ---

COULD_USE, NODEPOOL_REQUIREMENT, CLASS_SELECTOR, POD_CONSTRAINTS, NO_FREE_UNIT, NO_NODEPOOL = (
    "could-use", "nodepool-requirement", "class-selector", "pod-constraints", "no-free-unit", "no-nodepool")
# Nothing holds it now, but a reservation that has not started (scheduled, assessing, ...) would from its start.
NOT_STARTED = "not-started"


@dataclass(frozen=True)
class ReservedUnit:
    """One usable reservation as a place for the pod: the labels a node in it carries, its room, its free units."""

    reservation_id: str
    instance_type: str
    zone: str
    labels: Mapping[str, str]
    allocatable: ResourceList
    free: int
    total: int
    selected_by: tuple[str, ...]  # the EC2NodeClasses whose status names it
    # Not started yet: why not now ("reservation cr-1 is scheduled: it starts at ..."); empty when usable now.
    # Its selected_by then names the classes whose terms will select it once it is active.
    not_started: str = ""

    def __str__(self) -> str:
        return f"{self.reservation_id} ({self.instance_type} in {self.zone})"


@dataclass(frozen=True)
class ReservedAnswer:
    blocker: str
    text: str
    reservations: tuple[str, ...] = ()  # the ones named


def _listed(units: Sequence[ReservedUnit]) -> str:
    shown = ", ".join(str(u) for u in units[:_MAX_REASONS])
    return shown + (f" and {len(units) - _MAX_REASONS} more" if len(units) > _MAX_REASONS else "")


def _mismatch(requirements: Requirements, labels: Mapping[str, str]) -> Requirement | None:
    """The first requirement a node with these labels breaks, among the keys such a node is known to carry."""
    return Requirements([r for r in requirements if r.key in labels]).first_mismatch(labels)


def why_not_reserved(alternatives: Sequence[Requirements], requests: ResourceList, pool: str | None,
                     pool_requirements: Requirements, node_class: str | None,
                     units: Sequence[ReservedUnit]) -> ReservedAnswer:
    """What keeps the pod out of reserved capacity now (see `_why_not_reserved_now`, on the units usable now);
    when a reservation that has not started would hold it, NOT_STARTED with both: what stands in the way now,
    and when that one starts."""
    usable = [u for u in units if not u.not_started]
    answer = _why_not_reserved_now(alternatives, requests, pool, pool_requirements, node_class, usable)
    upcoming = [u for u in units if u.not_started]
    if answer.blocker == COULD_USE or not upcoming:
        return answer
    later = _why_not_reserved_now(alternatives, requests, pool, pool_requirements, node_class, upcoming)
    if later.blocker != COULD_USE:
        return answer
    starting = [u for u in upcoming if u.reservation_id in later.reservations]
    return ReservedAnswer(NOT_STARTED, f"{answer.text}; {_listed(starting)} could hold it once it starts "
                                       f"({starting[0].not_started})", later.reservations)


def _why_not_reserved_now(alternatives: Sequence[Requirements], requests: ResourceList, pool: str | None,
                          pool_requirements: Requirements, node_class: str | None,
                          units: Sequence[ReservedUnit]) -> ReservedAnswer:
    """The first thing, in the order Karpenter meets them, that keeps this pod out of reserved capacity through
    NodePool `pool`: the pool's capacity-type requirement, its class's selector terms, the pool's other
    requirements, the pod's own constraints (node selector, affinity, size), a free unit. COULD_USE when a
    reservation would hold it now."""
    if pool is None:
        return ReservedAnswer(NO_NODEPOOL, "it is on a node no NodePool owns, so no NodePool could place it in a reservation")
    capacity = pool_requirements.get(CAPACITY_TYPE)
    if capacity is not None and not capacity.has(RESERVED):
        return ReservedAnswer(NODEPOOL_REQUIREMENT, f"NodePool {pool}'s requirement {_short(capacity)} leaves out reserved capacity")
    pod_capacity = [alt.get(CAPACITY_TYPE) for alt in alternatives]
    if alternatives and all(c is not None and not c.has(RESERVED) for c in pod_capacity):
        return ReservedAnswer(POD_CONSTRAINTS, f"the pod's own {_short(pod_capacity[0])} leaves out reserved capacity")
    selected = [u for u in units if node_class and node_class in u.selected_by]
    if not selected:
        return ReservedAnswer(CLASS_SELECTOR, f"EC2NodeClass {node_class or '(none)'} of NodePool {pool} selects no usable reservation "
                                              "(its capacityReservationSelectorTerms)")
    allowed = [u for u in selected if _mismatch(pool_requirements, u.labels) is None]
    if not allowed:
        first = selected[0]
        return ReservedAnswer(NODEPOOL_REQUIREMENT, f"NodePool {pool}'s requirement {_short(_mismatch(pool_requirements, first.labels))} "
                                                    f"rules out {_listed(selected)}, the reservations its EC2NodeClass {node_class} selects",
                              tuple(u.reservation_id for u in selected))
    matching = [u for u in allowed if not alternatives or any(_mismatch(alt, u.labels) is None for alt in alternatives)]
    if not matching:
        first = allowed[0]
        reasons = [_short(_mismatch(alt, first.labels)) for alt in alternatives if _mismatch(alt, first.labels) is not None]
        return ReservedAnswer(POD_CONSTRAINTS, f"the pod's own constraints ({'; or '.join(reasons)}) rule out {_listed(allowed)}",
                              tuple(u.reservation_id for u in allowed))
    fitting = [u for u in matching if requests.fits(u.allocatable)]
    if not fitting:
        wanted = ResourceList({n: a for n, a in requests.items() if n != PODS}).format() or "its requests"
        return ReservedAnswer(POD_CONSTRAINTS, f"the pod's requests ({wanted}) are more than a node of {_listed(matching)} offers",
                              tuple(u.reservation_id for u in matching))
    free = [u for u in fitting if u.free > 0]
    if not free:
        return ReservedAnswer(NO_FREE_UNIT, "no free unit: " + ", ".join(f"{u} has all {u.total} in use" for u in fitting[:_MAX_REASONS]),
                              tuple(u.reservation_id for u in fitting))
    return ReservedAnswer(COULD_USE, f"{_listed(free)} ha{'s' if len(free) == 1 else 've'} a free unit that could hold it",
                          tuple(u.reservation_id for u in free))
