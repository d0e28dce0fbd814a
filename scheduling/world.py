"""The database as a WORLD.json document (docs/simulate-interface.md): the one way the loop, the
what-if page and the API hand the current world to the engine.

Objects come out the way Kubernetes and EC2 write them, so the engine reads the database exactly
as it reads a pasted `kubectl get -o json`."""

from types import SimpleNamespace

from django.conf import settings
from django.db.models import Max, Prefetch, Q
from django.utils import timezone

from fleet.scope import working_cluster_id_or_none
from reservations.commitments import world_commitments
from reservations.ledger import units_held_elsewhere
from reservations.models import CapacityReservation, CapacityReservationGroup, EC2NodeClass
from scheduling.engine import parse_world
from scheduling.engine.ec2types import MIB, node_memory_mib
from scheduling.engine.taints import is_known_ephemeral
from scheduling.engine.world import EXCLUDED_FROM_PLANNING
from scheduling.engine.timeutil import format_time
from scheduling.models import CapacityType, InstanceType, KubeObject, Node, NodeClaim, NodePool, Offering, Pod, WatchState

KEEP_IDLE_RESERVED_ANNOTATION = "karpweb.io/keep-idle-reserved-nodes"
INITIALIZED_LABEL = "karpenter.sh/initialized"
REGISTERED_LABEL = "karpenter.sh/registered"


def current_world(now=None, *, include_pods: bool = True, include_nodes: bool = True,
                  instances: list[dict] | None = None) -> dict:
    """`instances` (DescribeInstances items) tell the engine which reservation each instance is in.
    Without `include_nodes`, only the nodes still coming up (in_flight_nodes) are there (the watch
    process keeps the others: scheduling/loop/keptworld.py)."""
    now = now or timezone.now()
    world = {
        "now": format_time(now),
        "featureGates": {"ReservedCapacity": settings.KARPWEB_FEATURE_RESERVED_CAPACITY},
        "instanceTypes": instance_types(),
        "capacityReservations": reservation_items(now),
        "capacityReservationGroups": world_groups(),
        "ec2NodeClasses": [node_class_object(nc) for nc in EC2NodeClass.objects.order_by("name")],
        "nodePools": [node_pool_object(p) for p in NodePool.objects.select_related("node_class").order_by("name")],
        "nodes": nodes() if include_nodes else in_flight_nodes(),
        "pods": pods() if include_pods else [],
        "daemonSets": daemon_sets(),
    }
    world.update(kept_whole())
    found = world_commitments()
    if found is not None:  # zonal RIs and Savings Plans the EC2 sync read (none: list prices)
        world["commitments"] = found
    if instances is not None:
        world["instances"] = instances
    return world


# WORLD.json's key for each kind mirrored whole (engine/volumes.py and engine/overlays.py read them).
WHOLE_KEYS = {KubeObject.Kind.STORAGE_CLASS: "storageClasses", KubeObject.Kind.PERSISTENT_VOLUME: "persistentVolumes",
              KubeObject.Kind.PERSISTENT_VOLUME_CLAIM: "persistentVolumeClaims", KubeObject.Kind.CSI_NODE: "csiNodes",
              KubeObject.Kind.NODE_OVERLAY: "nodeOverlays", KubeObject.Kind.POD_DISRUPTION_BUDGET: "podDisruptionBudgets",
              KubeObject.Kind.SERVICE: "services", KubeObject.Kind.REPLICA_SET: "replicaSets",
              KubeObject.Kind.STATEFUL_SET: "statefulSets", KubeObject.Kind.REPLICATION_CONTROLLER: "replicationControllers"}
SPREAD_KEYS = ("services", "replicaSets", "statefulSets", "replicationControllers")
STORAGE_KEYS = ("storageClasses", "persistentVolumes", "persistentVolumeClaims", "csiNodes")


def kept_whole() -> dict:
    """The working cluster's NodeOverlays and PodDisruptionBudgets, and its StorageClasses, PersistentVolumes and claims and
    CSINodes once they have been listed (WatchState.storage_listed_at); before, no storage: a world
    that lists no claims reads no pod's volumes, rather than finding every claim missing."""
    cluster_id = working_cluster_id_or_none()
    if cluster_id is None:
        return {}
    found = {key: [] for key in WHOLE_KEYS.values()}
    for kind, body in KubeObject.objects.fleet().filter(cluster_id=cluster_id, kind__in=WHOLE_KEYS) \
            .order_by("kind", "namespace", "name").values_list("kind", "body"):
        found[WHOLE_KEYS[kind]].append(body)
    if not WatchState.objects.fleet().filter(cluster_id=cluster_id, storage_listed_at__isnull=False).exists():
        for key in STORAGE_KEYS:
            del found[key]
    if settings.KARPWEB_DEFAULT_TOPOLOGY_SPREAD_CONSTRAINTS:
        found["defaultTopologySpreadConstraints"] = settings.KARPWEB_DEFAULT_TOPOLOGY_SPREAD_CONSTRAINTS
    else:
        for key in SPREAD_KEYS:
            del found[key]
    return found


