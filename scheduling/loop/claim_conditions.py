"""`ReservedCapacityAvailable` on NodeClaims (seed 001 wanted it on NodeClaims, EC2NodeClasses and
NodePools): each live NodeClaim carries its NodePool's condition as the engine computed it in this
status run: True while a reservation the NodePool can use has room (or no pod waits for one),
False / LimitExceeded while pending pods wait because they are full."""


from fleet.connection import is_kubernetes
from scheduling.adapters.kube.interface import Condition
from scheduling.models import Mode, NodeClaim
from scheduling.modes import effective_mode

CONDITION = "ReservedCapacityAvailable"


def write_nodeclaim_conditions(pool_conditions: dict[str, list[dict]], cluster, now, refusal: str = "") -> int:
    """Copy each NodePool's ReservedCapacityAvailable onto its NodeClaims; returns how many
    NodeClaims changed (those are also written to a real cluster when their NodePool is in control
    mode: in observe mode karpweb writes nothing to the cluster). `refusal`: control_refusal()."""
    by_pool = {name: next((c for c in conditions if c["type"] == CONDITION), None)
               for name, conditions in pool_conditions.items()}
    changed = 0
    # Only what this reads and writes: a cluster has thousands of claims, each with JSON it does not need.
    claims = NodeClaim.objects.filter(deleting_since__isnull=True, node_pool__isnull=False).select_related(
        "node_pool").only("name", "conditions", "node_pool__name", "node_pool__mode")
    for claim in claims.order_by("name"):
        source = by_pool.get(claim.node_pool.name)
        if source is None:
            continue
        message = f"NodePool {claim.node_pool.name}: {source['message']}"
        if claim.set_condition(CONDITION, source["status"], source["reason"], message, now=now):
            claim.save(update_fields=["conditions"])
            changed += 1
            if is_kubernetes() and effective_mode(claim.node_pool, refusal) == Mode.CONTROL:
                cluster.set_conditions("NodeClaim", claim.name, [Condition(CONDITION, source["status"], source["reason"], message)])
    return changed
