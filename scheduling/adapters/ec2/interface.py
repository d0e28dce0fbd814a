"""The small interface the control loop uses for a cloud, shared by EC2 and the simulated world.

Everything here is plain data (dataclasses, dicts in EC2's own shape) so that the engine and a
simulated world can produce and consume it without boto3. ``EC2CloudProvider`` in ``provider.py``
implements :class:`CloudProvider` on boto3.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

# Capacity types and reservation types are the engine's label values, re-exported here.
from scheduling.engine.labels import ON_DEMAND, RESERVATION_CAPACITY_BLOCK, RESERVATION_DEFAULT, RESERVED, SPOT  # noqa: F401


class CloudAPIError(Exception):
    """A cloud API call failed; ``code`` is the provider's error code (e.g. ``UnauthorizedOperation``)."""

    def __init__(self, code: str, message: str, operation: str = "") -> None:
        super().__init__(f"{operation + ': ' if operation else ''}{code}: {message}")
        self.code = code
        self.message = message
        self.operation = operation


class SelectorTermsError(ValueError):
    """capacityReservationSelectorTerms are invalid; ``problems`` says exactly what, per term."""

    def __init__(self, problems: Sequence[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = list(problems)


@dataclass(frozen=True)
class InstanceTypeInfo:
    name: str
    vcpus: int
    memory_mib: int  # as EC2 reports it; the node reports less (engine.ec2types.node_memory_mib)
    architecture: str  # Kubernetes arch: amd64 | arm64
    max_pods: int  # the ENI limit on the default network card
    gpu_count: int = 0
    gpu_manufacturer: str = ""
    gpu_name: str = ""
    bare_metal: bool = False
    usage_classes: tuple[str, ...] = ()  # on-demand, spot, capacity-block
    on_demand_price: float | None = None
    price_source: str = ""  # pricing-api | bundled | estimated | "" (unknown)
    # Every well-known label and extended resource Karpenter's AWS provider derives (engine.ec2types).
    labels: Mapping[str, str] = field(default_factory=dict)
    resources: Mapping[str, int] = field(default_factory=dict)
    instance_store_gb: int = 0


@dataclass(frozen=True)
class OfferingInfo:
    instance_type: str
    zone: str
    zone_id: str
    capacity_type: str  # on-demand | spot | reserved
    price: float | None
    available: bool = True
    reservation_id: str | None = None
    reservation_type: str | None = None
    interruptible: bool = False
    reservation_capacity: int = 0


@dataclass
class Catalogue:
    instance_types: list[InstanceTypeInfo]
    offerings: list[OfferingInfo]
    fetched_at: datetime
    price_source: str  # where the on-demand prices came from: pricing-api | bundled | mixed
    notes: list[str] = field(default_factory=list)

    def instance_type(self, name: str) -> InstanceTypeInfo | None:
        return next((it for it in self.instance_types if it.name == name), None)


@dataclass(frozen=True)
class LaunchOffering:
    """One offering a NodeClaim may launch into (the engine's choice of compatible offerings)."""

    instance_type: str
    zone: str
    capacity_type: str
    price: float
    subnet_id: str | None = None
    reservation_id: str | None = None
    reservation_type: str | None = None  # default | capacity-block (reserved only)
    interruptible: bool = False
    reservation_capacity: int = 0
    # A Capacity Reservation group holding this reservation and like ones: the launch targets the
    # group (CapacityReservationResourceGroupArn) and EC2 picks a member with room.
    reservation_group_arn: str | None = None


@dataclass
class LaunchRequest:
    nodeclaim_name: str
    nodeclass_name: str
    image_id: str
    offerings: Sequence[LaunchOffering]
    security_group_ids: Sequence[str] = ()
    subnet_ids: Mapping[str, str] = field(default_factory=dict)  # zone -> subnet, when an offering has none
    instance_profile: str | None = None
    user_data: str | None = None  # plain text; the adapter base64-encodes it
    tags: Mapping[str, str] = field(default_factory=dict)
    context: str | None = None  # EC2NodeClass spec.context, passed to CreateFleet
    # The EC2NodeClass's open mode (karpweb.io/open-reservations): on-demand launches use
    # CapacityReservationPreference `open`, so EC2 may run them in a matching open ODCR.
    open_reservations: bool = False
    image_ids: Mapping[str, str] = field(default_factory=dict)  # instance type -> image, where it differs
    user_data_by_type: Mapping[str, str] = field(default_factory=dict)  # instance type -> user data, where it differs
    block_device_mappings: Sequence[Mapping[str, Any]] = ()  # EC2's shape
    metadata_options: Mapping[str, Any] | None = None  # EC2's shape
    detailed_monitoring: bool = False
    associate_public_ip: bool | None = None
    # Given, the provider resolves the rest from the EC2NodeClass as Karpenter does (image per
    # instance type, subnets, security groups, instance profile, user data, tags).
    node_class: NodeClassLaunch | None = None


@dataclass(frozen=True)
class NodeClassLaunch:
    """What launch resolution needs beyond the offerings: the EC2NodeClass and the node to be."""

    uid: str
    spec: Mapping[str, Any]
    nodepool: str
    labels: Mapping[str, str]  # the NodeClaim's
    taints: Sequence[Mapping[str, str]] = ()  # the NodePool's taints, then its startup taints
    shapes: Mapping[str, tuple[str, str]] = field(default_factory=dict)  # instance type -> (arch, image variant)
    # instance type -> the max pods karpweb planned the node with (the ENI limit, podsPerCore, Windows' 110);
    # the user data pins it when spec.kubelet.maxPods is not set, as upstream does.
    max_pods: Mapping[str, int] = field(default_factory=dict)
    status_profile: str = ""  # the class's status.instanceProfile (reused while it holds spec.role)


@dataclass(frozen=True)
class LaunchError:
    code: str
    message: str
    instance_type: str | None = None
    zone: str | None = None
    capacity_type: str | None = None
    reservation_id: str | None = None


@dataclass
class LaunchResult:
    instance_id: str | None = None
    instance_type: str | None = None
    zone: str | None = None
    capacity_type: str | None = None
    reservation_id: str | None = None
    reservation_type: str | None = None
    interruptible: bool = False
    fleet_id: str | None = None
    error_code: str | None = None  # set when no instance was launched
    error_message: str = ""
    errors: list[LaunchError] = field(default_factory=list)  # every failure, for the decision log
    reservations_marked_unavailable: list[str] = field(default_factory=list)
    offerings_marked_unavailable: list[tuple[str, str, str]] = field(default_factory=list)
    # Open mode: the open reservation EC2 placed this on-demand instance in (it stays on-demand).
    open_reservation_id: str | None = None

    @property
    def ok(self) -> bool:
        return self.instance_id is not None


@dataclass(frozen=True)
class InstanceMembership:
    """Where one instance sits: the capacity type EC2 says it has, and its reservation."""

    instance_id: str
    instance_type: str
    zone: str
    state: str
    capacity_type: str
    reservation_id: str | None
    reservation_type: str | None
    interruptible: bool
    capacity_reservation_preference: str | None
    launch_time: datetime | None
    tags: Mapping[str, str]
    # An on-demand instance that EC2 runs inside an open reservation (preference ``open``): it
    # uses a unit of that reservation but is not ``reserved`` (upstream's rule), so it keeps its
    # on-demand labels.
    open_reservation_id: str | None = None
    # What it was launched with (drift: AMI, subnet and security-group drift read them).
    image_id: str = ""
    subnet_id: str = ""
    security_group_ids: tuple[str, ...] = ()


@dataclass
class TerminateResult:
    terminating: list[str] = field(default_factory=list)
    not_found: list[str] = field(default_factory=list)
    errors: list[LaunchError] = field(default_factory=list)


@runtime_checkable
class CloudProvider(Protocol):
    """What the loop needs from a cloud. Methods raise :class:`CloudAPIError` for API failures."""

    def describe_reservations(self, selector_terms: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """Active reservations the terms select, in EC2's ``CapacityReservation`` shape (plus
        ``UltraserverType`` for UltraServer capacity blocks), unioned and de-duplicated by id."""

    def available_instance_count(self, reservation_id: str) -> int:
        """The in-memory available count (synced from EC2, decremented by launches)."""

    def inventory(self) -> list[dict[str, Any]]:
        """Every reservation usable now or soon (owned or shared), selected by a class or not."""

    def reservations_by_id(self, reservation_ids: Sequence[str]) -> list[dict[str, Any]]:
        """These reservations in any state (expired, cancelled, ...); unknown ids left out."""

    def nodeclass_status(self, name: str, selector_terms: Sequence[Mapping[str, Any]] | None) -> Any:
        """``status.ReservationStatus`` for one EC2NodeClass (built with ``status.build_status``)."""

    def describe_instances(
        self, instance_ids: Sequence[str] | None = None, tags: Mapping[str, str] | None = None
    ) -> list[InstanceMembership]: ...

    def catalogue(self) -> Catalogue: ...

    def launch(self, request: LaunchRequest) -> LaunchResult: ...

    def terminate(self, instance_ids: Sequence[str]) -> TerminateResult: ...
