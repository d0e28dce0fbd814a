"""Volumes as Karpenter's scheduler reads them: where a pod's persistent volumes let it run, and how
many volumes a node's CSI drivers may attach.

- Topology (upstream kubernetes-sigs/karpenter
  `pkg/controllers/provisioning/scheduling/volumetopology.go`): a claim bound to a volume adds the
  volume's required node affinity (each nodeSelectorTerm one alternative; a local or hostPath
  volume's hostname expressions dropped, since a new node never has that hostname); an unbound
  claim adds its StorageClass's `allowedTopologies` (each term one alternative). A pod's volumes
  multiply out: every combination of one alternative per volume, the contradictory ones pruned
  (all of them kept when none is left, so the pod fails on them). They narrow where the pod may
  land, not its node affinity as topology spread counts it.
- What makes a pod's claims unusable, as kube-scheduler rejects them (upstream
  `ValidatePersistentVolumeClaims`): a claim that does not exist, is being deleted or is `Lost`; a
  bound claim without `pv.kubernetes.io/bind-completed` or whose volume is missing or being
  deleted; an unbound claim with no StorageClass, an unknown one, or one with `Immediate` binding
  (the volume is made before the pod is placed, so the claim must be bound first).
- Limits (upstream `pkg/scheduling/volumeusage.go`): a node's CSINode says how many volumes each
  driver may attach (`allocatable.count`); the claims of the pods on the node, counted once each
  per driver, may not go above it. The driver is the volume's CSI driver (an in-tree EBS volume
  counts as `ebs.csi.aws.com`), or for an unbound claim its StorageClass's provisioner.

A world that lists no `persistentVolumeClaims` says nothing about storage: its pods' volumes are
not read (so worlds written before these keys existed plan as they did)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from itertools import product
from typing import Any

from .labels import HOSTNAME
from .requirements import IN, Requirement, RequirementError, Requirements

DEFAULT_CLASS_ANNOTATION = "storageclass.kubernetes.io/is-default-class"
BIND_COMPLETED_ANNOTATION = "pv.kubernetes.io/bind-completed"
IMMEDIATE = "Immediate"
WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"
# In-tree provisioners and their CSI drivers (k8s.io/csi-translation-lib), those an EKS cluster meets.
IN_TREE_DRIVERS = {"kubernetes.io/aws-ebs": "ebs.csi.aws.com", "kubernetes.io/gce-pd": "pd.csi.storage.gke.io",
                   "kubernetes.io/azure-disk": "disk.csi.azure.com", "kubernetes.io/cinder": "cinder.csi.openstack.org"}


@dataclass(frozen=True)
class StorageClass:
    name: str
    provisioner: str
    binding_mode: str = IMMEDIATE
    topologies: tuple[Requirements, ...] = ()  # allowedTopologies, ORed
    default: bool = False
    created: datetime | None = None

    @property
    def driver(self) -> str:
        return IN_TREE_DRIVERS.get(self.provisioner, self.provisioner)


@dataclass(frozen=True)
class PersistentVolume:
    name: str
    terms: tuple[Requirements, ...] = ()  # spec.nodeAffinity.required.nodeSelectorTerms, ORed
    driver: str = ""  # "": not CSI (NFS, say): not counted against a limit
    deleting: bool = False


@dataclass(frozen=True)
class VolumeClaim:
    namespace: str
    name: str
    volume_name: str = ""
    storage_class: str | None = None  # None: not set (the default class applies)
    phase: str = "Pending"
    deleting: bool = False
    bind_completed: bool = False

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass
class Storage:
    """The world's storage objects. `known`: the world lists its claims (else volumes are not read)."""

    known: bool = False
    classes: dict[str, StorageClass] = field(default_factory=dict)
    volumes: dict[str, PersistentVolume] = field(default_factory=dict)
    claims: dict[tuple[str, str], VolumeClaim] = field(default_factory=dict)
    limits: dict[str, dict[str, int]] = field(default_factory=dict)  # node name -> driver -> count

    def default_class(self) -> StorageClass | None:
        """The default StorageClass; of several, the newest (the API server's rule since 1.26)."""
        defaults = [c for c in self.classes.values() if c.default]
        return max(defaults, key=lambda c: (c.created or datetime.min, c.name), default=None)


