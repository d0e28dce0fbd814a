"""Celery tasks: thin wrappers that run a loop step under its lease and record it.

Beat schedules live in django-celery-beat's tables (editable in the admin), created by migration
0004 with an expiry shorter than each interval so that a late run never piles up behind the next."""

from celery import shared_task
from celery.signals import worker_ready
from django.utils import timezone

from scheduling.loop import startup, steps
from scheduling.loop.runs import run_step

RETRY = dict(bind=True, autoretry_for=(Exception,), retry_backoff=2, retry_backoff_max=60, retry_jitter=True, max_retries=3)


@worker_ready.connect
def run_due_steps_at_start(sender=None, **kwargs):
    # sender: the worker's consumer. Sent by `celery worker` once it consumes (not by the test
    # worker of celery.contrib.testing, whose start the loop tests control themselves).
    startup.run_due_steps(sender.app, timezone.now())


def _run(task, name, step):
    return run_step(name, step, task_id=task.request.id or "").counts


@shared_task(name="karpweb.sync_ec2", **RETRY)
def sync_ec2(self):
    return _run(self, "sync_ec2", steps.sync_ec2)


@shared_task(name="karpweb.sync_catalogue", **RETRY)
def sync_catalogue(self):
    return _run(self, "sync_catalogue", steps.sync_catalogue)


@shared_task(name="karpweb.sync_kubernetes", **RETRY)
def sync_kubernetes(self):
    return _run(self, "sync_kubernetes", steps.sync_kubernetes)


@shared_task(name="karpweb.provision", **RETRY)
def provision(self):
    return _run(self, "provision", steps.provision)


@shared_task(name="karpweb.status", **RETRY)
def status(self):
    return _run(self, "status", steps.status)


@shared_task(name="karpweb.lifecycle", **RETRY)
def lifecycle(self):
    return _run(self, "lifecycle", steps.lifecycle)


# The four steps lifecycle runs on one engine run, each on its own (beat schedules lifecycle).
@shared_task(name="karpweb.consolidate", **RETRY)
def consolidate(self):
    return _run(self, "consolidate", steps.consolidate)


@shared_task(name="karpweb.expire_capacity_blocks", **RETRY)
def expire_capacity_blocks(self):
    return _run(self, "expire_capacity_blocks", steps.expire_capacity_blocks)


@shared_task(name="karpweb.demote", **RETRY)
def demote(self):
    return _run(self, "demote", steps.demote)
