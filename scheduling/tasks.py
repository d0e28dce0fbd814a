"""Celery tasks: the loop's steps, per cluster, each under its lease and recorded.

Beat schedules live in django-celery-beat's tables (editable in the admin), created by migration
0004 with an expiry shorter than each interval so that a late run never piles up behind the next.
Each scheduled task (`karpweb.sync_kubernetes`, ...) is a dispatcher: in a fleet of one it runs its
step at once, as a single-cluster karpweb did; in a fleet it sends one `karpweb.cluster_step`
(step, cluster id) per cluster to that cluster's shard queue (`Cluster.queue`), or for the EC2 steps
one per (account, region) the clusters use, so that one cluster's slow or failing step never delays
another's. Each runs in its cluster's scope under the lease of its (step, cluster) (its (step,
account, region) for an EC2 step): two workers never run the same one, and a killed worker's task
runs again elsewhere (acks late, reject on worker lost) and acts once."""

import datetime
import logging

from celery import shared_task
from celery.signals import worker_ready
from django.conf import settings
from django.utils import timezone

from fleet.models import Cluster
from fleet.scope import default_cluster
from scheduling.loop import startup, steps
from scheduling.loop.names import EC2_STEPS, STEPS  # noqa: F401 - STEPS is read from here too
from scheduling.loop.runs import run_step, scope_for

log = logging.getLogger(__name__)

RETRY = dict(bind=True, autoretry_for=(Exception,), retry_backoff=2, retry_backoff_max=60, retry_jitter=True, max_retries=3)



@worker_ready.connect
def run_due_steps_at_start(sender=None, **kwargs):
    # sender: the worker's consumer. Sent by `celery worker` once it consumes (not by the test
    # worker of celery.contrib.testing, whose start the loop tests control themselves).
    if settings.REDIS_URL and not settings.KARPWEB_CACHE_URL:
        log.warning("KARPWEB_CACHE_URL is not set: this worker keeps the reservations' free units and the empty "
                    "pools EC2 reported in its own memory; with more than one worker, set it to a Redis they share "
                    "(docs/operations.md)")
    startup.run_due_steps(sender.app, timezone.now())


def targets(name: str) -> list[Cluster]:
    """The clusters a step runs on: every cluster, or for an EC2 step the first cluster (by name)
    of each (account, region) pair."""
    clusters = list(Cluster.objects.select_related("account").order_by("name"))
    if name not in EC2_STEPS:
        return clusters
    firsts: dict[tuple, Cluster] = {}
    for cluster in clusters:
        firsts.setdefault((cluster.account_id, cluster.region), cluster)
    return list(firsts.values())


def ec2_lease_key(name: str, cluster: Cluster) -> str:
    return f"{cluster.account.account_id}:{cluster.region or '-'}" if name in EC2_STEPS else ""


def dispatch(task, name: str) -> dict:
    """Run `name` on every cluster: here in a fleet of one, else one cluster_step per target on its
    shard's queue (expiring when the dispatcher's own message does)."""
    clusters = list(Cluster.objects.select_related("account").order_by("pk")[:2])
    if len(clusters) <= 1:
        # A fleet of one runs here, at once, as a single-cluster karpweb ran (in its cluster's scope).
        return run_on(name, clusters[0] if clusters else default_cluster(), task.request.id)
    expires = _expiry(task.request.expires)
    sent = {}
    for cluster in targets(name):
        cluster_step.apply_async(args=(name, cluster.pk), queue=cluster.queue, expires=expires)
        sent[cluster.queue] = sent.get(cluster.queue, 0) + 1
    return {"dispatched": sum(sent.values()), **{f"queue {queue}": count for queue, count in sorted(sent.items())}}


def _step(name: str):
    return lambda: getattr(steps, name)()  # looked up when it runs


def _expiry(expires) -> datetime.datetime | None:
    if isinstance(expires, str):
        try:
            return datetime.datetime.fromisoformat(expires)
        except ValueError:
            return None
    return expires if isinstance(expires, datetime.datetime) else None


@shared_task(name="karpweb.cluster_step", **RETRY)
def cluster_step(self, name: str, cluster_id: int):
    """One step on one cluster, in its scope, under the (step, cluster) lease."""
    if name not in STEPS:
        raise ValueError(f"step: {name!r} is not a loop step ({', '.join(sorted(STEPS))})")
    cluster = Cluster.objects.select_related("account").filter(pk=cluster_id).first()
    if cluster is None:
        return {"skipped": f"cluster {cluster_id} no longer exists"}
    return run_on(name, cluster, self.request.id)


def run_on(name: str, cluster: Cluster, task_id: str | None) -> dict:
    with scope_for(cluster):
        return run_step(name, _step(name), task_id=task_id or "", cluster=cluster,
                        lease_key=ec2_lease_key(name, cluster)).counts


@shared_task(name="karpweb.sync_ec2", **RETRY)
def sync_ec2(self):
    return dispatch(self, "sync_ec2")


@shared_task(name="karpweb.sync_catalogue", **RETRY)
def sync_catalogue(self):
    return dispatch(self, "sync_catalogue")


@shared_task(name="karpweb.sync_kubernetes", **RETRY)
def sync_kubernetes(self):
    return dispatch(self, "sync_kubernetes")


@shared_task(name="karpweb.provision", **RETRY)
def provision(self):
    return dispatch(self, "provision")


@shared_task(name="karpweb.status", **RETRY)
def status(self):
    return dispatch(self, "status")


@shared_task(name="karpweb.lifecycle", **RETRY)
def lifecycle(self):
    return dispatch(self, "lifecycle")


# The four steps lifecycle runs on one engine run, each on its own (beat schedules lifecycle).
@shared_task(name="karpweb.consolidate", **RETRY)
def consolidate(self):
    return dispatch(self, "consolidate")


@shared_task(name="karpweb.expire_capacity_blocks", **RETRY)
def expire_capacity_blocks(self):
    return dispatch(self, "expire_capacity_blocks")


@shared_task(name="karpweb.demote", **RETRY)
def demote(self):
    return dispatch(self, "demote")
