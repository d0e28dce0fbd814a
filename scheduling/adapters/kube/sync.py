"""Mirror the cluster into the Django models: list, then watch from the list's resourceVersion.

Works on any :class:`~.interface.ClusterAdapter` (the real cluster or the simulated world):

- :meth:`ClusterSync.sync_once` lists every kind and replaces the rows of that kind (rows whose
  object disappeared are deleted), in bulk: one upsert per kind and a handful of lookups.
- :meth:`ClusterSync.start` / :meth:`ClusterSync.pump` / :meth:`ClusterSync.stop` (or
  :meth:`ClusterSync.run` for all three) keep the models current: one reader thread per kind lists
  and then watches from the resourceVersion; a ``410 Gone`` makes it list again, a lost connection
  (an API server restart, say) makes it reconnect with backoff and resume from the last
  resourceVersion it saw. Reader threads only talk to the API; every database write happens in the
  thread that calls ``pump``, batched (coalesced per object) so a busy cluster costs few queries.

Foreign keys between the mirrored kinds (NodePool -> EC2NodeClass, NodeClaim -> NodePool and
EC2NodeClass, Node -> NodeClaim and NodePool, Pod -> Node, and the reservation labels ->
CapacityReservation) are resolved by name when a row is written, and re-linked when the object
they point to arrives later.
"""

from __future__ import annotations

import functools
import logging
import queue
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from reservations.models import OPEN_RESERVATIONS_ANNOTATION, CapacityReservation, EC2NodeClass
from scheduling.engine import labels as L
from scheduling.engine.groups import merge_terms
from scheduling.engine.quantities import QuantityError, parse_quantity
from scheduling.engine.timeutil import parse_optional_time
from scheduling.models import KubeObject, Node, NodeClaim, NodePool, Pod

from .errors import ClusterError, ResourceVersionExpired
from .interface import (
    KEPT_WHOLE_KINDS, KINDS, OPTIONAL_KINDS, SPREAD_SOURCE_KINDS, STORAGE_KINDS, ClusterAdapter, ObjectList, WatchEvent,
)
from .resources import resource_for

log = logging.getLogger(__name__)

MODELS = {"EC2NodeClass": EC2NodeClass, "NodePool": NodePool, "NodeClaim": NodeClaim, "Node": Node, "Pod": Pod,
          **{kind: KubeObject for kind in KEPT_WHOLE_KINDS}}
NODECLASS_LABEL = "karpenter.k8s.aws/ec2nodeclass"
BATCH_SIZE = 500
# EC2NodeClass status fields that say what launches resolve to (mirrored into status_launch).
LAUNCH_STATUS_FIELDS = ("amis", "subnets", "securityGroups", "instanceProfile")


@dataclass
class SyncStats:
    created: Counter = field(default_factory=Counter)
    updated: Counter = field(default_factory=Counter)
    deleted: Counter = field(default_factory=Counter)
    events: int = 0
    lists: int = 0
    relists: int = 0  # lists after a 410 Gone
    reconnects: int = 0  # watches resumed after a connection was lost
    lag_seconds: float = 0.0  # the longest an event waited between its read and its write
    # What changed, for readers that keep their own copy (the watch process's kept world): the
    # keys each kind's events touched, and the kinds listed in full (every row may have changed).
    touched: dict[str, set[tuple]] = field(default_factory=dict)
    listed: set[str] = field(default_factory=set)
    errors: list[ClusterError] = field(default_factory=list)

    def add_error(self, error: ClusterError) -> None:
        if not self.errors or self.errors[-1].message != error.message:
            self.errors.append(error)

    def summary(self) -> str:
        parts = []
        for kind in KINDS:
            counts = [f"{label} {counter[kind]}" for label, counter in
                      (("+", self.created), ("~", self.updated), ("-", self.deleted)) if counter[kind]]
            if counts:
                parts.append(f"{kind} " + " ".join(counts))
        text = ", ".join(parts) or "no changes"
        if self.errors:
            text += f"; {len(self.errors)} error(s), last: {self.errors[-1].message}"
        return text


# --- object -> row ------------------------------------------------------------------------------
def _meta(obj: dict) -> dict:
    return obj.get("metadata") or {}



