"""The watch process (``manage.py watch``): react like a controller instead of polling.

It lists each kind once, then follows the watches (``ClusterSync``: a 410 Gone relists, a lost
connection resumes) and writes each change to the models as it comes. A pod that becomes pending,
or a node that goes away, opens Karpenter's batch window (``KARPWEB_BATCH_IDLE_SECONDS``, 1 s of
quiet, at most ``KARPWEB_BATCH_MAX_SECONDS``, 10 s); when it closes, one provisioning run plans every
pending pod. A node that appears or changes runs the after-launch pass (registration,
initialization) at once. Only one replica watches: the ``kubernetes-watch`` lease, renewed while it
runs; a second replica waits for it. The periodic steps stay as a safety net."""

from __future__ import annotations

import datetime
import gc
import logging
import threading
import time
from collections.abc import Callable

from django.conf import settings
from django.db.models import F
from django.utils import timezone

from fleet.scope import current_cluster
from scheduling.adapters.kube.sync import ClusterSync, storage_listed
from scheduling.engine.batching import BatchWindow
from scheduling.engine.world import TERMINAL_PHASES
from scheduling.loop import leases
from scheduling.loop.keptworld import KeptWorld
from scheduling.models import Pod, WatchState

log = logging.getLogger(__name__)
LEASE = "kubernetes-watch"
LEASE_TTL = datetime.timedelta(seconds=30)


def per_cluster(name: str) -> str:
    """A lease of the scope's cluster: `name` itself with no scope open (a fleet of one), else
    `name:cluster-<id>`, so that each cluster of a fleet has its own watch process and full sync."""
    cluster = current_cluster()
    return name if cluster is None else f"{name}:cluster-{cluster.pk}"


class WatchLoop:
    def __init__(self, adapter, *, provision: Callable[[], object], after_launch: Callable[[], object] | None = None,
                 idle_seconds: float | None = None, max_seconds: float | None = None,
                 clock: Callable[[], float] = time.monotonic, kept: KeptWorld | None = None,
                 check_seconds: float | None = None, lease_ttl: datetime.timedelta = LEASE_TTL,
                 lifecycle: Callable[[], object] | None = None, lifecycle_seconds: float | None = None) -> None:
        """`kept`: the world `provision` plans from, kept up to date with every change applied here
        and compared with the database every `check_seconds` (KARPWEB_KEPT_WORLD_CHECK_SECONDS).
        `lifecycle`: the lifecycle pass on that world, every `lifecycle_seconds` (KARPWEB_LIFECYCLE_SECONDS)
        while no batch window is open, so that it never delays a waiting pod's provisioning run."""
        self.adapter = adapter
        self.provision = provision
        self.lease_ttl = lease_ttl  # a replica that dies holding it is replaced within this time
        self.kept = kept
        self.check_seconds = check_seconds if check_seconds is not None else settings.KARPWEB_KEPT_WORLD_CHECK_SECONDS
        self.after_launch = after_launch
        self.lifecycle = lifecycle
        self.lifecycle_seconds = (lifecycle_seconds if lifecycle_seconds is not None
                                  else settings.KARPWEB_LIFECYCLE_SECONDS)
        self.lifecycles = 0
        self.window = BatchWindow(idle_seconds if idle_seconds is not None else settings.KARPWEB_BATCH_IDLE_SECONDS,
                                  max_seconds if max_seconds is not None else settings.KARPWEB_BATCH_MAX_SECONDS)
        self.clock = clock
        self.holder = leases.holder_id()
        self.lease = per_cluster(LEASE)  # the scope's cluster's (built in the scope it runs in)
        self.batches = 0
        self.leading = False

    def run(self, *, duration: float | None = None, stop: threading.Event | None = None) -> dict:
        """Watch until `stop` is set or `duration` seconds have passed (waiting for the lease counts)."""
        stop = stop or threading.Event()
        deadline = None if duration is None else self.clock() + duration
        done = lambda: stop.is_set() or (deadline is not None and self.clock() >= deadline)  # noqa: E731
        while not leases.acquire(self.lease, self.holder, self.lease_ttl):
            if done():
                return {"leading": False, "batches": 0, "lifecycles": 0}
            stop.wait(1.0)  # another replica watches: wait for its lease to lapse
        self.leading = True
        log.info("watching the cluster (lease %s held by %s)", self.lease, self.holder)
        sync = ClusterSync(self.adapter)
        sync.start()
        renewed = self.clock()
        heartbeat = Heartbeat(self.holder)
        checked = self.clock()
        lifecycle_at = None  # the first pass runs once the kept world is loaded
        storage_recorded = False
        try:
            while not done():
                stats = sync.pump(timeout=0.1)
                now = self.clock()
                if not storage_recorded and storage_listed(sync.resource_versions):
                    WatchState.record(storage_listed_at=timezone.now())  # the plan reads pods' volumes from now
                    storage_recorded = True
                heartbeat.add(stats, now, kept_objects=self.kept.size() if self.kept is not None else 0)
                if self.kept is not None:
                    self.kept.apply(stats)
                    if not self.kept.loaded and all(kind in sync.resource_versions for kind in sync.kinds):
                        self.kept.load()  # once the first lists are in: not in the first batch's time
                        # Millions of long-lived objects: out of the cyclic collector's way, or each
                        # full collection (a second at 50,000 pods) lands in some batch's time.
                        gc.collect()
                        gc.freeze()
                    if now - checked >= self.check_seconds:
                        self.kept.check()
                        checked = now
                if (stats.created["Pod"] or stats.updated["Pod"] or stats.deleted["Node"]) and pending_pods():
                    self.window.trigger(now)
                if (stats.created["Node"] or stats.updated["Node"]) and self.after_launch is not None:
                    self.after_launch()
                if self.window.due(now):
                    self.window.close()
                    self.batches += 1
                    WatchState.record(batches=F("batches") + 1, last_batch_at=timezone.now())
                    self.provision()
                if self._lifecycle_due(now, lifecycle_at):
                    lifecycle_at = now
                    self.lifecycles += 1
                    self.lifecycle()
                if now - renewed >= self.lease_ttl.total_seconds() / 3:
                    if not leases.acquire(self.lease, self.holder, self.lease_ttl):
                        log.warning("lost the %s lease; another replica watches now", self.lease)
                        break
                    renewed = now
        finally:
            sync.stop()
            heartbeat.stop()
            leases.release(self.lease, self.holder)
            self.leading = False
        return {"leading": True, "batches": self.batches, "lifecycles": self.lifecycles}

    def _lifecycle_due(self, now: float, last: float | None) -> bool:
        if self.lifecycle is None or self.window.open or (self.kept is not None and not self.kept.loaded):
            return False
        return last is None or now - last >= self.lifecycle_seconds


