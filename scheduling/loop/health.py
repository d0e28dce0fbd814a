"""Is the control loop running? For each scheduled step: its last run, its last success, and what
is wrong (failing, or no success for three of its intervals), read from TaskRun and the beat
schedule, in two queries whatever the history's size."""

import datetime
from dataclasses import dataclass

from django.db.models import OuterRef, Subquery
from django.db.models.functions import Substr
from django_celery_beat.models import PeriodicTask

from fleet.connection import is_kubernetes
from scheduling.models import TaskRun, WatchState

STALE_AFTER_INTERVALS = 3
TASK_PREFIX = "karpweb."


@dataclass
class StepHealth:
    step: str
    every: int  # seconds, as beat schedules it
    last: TaskRun | None
    last_success: datetime.datetime | None
    problem: str = ""
    note: str = ""  # not a problem, but the row says something other than "ok"


def loop_health(now: datetime.datetime) -> list[StepHealth]:
    # Per beat entry, its step's newest run and newest success: index scans of (task, -started_at)
    # that stop at the first row, however long the history.
    runs = TaskRun.objects.filter(task=Substr(OuterRef("task"), len(TASK_PREFIX) + 1)).exclude(
        status=TaskRun.Status.SKIPPED).order_by("-started_at")
    entries = list(PeriodicTask.objects.filter(enabled=True, task__startswith=TASK_PREFIX, interval__period="seconds")
                   .select_related("interval").annotate(
                       last_id=Subquery(runs.values("pk")[:1]),
                       last_success=Subquery(runs.filter(status=TaskRun.Status.SUCCEEDED).values("finished_at")[:1])))
    last = TaskRun.objects.in_bulk([entry.last_id for entry in entries if entry.last_id])
    worker_seen = max((run.started_at for run in last.values()), default=None)
    return sorted((_health(entry.task.removeprefix(TASK_PREFIX), entry.interval.every, last.get(entry.last_id),
                           entry.last_success, now, worker_seen) for entry in entries), key=lambda health: health.step)


def _health(step, every, last, last_success, now, worker_seen=None) -> StepHealth:
    health = StepHealth(step, every, last, last_success)
    stale_after = datetime.timedelta(seconds=every * STALE_AFTER_INTERVALS)
    if last is None:
        # A worker runs every step once when it starts (scheduling.loop.startup): a step that has
        # never run while others run is about to, not late.
        if worker_seen is not None and now - worker_seen <= stale_after:
            health.note = "waiting for its first run"
        else:
            health.problem = "has not run yet: is the Celery worker (and beat) running?"
    elif last.status == TaskRun.Status.FAILED:
        health.problem = f"the last run failed: {(last.error or 'no error recorded').splitlines()[0][:200]}"
    elif last_success is None or now - last_success > stale_after:
        since = "ever" if last_success is None else f"{int((now - last_success).total_seconds())} s"
        health.problem = f"no successful run for {since} (it runs every {every} s)"
    return health


@dataclass
class WatchHealth:
    state: WatchState
    connected: bool
    watching_expected: bool  # a real cluster: the watch process should run
    last_event_ago: float | None  # seconds
    problem: str = ""


def watch_health(now: datetime.datetime) -> WatchHealth:
    """The watch process as the overview shows it: connected (a heartbeat within 30 s), its last
    event, relists, reconnects, lag and batches."""
    state = WatchState.current()
    connected = state.connected(now)
    expected = is_kubernetes()
    ago = (now - state.last_event_at).total_seconds() if state.last_event_at else None
    health = WatchHealth(state, connected, expected, ago)
    if expected and not connected:
        health.problem = ("not running: the cluster is polled by the 30 s sync; start `manage.py watch`"
                          if state.heartbeat_at is None else
                          f"no heartbeat for {int((now - state.heartbeat_at).total_seconds())} s: "
                          "the cluster is polled by the periodic sync meanwhile")
    return health