def _replicas(value) -> int | None:
    """A NodePool's spec.replicas (its CRD admits integers from 0 only); None: a dynamic NodePool."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _clip(value, length: int) -> str:
    return str(value or "")[:length]


def _quantity(value, milli: bool = False) -> int:
    if value in (None, ""):
        return 0
    try:
        return parse_quantity(value, milli=milli)
    except QuantityError:
        log.warning("ignoring invalid quantity %r", value)
        return 0


def _capacity_type(labels: dict) -> str:
    value = labels.get(L.CAPACITY_TYPE, "")
    return value if value in L.CAPACITY_TYPES else ""


def _condition_time(conditions: list[dict], condition_type: str) -> datetime | None:
    for condition in conditions or []:
        if condition.get("type") == condition_type and condition.get("status") == "True":
            return parse_optional_time(condition.get("lastTransitionTime"))
    return None


def pod_requests(spec: dict) -> tuple[int, int]:
    """Effective (cpu millicores, memory bytes) the scheduler reserves for a pod: the larger of the
    containers' sum (with restartable init "sidecar" containers) and each init container in turn,
    plus the pod overhead."""
    def requests(container: dict) -> tuple[int, int]:
        values = (container.get("resources") or {}).get("requests") or {}
        return _quantity(values.get("cpu"), milli=True), _quantity(values.get("memory"))

    cpu = memory = 0
    for container in spec.get("containers") or []:
        c, m = requests(container)
        cpu, memory = cpu + c, memory + m
    sidecar_cpu = sidecar_memory = 0
    init_cpu = init_memory = 0
    for container in spec.get("initContainers") or []:
        c, m = requests(container)
        if container.get("restartPolicy") == "Always":
            sidecar_cpu, sidecar_memory = sidecar_cpu + c, sidecar_memory + m
            init_cpu, init_memory = max(init_cpu, sidecar_cpu), max(init_memory, sidecar_memory)
        else:
            init_cpu, init_memory = max(init_cpu, sidecar_cpu + c), max(init_memory, sidecar_memory + m)
    overhead = spec.get("overhead") or {}
    cpu = max(cpu + sidecar_cpu, init_cpu) + _quantity(overhead.get("cpu"), milli=True)
    memory = max(memory + sidecar_memory, init_memory) + _quantity(overhead.get("memory"))
    return cpu, memory


POD_SPEC_FIELDS = ("nodeSelector", "affinity", "tolerations", "topologySpreadConstraints", "priorityClassName",
                   "schedulerName", "overhead", "preemptionPolicy", "runtimeClassName")


def _pod_spec(spec: dict) -> dict:
    kept = {key: spec[key] for key in POD_SPEC_FIELDS if spec.get(key) not in (None, [], {})}
    claims = _claim_volumes(spec.get("volumes") or [])
    if claims:
        kept["volumes"] = claims
    for key in ("containers", "initContainers"):
        if spec.get(key):
            kept[key] = [
                {"name": c.get("name", ""), "resources": {"requests": (c.get("resources") or {}).get("requests") or {}},
                 **({"restartPolicy": c["restartPolicy"]} if c.get("restartPolicy") else {}),
                 **({"ports": ports} if (ports := _host_ports(c)) else {})}
                for c in spec[key]
            ]
    return kept


def _claim_volumes(volumes: list) -> list[dict]:
    """The volumes that use a claim (what the engine's volume rules read); not their other sources."""
    kept = []
    for volume in volumes:
        if not isinstance(volume, dict):
            continue
        if volume.get("persistentVolumeClaim"):
            kept.append({"name": volume.get("name", ""),
                         "persistentVolumeClaim": {"claimName": volume["persistentVolumeClaim"].get("claimName", "")}})
        elif volume.get("ephemeral"):
            kept.append({"name": volume.get("name", ""), "ephemeral": {}})
    return kept


def storage_listed(kinds) -> bool:
    """Whether every storage kind has been listed (until then a plan reads no pod's volumes)."""
    return set(STORAGE_KINDS) <= set(kinds)


def _host_ports(container: dict) -> list[dict]:
    """The container's ports that take a host port (the engine keeps pods whose host ports clash apart)."""
    return [{k: p[k] for k in ("containerPort", "hostPort", "protocol", "hostIP") if k in p}
            for p in container.get("ports") or [] if isinstance(p, dict) and p.get("hostPort")]


def _controller(meta: dict) -> tuple[str, str]:
    refs = meta.get("ownerReferences") or []
    ref = next((r for r in refs if r.get("controller")), refs[0] if refs else None)
    return (_clip(ref.get("kind"), 64), _clip(ref.get("name"), 253)) if ref else ("", "")


def _chunked_lookup(model, field_name: str, values: set[str]) -> dict:
    values = sorted(v for v in values if v)
    found = {}
    for start in range(0, len(values), BATCH_SIZE):
        found.update(model.objects.filter(**{f"{field_name}__in": values[start:start + BATCH_SIZE]})
                     .values_list(field_name, "id"))
    return found


def _not_served(kind: str, error: ClusterError) -> bool:
    """An optional kind the cluster does not serve (404 on its list): nothing to mirror."""
    return kind in OPTIONAL_KINDS and error.not_found


def _namespaced(kind: str) -> bool:
    return resource_for(kind).namespaced


def _rows(kind: str):
    """The rows that mirror `kind`'s objects (the storage kinds share one table)."""
    model = MODELS[kind]
    return model.objects.filter(kind=kind) if model is KubeObject else model.objects.all()


def mirrored_kinds() -> tuple[str, ...]:
    """The kinds a sync reads: all but the default spread's sources when no default is configured."""
    if settings.KARPWEB_DEFAULT_TOPOLOGY_SPREAD_CONSTRAINTS:
        return KINDS
    return tuple(kind for kind in KINDS if kind not in SPREAD_SOURCE_KINDS)


def _kube_object_row(kind: str, obj: dict, links, now: datetime) -> dict:
    """An object kept whole, less what only the API server's bookkeeping needs (a list's items carry no
    kind: it is the list's); a default spread source, only its selector (ReplicaSets are many)."""
    meta = {key: value for key, value in _meta(obj).items() if key != "managedFields"}
    body = {**obj, "apiVersion": resource_for(kind).api_version, "kind": kind, "metadata": meta}
    if kind == "DaemonSet":  # what the engine reads: its pods' template (the rest changes with every rollout)
        body = {"apiVersion": body["apiVersion"], "kind": kind,
                "metadata": {key: meta[key] for key in ("name", "namespace", "uid") if key in meta},
                "spec": {"template": (obj.get("spec") or {}).get("template") or {}}}
    elif kind in SPREAD_SOURCE_KINDS:
        body = {"apiVersion": body["apiVersion"], "kind": kind,
                "metadata": {key: meta[key] for key in ("name", "namespace", "uid") if key in meta},
                "spec": {"selector": (obj.get("spec") or {}).get("selector")}}
    return {"kind": kind, "namespace": meta.get("namespace", ""), "name": meta.get("name", ""), "body": body,
            "synced_at": now}


class _Links:
    """name -> id lookups for the foreign keys of one batch, loaded in bulk."""

    def __init__(self) -> None:
        self._cache: dict[str, dict] = {}

    def _load(self, key: str, loader: Callable[[], Iterable[tuple]]) -> dict:
        if key not in self._cache:
            self._cache[key] = dict(loader())
        return self._cache[key]

    def node_classes(self) -> dict:
        return self._load("nc", lambda: EC2NodeClass.objects.values_list("name", "id"))

    def node_pools(self) -> dict:
        return self._load("np", lambda: NodePool.objects.values_list("name", "id"))

    def node_claims_by_node(self) -> dict:
        return self._load("claims", lambda: NodeClaim.objects.exclude(node_name="").values_list("node_name", "id"))

    def nodes(self, names: set[str]) -> dict:
        return _chunked_lookup(Node, "name", names)

    def reservations(self, ids: set[str]) -> dict:
        return _chunked_lookup(CapacityReservation, "reservation_id", ids)

    def forget(self, *keys: str) -> None:
        for key in keys:
            self._cache.pop(key, None)


class ClusterSync:
    def __init__(self, adapter: ClusterAdapter, kinds: Iterable[str] | None = None, *, watch_timeout: int = 60,
                 clock: Callable[[], datetime] = timezone.now) -> None:
        kinds = mirrored_kinds() if kinds is None else kinds
        unknown = set(kinds) - set(KINDS)
        if unknown:
            raise ValueError(f"unknown kinds {sorted(unknown)}; expected some of {', '.join(KINDS)}")
        self.adapter = adapter
        self.kinds = [kind for kind in KINDS if kind in set(kinds)]
        self.watch_timeout = watch_timeout
        self.clock = clock
        self.resource_versions: dict[str, str] = {}
        # NodeClaim name -> spec.nodeClassRef.name (not a column; needed to link late EC2NodeClasses).
        self._claim_classes: dict[str, str] = {}
        self._queue: queue.Queue = queue.Queue()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.stats = SyncStats()

    # --- one-shot ------------------------------------------------------------------------------
    def sync_once(self) -> SyncStats:
        """List every kind and make the models match. Errors (a kind not installed, forbidden, the
        server unreachable) are collected per kind; the other kinds still sync."""
        stats = SyncStats()
        for kind in self.kinds:
            try:
                snapshot = self.adapter.list(kind)
            except ClusterError as error:
                if _not_served(kind, error):
                    self.apply_snapshot(ObjectList(kind, [], ""), stats)  # none to mirror: the rows go
                    continue
                stats.add_error(error)
                continue
            stats.lists += 1
            self.apply_snapshot(snapshot, stats)
        self._merge(stats)
        return stats

    # --- applying ------------------------------------------------------------------------------
    def apply_snapshot(self, snapshot: ObjectList, stats: SyncStats | None = None) -> SyncStats:
        """Replace every row of ``snapshot.kind`` with the snapshot's objects."""
        stats = stats or SyncStats()
        keys = {self._key(snapshot.kind, obj) for obj in snapshot.items}
        with transaction.atomic():
            existing = self._existing_keys(snapshot.kind)
            gone = [pk for key, pk in existing.items() if key not in keys]
            for start in range(0, len(gone), BATCH_SIZE):
                _rows(snapshot.kind).filter(pk__in=gone[start:start + BATCH_SIZE]).delete()
            stats.deleted[snapshot.kind] += len(gone)
            if snapshot.kind == "NodeClaim":
                self._claim_classes = {}
            self._write(snapshot.kind, snapshot.items, existing, stats)
            if snapshot.kind not in KEPT_WHOLE_KINDS:
                self._relink({snapshot.kind})
        self.resource_versions[snapshot.kind] = snapshot.resource_version
        stats.listed.add(snapshot.kind)
        return stats

    def apply_events(self, events: Iterable[WatchEvent], stats: SyncStats | None = None) -> SyncStats:
        """Apply watch events; several events for one object collapse to the last one."""
        stats = stats or SyncStats()
        latest: dict[str, dict[tuple, WatchEvent]] = {kind: {} for kind in KINDS}
        for event in events:
            stats.events += 1
            if event.resource_version:
                self.resource_versions[event.kind] = event.resource_version
            if event.type == "BOOKMARK" or event.kind not in latest:
                continue
            latest[event.kind][self._key(event.kind, event.object)] = event
        with transaction.atomic():
            for kind in KINDS:
                if not latest[kind]:
                    continue
                stats.touched.setdefault(kind, set()).update(latest[kind])
                deleted = [key for key, event in latest[kind].items() if event.type == "DELETED"]
                upserts = [event.object for event in latest[kind].values() if event.type != "DELETED"]
                if deleted:
                    existing = self._existing_keys(kind, deleted)
                    pks = [existing[key] for key in deleted if key in existing]
                    _rows(kind).filter(pk__in=pks).delete()
                    stats.deleted[kind] += len(pks)
                    if kind == "NodeClaim":
                        for key in deleted:
                            self._claim_classes.pop(key[0], None)
                if upserts:
                    existing = self._existing_keys(kind, [self._key(kind, obj) for obj in upserts])
                    self._write(kind, upserts, existing, stats)
            self._relink({kind for kind in KINDS if latest[kind]} - set(KEPT_WHOLE_KINDS))
        return stats

    @staticmethod
    def _key(kind: str, obj: dict) -> tuple:
        meta = _meta(obj)
        return (meta.get("namespace", ""), meta.get("name", "")) if _namespaced(kind) else (meta.get("name", ""),)

    def _existing_keys(self, kind: str, keys: list[tuple] | None = None) -> dict[tuple, int]:
        """Primary keys of the rows for ``keys`` (all rows of the kind when None)."""
        fields = ("namespace", "name", "pk") if _namespaced(kind) else ("name", "pk")
        if keys is None:
            return {tuple(row[:-1]): row[-1] for row in _rows(kind).values_list(*fields)}
        names = sorted({key[-1] for key in keys})
        wanted = set(keys)
        found = {}
        for start in range(0, len(names), BATCH_SIZE):
            for row in _rows(kind).filter(name__in=names[start:start + BATCH_SIZE]).values_list(*fields):
                if tuple(row[:-1]) in wanted:
                    found[tuple(row[:-1])] = row[-1]
        return found

    def _write(self, kind: str, objects: list[dict], existing: dict[tuple, int], stats: SyncStats) -> None:
        if not objects:
            return
        now = self.clock()
        links = _Links()
        build = (functools.partial(_kube_object_row, kind) if kind in KEPT_WHOLE_KINDS
                 else getattr(self, f"_row_{kind.lower()}"))
        rows = [build(obj, links, now) for obj in objects]
        if kind == "Pod":
            node_ids = links.nodes({row["node_name"] for row in rows})
            for row in rows:
                row["node_id"] = node_ids.get(row["node_name"])
        if kind in ("NodeClaim", "Node"):
            reservation_ids = links.reservations({row["reservation_label"] for row in rows})
            for row in rows:
                row["reservation_id"] = reservation_ids.get(row["reservation_label"])
        model = MODELS[kind]
        # The rows' unique constraint: names are unique per cluster (each row gets the working cluster).
        unique = (["cluster", "kind", "namespace", "name"] if kind in KEPT_WHOLE_KINDS
                  else ["cluster", "namespace", "name"] if kind == "Pod" else ["cluster", "name"])
        update_fields = [name for name in rows[0] if name not in unique and name != "selected_reservation_ids"]
        instances = []
        for row in rows:
            instance = model(**{k: v for k, v in row.items() if k != "selected_reservation_ids"})
            instances.append(instance)
        model.objects.bulk_create(instances, batch_size=BATCH_SIZE, update_conflicts=True, unique_fields=unique,
                                  update_fields=update_fields)
        created = sum(1 for obj in objects if self._key(kind, obj) not in existing)
        stats.created[kind] += created
        stats.updated[kind] += len(objects) - created
        if kind == "EC2NodeClass":
            self._write_selected_reservations(rows)

    def _write_selected_reservations(self, rows: list[dict]) -> None:
        ids = dict(EC2NodeClass.objects.filter(name__in=[r["name"] for r in rows]).values_list("name", "id"))
        wanted = {r["name"]: r["selected_reservation_ids"] for r in rows}
        reservations = _Links().reservations({rid for ids_ in wanted.values() for rid in ids_})
        through = EC2NodeClass.selected_reservations.through
        through.objects.filter(ec2nodeclass_id__in=ids.values()).delete()
        through.objects.bulk_create([
            through(ec2nodeclass_id=ids[name], capacityreservation_id=reservations[rid])
            for name, rids in wanted.items() if name in ids for rid in sorted(set(rids)) if rid in reservations
        ], batch_size=BATCH_SIZE)

    # --- one row per kind ---------------------------------------------------------------------------
    def _row_ec2nodeclass(self, obj: dict, links: _Links, now: datetime) -> dict:
        meta, spec, status = _meta(obj), dict(obj.get("spec") or {}), obj.get("status") or {}
        annotations = meta.get("annotations") or {}
        # karpweb's group terms live in an annotation (Karpenter's CRD would prune them from spec).
        terms = merge_terms(spec.pop("capacityReservationSelectorTerms", None) or [], annotations)
        reservations = status.get("capacityReservations") or []
        return {
            "name": meta.get("name", ""), "uid": _clip(meta.get("uid"), 64),
            "resource_version": _clip(meta.get("resourceVersion"), 64),
            "capacity_reservation_selector_terms": terms, "spec": spec,
            "annotations": annotations,
            "open_reservations": annotations.get(OPEN_RESERVATIONS_ANNOTATION) == "true",
            "status_capacity_reservations": reservations, "conditions": status.get("conditions") or [],
            "status_launch": {key: status[key] for key in LAUNCH_STATUS_FIELDS if key in status},
            "created_at": parse_optional_time(meta.get("creationTimestamp")), "synced_at": now,
            "selected_reservation_ids": [r.get("id") for r in reservations if r.get("id")],
        }

    def _row_nodepool(self, obj: dict, links: _Links, now: datetime) -> dict:
        meta, spec, status = _meta(obj), obj.get("spec") or {}, obj.get("status") or {}
        template = spec.get("template") or {}
        template_spec = template.get("spec") or {}
        disruption = spec.get("disruption") or {}
        ref = template_spec.get("nodeClassRef") or {}
        return {
            "name": meta.get("name", ""), "uid": _clip(meta.get("uid"), 64),
            "resource_version": _clip(meta.get("resourceVersion"), 64),
            "weight": int(spec.get("weight") or 0), "replicas": _replicas(spec.get("replicas")),
            "node_class_ref": ref, "node_class_id": links.node_classes().get(ref.get("name")),
            "requirements": template_spec.get("requirements") or [],
            "taints": template_spec.get("taints") or [], "startup_taints": template_spec.get("startupTaints") or [],
            "labels": (template.get("metadata") or {}).get("labels") or {},
            "limits": spec.get("limits") or {},
            "consolidation_policy": disruption.get("consolidationPolicy") or NodePool.ConsolidationPolicy.WHEN_EMPTY_OR_UNDERUTILIZED,
            "consolidate_after": _clip(disruption.get("consolidateAfter") or "0s", 32),
            "budgets": disruption.get("budgets") if disruption.get("budgets") is not None else [{"nodes": "10%"}],
            "expire_after": _clip(template_spec.get("expireAfter") or "720h", 32),
            "termination_grace_period": _clip(template_spec.get("terminationGracePeriod") or "", 32),
            "conditions": status.get("conditions") or [], "status_resources": status.get("resources") or {},
            "created_at": parse_optional_time(meta.get("creationTimestamp")), "synced_at": now,
        }

    def _row_nodeclaim(self, obj: dict, links: _Links, now: datetime) -> dict:
        meta, spec, status = _meta(obj), obj.get("spec") or {}, obj.get("status") or {}
        labels = meta.get("labels") or {}
        class_name = (spec.get("nodeClassRef") or {}).get("name") or labels.get(NODECLASS_LABEL, "")
        self._claim_classes[meta.get("name", "")] = class_name
        reservation = labels.get(L.RESERVATION_ID, "")
        conditions = status.get("conditions") or []
        return {
            "name": meta.get("name", ""), "uid": _clip(meta.get("uid"), 64),
            "node_pool_id": links.node_pools().get(labels.get(L.NODEPOOL)),
            "node_class_id": links.node_classes().get(class_name),
            "instance_type": _clip(labels.get(L.INSTANCE_TYPE), 64), "zone": _clip(labels.get(L.ZONE), 32),
            "capacity_type": _capacity_type(labels),
            "reservation_id": None,  # resolved for the whole batch in _write
            "reservation_label": _clip(reservation, 64), "labels": labels,
            "annotations": meta.get("annotations") or {}, "expire_after": _clip(spec.get("expireAfter"), 32),
            "requirements": spec.get("requirements") or [],
            "resources": (spec.get("resources") or {}).get("requests") or {},
            "provider_id": _clip(status.get("providerID"), 255), "node_name": _clip(status.get("nodeName"), 253),
            "image_id": _clip(status.get("imageID"), 64), "conditions": conditions,
            "created_at": parse_optional_time(meta.get("creationTimestamp")),
            "launched_at": _condition_time(conditions, "Launched"),
            "registered_at": _condition_time(conditions, "Registered"),
            "initialized_at": _condition_time(conditions, "Initialized"),
            "deleting_since": parse_optional_time(meta.get("deletionTimestamp")), "synced_at": now,
        }

    def _row_node(self, obj: dict, links: _Links, now: datetime) -> dict:
        meta, spec, status = _meta(obj), obj.get("spec") or {}, obj.get("status") or {}
        labels = meta.get("labels") or {}
        allocatable = status.get("allocatable") or {}
        reservation = labels.get(L.RESERVATION_ID, "")
        ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
        return {
            "name": meta.get("name", ""), "uid": _clip(meta.get("uid"), 64),
            "node_pool_id": links.node_pools().get(labels.get(L.NODEPOOL)),
            "node_claim_id": None,  # linked in _relink (one claim per node)
            "instance_type": _clip(labels.get(L.INSTANCE_TYPE), 64), "zone": _clip(labels.get(L.ZONE), 32),
            "capacity_type": _capacity_type(labels),
            "reservation_id": None,  # resolved for the whole batch in _write
            "reservation_label": _clip(reservation, 64), "labels": labels,
            "annotations": meta.get("annotations") or {}, "taints": spec.get("taints") or [],
            "allocatable_cpu_millicores": _quantity(allocatable.get("cpu"), milli=True),
            "allocatable_memory_bytes": _quantity(allocatable.get("memory")),
            "allocatable_pods": _quantity(allocatable.get("pods")) if allocatable.get("pods") else 110,
            # Extended resources are domain-prefixed (nvidia.com/gpu, vpc.amazonaws.com/efa, ...).
            "allocatable_extended": {k: _quantity(v) for k, v in sorted(allocatable.items()) if "/" in k},
            "provider_id": _clip(spec.get("providerID"), 255), "ready": ready,
            "conditions": [{k: c[k] for k in ("type", "status", "lastTransitionTime") if k in c}
                           for c in status.get("conditions") or [] if isinstance(c, dict)],
            "unschedulable": bool(spec.get("unschedulable")),
            "created_at": parse_optional_time(meta.get("creationTimestamp")),
            "deleting_since": parse_optional_time(meta.get("deletionTimestamp")), "synced_at": now,
        }

    def _row_pod(self, obj: dict, links: _Links, now: datetime) -> dict:
        meta, spec, status = _meta(obj), obj.get("spec") or {}, obj.get("status") or {}
        cpu, memory = pod_requests(spec)
        owner_kind, owner_name = _controller(meta)
        node_name = spec.get("nodeName") or ""
        return {
            "namespace": meta.get("namespace", ""), "name": meta.get("name", ""), "uid": _clip(meta.get("uid"), 64),
            "node_id": None,  # resolved for the whole batch in _write
            "node_name": _clip(node_name, 253), "phase": _clip(status.get("phase") or "Pending", 16),
            "cpu_request_millicores": cpu, "memory_request_bytes": memory,
            "labels": meta.get("labels") or {}, "annotations": meta.get("annotations") or {},
            "spec": _pod_spec(spec), "owner_kind": owner_kind, "owner_name": owner_name,
            "priority": int(spec.get("priority") or 0),
            "created_at": parse_optional_time(meta.get("creationTimestamp")),
            "started_at": parse_optional_time(status.get("startTime")),
            "deleting_since": parse_optional_time(meta.get("deletionTimestamp")), "synced_at": now,
        }

    # --- links ---------------------------------------------------------------------------------
    def _relink(self, kinds: set[str] | None = None) -> None:
        """Point foreign keys at rows that exist now (their targets may have arrived after them)."""
        if kinds is not None and kinds <= {"Pod"}:
            self._relink_pods()
            return
        classes = dict(EC2NodeClass.objects.values_list("name", "id"))
        pools = dict(NodePool.objects.values_list("name", "id"))

        changed = []
        for pool in NodePool.objects.only("id", "node_class_ref", "node_class_id"):
            target = classes.get((pool.node_class_ref or {}).get("name"))
            if pool.node_class_id != target:
                pool.node_class_id = target
                changed.append(pool)
        NodePool.objects.bulk_update(changed, ["node_class"], batch_size=BATCH_SIZE)

        changed = []
        claims = list(NodeClaim.objects.only("id", "name", "labels", "node_pool_id", "node_class_id", "node_name",
                                             "provider_id", "reservation_label", "reservation_id"))
        reservation_ids = _Links().reservations(
            {c.reservation_label for c in claims} | set(Node.objects.exclude(reservation_label="")
                                                           .values_list("reservation_label", flat=True)))
        for claim in claims:
            pool = pools.get((claim.labels or {}).get(L.NODEPOOL))
            node_class = classes.get(self._claim_classes.get(claim.name) or (claim.labels or {}).get(NODECLASS_LABEL))
            reservation = reservation_ids.get(claim.reservation_label)
            if node_class is None and claim.name not in self._claim_classes:
                node_class = claim.node_class_id  # unknown ref (synced by another process): keep
            if (claim.node_pool_id, claim.node_class_id, claim.reservation_id) != (pool, node_class, reservation):
                claim.node_pool_id, claim.node_class_id, claim.reservation_id = pool, node_class, reservation
                changed.append(claim)
        NodeClaim.objects.bulk_update(changed, ["node_pool", "node_class", "reservation"], batch_size=BATCH_SIZE)

        by_node = {c.node_name: c.id for c in claims if c.node_name}
        by_provider = {c.provider_id: c.id for c in claims if c.provider_id}
        nodes = list(Node.objects.only("id", "name", "labels", "provider_id", "node_pool_id", "node_claim_id",
                                       "reservation_label", "reservation_id"))
        taken: set[int] = set()
        wanted: dict[int, int | None] = {}
        for node in nodes:
            claim = by_node.get(node.name)
            if claim is None and node.provider_id:
                claim = by_provider.get(node.provider_id)
            if claim in taken:
                claim = None
            if claim is not None:
                taken.add(claim)
            wanted[node.id] = claim
        changed = []
        for node in nodes:
            pool = pools.get((node.labels or {}).get(L.NODEPOOL))
            reservation = reservation_ids.get(node.reservation_label)
            if (node.node_pool_id, node.node_claim_id, node.reservation_id) != (pool, wanted[node.id], reservation):
                node.node_pool_id, node.node_claim_id, node.reservation_id = pool, wanted[node.id], reservation
                changed.append(node)
        if changed:
            # Free the one-to-one targets first so that swapping claims between nodes cannot collide.
            moving = [n.id for n in changed if n.node_claim_id is not None]
            Node.objects.filter(node_claim_id__in=[wanted[i] for i in moving]).exclude(id__in=moving).update(node_claim=None)
            Node.objects.filter(id__in=moving).update(node_claim=None)
            Node.objects.bulk_update(changed, ["node_pool", "node_claim", "reservation"], batch_size=BATCH_SIZE)

        self._relink_pods()

    def _relink_pods(self) -> None:
        """Bound pods whose node arrived after them (or was recreated) get their node."""
        dangling = list(Pod.objects.filter(node__isnull=True).exclude(node_name="").only("id", "node_name"))
        if not dangling:
            return
        node_ids = _Links().nodes({pod.node_name for pod in dangling})
        changed = []
        for pod in dangling:
            if pod.node_name in node_ids:
                pod.node_id = node_ids[pod.node_name]
                changed.append(pod)
        Pod.objects.bulk_update(changed, ["node"], batch_size=BATCH_SIZE)

    # --- watching ------------------------------------------------------------------------------
    def start(self) -> None:
        """Start one reader thread per kind (list if no resourceVersion is known, then watch)."""
        if self._threads:
            raise RuntimeError("already started")
        self._stop.clear()
        for kind in self.kinds:
            thread = threading.Thread(target=self._reader, args=(kind, self.resource_versions.get(kind)),
                                      name=f"karpweb-kube-watch-{kind}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def synced(self) -> bool:
        """Every kind's first list has been applied (or its resourceVersion was given to resume
        from): until then the models mix kinds listed at different times, some not at all."""
        return all(kind in self.resource_versions for kind in self.kinds)

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        close = getattr(self.adapter, "stop_watches", None)  # optional: adapters that stream
        if close is not None:
            close()
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(deadline - time.monotonic(), 0))
        self._threads = []
        self._queue = queue.Queue()

    def pump(self, timeout: float = 1.0, until: Callable[[], bool] | None = None, max_batch: int = 2000) -> SyncStats:
        """Apply what the readers queued, for up to ``timeout`` seconds or until ``until()`` is true
        (checked after each batch). Returns what this call changed."""
        stats = SyncStats()
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            try:
                first = self._queue.get(timeout=min(remaining, 0.2))
            except queue.Empty:
                if until is not None and until():
                    break
                continue
            items = [first]
            while len(items) < max_batch:
                try:
                    items.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            self._apply_items(items, stats)
            if until is not None and until():
                break
        self._merge(stats)
        return stats

    def run(self, duration: float, until: Callable[[], bool] | None = None) -> SyncStats:
        """List and watch for ``duration`` seconds (or until ``until()``), then stop."""
        self.start()
        try:
            return self.pump(duration, until)
        finally:
            self.stop()

    def _apply_items(self, items: list[tuple], stats: SyncStats) -> None:
        events: list[WatchEvent] = []
        first_read = 0.0
        for what, kind, payload, read_at in items:
            if what == "event":
                first_read = first_read if events else read_at
                events.append(payload)
                continue
            if events:
                self._apply_events_timed(events, first_read, stats)
                events = []
            if what == "snapshot":
                stats.lists += 1
                self.apply_snapshot(payload, stats)
            elif what == "expired":
                stats.relists += 1
            elif what == "reconnect":
                stats.reconnects += 1
            elif what == "error":
                stats.add_error(payload)
        if events:
            self._apply_events_timed(events, first_read, stats)

    def _apply_events_timed(self, events: list[WatchEvent], first_read: float, stats: SyncStats) -> None:
        self.apply_events(events, stats)
        stats.lag_seconds = max(stats.lag_seconds, time.monotonic() - first_read)

    def _put(self, what: str, kind: str, payload) -> None:
        self._queue.put((what, kind, payload, time.monotonic()))  # read time: the lag to the write

    def _reader(self, kind: str, resource_version: str | None) -> None:
        backoff = 0.25
        lost_connection = False
        while not self._stop.is_set():
            try:
                if not resource_version:
                    snapshot = self.adapter.list(kind)
                    self._put("snapshot", kind, snapshot)
                    resource_version = snapshot.resource_version
                elif lost_connection:
                    self._put("reconnect", kind, resource_version)
                lost_connection = False
                for event in self.adapter.watch(kind, resource_version, timeout_seconds=self.watch_timeout):
                    if event.resource_version:
                        resource_version = event.resource_version
                    self._put("event", kind, event)
                    if self._stop.is_set():
                        break
                backoff = 0.25
            except ResourceVersionExpired as expired:
                log.info("%s", expired)
                self._put("expired", kind, resource_version)
                resource_version = None
            except ClusterError as error:
                if self._stop.is_set():
                    return  # stop() shut the watch's connection: not the server going away
                if _not_served(kind, error):
                    log.info("%s: not served by this cluster (its CRD is not installed); not mirrored", kind)
                    self._put("snapshot", kind, ObjectList(kind, [], ""))
                    return
                log.warning("%s sync: %s", kind, error)
                self._put("error", kind, error)
                lost_connection = True
                self._stop.wait(backoff)
                backoff = min(backoff * 2, 3.0)

    def _merge(self, stats: SyncStats) -> None:
        for name in ("created", "updated", "deleted"):
            getattr(self.stats, name).update(getattr(stats, name))
        self.stats.events += stats.events
        self.stats.lists += stats.lists
        self.stats.relists += stats.relists
        self.stats.reconnects += stats.reconnects
        self.stats.lag_seconds = max(self.stats.lag_seconds, stats.lag_seconds)
        for error in stats.errors:
            self.stats.add_error(error)
        del self.stats.errors[:-20]
