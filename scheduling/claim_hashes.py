"""What a NodeClaim karpweb creates carries: its label, and, so that its NodePool's and EC2NodeClass's
later edits drift it (scheduling/engine/refresh.py), the hash annotations and spec.expireAfter. The loop's
provisioning writes them, and so does seed_demo (karpweb's claims in the demo world it controls)."""

from scheduling.engine import refresh as engine

# On the NodeClaims karpweb creates, so that a retry only ever relaunches karpweb's own claims.
PROVISIONER_LABEL = "karpweb.io/provisioner"

DEFAULT_NODE_CLASS_REF = {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass"}


def node_class_ref(pool) -> dict:
    if pool.node_class_ref:
        return dict(pool.node_class_ref)
    return {**DEFAULT_NODE_CLASS_REF, "name": pool.node_class.name} if pool.node_class else {}


def pool_hash(pool) -> str:
    """The NodePool's template as upstream hashes it (the fields karpweb mirrors: labels, taints,
    startup taints, nodeClassRef, expireAfter; terminationGracePeriod once it is mirrored)."""
    return engine.nodepool_hash(pool.labels or {}, {}, pool.taints or [], pool.startup_taints or [],
                                node_class_ref(pool), pool.expire_after or "",
                                getattr(pool, "termination_grace_period", "") or "")


def class_hash(node_class) -> str | None:
    return engine.nodeclass_hash(node_class.spec or {}) if node_class is not None else None


def claim_annotations(pool) -> dict[str, str]:
    """The hash annotations a new NodeClaim of this NodePool carries."""
    if pool is None:
        return {}
    return engine.hash_annotations(pool_hash(pool), class_hash(pool.node_class))


def claim_expire_after(pool) -> str:
    return (pool.expire_after or "720h") if pool is not None else ""