def instance_types() -> list[dict]:
    """Instance types with their on-demand and spot offerings (reserved ones come from reservations),
    sized as their nodes report themselves: the VM memory overhead off, extended resources on."""
    open_market = Offering.objects.filter(reservation__isnull=True).exclude(capacity_type=CapacityType.RESERVED)
    types = InstanceType.objects.prefetch_related(
        Prefetch("offerings", queryset=open_market.order_by("capacity_type", "zone"))
    ).order_by("name")
    return [instance_type_item(it, it.offerings.all()) for it in types]


def instance_type_item(it: InstanceType, offerings=()) -> dict:
    return {
        "name": it.name,
        "cpu": f"{it.cpu_millicores}m",
        "memory": str(node_memory_bytes(it)),
        "pods": it.max_pods,
        "resources": {name: str(amount) for name, amount in extended_resources(it).items()},
        "labels": {"kubernetes.io/arch": it.arch, "kubernetes.io/os": it.os, **(it.labels or {})},
        "offerings": [
            {"capacityType": o.capacity_type, "zone": o.zone, "price": o.price, "available": o.available,
             **({"zoneId": o.zone_id} if o.zone_id else {})}
            for o in offerings
        ],
    }


def node_allocatable(it: InstanceType, node_class: EC2NodeClass | None) -> dict[str, int]:
    """What a node of this type reports as allocatable under this EC2NodeClass, as the engine plans
    it (the simulated kubelet registers with this, so planned nodes hold what registered ones do)."""
    classes = [node_class_object(node_class)] if node_class is not None else []
    world = parse_world({"instanceTypes": [instance_type_item(it)], "ec2NodeClasses": classes})
    engine_type = world.instance_types[0]
    if world.node_classes:
        nc = world.node_classes[0]
        engine_type = engine_type.for_node_class(nc.kubelet, nc.shape, ()) or engine_type
    return dict(engine_type.allocatable)