class Heartbeat:
    """The watch's state for the console and metrics (WatchState): written every
    HEARTBEAT_SECONDS, with what the watch applied since the last write."""

    HEARTBEAT_SECONDS = 2.0

    def __init__(self, holder: str) -> None:
        self.holder = holder
        self.events = self.relists = self.reconnects = 0
        self.lag = 0.0
        self.changed_at = self.event_at = None  # wall-clock times of the newest change (list or event) and event
        self.written = None
        now = timezone.now()
        WatchState.record(holder=holder, started_at=now, heartbeat_at=now, lag_seconds=0.0)

    def add(self, stats, clock_now: float, kept_objects: int = 0) -> None:
        if stats.events or stats.lists:
            self.changed_at = timezone.now()
        if stats.events:
            self.event_at = self.changed_at
        self.events += stats.events
        self.relists += stats.relists
        self.reconnects += stats.reconnects
        self.lag = max(self.lag, stats.lag_seconds)
        if self.written is None or clock_now - self.written >= self.HEARTBEAT_SECONDS:
            self.write(kept_objects=kept_objects)
            self.written = clock_now

    def write(self, **extra) -> None:
        fields = dict(heartbeat_at=timezone.now(), lag_seconds=self.lag, events=F("events") + self.events,
                      relists=F("relists") + self.relists, reconnects=F("reconnects") + self.reconnects, **extra)
        if self.changed_at is not None:
            fields["world_as_of"] = self.changed_at
        if self.event_at is not None:
            fields["last_event_at"] = self.event_at
        WatchState.record(**fields)
        self.events = self.relists = self.reconnects = 0
        self.lag = 0.0
        self.changed_at = self.event_at = None

    def stop(self) -> None:
        self.write(holder="", kept_objects=0)


def pending_pods() -> bool:
    return Pod.objects.filter(node_name="").exclude(phase__in=TERMINAL_PHASES).exists()


FULL_SYNC = "kubernetes-full-sync"


def full_sync_due(now) -> bool:
    """Whether the periodic Kubernetes sync lists every kind now: always without a watch process;
    with one, once per KARPWEB_KUBERNETES_RESYNC_SECONDS (a lease, so of two workers one lists)."""
    if not watching(now):
        return True
    ttl = datetime.timedelta(seconds=settings.KARPWEB_KUBERNETES_RESYNC_SECONDS)
    return leases.acquire(per_cluster(FULL_SYNC), leases.holder_id(), ttl)


DRIFT = "kubernetes_drift"  # EventCount name, label = the kind the periodic sync had to repair


def watching(now) -> bool:
    """Whether a watch process holds its lease now."""
    from scheduling.models import Lease

    return Lease.objects.filter(name=per_cluster(LEASE), expires_at__gt=now).exclude(holder="").exists()


def count_drift(stats, now) -> int:
    """While the watch runs, what the periodic full sync still had to change is drift the watch
    missed: counted per kind (karpweb_kubernetes_drift_repairs_total) and logged."""
    from scheduling.models import EventCount

    if not watching(now):
        return 0
    repaired = 0
    for kind in set(stats.created) | set(stats.updated) | set(stats.deleted):
        changed = stats.created[kind] + stats.updated[kind] + stats.deleted[kind]
        if changed:
            EventCount.bump(DRIFT, kind, changed)
            repaired += changed
    if repaired:
        log.warning("the periodic Kubernetes sync repaired %d object(s) the watch had missed: %s", repaired, stats.summary())
    return repaired