@dataclass(frozen=True)
class PodVolumes:
    """What a pod's volumes mean for placing it."""

    terms: tuple[Requirements, ...] | None = None  # None: no volume narrows it
    problem: str = ""  # why its claims cannot be used; it is placed nowhere
    usage: tuple[tuple[str, frozenset[str]], ...] = ()  # driver -> the claims it attaches


NO_VOLUMES = PodVolumes()


def claim_names(pod_name: str, spec_volumes: Any) -> tuple[str, ...]:
    """The claims a pod's `spec.volumes` use: a persistentVolumeClaim's claimName, and for a generic
    ephemeral volume the claim Kubernetes makes for it, `<pod>-<volume>`."""
    names = []
    for volume in spec_volumes if isinstance(spec_volumes, list) else ():
        if not isinstance(volume, dict):
            continue
        claim = volume.get("persistentVolumeClaim")
        if isinstance(claim, dict) and isinstance(claim.get("claimName"), str):
            names.append(claim["claimName"])
        elif isinstance(volume.get("ephemeral"), dict) and isinstance(volume.get("name"), str):
            names.append(f"{pod_name}-{volume['name']}")
    return tuple(names)


def pod_volumes(storage: Storage, namespace: str, claims: tuple[str, ...]) -> PodVolumes:
    if not storage.known or not claims:
        return NO_VOLUMES
    per_volume, usage = [], {}
    for name in dict.fromkeys(claims):
        claim = storage.claims.get((namespace, name))
        problem = _unusable(storage, claim, namespace, name)
        if problem:
            return PodVolumes(problem=problem)
        alternatives, driver = _claim_topology(storage, claim)
        if alternatives:
            per_volume.append(alternatives)
        if driver:
            usage.setdefault(driver, set()).add(claim.key)
    usage_items = tuple(sorted((driver, frozenset(keys)) for driver, keys in usage.items()))
    return PodVolumes(terms=_combine(per_volume) if per_volume else None, usage=usage_items)


def _unusable(storage: Storage, claim: VolumeClaim | None, namespace: str, name: str) -> str:
    where = f"persistentvolumeclaim {namespace}/{name}"
    if claim is None:
        return f"{where} does not exist"
    if claim.deleting:
        return f"{where} is being deleted"
    if claim.phase == "Lost":
        return f"{where} is Lost: bound to a persistentvolume that no longer exists"
    if claim.volume_name:
        volume = storage.volumes.get(claim.volume_name)
        if not claim.bind_completed:
            return f"{where} names persistentvolume {claim.volume_name} but is not bound yet ({BIND_COMPLETED_ANNOTATION} missing)"
        if volume is None:
            return f"{where} is bound to persistentvolume {claim.volume_name}, which does not exist"
        if volume.deleting:
            return f"{where} is bound to persistentvolume {claim.volume_name}, which is being deleted"
        return ""
    storage_class = _class_of(storage, claim)
    if storage_class is None:
        if not (claim.storage_class or (claim.storage_class is None and storage.default_class())):
            return f"{where} is unbound and names no storageclass"
        return f"{where} is unbound and its storageclass {claim.storage_class} does not exist"
    if storage_class.binding_mode != WAIT_FOR_FIRST_CONSUMER:
        return (f"{where} is unbound and its storageclass {storage_class.name} binds Immediately: "
                "the volume must be made and bound before the pod can be placed")
    return ""


def _class_of(storage: Storage, claim: VolumeClaim) -> StorageClass | None:
    if claim.storage_class is None:
        return storage.default_class()
    return storage.classes.get(claim.storage_class) if claim.storage_class else None