def node_memory_bytes(it: InstanceType) -> int:
    """The memory a node of this type reports (EC2's figure less the VM overhead)."""
    mib = node_memory_mib(it.memory_bytes // MIB, it.arch, settings.KARPWEB_VM_MEMORY_OVERHEAD_PERCENT)
    return mib * MIB


def extended_resources(it: InstanceType | None) -> dict[str, int]:
    """What a node of this type advertises beyond cpu, memory and pods (rows synced before the
    catalogue carried resources: their GPUs)."""
    if it is None:
        return {}
    if it.resources:
        return {name: int(amount) for name, amount in it.resources.items()}
    return {"nvidia.com/gpu": it.gpu_count} if it.gpu_count else {}


def world_groups() -> list[dict]:
    """WORLD.json `capacityReservationGroups`: the stored members of each Capacity Reservation group."""
    return [{"GroupArn": arn, "CapacityReservationIds": list(ids)}
            for arn, ids in CapacityReservationGroup.objects.order_by("arn").values_list("arn", "reservation_ids")]


def reservation_items(now) -> list[dict]:
    """The reservations the working cluster sees, each with the units other clusters of the fleet
    hold for their launches (or launched since the last sync) taken from its available count: the
    engine plans around them (reservations/ledger.py)."""
    held = units_held_elsewhere(working_cluster_id_or_none(), now)
    return [reservation_item(r, held.get(r.pk, 0)) for r in CapacityReservation.objects.order_by("reservation_id")]


def reservation_item(r: CapacityReservation, held_elsewhere: int = 0) -> dict:
    """One reservation as DescribeCapacityReservations reports it (`held_elsewhere`: units the fleet
    ledger says other clusters hold, not free for this one)."""
    item = {
        "CapacityReservationId": r.reservation_id,
        "CapacityReservationArn": r.arn,
        "OwnerId": r.owner_id,
        "InstanceType": r.instance_type,
        "InstancePlatform": r.instance_platform,
        "AvailabilityZone": r.availability_zone,
        "AvailabilityZoneId": r.availability_zone_id,
        "Tenancy": r.tenancy,
        "TotalInstanceCount": r.total_instance_count,
        "AvailableInstanceCount": max(r.available_instance_count - held_elsewhere, 0),
        "State": r.state,
        "InstanceMatchCriteria": r.instance_match_criteria,
        "ReservationType": r.reservation_type,
        "Interruptible": r.interruptible,
        "EndDateType": r.end_date_type,
        "Tags": [{"Key": key, "Value": value} for key, value in sorted((r.tags or {}).items())],
    }
    for key, value in (("StartDate", r.start_date), ("EndDate", r.end_date), ("CreateDate", r.create_date)):
        if value:
            item[key] = format_time(value)
    if r.ultraserver_type:
        item["UltraserverType"] = r.ultraserver_type
    if r.planning_excluded:  # karpweb's own override: the engine offers none of its units
        item[EXCLUDED_FROM_PLANNING] = r.planning_exclusion
    return item


def _metadata(name, *, uid="", labels=None, annotations=None, created=None, namespace=None, deleting=None) -> dict:
    meta = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    if uid:
        meta["uid"] = uid
    if labels:
        meta["labels"] = labels
    if annotations:
        meta["annotations"] = annotations
    if created:
        meta["creationTimestamp"] = format_time(created)
    if deleting:
        meta["deletionTimestamp"] = format_time(deleting)
    return meta


def node_class_object(nc: EC2NodeClass) -> dict:
    spec = {**(nc.spec or {}), "capacityReservationSelectorTerms": nc.capacity_reservation_selector_terms}
    ready = [c for c in nc.conditions or [] if c.get("type") == "Ready"]  # Karpenter's launch gate
    return {
        "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
        "metadata": _metadata(nc.name, uid=nc.uid, annotations=nc.annotations, created=nc.created_at),
        "spec": spec,
        **({"status": {"conditions": ready}} if ready else {}),
    }


def node_pool_object(p: NodePool) -> dict:
    node_class_ref = p.node_class_ref or (
        {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": p.node_class.name} if p.node_class else {}
    )
    annotations = {KEEP_IDLE_RESERVED_ANNOTATION: "true"} if p.keep_idle_reserved_nodes else None
    return {
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
        "metadata": _metadata(p.name, uid=p.uid, annotations=annotations, created=p.created_at),
        "spec": {
            # A static NodePool has replicas and no weight (0 is karpweb's "unset"): the engine refuses
            # both together, as the CRD does, so the admin's check names a weight set on a static pool.
            **({"weight": p.weight} if p.replicas is None or p.weight else {}),
            **({"replicas": p.replicas} if p.replicas is not None else {}),
            "limits": p.limits or {},
            "disruption": {
                "consolidationPolicy": p.consolidation_policy,
                "consolidateAfter": p.consolidate_after,
                "budgets": p.budgets or [{"nodes": "10%"}],
            },
            "template": {
                "metadata": {"labels": p.labels or {}},
                "spec": {
                    "nodeClassRef": node_class_ref,
                    "requirements": p.requirements or [],
                    "taints": p.taints or [],
                    "startupTaints": p.startup_taints or [],
                    "expireAfter": p.expire_after,
                    **({"terminationGracePeriod": p.termination_grace_period} if p.termination_grace_period else {}),
                },
            },
        },
    }


def nodes() -> list[dict]:
    """Every node the engine plans with: the Nodes, each still coming up as its NodeClaim makes it."""
    flying = in_flight_nodes()
    coming_up = {d["metadata"]["name"] for d in flying}
    return [d for d in registered_nodes() if d["metadata"]["name"] not in coming_up] + flying


def registered_nodes(names=None) -> list[dict]:
    """The Node rows (those named, or all), by name (in Python: the same order wherever they are read)."""
    rows = Node.objects.all() if names is None else Node.objects.filter(name__in=list(names))
    types = {it.name: it for it in InstanceType.objects.filter(name__in=rows.values("instance_type"))
             .only("name", "resources", "gpu_count")}
    return [node_object(n, extended_resources(types.get(n.instance_type))) for n in sorted(rows, key=lambda n: n.name)]


def node_object(n: Node, type_resources: dict[str, int] | None = None) -> dict:
    allocatable = {"cpu": f"{n.allocatable_cpu_millicores}m", "memory": str(n.allocatable_memory_bytes),
                   "pods": str(n.allocatable_pods)}
    # What the node itself reports (device plugins); a node synced before they started: its type's.
    extended = n.allocatable_extended or type_resources or {}
    allocatable.update({name: str(amount) for name, amount in sorted(extended.items())})
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": _metadata(n.name, uid=n.uid, labels=n.labels, annotations=n.annotations, created=n.created_at,
                              deleting=n.deleting_since),
        "spec": {"providerID": n.provider_id, "taints": n.taints or [], "unschedulable": n.unschedulable},
        "status": {
            "allocatable": allocatable,
            "conditions": [{"type": "Ready", "status": "True" if n.ready else "False"}],
        },
    }


