"""The open-reservation trap: open ODCRs idle beside paid on-demand nodes of their type and zone,
in a cluster whose launches opt out of open matching. Pure functions over facts the mirror gives
(reservations/open_trap.py); no Django, boto3 or kubernetes.

Why it happens (aws/karpenter-provider-aws #8176, #8510, #9518): once reserved capacity is on,
Karpenter's launch templates for on-demand and spot carry
``CapacityReservationSpecification.CapacityReservationPreference: none`` so that nothing falls
into an open ODCR by chance, and a reservation that no ``capacityReservationSelectorTerms`` term
names is never launched into. The open reservation is billed while on-demand nodes of the same
type run beside it: paid twice.

A cluster opts out of open matching when one of its EC2NodeClasses selects reservations (non-empty
``capacityReservationSelectorTerms``) and is not in karpweb's open mode, or when a launch template
tagged for it (``karpenter.k8s.aws/cluster``) carries preference ``none``.

For each such cluster and each open, active reservation its account sees with idle units: the
on-demand nodes of the reservation's type and zone that a NodePool launched and could not launch
into the reservation (its EC2NodeClass does not select it, or its ``karpenter.sh/capacity-type``
requirement leaves out ``reserved``) are paid beside it. The double payment is
``min(idle units, paid nodes) x on-demand price`` per hour; a reservation seen by several clusters
gives its idle units to the cluster with the most paid nodes first, so the fleet's total never
counts a unit twice.

The fix: the EC2NodeClass gains an ``{id: cr-...}`` term (kept terms are never dropped) and the
NodePool's ``karpenter.sh/capacity-type`` requirement gains ``reserved`` (on-demand kept). Karpenter
(and karpweb) then launch into the reservation as reserved capacity and consolidation can move the
paid nodes into it.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass, field

from .groups import is_group_term
from .labels import CAPACITY_TYPE, ON_DEMAND, RESERVED

PREFERENCE_NONE = "none"
EC2NODECLASS_API = "karpenter.k8s.aws/v1"
NODEPOOL_API = "karpenter.sh/v1"
TERMS_FIELD = "capacityReservationSelectorTerms"


@dataclass(frozen=True)
class NodeClassFacts:
    name: str
    terms: tuple = ()  # capacityReservationSelectorTerms as the cluster has them (groups included)
    selected: tuple[str, ...] = ()  # reservation ids its status resolves to
    open_mode: bool = False  # karpweb.io/open-reservations: its on-demand launches use preference open
    resource_version: str = ""


@dataclass(frozen=True)
class NodePoolFacts:
    name: str
    node_class: str
    requirements: tuple = ()  # spec.template.spec.requirements, as Kubernetes writes them
    resource_version: str = ""


@dataclass(frozen=True)
class PaidNode:
    name: str
    instance_type: str
    zone: str
    node_pool: str  # "" when no NodePool launched it (a managed node group): no Karpenter fix reaches it


@dataclass(frozen=True)
class LaunchTemplateFacts:
    name: str
    preference: str  # CapacityReservationSpecification.CapacityReservationPreference ("" when unset)


@dataclass(frozen=True)
class ClusterFacts:
    name: str
    account: str
    node_classes: tuple[NodeClassFacts, ...] = ()
    node_pools: tuple[NodePoolFacts, ...] = ()
    paid_nodes: tuple[PaidNode, ...] = ()  # running on-demand, in no reservation
    launch_templates: tuple[LaunchTemplateFacts, ...] = ()


@dataclass(frozen=True)
class OpenReservation:
    reservation_id: str
    instance_type: str
    zone: str
    idle: int
    price_per_hour: float | None  # on-demand list price of one instance
    clusters: tuple[str, ...] = ()  # the clusters whose account sees it


@dataclass(frozen=True)
class ObjectPatch:
    """One object's change: its spec fragment before and after, and the version it was computed on."""
    kind: str  # EC2NodeClass | NodePool
    name: str
    resource_version: str
    before: object
    after: object


