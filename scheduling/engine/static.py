"""Static NodePools (`spec.replicas`, alpha upstream): a pool that keeps a fixed number of nodes
whatever the pods (kubernetes-sigs/karpenter pkg/controllers/static/{provisioning,deprovisioning}).

- Pending pods never get claims from a static pool (the scheduler is given the dynamic pools
  only); they may still bind to its nodes where those have room.
- A pool short of `replicas` (its nodes not being deleted, those still coming up included) gets
  claims without pods up to `replicas`, capped by `limits.nodes`. Upstream sets no instance-type
  requirement and lets the cloud provider pick at launch; here each claim takes a free reserved
  unit its class selects (held in the plan's ledger, so no unit is given twice), else the cheapest
  offering, as any finalised claim does.
- A pool above `replicas` deletes the surplus: claims not launched yet first, then empty nodes,
  then the nodes whose pods cost least to disrupt (nodes with do-not-disrupt pods last).
- Consolidation never takes a static pool's nodes. Drift replaces a drifted one with a new claim
  of the pool (no pod simulation decides it: its pods go wherever they fit, upstream's StaticDrift),
  once the pool is not above its replicas and while `limits.nodes` leaves room for the replacement.
"""

from __future__ import annotations

from typing import Callable

from .cluster import Node, NodePool, Pod, World
from .ledger import ReservationLedger
from .nodeclaim import NodeClaim, PoolTemplate

STATIC_REASON = "static"


def dynamic_templates(templates: list[PoolTemplate]) -> list[PoolTemplate]:
    """The templates the scheduler may open claims from for pending pods."""
    return [t for t in templates if not t.pool.static]


def pool_nodes(world: World, pool: NodePool) -> list[Node]:
    """The pool's nodes that are not being deleted (in-flight claims are nodes of the world too)."""
    return [n for n in world.nodes if n.nodepool == pool.name and not n.deleting]


def shortfall(world: World, pool: NodePool) -> int:
    """How many claims the pool needs to reach `replicas`, within `limits.nodes`."""
    running = len(pool_nodes(world, pool))
    wanted = pool.replicas - running
    limit = pool.limits.get("nodes") if pool.limits is not None else None
    if limit is not None:
        wanted = min(wanted, limit - running)
    return max(0, wanted)


def static_claims(world: World, templates: list[PoolTemplate], ledger: ReservationLedger,
                  name: Callable[[str], str], next_seq: Callable[[], int]) -> list[NodeClaim]:
    """Claims without pods for each static pool short of its replicas."""
    claims = []
    for template in templates:
        if template.pool.static:
            for _ in range(shortfall(world, template.pool)):
                claim = static_claim(template, ledger, name, next_seq)
                if claim is None:
                    break
                claims.append(claim)
    return claims


def static_claim(template: PoolTemplate, ledger: ReservationLedger, name: Callable[[str], str],
                 next_seq: Callable[[], int]) -> NodeClaim | None:
    """One claim without pods from a static pool's template, holding a free reserved unit if it can;
    None when the pool cannot launch (its class is missing or not ready, no type holds its DaemonSets)."""
    if template.problem is not None or template.catalog is None:
        return None
    mask = template.mask & template.catalog.fits_mask(template.daemon_overhead)
    if not mask:
        return None
    claim = NodeClaim(template, mask, next_seq())
    claim.name = name(template.name)
    if template.allows_reserved():
        claim.take(claim.free_reservation(ledger), ledger)
    return claim


def may_replace_drifted(world: World, pool: NodePool, replacing: int = 0) -> bool:
    """Upstream's static drift: not while the pool is above its replicas (the scale-down comes
    first), and only while one more node stays within `limits.nodes` (each replacement launches
    before its drifted node goes; `replacing`: those this pass already planned)."""
    running = len(pool_nodes(world, pool))
    limit = pool.limits.get("nodes") if pool.limits is not None else None
    return running <= pool.replicas and (limit is None or running + replacing + 1 <= limit)


def surplus(world: World, pool: NodePool, bound: dict[str, list[Pod]],
            cost: Callable[[Node, list[Pod]], float]) -> list[Node]:
    """The nodes a static pool above its replicas deletes, in upstream's order: not launched yet
    (no provider ID), then empty (DaemonSet pods only), then without do-not-disrupt pods, then the
    lowest disruption cost (`cost` of the node and its pods that would move)."""
    nodes = pool_nodes(world, pool)
    extra = len(nodes) - pool.replicas
    if extra <= 0:
        return []

    def order(node: Node) -> tuple:
        pods = bound.get(node.name, [])
        moving = [p for p in pods if p.reschedulable]
        blocked = any(p.blocks_disruption(world.now) for p in pods)
        return (bool(node.provider_id), bool(moving) or blocked, blocked, cost(node, moving), node.name)

    return sorted(nodes, key=order)[:extra]