def in_flight_nodes() -> list[dict]:
    """NodeClaims whose Node has not registered, or is not initialized yet, as the nodes they will
    be: capacity for the pods they can take, as upstream's cluster state counts them
    (kubernetes-sigs/karpenter pkg/controllers/state/statenode.go). Otherwise every provisioning
    run launches again for the same pods while a node comes up.

    Until its Node is initialized (`karpenter.sh/initialized=true`, or the claim's Initialized time
    where no kubelet labels it: the simulated world), a claim's node has its
    NodePool's taints (the Node's own once registered) less the known ephemeral taints
    (not-ready, unreachable, uninitialized, `karpenter.sh/unregistered`) and its startup taints,
    the labels of its claim until it is registered, and what its instance type allocates wherever
    the kubelet does not report it yet (extended resources before their device plugin)."""
    # The initialized label is read here, not in SQL: a JSON `contains` lookup exists on PostgreSQL
    # only, and the embedded SQLite database runs this too.
    claims = [claim for claim in NodeClaim.objects.filter(deleting_since__isnull=True).exclude(instance_type="")
              .filter(Q(node__isnull=True) | Q(initialized_at__isnull=True))  # (a simulated Node has no label)
              .select_related("node_pool", "node_class", "node").order_by("name")
              if (getattr(_node_of(claim), "labels", None) or {}).get(INITIALIZED_LABEL) != "true"]
    sizes = {it.name: it for it in InstanceType.objects.filter(name__in={c.instance_type for c in claims})}
    room: dict[tuple, dict[str, int]] = {}  # per (type, EC2NodeClass): what its node will report
    nodes = []
    for claim in claims:
        size = sizes.get(claim.instance_type)
        if size is None:
            continue
        key = (size.name, claim.node_class_id)
        if key not in room:
            room[key] = node_allocatable(size, claim.node_class)
        nodes.append(in_flight_node(claim, _node_of(claim), room[key]))
    return nodes


def _node_of(claim: NodeClaim) -> Node | None:
    try:
        return claim.node
    except Node.DoesNotExist:
        return None


def in_flight_node(claim: NodeClaim, node: Node | None, planned: dict[str, int]) -> dict:
    """One claim's node while it comes up (see in_flight_nodes)."""
    pool = claim.node_pool
    allocatable = {name: str(amount) for name, amount in planned.items()}
    allocatable["cpu"] = f"{planned['cpu']}m"
    if node is None:
        return {
            "apiVersion": "v1", "kind": "Node",
            "metadata": _metadata(claim.name, labels={**claim.labels, "kubernetes.io/hostname": claim.name}),
            "spec": {"providerID": claim.provider_id, "taints": pool.taints if pool else []},
            "status": {"allocatable": allocatable, "conditions": [{"type": "Ready", "status": "False"}]},
        }
    document = node_object(node)
    registered = (node.labels or {}).get(REGISTERED_LABEL) == "true"
    if not registered:
        document["metadata"]["labels"] = {**claim.labels, "kubernetes.io/hostname": node.name}
    taints = (node.taints or []) if registered else (pool.taints or [] if pool else [])
    startup = pool.startup_taints or [] if pool else []
    document["spec"]["taints"] = [t for t in taints if not _coming_up_taint(t, startup)]
    reported = document["status"]["allocatable"]
    for name, amount in allocatable.items():  # what the kubelet reports as nothing yet, the claim's type has
        if _zero(reported.get(name)):
            reported[name] = amount
    return document


def _coming_up_taint(taint: dict, startup: list[dict]) -> bool:
    key, effect, value = taint.get("key") or "", taint.get("effect") or "", taint.get("value") or ""
    return is_known_ephemeral(key, effect, value) or any(
        s.get("key") == key and s.get("effect") == effect and (s.get("value") or "") == value for s in startup)


