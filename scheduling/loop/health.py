"""Is the control loop running? For each scheduled step: its last run, its last success, and what
is wrong (failing, or no success for three of its intervals), read from TaskRun and the beat
schedule, in two queries whatever the history's size."""

import datetime
from dataclasses import dataclass

from django.conf import settings
from django.db.models import OuterRef, Subquery, Value
from django.db.models.functions import Coalesce, Substr
from django_celery_beat.models import PeriodicTask

from fleet.connection import is_kubernetes
from scheduling.loop.names import STEPS
from scheduling.models import TaskRun, WatchState

STALE_AFTER_INTERVALS = 3
TASK_PREFIX = "karpweb."
EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


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
    restart = last_worker_restart()
    return sorted((_health(entry.task.removeprefix(TASK_PREFIX), entry.interval.every, last.get(entry.last_id),
                           entry.last_success, now, worker_seen, restart) for entry in entries),
                  key=lambda health: health.step)


@dataclass
class WorkerRestart:
    """The newest line of the quick start's supervisor record (scripts/supervise.sh)."""
    exited_at: datetime.datetime
    code: int
    restart_at: datetime.datetime
    last_line: str
    restarts: int  # lines in the record: exits since ./karpweb.sh run started

    def describe(self) -> str:
        # bash reports a process killed by signal N as 128 + N (9: KILL, the OOM killer's).
        how = f"was killed by signal {self.code - 128}" if self.code > 128 else f"exited with code {self.code}"
        return (f"the Celery worker {how} at {self.exited_at:%H:%M:%S} UTC "
                f"({self.last_line}) and ./karpweb.sh run restarted it at {self.restart_at:%H:%M:%S} UTC "
                f"({self.restarts} restart{'s' if self.restarts != 1 else ''} so far, var/celery-restarts.log); "
                "if it keeps stopping, read var/celery.log, then stop ./karpweb.sh run (Ctrl-C) and start it again")


def last_worker_restart() -> WorkerRestart | None:
    """The supervisor's last record, in the quick start only (settings.KARPWEB_WORKER_RESTARTS is None
    when a process manager runs the worker). A line that does not parse is skipped: the file is written
    by a shell script and may end in a partial line."""
    path = settings.KARPWEB_WORKER_RESTARTS
    try:
        lines = path.read_text(errors="replace").splitlines() if path else []
    except FileNotFoundError:
        return None
    for line in reversed(lines):
        fields = line.split("\t", 3)
        try:
            exited, code, restart, last_line = fields
            return WorkerRestart(_utc(exited), int(code), _utc(restart), last_line, len(lines))
        except ValueError:
            continue
    return None


def _utc(text: str) -> datetime.datetime:
    return datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.UTC)


def _health(step, every, last, last_success, now, worker_seen=None, restart=None) -> StepHealth:
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
    # Why it stopped, when ./karpweb.sh run's supervisor saw the worker exit since the last success.
    if restart and health.problem and (last is None or last.status != TaskRun.Status.FAILED) and (
            last_success is None or restart.exited_at >= last_success):
        health.problem += f" — {restart.describe()}"
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


# --- per cluster ---------------------------------------------------------------------------
# loop_health above reads each step's newest run across the fleet: one cluster's failing step hides
# behind another's success. These read each (cluster, step)'s own runs, as annotations of a Cluster
# queryset, so that a page of clusters costs no query more than its list.

@dataclass
class FailingStep:
    step: str
    since: datetime.datetime  # the first failure since its last success
    error: str  # the last failure's first line

    def as_dict(self) -> dict:
        return {"step": self.step, "since": self.since.isoformat().replace("+00:00", "Z"), "error": self.error}


def _cluster_steps() -> tuple[str, ...]:
    return STEPS


def health_annotations() -> dict:
    """Cluster queryset annotations: per loop step, its newest run's status and error and the start of
    its current run of failures (index scans of TaskRun's (cluster, task, -started_at))."""
    annotations = {}
    for step in _cluster_steps():
        runs = TaskRun.objects.filter(cluster=OuterRef("pk"), task=step).exclude(
            status=TaskRun.Status.SKIPPED).order_by("-started_at", "-id")
        newest = runs.values("status", "error")
        failures = TaskRun.objects.filter(cluster=OuterRef("pk"), task=step, status=TaskRun.Status.FAILED)
        # Inside `streak`, OuterRef is the failed run: its cluster is the cluster's.
        last_ok = TaskRun.objects.filter(cluster=OuterRef("cluster"), task=step, status=TaskRun.Status.SUCCEEDED) \
            .order_by("-started_at").values("started_at")[:1]
        streak = failures.filter(started_at__gt=Coalesce(Subquery(last_ok), Value(EPOCH))).order_by("started_at")
        annotations[f"step_{step}_status"] = Subquery(newest.values("status")[:1])
        annotations[f"step_{step}_error"] = Subquery(runs.filter(status=TaskRun.Status.FAILED).values("error")[:1])
        annotations[f"step_{step}_since"] = Subquery(streak.values("started_at")[:1])
    return annotations


def failing_steps(cluster) -> list[FailingStep]:
    """The failing steps of a cluster read with health_annotations(): those whose newest run failed."""
    failing = []
    for step in _cluster_steps():
        if getattr(cluster, f"step_{step}_status", None) != TaskRun.Status.FAILED:
            continue
        error = (getattr(cluster, f"step_{step}_error", "") or "no error recorded").strip()
        failing.append(FailingStep(step, getattr(cluster, f"step_{step}_since"),
                                   (error.splitlines() or ["no error recorded"])[0][:200]))
    return failing


def with_health(queryset):
    """`queryset` (of Cluster) with health_annotations(); read each row's with failing_steps()."""
    return queryset.annotate(**health_annotations())


def clusters_health(queryset) -> dict[int, list[FailingStep]]:
    """{cluster id: its failing steps} for the clusters of `queryset`: one query."""
    return {cluster.pk: failing_steps(cluster) for cluster in with_health(queryset.order_by())}
