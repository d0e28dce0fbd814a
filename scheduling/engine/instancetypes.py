"""Instance types and their offerings (one per capacity type and zone, one per reservation).

An offering is what a launch buys: an instance type in a zone with a capacity type. A reserved
offering belongs to exactly one reservation, has an integer capacity (the reservation's
`AvailableInstanceCount`) and costs the on-demand price / 10,000,000: free, but ordered like the
on-demand prices so that consolidation still moves from large reserved types to small ones.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Iterable, Mapping

from .labels import (
    CAPACITY_TYPE, OFFERING_LABELS, ON_DEMAND, RESERVATION_ID, RESERVATION_INTERRUPTIBLE, RESERVATION_TYPE,
    RESERVED, ZONE, ZONE_ID, ARCH, DEFAULT_ARCH,
)
from .ec2types import NodeClassShape, node_shape
from .overhead import KubeletConfig, allocatable
from .quantities import CPU, EPHEMERAL_STORAGE, PODS, ResourceList
from .requirements import Requirements
from .reservations import CapacityReservation

RESERVED_PRICE_DIVISOR = 10_000_000


@dataclass(frozen=True, slots=True, eq=False)
class Offering:
    capacity_type: str
    zone: str
    price: float
    available: bool = True
    reservation: CapacityReservation | None = None
    unavailable_reason: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    # Where `price` comes from: "list", "savings-plan" or "reserved-instance" (engine/commitments.py).
    basis: str = "list"
    list_price: float | None = None  # the list price when `price` is another basis's

    @property
    def at_list(self) -> float:
        return self.price if self.list_price is None else self.list_price

    @classmethod
    def create(cls, capacity_type: str, zone: str, price: float, available: bool = True,
               reservation: CapacityReservation | None = None, unavailable_reason: str | None = None,
               zone_id: str = "") -> "Offering":
        labels = {ZONE: zone, CAPACITY_TYPE: capacity_type}
        zone_id = zone_id or (reservation.zone_id if reservation is not None else "")
        if zone_id:
            labels[ZONE_ID] = zone_id
        if reservation is not None:
            labels[RESERVATION_ID] = reservation.id
            labels[RESERVATION_TYPE] = reservation.reservation_type
            labels[RESERVATION_INTERRUPTIBLE] = "true" if reservation.interruptible else "false"
        if not available and unavailable_reason is None:
            unavailable_reason = f"{capacity_type} in {zone} is unavailable"
        return cls(capacity_type, zone, price, available, reservation, unavailable_reason, labels)

    @property
    def reserved(self) -> bool:
        return self.reservation is not None

    @property
    def price_basis(self) -> str:
        """The basis of `price` as figures state it: a reserved offering's is its reservation's."""
        return "reservation" if self.reservation is not None else self.basis

    @property
    def reservation_id(self) -> str | None:
        return self.reservation.id if self.reservation is not None else None

    @property
    def capacity(self) -> int:
        """Reserved units available; on-demand and spot are unbounded."""
        return self.reservation.available_count if self.reservation is not None else 2**62

    def compatible(self, requirements: Requirements) -> bool:
        """Upstream `Offerings.Compatible`: labels the offering lacks (reservation labels on
        on-demand and spot) count as DoesNotExist."""
        for key in OFFERING_LABELS:
            req = requirements.get(key)
            if req is None:
                continue
            value = self.labels.get(key)
            if value is None:
                if not req.admits_absent:
                    return False
            elif not req.has(value):
                return False
        return True


@dataclass(slots=True, eq=False)
class InstanceType:
    name: str
    capacity: ResourceList
    labels: dict[str, str]
    offerings: tuple[Offering, ...]
    allocatable: ResourceList
    instance_store_gb: int = 0  # local instance storage (ephemeral storage under RAID0)

    def matches(self, requirements: Requirements, instance_keys: frozenset[str]) -> bool:
        """Whether the instance type's own labels satisfy the requirements. A label the type
        does not define counts as DoesNotExist (so `instance-family In [m5]` needs the label)."""
        labels = self.labels
        for req in requirements:
            if req.key not in instance_keys:
                continue
            value = labels.get(req.key)
            if value is None:
                if not req.admits_absent:
                    return False
            elif not req.has(value):
                return False
        return True

    def on_demand_price(self, zone: str | None = None) -> float:
        """The on-demand list price in `zone`, else the cheapest anywhere, else 0 (as upstream)."""
        prices = [o.at_list for o in self.offerings if o.capacity_type == ON_DEMAND]
        in_zone = [o.at_list for o in self.offerings if o.capacity_type == ON_DEMAND and o.zone == zone]
        if in_zone:
            return min(in_zone)
        return min(prices) if prices else 0.0

    def for_node_class(self, kubelet: KubeletConfig, shape: NodeClassShape,
                       reserved: Iterable[Offering]) -> "InstanceType | None":
        """A copy for one EC2NodeClass: its AMI family and kubelet settings (max pods, kube-reserved,
        root volume, OS labels) and the reservations it selects; None when the class cannot run it.
        The type's own `pods` is its ENI limit."""
        node = node_shape(self.capacity.get(PODS, 110), self.capacity.get(CPU, 0) // 1000, self.instance_store_gb,
                          self.labels.get(ARCH, DEFAULT_ARCH), shape, kubelet.max_pods, kubelet.pods_per_core)
        if node is None:
            return None
        capacity = ResourceList(self.capacity)
        capacity[PODS] = node.pods
        if node.ephemeral_storage is not None:
            capacity[EPHEMERAL_STORAGE] = node.ephemeral_storage
        labels = {**self.labels, **node.labels} if node.labels else self.labels
        room = allocatable(capacity, replace(kubelet, max_pods=node.pods), node.kube_reserved_pods)
        return InstanceType(self.name, capacity, labels, self.offerings + tuple(reserved), room, self.instance_store_gb)


def reserved_offering(instance_type: InstanceType, reservation: CapacityReservation, now: datetime) -> Offering:
    """The offering of one reservation (upstream `ReservedCapacityResolver`); its zone id from the
    reservation, else from the type's offerings in that zone."""
    reason = reservation.unavailable_reason(now)
    zone_id = next((o.labels[ZONE_ID] for o in instance_type.offerings if o.zone == reservation.zone and ZONE_ID in o.labels), "")
    return Offering.create(
        RESERVED,
        reservation.zone,
        instance_type.on_demand_price(reservation.zone) / RESERVED_PRICE_DIVISOR,
        available=reason is None,
        reservation=reservation,
        unavailable_reason=reason,
        zone_id=zone_id,
    )