@dataclass(frozen=True)
class Trap:
    cluster: str
    account: str
    reservation_id: str
    instance_type: str
    zone: str
    idle: int  # the reservation's idle units this cluster is given
    paid_nodes: tuple[str, ...]
    price_per_hour: float | None
    opted_out_because: tuple[str, ...]
    patches: tuple[ObjectPatch, ...] = field(default=())

    @property
    def units(self) -> int:
        """The units paid twice: idle prepaid units that paid nodes could fill."""
        return min(self.idle, len(self.paid_nodes))

    @property
    def dollars_per_hour(self) -> float:
        return round(self.units * (self.price_per_hour or 0.0), 6)

    @property
    def basis(self) -> str:
        if self.price_per_hour is None:
            return f"{self.units} x {self.instance_type}: no on-demand list price known, so no dollar figure"
        return (f"min({self.idle} idle, {len(self.paid_nodes)} paid) = {self.units} x {self.instance_type} x "
                f"${self.price_per_hour:,.4f}/h on-demand list price")


def opted_out(cluster: ClusterFacts) -> tuple[str, ...]:
    """Why the cluster's launches skip open reservations; () when they do not."""
    reasons = [f"EC2NodeClass {c.name} selects reservations ({TERMS_FIELD}) and is not in karpweb's open mode"
               for c in cluster.node_classes if c.terms and not c.open_mode]
    reasons += [f"launch template {t.name} carries CapacityReservationPreference: none"
                for t in cluster.launch_templates if t.preference == PREFERENCE_NONE]
    return tuple(reasons)


def capacity_types_with_reserved(requirements) -> list | None:
    """The requirements with `reserved` allowed by karpenter.sh/capacity-type (on-demand and every
    other value kept); None when it already is (no requirement on the key, Exists, or In with it)."""
    result, changed = [], False
    for requirement in requirements or ():
        if not isinstance(requirement, dict) or requirement.get("key") != CAPACITY_TYPE:
            result.append(requirement)
            continue
        operator, values = requirement.get("operator"), list(requirement.get("values") or [])
        if operator == "In" and RESERVED not in values:
            requirement = {**requirement, "values": values + [RESERVED]}
            changed = True
        elif operator == "NotIn" and RESERVED in values:
            values.remove(RESERVED)
            changed = True
            if not values:
                continue  # NotIn nothing: drop the requirement rather than write an empty list
            requirement = {**requirement, "values": values}
        elif operator == "DoesNotExist":
            requirement = {"key": CAPACITY_TYPE, "operator": "In", "values": [ON_DEMAND, RESERVED]}
            changed = True
        result.append(requirement)
    return result if changed else None


def allows_reserved(requirements) -> bool:
    return capacity_types_with_reserved(requirements) is None


def _patches(cluster: ClusterFacts, reservation_id: str, pools: list[NodePoolFacts]) -> tuple[ObjectPatch, ...]:
    classes = {c.name: c for c in cluster.node_classes}
    patches: list[ObjectPatch] = []
    for class_name in sorted({p.node_class for p in pools}):
        node_class = classes.get(class_name)
        if node_class is None or reservation_id in node_class.selected:
            continue
        term = {"id": reservation_id}
        terms = list(node_class.terms)
        if term not in terms:  # an id term the status has not resolved yet is not added twice
            patches.append(ObjectPatch("EC2NodeClass", class_name, node_class.resource_version, terms, terms + [term]))
    for pool in sorted(pools, key=lambda p: p.name):
        after = capacity_types_with_reserved(pool.requirements)
        if after is not None:
            patches.append(ObjectPatch("NodePool", pool.name, pool.resource_version, list(pool.requirements), after))
    return tuple(patches)