def _claim_topology(storage: Storage, claim: VolumeClaim) -> tuple[tuple[Requirements, ...], str]:
    """(the alternatives where the claim's volume can be used, the driver that attaches it)."""
    if claim.volume_name:
        volume = storage.volumes[claim.volume_name]
        return volume.terms, volume.driver
    storage_class = _class_of(storage, claim)
    return storage_class.topologies, storage_class.driver


def _combine(per_volume: list[tuple[Requirements, ...]]) -> tuple[Requirements, ...]:
    """One alternative from each volume, ANDed; the contradictory combinations pruned unless none is
    left (upstream keeps them all then: the pod fails on them rather than on nothing)."""
    combined = []
    for choice in product(*per_volume):
        merged = Requirements()
        for term in choice:
            merged = merged.intersect(term)
        combined.append(merged)
    usable = [term for term in combined if term.satisfiable()]
    return tuple(dict.fromkeys(usable or combined))


def exceeds_limits(limits: dict[str, int], attached: dict[str, set[str]],
                   usage: tuple[tuple[str, frozenset[str]], ...]) -> str | None:
    """Why attaching `usage` to a node with `attached` would go above its CSI limits, or None."""
    for driver, claims in usage:
        limit = limits.get(driver)
        if limit is None:
            continue
        count = len(attached.get(driver, set()) | claims)
        if count > limit:
            return f"would attach {count} volumes of driver {driver}, above the node's limit of {limit} (CSINode)"
    return None


# --- WORLD.json ----------------------------------------------------------------------------------

def parse_storage(data: dict, reader) -> Storage:
    """`persistentVolumes`, `persistentVolumeClaims`, `storageClasses` and `csiNodes`, as Kubernetes
    writes them (`reader`: world.py's reader, which collects each problem with its path)."""
    storage = Storage(known=data.get("persistentVolumeClaims") is not None)
    for path, item in _objects(reader, data.get("storageClasses"), "storageClasses"):
        found = _storage_class(reader, item, path)
        if found is not None:
            storage.classes[found.name] = found
    for path, item in _objects(reader, data.get("persistentVolumes"), "persistentVolumes"):
        found = _volume(reader, item, path)
        if found is not None:
            storage.volumes[found.name] = found
    for path, item in _objects(reader, data.get("persistentVolumeClaims"), "persistentVolumeClaims"):
        found = _claim(reader, item, path)
        if found is not None:
            storage.claims[(found.namespace, found.name)] = found
    for path, item in _objects(reader, data.get("csiNodes"), "csiNodes"):
        name = reader.string(reader.mapping(item.get("metadata"), f"{path}.metadata"), "name", f"{path}.metadata",
                             required=True)
        drivers = {}
        for driver_path, driver in reader.items(reader.mapping(item.get("spec"), f"{path}.spec").get("drivers"),
                                                f"{path}.spec.drivers"):
            entry = reader.mapping(driver, driver_path)
            allocatable = reader.mapping(entry.get("allocatable"), f"{driver_path}.allocatable")
            count = reader.integer(allocatable, "count", f"{driver_path}.allocatable", minimum=0)
            driver_name = reader.string(entry, "name", driver_path, required=True)
            if driver_name and count is not None:
                drivers[driver_name] = count
        if name:
            storage.limits[name] = drivers
    return storage


def _objects(reader, value: Any, path: str):
    for item_path, item in reader.items(value, path):
        if isinstance(item, dict):
            yield item_path, item
        else:
            reader.problem(item_path, "expected an object")