def _zero(amount) -> bool:
    return amount in (None, "", "0", "0m")


# What pod_object reads: rows of these instead of model instances (a world can hold 50,000 pods).
POD_FIELDS = ("namespace", "name", "uid", "node_name", "phase", "labels", "annotations", "spec", "owner_kind",
              "owner_name", "priority", "created_at", "started_at", "deleting_since")


def pods(keys=None) -> list[dict]:
    """The Pod rows (those of the (namespace, name) `keys`, or all), by namespace and name."""
    rows = Pod.objects.all()
    if keys is not None:
        keys = set(keys)
        rows = rows.filter(name__in={name for _, name in keys})
    found = (row for row in rows.values(*POD_FIELDS) if keys is None or (row["namespace"], row["name"]) in keys)
    return [pod_object(SimpleNamespace(**row)) for row in sorted(found, key=lambda r: (r["namespace"], r["name"]))]


def daemon_sets() -> list[dict]:
    """Each DaemonSet as its newest pod shows it (upstream's provisioner, too, prefers a DaemonSet's
    pod to its template: admission webhooks may have changed the requests), so DaemonSet overhead
    on new nodes counts in the loop as in `simulate`. The DaemonSet controller pins each pod to its
    node with a `matchFields metadata.name` term; that term is taken out again (upstream puts the
    template's node affinity back). A DaemonSet with no pod yet is read from its mirrored object."""
    newest = (Pod.objects.filter(owner_kind="DaemonSet").values("namespace", "owner_name")
              .annotate(newest=Max("id")).values_list("newest", flat=True))
    rows = Pod.objects.filter(id__in=list(newest)).values("namespace", "owner_name", "labels", "spec")
    found = {(row["namespace"], row["owner_name"]): daemon_set_object(row) for row in rows}
    for namespace, name, body in KubeObject.objects.filter(kind=KubeObject.Kind.DAEMON_SET) \
            .values_list("namespace", "name", "body"):
        found.setdefault((namespace, name), body)
    return [found[key] for key in sorted(found)]


def daemon_set_object(row: dict) -> dict:
    spec = {key: value for key, value in (row["spec"] or {}).items() if key != "nodeName"}
    spec.setdefault("containers", [])
    affinity = spec.get("affinity") or {}
    required = (affinity.get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution")
    if required:
        terms = [{k: v for k, v in term.items() if k != "matchFields"} for term in required.get("nodeSelectorTerms") or []]
        terms = [term for term in terms if term.get("matchExpressions")]
        node_affinity = {k: v for k, v in affinity["nodeAffinity"].items() if k != "requiredDuringSchedulingIgnoredDuringExecution"}
        if terms:
            node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {"nodeSelectorTerms": terms}
        spec["affinity"] = {**affinity, "nodeAffinity": node_affinity}
    return {"apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": row["owner_name"], "namespace": row["namespace"]},
            "spec": {"template": {"metadata": {"labels": row["labels"] or {}}, "spec": spec}}}


# The apiVersion of the controllers the sync records by kind only (Pod.owner_kind).
OWNER_API_VERSIONS = {"ReplicaSet": "apps/v1", "StatefulSet": "apps/v1", "DaemonSet": "apps/v1", "Deployment": "apps/v1",
                      "ReplicationController": "v1", "Job": "batch/v1", "Node": "v1"}


def pod_object(p) -> dict:
    """A Pod (or a row of POD_FIELDS) as Kubernetes writes it."""
    spec = dict(p.spec or {})
    spec.setdefault("containers", [])
    if p.node_name:
        spec["nodeName"] = p.node_name
    else:
        spec.pop("nodeName", None)
    if p.priority:
        spec["priority"] = p.priority
    metadata = _metadata(p.name, namespace=p.namespace, uid=p.uid, labels=p.labels, annotations=p.annotations,
                         created=p.created_at, deleting=p.deleting_since)
    if p.owner_kind:
        # DaemonSet pods never move and do not keep a node from being empty; a ReplicaSet's, StatefulSet's
        # or ReplicationController's selector is its default spread's (engine/defaultspread.py).
        metadata["ownerReferences"] = [{"apiVersion": OWNER_API_VERSIONS.get(p.owner_kind, ""), "kind": p.owner_kind,
                                        "name": p.owner_name, "controller": True}]
    status = {"phase": p.phase}
    if p.started_at:
        status["startTime"] = format_time(p.started_at)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec, "status": status}
