"""WORLD.json -> engine objects, collecting every problem with its JSON path.

Objects are read as `kubectl get -o json` and `aws ec2 describe-capacity-reservations` write them:
a list may also be a Kubernetes `List` (`{"items": [...]}`), reservations may be the whole
`{"CapacityReservations": [...]}` output (as the `capacityReservations` value or at the top level),
and timestamps may be datetimes (boto3). Nothing stops at the first problem: `parse_world` raises
one WorldError listing all of them as `(json_path, message)`.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from datetime import datetime
from typing import Any, Callable

from .budgets import parse_disruption
from .cluster import DaemonSet, Node, NodeClass, NodePool, Pod, World
from .hostports import parse_host_ports
from .groups import GROUPS_ANNOTATION, merge_terms, parse_annotation
from .instances import parse_instances
from .ec2types import (
    AMI_FAMILIES, INSTANCE_LOCAL_NVME, VM_MEMORY_OVERHEAD_PERCENT, DerivedType, NodeClassShape, alias_family, ami_family,
    capacity as capacity_of, derive,
)
from .instancetypes import InstanceType, Offering
from .labels import ARCH, DEFAULT_ARCH, DEFAULT_OS, INSTANCE_TYPE, NODE_NAME_FIELD, ON_DEMAND, OS, SPOT
from .overhead import KubeletConfig, allocatable
from .podaffinity import (
    DO_NOT_SCHEDULE, HONOR, IGNORE, NAMESPACE_NAME_LABEL, SCHEDULE_ANYWAY, AffinityTerm, LabelSelector, SpreadConstraint, WeightedTerm,
)
from .quantities import CPU, EPHEMERAL_STORAGE, MEMORY, PODS, QuantityError, ResourceList, parse_decimal, parse_resource
from .requirements import GTE, IN, LTE, NOT_IN, Requirement, RequirementError, Requirements
from .refresh import drifted_claims
from .reservations import CapacityReservation
from .taints import EFFECTS, Taint, Toleration
from .timeutil import parse_time, utcnow
from .defaultspread import inject_default_spread
from .commitments import cover, parse_commitments
from .overlays import parse_overlays
from .pdbs import parse_budgets
from .volumes import Storage, claim_names, parse_storage, pod_volumes

DEFAULT_MAX_PODS = 110
DEFAULT_EPHEMERAL_STORAGE = "20Gi"  # the EKS AMIs' default root volume
RESERVATION_ID = re.compile(r"^cr-[0-9a-z]+$")
# karpweb's key on a reservation item (no EC2 field): why an operator keeps karpweb from planning into it.
EXCLUDED_FROM_PLANNING = "karpwebExcludedFromPlanning"
TERMINAL_PHASES = ("Succeeded", "Failed")
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
_LABEL_SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
MAX_MIN_VALUES = 50  # the NodePool CRD's bound


def _show(value: Any) -> str:
    """A value as JSON would write it, shortened; anything JSON cannot write via str()."""
    text = json.dumps(value, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


class WorldError(ValueError):
    """Bad input: every problem, as `(json_path, message)` pairs."""

    def __init__(self, problems: list[tuple[str, str]]):
        self.problems = problems
        super().__init__("\n".join(self.lines()))

    def lines(self) -> list[str]:
        return [f"{path}: {message}" for path, message in self.problems]


def load_json(text: str, source: str = "WORLD.json") -> Any:
    """Parse JSON text, turning a syntax error into a WorldError naming the position."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise WorldError([(source, f"invalid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})")]) from None


def parse_world(data: Any, now: datetime | None = None) -> World:
    reader = _Reader()
    world = reader.world(data, now)
    if reader.problems:
        raise WorldError(reader.problems)
    return world


def parse_pod(item: Any, path: str = "pod") -> Pod | None:
    """One Pod as Kubernetes writes it (None for a finished one); a WorldError names what is wrong."""
    return _parse_one(_Reader.pod, item, path)


def parse_node(item: Any, path: str = "node") -> Node | None:
    """One Node as Kubernetes writes it; a WorldError names what is wrong."""
    return _parse_one(_Reader.node, item, path)


def _parse_one(read: Callable, item: Any, path: str):
    reader = _Reader()
    parsed = read(reader, item, path) if isinstance(item, dict) else reader.problem(path, "expected an object")
    if reader.problems:
        raise WorldError(reader.problems)
    return parsed