def _storage_class(reader, item: dict, path: str) -> StorageClass | None:
    meta = reader.mapping(item.get("metadata"), f"{path}.metadata")
    name = reader.string(meta, "name", f"{path}.metadata", required=True)
    mode = reader.string(item, "volumeBindingMode", path, default=IMMEDIATE)
    if mode not in (IMMEDIATE, WAIT_FOR_FIRST_CONSUMER):
        reader.problem(f"{path}.volumeBindingMode", f'"{mode}" is not one of {IMMEDIATE}, {WAIT_FOR_FIRST_CONSUMER}')
        mode = IMMEDIATE
    terms = []
    for term_path, term in reader.items(item.get("allowedTopologies"), f"{path}.allowedTopologies"):
        expressions = reader.items(reader.mapping(term, term_path).get("matchLabelExpressions"),
                                   f"{term_path}.matchLabelExpressions")
        requirements = []
        for expression_path, expression in expressions:
            entry = reader.mapping(expression, expression_path)
            key = reader.string(entry, "key", expression_path, required=True)
            values = reader.string_list(entry.get("values"), f"{expression_path}.values")
            if key:
                try:
                    requirements.append(Requirement.of(key, IN, values))
                except RequirementError as exc:
                    reader.problem(f"{expression_path}.key", str(exc))
        if requirements:
            terms.append(Requirements(requirements))
    annotations = reader.string_map(meta.get("annotations"), f"{path}.metadata.annotations")
    if not name:
        return None
    return StorageClass(name=name, provisioner=reader.string(item, "provisioner", path, default="") or "",
                        binding_mode=mode, topologies=tuple(terms),
                        default=annotations.get(DEFAULT_CLASS_ANNOTATION) == "true",
                        created=reader.time(meta, "creationTimestamp", f"{path}.metadata"))


def _volume(reader, item: dict, path: str) -> PersistentVolume | None:
    meta = reader.mapping(item.get("metadata"), f"{path}.metadata")
    name = reader.string(meta, "name", f"{path}.metadata", required=True)
    spec = reader.mapping(item.get("spec"), f"{path}.spec")
    required_path = f"{path}.spec.nodeAffinity.required"
    required = reader.mapping(reader.mapping(spec.get("nodeAffinity"), f"{path}.spec.nodeAffinity").get("required"),
                              required_path)
    pinned_to_a_host = spec.get("local") is not None or spec.get("hostPath") is not None
    terms = []
    for term_path, term in reader.items(required.get("nodeSelectorTerms"), f"{required_path}.nodeSelectorTerms"):
        expressions = reader.requirements(reader.mapping(term, term_path).get("matchExpressions"),
                                          f"{term_path}.matchExpressions")
        if pinned_to_a_host:
            # A new node never has the old one's hostname: a hostname-only term allows anywhere.
            kept = [r for r in expressions if r.key != HOSTNAME]
            if expressions and not kept:
                terms.append(Requirements())
                continue
            expressions = kept
        if expressions:
            terms.append(Requirements(expressions))
    csi = reader.mapping(spec.get("csi"), f"{path}.spec.csi")
    driver = reader.string(csi, "driver", f"{path}.spec.csi", default="") or ""
    if not driver and spec.get("awsElasticBlockStore") is not None:
        driver = IN_TREE_DRIVERS["kubernetes.io/aws-ebs"]
    if not name:
        return None
    return PersistentVolume(name=name, terms=tuple(terms), driver=driver,
                            deleting=meta.get("deletionTimestamp") is not None)


def _claim(reader, item: dict, path: str) -> VolumeClaim | None:
    meta = reader.mapping(item.get("metadata"), f"{path}.metadata")
    name = reader.string(meta, "name", f"{path}.metadata", required=True)
    spec = reader.mapping(item.get("spec"), f"{path}.spec")
    status = reader.mapping(item.get("status"), f"{path}.status")
    annotations = reader.string_map(meta.get("annotations"), f"{path}.metadata.annotations")
    volume_name = reader.string(spec, "volumeName", f"{path}.spec", default="") or ""
    if not name:
        return None
    return VolumeClaim(
        namespace=reader.string(meta, "namespace", f"{path}.metadata", default="default") or "default",
        name=name, volume_name=volume_name,
        storage_class=reader.string(spec, "storageClassName", f"{path}.spec") if "storageClassName" in spec else None,
        phase=reader.string(status, "phase", f"{path}.status", default="Pending") or "Pending",
        deleting=meta.get("deletionTimestamp") is not None,
        # A claim the API server bound carries the annotation; a hand-written world may say status.phase Bound.
        bind_completed=BIND_COMPLETED_ANNOTATION in annotations or status.get("phase") == "Bound")
