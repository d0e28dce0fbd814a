"""Every loop step runs under a lease and leaves a TaskRun behind: start, end, counts, error."""

import datetime
import logging
import traceback
from collections.abc import Callable

from django.utils import timezone

from scheduling.loop import leases
from scheduling.models import TaskRun
from scheduling.modes import global_mode

log = logging.getLogger(__name__)


def run_step(name: str, step: Callable[[], dict], *, lease_ttl: datetime.timedelta = leases.DEFAULT_TTL,
             task_id: str = "") -> TaskRun:
    """Run `step` unless another worker holds its lease; record the run. A failure is recorded and
    then re-raised, so that Celery retries it with backoff."""
    holder = leases.holder_id()
    run = TaskRun.objects.create(task=name, task_id=task_id or "", worker=holder, mode=global_mode())
    previous = leases.holder(f"step:{name}")
    if not leases.acquire(f"step:{name}", holder, lease_ttl):
        return _finish(run, TaskRun.Status.SKIPPED)
    if previous:
        # The last holder never released the lease: its worker died (killed, OOM) mid-run, and its
        # run would read "running" for ever. Say how it ended.
        TaskRun.objects.filter(task=name, worker=previous, status=TaskRun.Status.RUNNING).update(
            status=TaskRun.Status.FAILED, finished_at=timezone.now(),
            error="the worker stopped before the run finished (its lease expired unreleased)",
        )
    try:
        counts = step() or {}
    except Exception as exc:
        log.exception("loop step %s failed", name)
        _finish(run, TaskRun.Status.FAILED, error=f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=5)}")
        raise
    finally:
        leases.release(f"step:{name}", holder)
    return _finish(run, TaskRun.Status.SUCCEEDED, counts=counts)


def _finish(run: TaskRun, status: str, *, counts: dict | None = None, error: str = "") -> TaskRun:
    run.status = status
    run.counts = counts or {}
    run.error = error
    run.finished_at = timezone.now()
    run.save(update_fields=["status", "counts", "error", "finished_at"])
    return run
