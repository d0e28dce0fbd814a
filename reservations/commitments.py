"""The account's commitments (zonal Reserved Instances, Savings Plans) in the mirror: written by the
EC2 sync, read into WORLD.json `commitments` and by the figures that state their price basis.

The rules are the engine's (scheduling/engine/commitments.py); this module only keeps what the EC2
providers read (scheduling/adapters/ec2/reservedinstances.py, savingsplans.py) per account and region.
"""

from __future__ import annotations

import logging

from fleet.scope import NoClusterScope, working_cluster
from reservations.models import PriceCommitments
from scheduling.engine.commitments import Commitments, parse_commitments

log = logging.getLogger(__name__)


def _account_and_region(cluster=None) -> tuple[str, str] | None:
    """The working cluster's account and the region its EC2 calls go to (None: no cluster, no region)."""
    from scheduling.adapters.ec2.client import cluster_ec2_config
    from scheduling.adapters.ec2.interface import CloudAPIError

    try:
        cluster = cluster or working_cluster()
        return cluster.account.account_id, cluster_ec2_config(cluster).region
    except (NoClusterScope, CloudAPIError):
        return None


def refresh(cloud, now) -> dict:
    """Read the commitments (each provider caches an hour) and keep them for the working cluster's account
    and region. A failure other than a refusal keeps the last reading (prices do not flap to list)."""
    from scheduling.adapters.ec2.interface import CloudAPIError

    read = getattr(cloud, "commitments", None)
    if read is None:  # the simulated cloud: list prices
        return {}
    try:
        account_id = working_cluster().account.account_id
    except NoClusterScope:
        return {}
    try:
        found = read()
    except CloudAPIError as exc:
        log.warning("commitments not read: %s", exc)
        return {"commitment_errors": 1}
    PriceCommitments.objects.update_or_create(
        account_id=account_id, region=cloud.config.region,
        defaults={"reserved_instances": found["reservedInstances"], "savings_plans": found["savingsPlans"],
                  "list_prices_because": found["listPricesBecause"], "read_at": now})
    return {"reserved_instances": len(found["reservedInstances"]), "savings_plans": len(found["savingsPlans"])}


def current_row(cluster=None) -> PriceCommitments | None:
    key = _account_and_region(cluster)  # a row exists only where an EC2 sync (or the demo's seeding) wrote one
    if key is None:
        return None
    return PriceCommitments.objects.filter(account_id=key[0], region=key[1]).first()


def world_commitments(cluster=None) -> dict | None:
    """WORLD.json `commitments` for the working cluster (None: nothing read: list prices, as before)."""
    row = current_row(cluster)
    return row.as_world() if row is not None else None


def current(cluster=None) -> Commitments:
    """The engine's reading of them (empty: list prices)."""
    found = world_commitments(cluster)
    return parse_commitments(found, lambda path, message: None) if found else Commitments()


def price_status(cluster=None) -> dict:
    """What the overview says about the working cluster's prices: which are in use, and why not the others."""
    return price_words(current_row(cluster))


def price_words(row: PriceCommitments | None) -> dict:
    """{"basis": "list" | "commitments", "words": ..., "because": [...]} for one account and region's reading."""
    if row is None:
        return {"basis": "list", "words": "list prices (no Reserved Instances or Savings Plans read yet)", "because": []}
    ris = sum(int(ri.get("InstanceCount") or 0) for ri in row.reserved_instances)
    parts = []
    if ris:
        parts.append(f"{ris} zonal Reserved Instance unit{'s' if ris != 1 else ''}")
    if row.savings_plans:
        parts.append(f"{len(row.savings_plans)} Savings Plan{'s' if len(row.savings_plans) != 1 else ''}")
    because = list(row.list_prices_because)
    basis, words = ("commitments", "with " + " and ".join(parts)) if parts else ("list", "list prices")
    if because:
        words += f" ({'; '.join(because)})"
    elif not parts:
        words += " (no active zonal Reserved Instances or Savings Plans)"
    return {"basis": basis, "words": words, "because": because}


def by_account_and_region() -> "CommitmentsLookup":
    """Every account and region's commitments, to price reservations fleet-wide (one query)."""
    rows = list(PriceCommitments.objects.all())
    return CommitmentsLookup({(row.account_id, row.region): parse_commitments(row.as_world(), lambda path, message: None)
                              for row in rows})


class CommitmentsLookup:
    """The commitments that price a reservation's units: its owner's in its region; a fleet of one (its account a
    placeholder, or blank) with a single reading in that region: that reading."""

    def __init__(self, found: dict[tuple[str, str], Commitments]) -> None:
        self.found = found

    def of(self, owner_id: str, region: str) -> Commitments:
        exact = self.found.get((owner_id, region))
        if exact is not None:
            return exact
        here = [c for (_, r), c in self.found.items() if r == region or not region]
        return here[0] if len(here) == 1 else Commitments()
