"""Every loop step runs under a lease and leaves a TaskRun behind: start, end, counts, error. A step
that changes a cluster's nodes or pods ends by refreshing its running totals (scheduling/totals.py).

A step runs in its cluster's scope (`scope_for`, opened by its caller) as loop code
(fleet.scope.loop_code): a Kubernetes-side row it touches with no scope open, outside an explicit
`unscoped()`, raises NoClusterScope and fails the run."""

import datetime
import logging
import traceback
from collections.abc import Callable

from django.utils import timezone

from fleet.scope import loop_code

from scheduling.loop import leases
from scheduling.models import TaskRun
from scheduling.modes import global_mode

log = logging.getLogger(__name__)


def scope_for(cluster):
    """The scope a loop step (or the watch) on `cluster` runs in: its cluster scope, always, however
    many clusters the fleet has; what the step talks to comes from the cluster's row
    (scheduling/loop/backends.py), never from the settings that made the first cluster."""
    from fleet.scope import cluster_scope

    return cluster_scope(cluster)


def lease_name(name: str, cluster=None, key: str = "") -> str:
    """The lease a step runs under: one per step, per cluster (`cluster`), or per `key` (an EC2
    step's account and region), so that two workers never run the same step on the same cluster."""
    if key:
        return f"step:{name}:{key}"
    return f"step:{name}" if cluster is None else f"step:{name}:cluster-{cluster.pk}"


def run_step(name: str, step: Callable[[], dict], *, lease_ttl: datetime.timedelta = leases.DEFAULT_TTL,
             task_id: str = "", cluster=None, lease_key: str = "") -> TaskRun:
    """Run `step` unless another worker holds its lease; record the run. A failure is recorded and
    then re-raised, so that Celery retries it with backoff. `cluster`: the cluster it works on (its
    lease is that cluster's; the caller opens its scope), recorded on the run."""
    holder = leases.holder_id()
    run = TaskRun.objects.create(task=name, task_id=task_id or "", worker=holder, mode=global_mode(), cluster=cluster)
    lease = lease_name(name, cluster, lease_key)
    previous = leases.holder(lease)
    if not leases.acquire(lease, holder, lease_ttl):
        return _finish(run, TaskRun.Status.SKIPPED)
    if previous:
        # The last holder never released the lease: its worker died (killed, OOM) mid-run, and its
        # run would read "running" for ever. Say how it ended.
        TaskRun.objects.filter(task=name, worker=previous, status=TaskRun.Status.RUNNING).update(
            status=TaskRun.Status.FAILED, finished_at=timezone.now(),
            error="the worker stopped before the run finished (its lease expired unreleased)",
        )
    try:
        with loop_code():
            counts = step() or {}
            if not counts.get("skipped"):
                # The cluster's running totals, which the fleet's pages read (scheduling/totals.py).
                from scheduling import totals

                counts.update(totals.after_step(name, cluster))
    except Exception as exc:
        log.exception("loop step %s failed", name)
        _finish(run, TaskRun.Status.FAILED, error=f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=5)}")
        raise
    finally:
        leases.release(lease, holder)
    return _finish(run, TaskRun.Status.SUCCEEDED, counts=counts)


def _finish(run: TaskRun, status: str, *, counts: dict | None = None, error: str = "") -> TaskRun:
    run.status = status
    run.counts = counts or {}
    run.error = error
    run.finished_at = timezone.now()
    run.save(update_fields=["status", "counts", "error", "finished_at"])
    return run
