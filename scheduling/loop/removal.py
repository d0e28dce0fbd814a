"""Removing a cluster from the fleet: the one function `manage.py remove_cluster`, the admin's delete
and `DELETE /api/v1/clusters/<name>/` call.

What goes and what stays:
- refused while one of its loop steps runs (a live `step:<name>:cluster-<id>` lease, or a running
  TaskRun of it younger than a lease's time to live): the step would write rows of a cluster that is
  going;
- its steps stop by themselves: the beat entries are fleet-wide dispatchers that send a step to each
  cluster that exists (scheduling/tasks.py), and a step whose cluster is gone is skipped. Its watch
  stops at its next lease renewal: its lease is taken over by a tombstone holder;
- its reservation holds are released (deleted with it), so other clusters' ledgers get the units;
- its decisions and audit entries stay as history: their cluster link is cleared and its name kept
  in `cluster_name`; its task runs stay (their cluster link is cleared by SET_NULL);
- every mirrored Kubernetes-side row (NodePools, NodeClaims, Nodes, Pods, EC2NodeClasses, totals,
  watch state, controller guards, doctor findings, role bindings and tokens narrowed to it) is
  deleted with it (their foreign keys CASCADE);
- nothing in the cluster or in EC2 is touched: its nodes and instances keep running.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections import Counter

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from fleet.models import Cluster

# How long the watch's lease is held by the tombstone: longer than the watch's renewal interval
# (scheduling/loop/watch.py: a third of LEASE_TTL), so that the watch sees it lost the lease and stops.
WATCH_TOMBSTONE = datetime.timedelta(hours=1)


class RemovalError(Exception):
    """The cluster cannot be removed now (the message says why)."""


class UnknownCluster(RemovalError):
    pass


class StepRunning(RemovalError):
    pass


@dataclasses.dataclass
class Removed:
    name: str
    holds_released: int
    decisions_kept: int
    audit_entries_kept: int
    rows_deleted: dict


def running_steps(cluster: Cluster, now=None) -> list[str]:
    """The loop steps running on `cluster` now: "sync_kubernetes (worker host:1:ab)"."""
    from scheduling.loop import leases
    from scheduling.models import Lease, TaskRun

    now = now or timezone.now()
    suffix = f":cluster-{cluster.pk}"
    running = {}
    for name, holder in Lease.objects.filter(name__startswith="step:", name__endswith=suffix, expires_at__gt=now) \
            .exclude(holder="").values_list("name", "holder"):
        running[name.removeprefix("step:").removesuffix(suffix)] = holder
    # An EC2 step's lease is its account's and region's; its run names the cluster. A run whose
    # worker died reads "running" for ever: only one younger than a lease counts.
    for task, worker in TaskRun.objects.filter(cluster=cluster, status=TaskRun.Status.RUNNING,
                                               started_at__gt=now - leases.DEFAULT_TTL).values_list("task", "worker"):
        running.setdefault(task, worker)
    return [f"{task} (worker {holder})" for task, holder in sorted(running.items())]


def remove_cluster(name: str, *, user, source: str) -> Removed:
    """Remove the cluster named `name` (see the module's docstring), audited as `source`'s delete by
    `user`. Two calls at once: the second waits for the first's row lock and then finds no cluster
    (UnknownCluster), so nothing is done twice."""
    from scheduling.audit import record_change
    from scheduling.loop.watch import LEASE as WATCH_LEASE
    from scheduling.models import AuditEntry, Decision, Lease
    from reservations.models import ReservationHold

    with transaction.atomic():
        cluster = Cluster.objects.select_for_update().filter(name=name).first()
        if cluster is None:
            raise UnknownCluster(f"cluster: no cluster is named {name!r}")
        others = Cluster.objects.exclude(pk=cluster.pk).count()
        if not others:
            # An empty fleet gets its cluster back from the settings (fleet.scope.default_cluster).
            raise RemovalError(f"cluster {name}: it is the fleet's only cluster; add another before removing it")
        if cluster.is_default and others > 1:
            raise RemovalError(f"cluster {name}: it is the default cluster (is_default); make another cluster the "
                               "default first")
        running = running_steps(cluster)
        if running:
            raise StepRunning(f"cluster {name}: a loop step is running on it ({', '.join(running)}); "
                              "try again when it has finished")
        now = timezone.now()
        holds = ReservationHold.objects.filter(cluster=cluster, state=ReservationHold.State.HELD).count()
        # The audit entry first, so that it is kept with the others below.
        record_change(user=user, source=source, obj=cluster, action=AuditEntry.Action.DELETE, as_decision=False,
                      changes={"removed": [None, {"cluster": name, "holdsReleased": holds}]})
        decisions = Decision.objects.fleet().filter(cluster=cluster).update(cluster=None, cluster_name=name)
        entries = AuditEntry.objects.fleet().filter(cluster=cluster).update(cluster=None, cluster_name=name)
        # The watch stops when it next renews its lease: a tombstone holds it. Step leases go.
        watch_lease = f"{WATCH_LEASE}:cluster-{cluster.pk}"
        Lease.objects.update_or_create(name=watch_lease, defaults={"holder": f"removed cluster {name}",
                                                                   "expires_at": now + WATCH_TOMBSTONE})
        Lease.objects.filter(Q(name__startswith="step:") | Q(name__startswith="kubernetes-full-sync:"),
                             name__endswith=f":cluster-{cluster.pk}").delete()
        _, deleted = cluster.delete()
    return Removed(name=name, holds_released=holds, decisions_kept=decisions, audit_entries_kept=entries,
                   rows_deleted={label: count for label, count in sorted(deleted.items()) if count})


@dataclasses.dataclass
class Drained:
    deleting: int  # NodeClaims karpweb launched that are being deleted now (this call's and earlier ones')
    started: int  # of which this call started
    left: int  # not started yet: the budgets allow more on a later call


def drain(name: str, *, user, source: str, now=None) -> Drained:
    """`remove_cluster NAME --drain`, before the removal: delete the NodeClaims karpweb launched in the
    cluster (their nodes drained and their instances terminated by the lifecycle's termination, as any
    deleted NodeClaim's), at most what each NodePool's disruption budgets allow at a time (the budgets
    that name no reason: a removal is none of upstream's). Control mode only; audited, one Decision per
    claim. Called again until nothing is left; the removal is refused while any is still deleting."""
    from scheduling.audit import record_change
    from scheduling.claim_hashes import PROVISIONER_LABEL
    from scheduling.loop import backends
    from scheduling.loop.nodes import delete_claim
    from scheduling.loop.recording import PendingDecision, record
    from scheduling.loop.runs import scope_for
    from scheduling.models import AuditEntry, Decision, NodeClaim
    from scheduling.modes import Mode, control_refusal, effective_mode

    now = now or timezone.now()
    cluster = Cluster.objects.select_related("account").filter(name=name).first()
    if cluster is None:
        raise UnknownCluster(f"cluster: no cluster is named {name!r}")
    with scope_for(cluster):
        refusal = control_refusal()
        claims = list(NodeClaim.objects.filter(labels__has_key=PROVISIONER_LABEL).select_related("node_pool")
                      .order_by("created_at", "name"))
        pools = {claim.node_pool for claim in claims}
        observed = sorted(pool.name if pool else "(none)" for pool in pools
                          if effective_mode(pool, refusal) != Mode.CONTROL)
        if observed:
            raise RemovalError(f"cluster {name}: --drain acts only in control mode; NodePool(s) {', '.join(observed)} "
                               f"are in observe mode{f' ({refusal})' if refusal else ''}: drain with Karpenter or kubectl")
        deleting = Counter(c.node_pool for c in claims if c.deleting_since)
        sizes = Counter(c.node_pool for c in claims)
        allowed = {pool: _removal_budget(pool, sizes[pool], now) for pool in pools}
        started, decisions, adapter = 0, [], backends.cluster()
        for claim in claims:
            pool = claim.node_pool
            if claim.deleting_since or deleting[pool] >= allowed[pool]:
                continue
            delete_claim(adapter, claim, now)
            deleting[pool] += 1
            started += 1
            decisions.append(PendingDecision(
                kind=Decision.Kind.TERMINATE, subject=f"NodeClaim {claim.name}", mode=Mode.CONTROL, node_pool=pool,
                outcome=Decision.Outcome.ACTED, details={"name": claim.name, "instanceID": claim.instance_id},
                reason=f"NodeClaim {claim.name}: cluster {name} is being removed from the fleet (remove_cluster "
                       "--drain): its node is drained and its instance terminated"))
        record(decisions, now)
        left = NodeClaim.objects.filter(labels__has_key=PROVISIONER_LABEL, deleting_since__isnull=True).count()
        now_deleting = NodeClaim.objects.filter(labels__has_key=PROVISIONER_LABEL, deleting_since__isnull=False).count()
    if started:
        record_change(user=user, source=source, obj=cluster, action=AuditEntry.Action.CHANGE, as_decision=False,
                      changes={"drain": [None, {"cluster": name, "nodeClaimsDeleted": started}]})
    return Drained(deleting=now_deleting, started=started, left=left)


def _removal_budget(pool, node_count: int, now) -> int:
    """How many of `pool`'s nodes a drain may delete at once: its disruption budgets that name no reason
    (none written: upstream's default 10%, as the engine's world reads a NodePool)."""
    from scheduling.engine.budgets import parse_disruption

    written = {"budgets": pool.budgets} if pool is not None and pool.budgets else {}
    return parse_disruption({}, {"disruption": written}, {}, "", lambda *_: None).allowed("", node_count, now)
