"""A worker that starts runs every scheduled step that is due: never run, or last run longer ago
than its interval. Without this the hourly catalogue sync would not run for the first hour of a new
installation, and a worker back from an outage would wait a whole interval for each slow step."""

import datetime
import logging

from django.db.models import Max
from django_celery_beat.models import PeriodicTask

from scheduling.loop.health import TASK_PREFIX
from scheduling.models import TaskRun

log = logging.getLogger(__name__)


def due_steps(now: datetime.datetime) -> list[str]:
    """The Celery task names of the enabled beat entries whose step is due at `now`."""
    entries = PeriodicTask.objects.filter(enabled=True, task__startswith=TASK_PREFIX, interval__isnull=False) \
        .select_related("interval")
    last_started = dict(TaskRun.objects.exclude(status=TaskRun.Status.SKIPPED).values("task")
                        .annotate(last=Max("started_at")).values_list("task", "last"))
    due = []
    for entry in entries:
        last = last_started.get(entry.task.removeprefix(TASK_PREFIX))
        every = datetime.timedelta(**{entry.interval.period: entry.interval.every})
        if last is None or now - last >= every:
            due.append(entry.task)
    return sorted(due)


def run_due_steps(app, now: datetime.datetime) -> list[str]:
    """Queue each due step once (a step already running elsewhere is skipped by its lease)."""
    names = due_steps(now)
    for name in names:
        app.send_task(name)
    if names:
        log.info("worker start: queued the due loop steps %s", ", ".join(names))
    return names
