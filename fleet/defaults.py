"""The first account and cluster of an install that had none: what the settings of a single-cluster
karpweb say. One function for the migration that turns an existing install into a fleet of one and
for an empty database (fleet.scope.default_cluster), so both make the same cluster."""

import re
from collections.abc import Iterable

# The account an install gets when no reservation names an owner and no setting names one.
UNKNOWN_ACCOUNT_ID = "000000000000"
DEFAULT_NAME = "default"


def cluster_name(configured: str) -> str:
    """KARPWEB_CLUSTER_NAME as a DNS label (EKS allows upper case and "_"), else "default"."""
    name = re.sub(r"[^a-z0-9-]+", "-", (configured or "").strip().lower()).strip("-")[:63].strip("-")
    return name or DEFAULT_NAME


def account_fields(settings, owner_ids: Iterable[str] = ()) -> dict:
    """The AwsAccount: the owner most reservations carry (the lowest ID of a tie), else 000000000000
    named "default" (karpweb has no setting that names its account)."""
    counts: dict[str, int] = {}
    for owner in owner_ids:
        if owner and re.fullmatch(r"[0-9]{12}", owner):
            counts[owner] = counts.get(owner, 0) + 1
    account_id = min(counts, key=lambda owner: (-counts[owner], owner)) if counts else UNKNOWN_ACCOUNT_ID
    region = getattr(settings, "KARPWEB_AWS_REGION", "") or ""
    return {"account_id": account_id, "name": DEFAULT_NAME if account_id == UNKNOWN_ACCOUNT_ID else account_id,
            "regions": [region] if region else []}


def cluster_fields(settings) -> dict:
    """The Cluster (without its account): KARPWEB_CLUSTER simulated -> simulated, kubernetes ->
    kubeconfig when KUBECONFIG is set, else in-cluster."""
    if getattr(settings, "KARPWEB_CLUSTER", "simulated") == "kubernetes":
        kubeconfig = getattr(settings, "KARPWEB_KUBECONFIG", "") or ""
        connection = "kubeconfig" if kubeconfig else "in-cluster"
    else:
        kubeconfig, connection = "", "simulated"
    return {
        "name": cluster_name(getattr(settings, "KARPWEB_CLUSTER_NAME", "")),
        "region": getattr(settings, "KARPWEB_AWS_REGION", "") or "",
        "connection": connection,
        "kubeconfig": kubeconfig,
        "endpoint": getattr(settings, "KARPWEB_CLUSTER_ENDPOINT", "") or "",
        # Blank: it follows KARPWEB_MODE, as the install did.
        "mode": "",
        "karpenter": getattr(settings, "KARPWEB_KARPENTER", "auto") or "auto",
        "shard": "default",
        "is_default": True,
    }