def _trapped_nodes(cluster: ClusterFacts, reservation: OpenReservation) -> tuple[list[PaidNode], list[NodePoolFacts]]:
    """The cluster's paid nodes of the reservation's type and zone whose NodePool could not launch
    into it now (its class does not select it or the pool leaves out reserved), and their pools."""
    pools = {p.name: p for p in cluster.node_pools}
    classes = {c.name: c for c in cluster.node_classes}
    nodes, used_pools = [], {}
    for node in cluster.paid_nodes:
        pool = pools.get(node.node_pool)
        if node.instance_type != reservation.instance_type or node.zone != reservation.zone or pool is None:
            continue
        node_class = classes.get(pool.node_class)
        if node_class is None or node_class.open_mode:
            continue  # open mode: its next on-demand launch falls into the open reservation by itself
        if reservation.reservation_id in node_class.selected and allows_reserved(pool.requirements):
            continue  # already launchable into it: consolidation's business, not the trap's
        nodes.append(node)
        used_pools[pool.name] = pool
    return sorted(nodes, key=lambda n: n.name), list(used_pools.values())


def find_traps(clusters: list[ClusterFacts], reservations: list[OpenReservation]) -> list[Trap]:
    """Every (cluster, open reservation) pair caught in the trap, the largest double payment first."""
    by_name = {c.name: c for c in clusters}
    reasons = {c.name: opted_out(c) for c in clusters}
    traps: list[Trap] = []
    for reservation in reservations:
        if reservation.idle <= 0:
            continue
        candidates = []
        for name in reservation.clusters:
            cluster = by_name.get(name)
            if cluster is None or not reasons[name]:
                continue
            nodes, pools = _trapped_nodes(cluster, reservation)
            if nodes:
                candidates.append((cluster, nodes, pools))
        left = reservation.idle
        for cluster, nodes, pools in sorted(candidates, key=lambda c: (-len(c[1]), c[0].name)):
            if left <= 0:
                break
            given = min(left, len(nodes))
            left -= given
            traps.append(Trap(
                cluster=cluster.name, account=cluster.account, reservation_id=reservation.reservation_id,
                instance_type=reservation.instance_type, zone=reservation.zone, idle=given,
                paid_nodes=tuple(n.name for n in nodes), price_per_hour=reservation.price_per_hour,
                opted_out_because=reasons[cluster.name], patches=_patches(cluster, reservation.reservation_id, pools)))
    return sorted(traps, key=lambda t: (-t.dollars_per_hour, t.cluster, t.reservation_id))


def total_dollars_per_hour(traps: list[Trap]) -> float:
    return round(sum(t.dollars_per_hour for t in traps), 6)


# --- the fix as Kubernetes objects -----------------------------------------------------------------

def _spec_terms(terms) -> list:
    """What spec may hold: karpweb's group terms live in its annotation, never in the CRD's field."""
    return [t for t in terms or [] if not is_group_term(t)]


def patch_object(patch: ObjectPatch) -> dict:
    """The partial object for `kubectl apply --server-side` (or a merge patch): apiVersion, kind,
    name, the resourceVersion it was computed on (a changed object refuses it) and the one field."""
    metadata = {"name": patch.name}
    if patch.resource_version:
        metadata["resourceVersion"] = patch.resource_version
    if patch.kind == "EC2NodeClass":
        return {"apiVersion": EC2NODECLASS_API, "kind": "EC2NodeClass", "metadata": metadata,
                "spec": {TERMS_FIELD: _spec_terms(patch.after)}}
    return {"apiVersion": NODEPOOL_API, "kind": "NodePool", "metadata": metadata,
            "spec": {"template": {"spec": {"requirements": list(patch.after)}}}}


def patch_diff(patch: ObjectPatch, dump=None) -> str:
    """A unified diff of the field, before and after (`dump` renders it: YAML on the faces, JSON here)."""
    dump = dump or (lambda value: json.dumps(value, indent=2, sort_keys=True))
    field_name = TERMS_FIELD if patch.kind == "EC2NodeClass" else "requirements"
    before = patch.before if patch.kind == "NodePool" else _spec_terms(patch.before)
    after = patch.after if patch.kind == "NodePool" else _spec_terms(patch.after)
    where = f"{patch.kind.lower()}/{patch.name} {field_name}"
    return "\n".join(difflib.unified_diff(dump(before).splitlines(), dump(after).splitlines(),
                                          f"{where} (now)", f"{where} (fixed)", lineterm="", n=3))