class _Reader:
    def __init__(self) -> None:
        self.problems: list[tuple[str, str]] = []

    def problem(self, path: str, message: str) -> None:
        self.problems.append((path, message))

    # generic shapes ------------------------------------------------------------------------------

    def mapping(self, value: Any, path: str, required: bool = False) -> dict:
        if value is None:
            if required:
                self.problem(path, "is required")
            return {}
        if not isinstance(value, dict):
            self.problem(path, "expected an object")
            return {}
        return value

    def items(self, value: Any, path: str) -> list[tuple[str, Any]]:
        """A list, or a Kubernetes List object; returns (path, item) pairs."""
        if value is None:
            return []
        if isinstance(value, dict) and isinstance(value.get("items"), list):
            value, path = value["items"], f"{path}.items"
        if not isinstance(value, list):
            self.problem(path, "expected a list")
            return []
        return [(f"{path}[{index}]", item) for index, item in enumerate(value)]

    def string(self, parent: dict, key: str, path: str, *, required: bool = False, default: str | None = None) -> str | None:
        value = parent.get(key)
        if value is None:
            if required:
                self.problem(f"{path}.{key}", "is required")
            return default
        if not isinstance(value, str):
            self.problem(f"{path}.{key}", f"expected a string, got {_show(value)}")
            return default
        if required and not value:
            self.problem(f"{path}.{key}", "must not be empty")
        return value

    def boolean(self, parent: dict, key: str, path: str, default: bool) -> bool:
        value = parent.get(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            self.problem(f"{path}.{key}", f"expected true or false, got {_show(value)}")
            return default
        return value

    def integer(self, parent: dict, key: str, path: str, *, default: int | None = None, required: bool = False,
                minimum: int = 0, maximum: int | None = None) -> int | None:
        value = parent.get(key)
        if value is None:
            if required:
                self.problem(f"{path}.{key}", "is required")
            return default
        if isinstance(value, bool) or not isinstance(value, int):
            self.problem(f"{path}.{key}", f"expected an integer, got {_show(value)}")
            return default
        if value < minimum or (maximum is not None and value > maximum):
            bounds = f"between {minimum} and {maximum}" if maximum is not None else f"at least {minimum}"
            self.problem(f"{path}.{key}", f"{value} must be {bounds}")
            return default
        return value

    def number(self, parent: dict, key: str, path: str) -> float | None:
        value = parent.get(key)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            self.problem(f"{path}.{key}", "expected a non-negative number" if value is not None else "is required")
            return None
        return float(value)

    def time(self, parent: dict, key: str, path: str) -> datetime | None:
        value = parent.get(key)
        if value is None:
            return None
        try:
            return parse_time(value)
        except ValueError:
            self.problem(f"{path}.{key}", f"{_show(value)} is not a timestamp")
            return None

    def deleting(self, meta: dict, path: str) -> bool:
        """Whether metadata.deletionTimestamp is set (a malformed one is reported, and still set)."""
        self.time(meta, "deletionTimestamp", f"{path}.metadata")
        return meta.get("deletionTimestamp") is not None

    def string_map(self, value: Any, path: str) -> dict[str, str]:
        result = {}
        for key, item in self.mapping(value, path).items():
            if isinstance(item, str):
                result[key] = item
            else:
                self.problem(f"{path}.{key}", f"expected a string, got {_show(item)}")
        return result

    def quantity(self, name: str, value: Any, path: str) -> int | None:
        try:
            return parse_resource(name, value)
        except QuantityError as exc:
            self.problem(path, str(exc))
            return None

    def resources(self, value: Any, path: str) -> ResourceList:
        result = ResourceList()
        for name, item in self.mapping(value, path).items():
            amount = self.quantity(name, item, f"{path}.{name}")
            if amount is not None:
                result[name] = amount
        return result

    def metadata(self, obj: dict, path: str) -> tuple[dict, str | None]:
        meta = self.mapping(obj.get("metadata"), f"{path}.metadata", required=True)
        return meta, self.string(meta, "name", f"{path}.metadata", required=True)

    def unique(self, seen: set, key: Any, path: str, what: str) -> bool:
        if key in seen:
            self.problem(path, f"duplicate {what}")
            return False
        seen.add(key)
        return True

    # the world -----------------------------------------------------------------------------------

    def world(self, data: Any, now: datetime | None) -> World:
        if not isinstance(data, dict):
            self.problem("world", "expected a JSON object")
            return World(now=now or utcnow())
        data = inject_default_spread(data, self.problem)  # kube-scheduler's defaults on pending pods
        moment = self.time(data, "now", "world") if data.get("now") is not None else None
        gates = self.mapping(data.get("featureGates"), "featureGates")
        world = World(now=moment or now or utcnow(),
                      reserved_capacity=self.boolean(gates, "ReservedCapacity", "featureGates", True),
                      spot_to_spot=self.boolean(gates, "SpotToSpotConsolidation", "featureGates", False))
        world.instances = parse_instances(data.get("instances"), self.problem)
        overhead = self.overhead(data)
        world.instance_types = self.instance_types(data.get("instanceTypes"), data.get("describeInstanceTypes"), overhead)
        world.reservations = [r.started_by(world.now) for r in self.reservations(data)]
        world.reservation_groups = self.reservation_groups(data.get("capacityReservationGroups"))
        world.node_classes = self.collect(data.get("ec2NodeClasses"), "ec2NodeClasses", self.node_class, "EC2NodeClass")
        world.node_pools = self.collect(data.get("nodePools"), "nodePools", self.node_pool, "NodePool")
        world.nodes = self.collect(data.get("nodes"), "nodes", self.node, "node")
        world.daemon_sets = self.collect(data.get("daemonSets"), "daemonSets", self.daemon_set, "DaemonSet",
                                         key=lambda d: (d.namespace, d.name))
        world.node_overlays = parse_overlays(data.get("nodeOverlays"), self)
        world.pod_disruption_budgets = parse_budgets(data.get("podDisruptionBudgets"), self)
        world.storage = parse_storage(data, self)
        world.pods = [with_volumes(p, world.storage)
                      for p in self.collect(data.get("pods"), "pods", self.pod, "pod", key=lambda p: p.key) if p]
        for node in world.nodes:
            node.volume_limits = world.storage.limits.get(node.name, {})
        world.namespaces = self.namespaces(data.get("namespaces"))
        world.drifted = drifted_claims(data.get("nodeClaims"), self.problem)
        world.commitments = parse_commitments(data.get("commitments"), self.problem)
        world.instance_types, world.coverage = cover(world.instance_types, world.nodes, world.commitments)
        return world

    def overhead(self, data: dict) -> float:
        """`vmMemoryOverheadPercent` (upstream's VM_MEMORY_OVERHEAD_PERCENT): the share of memory
        taken off types given as `describeInstanceTypes`."""
        value = data.get("vmMemoryOverheadPercent")
        if value is None:
            return VM_MEMORY_OVERHEAD_PERCENT
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
            self.problem("vmMemoryOverheadPercent", f"expected a number from 0 to below 1 (0.075 is 7.5 %), got {_show(value)}")
            return VM_MEMORY_OVERHEAD_PERCENT
        return float(value)

    def collect(self, value: Any, path: str, parse: Callable, what: str, key: Callable = lambda o: o.name) -> list:
        result, seen = [], set()
        for item_path, item in self.items(value, path):
            if not isinstance(item, dict):
                self.problem(item_path, "expected an object")
                continue
            obj = parse(item, item_path)
            if obj is not None and self.unique(seen, key(obj), f"{item_path}.metadata.name", f"{what} {key(obj)}"):
                result.append(obj)
        return result

    # instance types ------------------------------------------------------------------------------

    def instance_types(self, value: Any, described: Any = None, overhead: float = VM_MEMORY_OVERHEAD_PERCENT
                       ) -> list[InstanceType]:
        raw = self.described_types(described)
        result, seen = [], set()
        for path, item in self.items(value, "instanceTypes"):
            if not isinstance(item, dict):
                self.problem(path, "expected an object")
                continue
            it = self.instance_type(item, path, raw, overhead)
            if it is not None and self.unique(seen, it.name, f"{path}.name", f'instance type "{it.name}"'):
                result.append(it)
        return result

    def described_types(self, value: Any) -> dict[str, tuple[str, DerivedType]]:
        """`describeInstanceTypes`: `aws ec2 describe-instance-types` output (or its `InstanceTypes`
        list), derived as Karpenter's AWS provider derives it; name -> (JSON path, derived)."""
        path = "describeInstanceTypes"
        if isinstance(value, dict) and "InstanceTypes" in value:
            value, path = value["InstanceTypes"], "describeInstanceTypes.InstanceTypes"
        derived = {}
        for item_path, item in self.items(value, path):
            if not isinstance(item, dict):
                self.problem(item_path, "expected an object")
                continue
            try:
                found = derive(item)
            except (ValueError, TypeError, AttributeError) as exc:
                self.problem(item_path, str(exc) if isinstance(exc, ValueError) else f"not an InstanceTypeInfo ({exc})")
                continue
            derived[found.name] = (item_path, found)
        return derived

    def instance_type(self, item: dict, path: str, raw: dict[str, tuple[str, DerivedType]],
                      overhead: float) -> InstanceType | None:
        name = self.string(item, "name", path, required=True)
        described = raw.get(name) if name else None
        base = capacity_of(described[1], overhead) if described else {}
        capacity = ResourceList(base)
        capacity.update(self.resources(item.get("resources"), f"{path}.resources"))
        for resource in (CPU, MEMORY):
            if item.get(resource) is not None:
                capacity[resource] = self.quantity(resource, item[resource], f"{path}.{resource}") or 0
            elif not described:
                hint = " (or a describeInstanceTypes entry of this name)" if name else ""
                self.problem(f"{path}.{resource}", "is required" + hint)
        if item.get(PODS) is not None or not described:
            capacity[PODS] = self.quantity(PODS, item.get(PODS, DEFAULT_MAX_PODS), f"{path}.pods") or 0
        capacity.setdefault(EPHEMERAL_STORAGE, parse_resource(EPHEMERAL_STORAGE, DEFAULT_EPHEMERAL_STORAGE))
        base_labels = described[1].labels if described else {ARCH: DEFAULT_ARCH, OS: DEFAULT_OS}
        labels = {**base_labels, **self.string_map(item.get("labels"), f"{path}.labels")}
        offerings = [o for o in (self.offering(o, p) for p, o in self.items(item.get("offerings"), f"{path}.offerings")) if o]
        if not name:
            return None
        labels[INSTANCE_TYPE] = name
        nvme = labels.get(INSTANCE_LOCAL_NVME, "")
        store = described[1].instance_store_gb if described else int(nvme) if nvme.isdigit() else 0
        return InstanceType(name, capacity, labels, tuple(offerings), allocatable(capacity, KubeletConfig()), store)

    def offering(self, item: Any, path: str) -> Offering | None:
        if not isinstance(item, dict):
            self.problem(path, "expected an object")
            return None
        capacity_type = self.string(item, "capacityType", path, required=True)
        if capacity_type not in (ON_DEMAND, SPOT, None):
            hint = ("reserved offerings come from capacityReservations" if capacity_type == "reserved"
                    else f"expected {ON_DEMAND} or {SPOT}")
            self.problem(f"{path}.capacityType", f'"{capacity_type}": {hint}')
            return None
        zone = self.string(item, "zone", path, required=True)
        zone_id = self.string(item, "zoneId", path, default="")
        price = self.number(item, "price", path)
        available = self.boolean(item, "available", path, True)
        if capacity_type is None or not zone or price is None:
            return None
        return Offering.create(capacity_type, zone, price, available, zone_id=zone_id)

    # reservations --------------------------------------------------------------------------------

    def reservations(self, data: dict) -> list[CapacityReservation]:
        value, path = data.get("capacityReservations"), "capacityReservations"
        if isinstance(value, dict) and "CapacityReservations" in value:
            value, path = value["CapacityReservations"], "capacityReservations.CapacityReservations"
        entries = self.items(value, path)
        if "CapacityReservations" in data:
            entries += self.items(data["CapacityReservations"], "CapacityReservations")
        result, seen = [], set()
        for item_path, item in entries:
            if not isinstance(item, dict):
                self.problem(item_path, "expected an object")
                continue
            reservation = self.reservation(item, item_path)
            if reservation and self.unique(seen, reservation.id, f"{item_path}.CapacityReservationId",
                                           f"reservation {reservation.id}"):
                result.append(reservation)
        return result

    def reservation(self, item: dict, path: str) -> CapacityReservation | None:
        rid = self.string(item, "CapacityReservationId", path, required=True)
        if rid and not RESERVATION_ID.match(rid):
            self.problem(f"{path}.CapacityReservationId", f'"{rid}" does not match {RESERVATION_ID.pattern}')
        instance_type = self.string(item, "InstanceType", path, required=True)
        zone = self.string(item, "AvailabilityZone", path, required=True)
        available = self.integer(item, "AvailableInstanceCount", path, required=True)
        total = self.integer(item, "TotalInstanceCount", path, default=available)
        fields = dict(
            owner_id=self.string(item, "OwnerId", path, default=""),
            state=self.string(item, "State", path, default="active"),
            instance_match_criteria=self.string(item, "InstanceMatchCriteria", path, default="open"),
            reservation_type=self.string(item, "ReservationType", path, default="default") or "default",
            end=self.time(item, "EndDate", path),
            start=self.time(item, "StartDate", path),
            tags=self.tags(item.get("Tags"), f"{path}.Tags"),
            interruptible=self.boolean(item, "Interruptible", path, False),
            ultraserver_type=self.string(item, "UltraserverType", path, default=""),
            zone_id=self.string(item, "AvailabilityZoneId", path, default=""),
            excluded_from_planning=self.string(item, EXCLUDED_FROM_PLANNING, path, default="") or "",
        )
        if not (rid and instance_type and zone) or available is None:
            return None
        return CapacityReservation(rid, instance_type, zone, available, total or 0, **fields)

    def tags(self, value: Any, path: str) -> dict[str, str]:
        if isinstance(value, dict):
            return self.string_map(value, path)
        tags = {}
        for item_path, item in self.items(value, path):
            entry = self.mapping(item, item_path)
            key = self.string(entry, "Key", item_path, required=True)
            if key is not None:
                tags[key] = self.string(entry, "Value", item_path, default="")
        return tags

    def reservation_groups(self, value: Any) -> dict[str, frozenset[str]]:
        groups = {}
        for path, item in self.items(value, "capacityReservationGroups"):
            entry = self.mapping(item, path)
            arn = self.string(entry, "GroupArn", path, required=True)
            ids = self.string_list(entry.get("CapacityReservationIds"), f"{path}.CapacityReservationIds")
            if arn:
                groups[arn] = frozenset(ids)
        return groups

    # EC2NodeClasses and NodePools ----------------------------------------------------------------

    def node_class(self, item: dict, path: str) -> NodeClass | None:
        meta, name = self.metadata(item, path)
        spec = self.mapping(item.get("spec"), f"{path}.spec")
        kubelet = self.kubelet(spec.get("kubelet"), f"{path}.spec.kubelet")
        annotations = meta.get("annotations") if isinstance(meta.get("annotations"), dict) else {}
        _, problem = parse_annotation(annotations.get(GROUPS_ANNOTATION))
        if problem:
            self.problem(f"{path}.metadata.annotations.{GROUPS_ANNOTATION}", problem)
        terms = merge_terms(spec.get("capacityReservationSelectorTerms"), annotations)
        not_ready = self.not_ready(self.mapping(item.get("status"), f"{path}.status").get("conditions"), f"{path}.status.conditions")
        return NodeClass(name, terms, kubelet, self.node_class_shape(spec, f"{path}.spec"), not_ready) if name else None

    def not_ready(self, conditions: Any, path: str) -> str | None:
        """An EC2NodeClass whose Ready condition is not True cannot launch (Karpenter's gate); a
        status without a Ready condition (a what-if world, a class never reconciled) says nothing."""
        for _, item in self.items(conditions, path):
            if isinstance(item, dict) and item.get("type") == "Ready" and item.get("status") != "True":
                return f"{item.get('reason') or 'NotReady'}: {item.get('message') or 'Ready is ' + str(item.get('status'))}"
        return None

    def node_class_shape(self, spec: dict, path: str) -> NodeClassShape:
        """AMI family (spec.amiFamily or an alias term; AL2023 when neither is given), the
        instance-store policy and the root volume: what changes a node's shape per class."""
        family = spec.get("amiFamily")
        if family is not None and family not in AMI_FAMILIES:
            self.problem(f"{path}.amiFamily", f"{_show(family)} is not one of {', '.join(AMI_FAMILIES)}")
        for term_path, term in self.items(spec.get("amiSelectorTerms"), f"{path}.amiSelectorTerms"):
            alias = term.get("alias") if isinstance(term, dict) else None
            if alias is not None and (not isinstance(alias, str) or alias_family(alias) is None):
                self.problem(f"{term_path}.alias", f"{_show(alias)} is not family@version with a family of "
                             "al2, al2023, bottlerocket, windows2019, windows2022, windows2025")
        policy = spec.get("instanceStorePolicy")
        if policy is not None and policy != "RAID0":
            self.problem(f"{path}.instanceStorePolicy", f'{_show(policy)}: the only policy is "RAID0"')
        root = None
        for bdm_path, bdm in self.items(spec.get("blockDeviceMappings"), f"{path}.blockDeviceMappings"):
            if isinstance(bdm, dict) and bdm.get("rootVolume") is True:
                ebs = self.mapping(bdm.get("ebs"), f"{bdm_path}.ebs")
                if ebs.get("volumeSize") is not None:
                    root = self.quantity(EPHEMERAL_STORAGE, ebs["volumeSize"], f"{bdm_path}.ebs.volumeSize")
        resolved = ami_family(spec)
        return NodeClassShape(ami_family=resolved if resolved in AMI_FAMILIES else "AL2023",
                              instance_store_raid0=policy == "RAID0", root_volume_bytes=root)

    def kubelet(self, value: Any, path: str) -> KubeletConfig:
        spec = self.mapping(value, path)
        eviction = self.string_map(spec.get("evictionHard"), f"{path}.evictionHard")
        for signal, threshold in eviction.items():
            try:
                parse_decimal(threshold[:-1] if threshold.endswith("%") else threshold)
            except QuantityError as exc:
                self.problem(f"{path}.evictionHard.{signal}", str(exc))
        return KubeletConfig(
            max_pods=self.integer(spec, "maxPods", path, minimum=1),
            pods_per_core=self.integer(spec, "podsPerCore", path, minimum=1),
            kube_reserved=self.resources(spec.get("kubeReserved"), f"{path}.kubeReserved"),
            system_reserved=self.resources(spec.get("systemReserved"), f"{path}.systemReserved"),
            eviction_hard=eviction,
        )

    def node_pool(self, item: dict, path: str) -> NodePool | None:
        _, name = self.metadata(item, path)
        spec = self.mapping(item.get("spec"), f"{path}.spec")
        template = self.mapping(spec.get("template"), f"{path}.spec.template")
        template_spec = self.mapping(template.get("spec"), f"{path}.spec.template.spec")
        ref = self.mapping(template_spec.get("nodeClassRef"), f"{path}.spec.template.spec.nodeClassRef", required=True)
        node_class = self.string(ref, "name", f"{path}.spec.template.spec.nodeClassRef", required=True)
        requirements = self.requirements(template_spec.get("requirements"), f"{path}.spec.template.spec.requirements",
                                         node_pool=True)
        pool = NodePool(
            name=name or "",
            node_class=node_class or "",
            requirements=Requirements(requirements),
            labels=self.string_map(self.mapping(template.get("metadata"), f"{path}.spec.template.metadata").get("labels"),
                                   f"{path}.spec.template.metadata.labels"),
            taints=self.taints(template_spec.get("taints"), f"{path}.spec.template.spec.taints"),
            weight=self.integer(spec, "weight", f"{path}.spec", default=0, maximum=100),
            limits=self.resources(spec["limits"], f"{path}.spec.limits") if spec.get("limits") is not None else None,
            disruption=parse_disruption(item.get("metadata") or {}, spec, template_spec, path, self.problem),
            replicas=self.integer(spec, "replicas", f"{path}.spec"),
        )
        if pool.static:
            self.static_pool_rules(spec, f"{path}.spec")
        return pool if name else None

    def static_pool_rules(self, spec: dict, path: str) -> None:
        """The NodePool CRD's rules for `replicas` (alpha upstream): no weight, no limit but nodes."""
        if spec.get("weight") is not None:
            self.problem(f"{path}.weight", "'weight' is not supported on static NodePools (spec.replicas is set)")
        limits = spec.get("limits")
        for name in sorted(limits) if isinstance(limits, dict) else ():
            if name != "nodes":
                self.problem(f"{path}.limits.{name}", "only 'limits.nodes' is supported on static NodePools "
                                                      "(spec.replicas is set)")

    def requirements(self, value: Any, path: str, *, field_selector: bool = False,
                     node_pool: bool = False) -> list[Requirement]:
        result = []
        for item_path, item in self.items(value, path):
            entry = self.mapping(item, item_path)
            key = self.string(entry, "key", item_path, required=True)
            operator = self.string(entry, "operator", item_path, required=True)
            values = self.string_list(entry.get("values"), f"{item_path}.values")
            min_values = self.integer(entry, "minValues", item_path, minimum=1, maximum=MAX_MIN_VALUES)
            if min_values is not None and operator == IN and len(values) < min_values:
                self.problem(f"{item_path}.minValues", f"{min_values} is more than the {len(values)} value(s) listed")
            if field_selector and key is not None and key != NODE_NAME_FIELD:
                self.problem(f"{item_path}.key", f'"{key}": matchFields supports only {NODE_NAME_FIELD}')
                continue
            if field_selector and operator not in (IN, NOT_IN, None):
                self.problem(f"{item_path}.operator", f'"{operator}": matchFields supports only In and NotIn')
                continue
            if not node_pool and operator in (GTE, LTE):
                self.problem(f"{item_path}.operator", f'"{operator}" is valid in NodePool requirements only; '
                             f'a pod writes {"Gt" if operator == GTE else "Lt"} with the bound moved by one')
                continue
            if key and operator:
                try:
                    result.append(Requirement.of(key, operator, values, min_values))
                except RequirementError as exc:
                    self.problem(f"{item_path}.operator", str(exc))
        return result

    def string_list(self, value: Any, path: str) -> list[str]:
        strings = []
        for item_path, item in self.items(value, path):
            if isinstance(item, str):
                strings.append(item)
            else:
                self.problem(item_path, f"expected a string, got {_show(item)}")
        return strings

    def taints(self, value: Any, path: str) -> tuple[Taint, ...]:
        result = []
        for item_path, item in self.items(value, path):
            entry = self.mapping(item, item_path)
            key = self.string(entry, "key", item_path, required=True)
            effect = self.string(entry, "effect", item_path, required=True)
            if effect is not None and effect not in EFFECTS:
                self.problem(f"{item_path}.effect", f'"{effect}" is not one of {", ".join(EFFECTS)}')
            elif key and effect:
                result.append(Taint(key, self.string(entry, "value", item_path, default=""), effect))
        return tuple(result)

    def namespaces(self, value: Any) -> dict[str, dict[str, str]]:
        """Optional v1 Namespace objects: their labels, for namespaceSelectors. A namespace that is
        not listed has just its `kubernetes.io/metadata.name` label."""
        result = {}
        for path, item in self.items(value, "namespaces"):
            meta, name = self.metadata(self.mapping(item, path), path)
            if name and self.unique(set(result), name, f"{path}.metadata.name", f"namespace {name}"):
                result[name] = {**self.string_map(meta.get("labels"), f"{path}.metadata.labels"),
                                NAMESPACE_NAME_LABEL: name}
        return result

    # nodes ---------------------------------------------------------------------------------------

    def node(self, item: dict, path: str) -> Node | None:
        meta, name = self.metadata(item, path)
        spec = self.mapping(item.get("spec"), f"{path}.spec")
        status = self.mapping(item.get("status"), f"{path}.status")
        allocatable = self.resources(status.get("allocatable"), f"{path}.status.allocatable")
        allocatable.setdefault(PODS, DEFAULT_MAX_PODS)
        capacity = self.resources(status["capacity"], f"{path}.status.capacity") if status.get("capacity") else allocatable
        if not name:
            return None
        return Node(
            name=name,
            labels=self.string_map(meta.get("labels"), f"{path}.metadata.labels"),
            allocatable=allocatable,
            capacity=capacity,
            taints=self.taints(spec.get("taints"), f"{path}.spec.taints"),
            unschedulable=self.boolean(spec, "unschedulable", f"{path}.spec", False),
            deleting=self.deleting(meta, path),
            ready=self.node_ready(status.get("conditions"), f"{path}.status.conditions"),
            created=self.time(meta, "creationTimestamp", f"{path}.metadata"),
            annotations=self.string_map(meta.get("annotations"), f"{path}.metadata.annotations"),
            provider_id=self.string(spec, "providerID", f"{path}.spec", default="") or "",
        )

    def node_ready(self, value: Any, path: str) -> bool:
        for _, item in self.items(value, path):
            if isinstance(item, dict) and item.get("type") == "Ready":
                return item.get("status") == "True"
        return True

    # pods ----------------------------------------------------------------------------------------

    def pod(self, item: dict, path: str) -> Pod | None:
        meta, name = self.metadata(item, path)
        spec = self.mapping(item.get("spec"), f"{path}.spec", required=True)
        status = self.mapping(item.get("status"), f"{path}.status")
        pod = self.pod_from_spec(meta, name, spec, path)
        if pod is None or status.get("phase") in TERMINAL_PHASES:
            return None
        pod.node_name = self.string(spec, "nodeName", f"{path}.spec") or None
        self.pod_disruption_fields(pod, meta, spec, status, path)
        return pod

    def pod_disruption_fields(self, pod: Pod, meta: dict, spec: dict, status: dict, path: str) -> None:
        """What consolidation reads: annotations, spec.priority, whether the pod is a DaemonSet's
        (ownerReferences) or a static pod (the kubernetes.io/config.mirror annotation) or a
        StatefulSet's, whether it is terminating (metadata.deletionTimestamp) and when it started."""
        pod.annotations = self.string_map(meta.get("annotations"), f"{path}.metadata.annotations")
        pod.priority = self.integer(spec, "priority", f"{path}.spec", default=0, minimum=-(2**31)) or 0
        owners = [o for _, o in self.items(meta.get("ownerReferences"), f"{path}.metadata.ownerReferences")]
        kinds = {o.get("kind") for o in owners if isinstance(o, dict) and isinstance(o.get("kind"), str)}
        pod.daemon = "DaemonSet" in kinds or MIRROR_ANNOTATION in pod.annotations
        pod.stateful = "StatefulSet" in kinds
        controller = next((o for o in owners if isinstance(o, dict) and o.get("controller")), None)
        if controller is not None and isinstance(controller.get("kind"), str) and isinstance(controller.get("name"), str):
            pod.owner = (controller["kind"], controller["name"])
        pod.terminating = self.deleting(meta, path)
        pod.started = self.time(status, "startTime", f"{path}.status")

    def daemon_set(self, item: dict, path: str) -> DaemonSet | None:
        meta, name = self.metadata(item, path)
        spec = self.mapping(item.get("spec"), f"{path}.spec")
        template = self.mapping(spec.get("template"), f"{path}.spec.template", required=True)
        template_meta = {**self.mapping(template.get("metadata"), f"{path}.spec.template.metadata"),
                         "namespace": meta.get("namespace")}
        pod_spec = self.mapping(template.get("spec"), f"{path}.spec.template.spec", required=True)
        pod = self.pod_from_spec(template_meta, name, pod_spec, f"{path}.spec.template")
        return DaemonSet(pod.namespace, name, pod) if pod is not None and name else None

    def pod_from_spec(self, meta: dict, name: str | None, spec: dict, path: str) -> Pod | None:
        namespace = self.string(meta, "namespace", f"{path}.metadata", default="default") or "default"
        requests = self.pod_requests(spec, f"{path}.spec")
        affinity = self.mapping(spec.get("affinity"), f"{path}.spec.affinity")
        labels = self.string_map(meta.get("labels"), f"{path}.metadata.labels")
        pod_affinity = self.pod_affinity(affinity.get("podAffinity"), namespace, labels, f"{path}.spec.affinity.podAffinity")
        anti_affinity = self.pod_affinity(affinity.get("podAntiAffinity"), namespace, labels,
                                          f"{path}.spec.affinity.podAntiAffinity")
        pod = dict(
            requests=requests,
            uid=self.string(meta, "uid", f"{path}.metadata", default=""),
            created=self.time(meta, "creationTimestamp", f"{path}.metadata"),
            labels=labels,
            node_selector=Requirements.from_labels(self.string_map(spec.get("nodeSelector"), f"{path}.spec.nodeSelector")),
            affinity_terms=self.node_affinity(affinity.get("nodeAffinity"), f"{path}.spec.affinity.nodeAffinity"),
            preferred_node_terms=self.preferred_node_affinity(affinity.get("nodeAffinity"),
                                                              f"{path}.spec.affinity.nodeAffinity"),
            tolerations=self.tolerations(spec.get("tolerations"), f"{path}.spec.tolerations"),
            anti_affinity=anti_affinity[0],
            preferred_anti_affinity=anti_affinity[1],
            affinity=pod_affinity[0],
            preferred_affinity=pod_affinity[1],
            spread=self.spread_constraints(spec.get("topologySpreadConstraints"), labels,
                                           f"{path}.spec.topologySpreadConstraints"),
            volume_claims=claim_names(name or "", spec.get("volumes")),
            host_ports=parse_host_ports(self.items(spec.get("containers"), f"{path}.spec.containers"), self.problem),
        )
        return Pod(namespace, name, **pod) if name else None

    def pod_requests(self, spec: dict, path: str) -> ResourceList:
        """Effective requests as the Kubernetes scheduler computes them: the sum of the containers
        (plus restartable init containers, i.e. sidecars), or the largest init container step if
        larger, plus the pod overhead, plus one `pods`. A container without requests but with
        limits requests its limits (API defaulting)."""
        containers = self.items(spec.get("containers"), f"{path}.containers")
        if not containers:
            self.problem(f"{path}.containers", "must list at least one container")
        total = ResourceList()
        for item_path, container in containers:
            total = total.add(self.container_requests(container, item_path))
        sidecars, init_peak = ResourceList(), ResourceList()
        for item_path, container in self.items(spec.get("initContainers"), f"{path}.initContainers"):
            requests = self.container_requests(container, item_path)
            if isinstance(container, dict) and container.get("restartPolicy") == "Always":
                sidecars = sidecars.add(requests)
            else:
                init_peak = init_peak.max(requests.add(sidecars))
        total = total.add(sidecars).max(init_peak)
        total = total.add(self.resources(spec.get("overhead"), f"{path}.overhead"))
        total[PODS] = total.get(PODS, 0) + 1
        return total

    def container_requests(self, container: Any, path: str) -> ResourceList:
        entry = self.mapping(container, path)
        resources = self.mapping(entry.get("resources"), f"{path}.resources")
        limits = self.resources(resources.get("limits"), f"{path}.resources.limits")
        requests = self.resources(resources.get("requests"), f"{path}.resources.requests")
        return ResourceList({**limits, **requests})

    def node_affinity(self, value: Any, path: str) -> tuple[Requirements, ...] | None:
        node_affinity = self.mapping(value, path)
        required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
        if required is None:
            return None
        required_path = f"{path}.requiredDuringSchedulingIgnoredDuringExecution"
        terms = []
        for term_path, term in self.items(self.mapping(required, required_path).get("nodeSelectorTerms"),
                                          f"{required_path}.nodeSelectorTerms"):
            entry = self.mapping(term, term_path)
            terms.append(Requirements(
                self.requirements(entry.get("matchExpressions"), f"{term_path}.matchExpressions")
                + self.requirements(entry.get("matchFields"), f"{term_path}.matchFields", field_selector=True)
            ))
        return tuple(terms)

    def tolerations(self, value: Any, path: str) -> tuple[Toleration, ...]:
        result = []
        for item_path, item in self.items(value, path):
            entry = self.mapping(item, item_path)
            operator = self.string(entry, "operator", item_path, default="Equal")
            if operator not in ("Equal", "Exists"):
                self.problem(f"{item_path}.operator", f'"{operator}" is not one of Equal, Exists')
                continue
            result.append(Toleration(
                key=self.string(entry, "key", item_path, default="") or "",
                operator=operator,
                value=self.string(entry, "value", item_path, default="") or "",
                effect=self.string(entry, "effect", item_path, default="") or "",
            ))
        return tuple(result)

    def pod_affinity(self, value: Any, namespace: str, labels: dict[str, str],
                     path: str) -> tuple[tuple[AffinityTerm, ...], tuple[WeightedTerm, ...]]:
        """A podAffinity or podAntiAffinity: its required terms and its weighted preferred terms."""
        spec = self.mapping(value, path)
        required_path = f"{path}.requiredDuringSchedulingIgnoredDuringExecution"
        required = [self.affinity_term(item, namespace, labels, item_path)
                    for item_path, item in self.items(spec.get("requiredDuringSchedulingIgnoredDuringExecution"), required_path)]
        preferred = []
        preferred_path = f"{path}.preferredDuringSchedulingIgnoredDuringExecution"
        for item_path, item in self.items(spec.get("preferredDuringSchedulingIgnoredDuringExecution"), preferred_path):
            entry = self.mapping(item, item_path)
            weight = self.integer(entry, "weight", item_path, required=True, minimum=1, maximum=100)
            term = self.affinity_term(entry.get("podAffinityTerm"), namespace, labels, f"{item_path}.podAffinityTerm")
            if weight is not None and term is not None:
                preferred.append(WeightedTerm(weight, term))
        return tuple(t for t in required if t is not None), tuple(preferred)

    def affinity_term(self, value: Any, namespace: str, labels: dict[str, str], path: str) -> AffinityTerm | None:
        """One PodAffinityTerm. Namespaces: those listed plus those the namespaceSelector selects;
        the pod's own namespace when neither is given."""
        entry = self.mapping(value, path, required=True)
        topology_key = self.string(entry, "topologyKey", path, required=True)
        namespaces = self.string_list(entry.get("namespaces"), f"{path}.namespaces")
        namespace_selector = self.label_selector(entry.get("namespaceSelector"), f"{path}.namespaceSelector")
        scope = frozenset(namespaces) if namespace_selector is not None else frozenset(namespaces or [namespace])
        selector = self.label_selector(entry.get("labelSelector"), f"{path}.labelSelector")
        selector = self.label_keys(selector, entry, labels, path, mismatch=True)
        return AffinityTerm(selector, scope, topology_key, namespace_selector) if topology_key else None

    def label_keys(self, selector: LabelSelector | None, entry: dict, labels: dict[str, str], path: str,
                   mismatch: bool = False) -> LabelSelector | None:
        """`matchLabelKeys` (and `mismatchLabelKeys`): the pod's own values for those keys, ANDed
        into the selector as `key In [value]` (`key NotIn [value]`); keys the pod lacks are ignored."""
        extra = []
        for field_name, operator in (("matchLabelKeys", IN), ("mismatchLabelKeys", NOT_IN))[:2 if mismatch else 1]:
            for key in self.string_list(entry.get(field_name), f"{path}.{field_name}"):
                if key in labels:
                    extra.append(Requirement.of(key, operator, [labels[key]]))
        if not extra:
            return selector
        if selector is None:
            self.problem(f"{path}.labelSelector", "is required with matchLabelKeys or mismatchLabelKeys")
            return None
        return LabelSelector(selector.requirements.intersect(extra))

    def preferred_node_affinity(self, value: Any, path: str) -> tuple[tuple[int, Requirements], ...]:
        """preferredDuringSchedulingIgnoredDuringExecution: (weight, term) pairs. A term without
        expressions matches every node, so it is no preference at all and is left out."""
        preferred_path = f"{path}.preferredDuringSchedulingIgnoredDuringExecution"
        terms = []
        for item_path, item in self.items(self.mapping(value, path).get("preferredDuringSchedulingIgnoredDuringExecution"),
                                          preferred_path):
            entry = self.mapping(item, item_path)
            weight = self.integer(entry, "weight", item_path, required=True, minimum=1, maximum=100)
            preference = self.mapping(entry.get("preference"), f"{item_path}.preference", required=True)
            term = Requirements(
                self.requirements(preference.get("matchExpressions"), f"{item_path}.preference.matchExpressions")
                + self.requirements(preference.get("matchFields"), f"{item_path}.preference.matchFields", field_selector=True)
            )
            if weight is not None and len(term):
                terms.append((weight, term))
        return tuple(terms)

    def spread_constraints(self, value: Any, labels: dict[str, str], path: str) -> tuple[SpreadConstraint, ...]:
        constraints = []
        for item_path, item in self.items(value, path):
            entry = self.mapping(item, item_path)
            max_skew = self.integer(entry, "maxSkew", item_path, required=True, minimum=1)
            topology_key = self.string(entry, "topologyKey", item_path, required=True)
            when = self.string(entry, "whenUnsatisfiable", item_path, required=True)
            if when is not None and when not in (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY):
                self.problem(f"{item_path}.whenUnsatisfiable", f'"{when}" is not one of {DO_NOT_SCHEDULE}, {SCHEDULE_ANYWAY}')
                when = None
            min_domains = self.integer(entry, "minDomains", item_path, minimum=1)
            if min_domains is not None and when == SCHEDULE_ANYWAY:
                self.problem(f"{item_path}.minDomains", f"requires whenUnsatisfiable {DO_NOT_SCHEDULE}")
            policies = {}
            for field_name, default in (("nodeAffinityPolicy", HONOR), ("nodeTaintsPolicy", IGNORE)):
                policy = self.string(entry, field_name, item_path, default=default)
                if policy not in (HONOR, IGNORE):
                    self.problem(f"{item_path}.{field_name}", f'"{policy}" is not one of {HONOR}, {IGNORE}')
                    policy = default
                policies[field_name] = policy
            selector = self.label_keys(self.label_selector(entry.get("labelSelector"), f"{item_path}.labelSelector"),
                                       entry, labels, item_path)
            if max_skew is not None and topology_key and when is not None:
                constraints.append(SpreadConstraint(max_skew, topology_key, when, selector,
                                                    min_domains if when == DO_NOT_SCHEDULE else None,
                                                    policies["nodeAffinityPolicy"], policies["nodeTaintsPolicy"]))
        return tuple(constraints)

    def label_selector(self, value: Any, path: str) -> LabelSelector | None:
        if value is None:
            return None
        selector = self.mapping(value, path)
        reqs = [Requirement.single(k, v) for k, v in self.string_map(selector.get("matchLabels"), f"{path}.matchLabels").items()]
        for item_path, item in self.items(selector.get("matchExpressions"), f"{path}.matchExpressions"):
            entry = self.mapping(item, item_path)
            key = self.string(entry, "key", item_path, required=True)
            operator = self.string(entry, "operator", item_path, required=True)
            if operator is not None and operator not in _LABEL_SELECTOR_OPERATORS:
                self.problem(f"{item_path}.operator", f'"{operator}" is not one of {", ".join(_LABEL_SELECTOR_OPERATORS)}')
                continue
            if key and operator:
                try:
                    reqs.append(Requirement.of(key, operator, self.string_list(entry.get("values"), f"{item_path}.values")))
                except RequirementError as exc:
                    self.problem(f"{item_path}.operator", str(exc))
        return LabelSelector(Requirements(reqs))


def with_volumes(pod: Pod, storage: Storage) -> Pod:
    """The pod with what its persistent volumes mean for placing it (volumes.py)."""
    found = pod_volumes(storage, pod.namespace, pod.volume_claims)
    if found.terms is None and not found.problem and not found.usage:
        return pod
    return replace(pod, volume_terms=found.terms, volume_problem=found.problem, volume_usage=found.usage)
