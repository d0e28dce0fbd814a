"""Who holds which units of a capacity reservation across the fleet (issue #36's ledger).

Pure: from what EC2 says about one reservation (its total and available counts, the instances our
accounts' DescribeInstances place in it, and, for a reservation one of our accounts owns,
GetCapacityReservationUsage's units per account) and from what karpweb mirrors (each cluster's
nodes, by instance id from their providerID), the units are attributed to:

- each cluster of ours whose node runs on an instance in the reservation;
- our accounts' instances in it that no cluster knows (per account);
- other accounts (units GetCapacityReservationUsage counts for an account that is not ours);
- unknown: used units nothing above explains (another account's, when the reservation is shared
  with us and its owner's usage is not ours to read; or an instance we have not listed yet).

The attributed units never exceed the used ones (total - available - lent): EC2's counts win. Units the
owner lends as interruptible capacity (InterruptibleCapacityAllocation) have left the available count
but are neither used by the fleet nor free for it: they are counted apart (`lent`), never as unknown.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Attribution:
    total: int
    used: int
    clusters: dict[str, int] = field(default_factory=dict)  # cluster name -> units
    our_accounts: dict[str, int] = field(default_factory=dict)  # our account id -> units no cluster knows
    other_accounts: dict[str, int] = field(default_factory=dict)  # account id (not ours) -> units
    unknown: int = 0
    instances: dict[str, list[str]] = field(default_factory=dict)  # cluster name -> its instance ids in it
    lent: int = 0  # lent as interruptible capacity: neither used by the fleet nor free for it

    @property
    def fleet_used(self) -> int:
        """Units the whole fleet uses: our clusters, our accounts and other accounts (unknown too: a
        unit someone uses is not idle)."""
        return self.used

    @property
    def ours(self) -> int:
        return sum(self.clusters.values()) + sum(self.our_accounts.values())

    @property
    def others(self) -> int:
        return sum(self.other_accounts.values())

    def as_dict(self) -> dict:
        return {"total": self.total, "used": self.used, "clusters": dict(sorted(self.clusters.items())),
                "ourAccounts": dict(sorted(self.our_accounts.items())),
                "otherAccounts": dict(sorted(self.other_accounts.items())), "unknown": self.unknown, "lent": self.lent}


def attribute(*, total: int, available: int, reservation_instances: Iterable[str],
              cluster_instances: Mapping[str, Iterable[str]], cluster_accounts: Mapping[str, str],
              account_instances: Mapping[str, Iterable[str]], usage: Mapping[str, int] | None = None,
              lent: int = 0) -> Attribution:
    """Attribute the used units of one reservation.

    `reservation_instances`: instance ids EC2 reports in the reservation (DescribeInstances of our
    accounts, or instances matched by type, zone and reservation id). `cluster_instances`: per
    cluster name, the instance ids of its nodes. `cluster_accounts`: cluster name -> its account id.
    `account_instances`: per account of ours, the instance ids DescribeInstances listed in it (so
    its keys are our accounts). `usage`: GetCapacityReservationUsage's InstanceUsages (account id ->
    UsedInstanceCount), when the owner is ours; None when not known. `lent`: units lent as interruptible
    capacity (gone from `available`, used by nobody of the fleet)."""
    lent = min(max(int(lent), 0), max(int(total) - int(available), 0))
    used = max(int(total) - int(available) - lent, 0)
    ours = set(account_instances)
    owner_of = {iid: account for account, ids in account_instances.items() for iid in ids}
    cluster_of = {iid: name for name, ids in cluster_instances.items() for iid in ids}
    clusters: dict[str, int] = {}
    instances: dict[str, list[str]] = {}
    our_accounts: dict[str, int] = {}
    per_account: dict[str, int] = {}  # our units found per account (clusters and unclustered)
    seen = sorted(set(reservation_instances))
    for iid in seen:
        cluster = cluster_of.get(iid)
        account = owner_of.get(iid) or (cluster_accounts.get(cluster, "") if cluster else "")
        if cluster is not None:
            clusters[cluster] = clusters.get(cluster, 0) + 1
            instances.setdefault(cluster, []).append(iid)
        elif account in ours:
            our_accounts[account] = our_accounts.get(account, 0) + 1
        else:
            continue  # an instance id nobody of ours listed: left to usage or unknown
        if account:
            per_account[account] = per_account.get(account, 0) + 1
    other_accounts: dict[str, int] = {}
    for account, count in sorted((usage or {}).items()):
        count = int(count)
        if count <= 0:
            continue
        if account in ours or account in cluster_accounts.values():
            # Usage says the account uses more than its instances we listed: ours, no cluster knows them.
            extra = count - per_account.get(account, 0)
            if extra > 0:
                our_accounts[account] = our_accounts.get(account, 0) + extra
        else:
            other_accounts[account] = count
    # EC2's counts win: never attribute more units than are used (a count read a moment apart).
    budget = used
    for bucket in (clusters, our_accounts, other_accounts):
        for key in sorted(bucket):
            bucket[key] = min(bucket[key], budget)
            budget -= bucket[key]
        for key in [k for k, v in bucket.items() if v == 0]:
            del bucket[key]
    return Attribution(total=int(total), used=used, clusters=clusters, our_accounts=our_accounts,
                       other_accounts=other_accounts, unknown=budget, instances=instances, lent=lent)
