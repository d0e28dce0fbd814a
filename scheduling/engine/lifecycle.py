"""The reservation lifecycle of running nodes: capacity-block expiry, demotion to on-demand, and
reservation drift (aws/karpenter-provider-aws `pkg/controllers/capacityreservation/`,
`pkg/cloudprovider/drift.go`).

  * Expiry: every node in a capacity block is drained from 40 minutes before the block's end, 70
    for an UltraServer block (`capacityblocks.py` decides the times). The decision is listed as
    soon as the drain is less than an hour away, so that operators see it coming; it is due once
    `now >= drainAt`. Budgets and `karpenter.sh/do-not-disrupt` do not hold it back (upstream's
    expiration controller deletes the NodeClaim; the drain itself honours PDBs and grace periods).
  * Demotion: a node labelled `karpenter.sh/capacity-type=reserved` whose reservation is gone from
    DescribeCapacityReservations, is no longer `active` (cancelled, expired, ...), is past its
    EndDate, or (per DescribeInstances, the optional `instances`) no longer holds the instance
    becomes `on-demand`. EVERY reservation label is removed, the interruptible one included
    (upstream leaves it behind and the node then drifts against its own on-demand offering).
    As upstream `capacityTypeFromInstance`, an instance is reserved iff it has a
    CapacityReservationId AND its preference is `capacity-reservations-only`. Without `instances`
    the reservations alone decide.
  * Drift: a reserved node whose reservation is no longer selected by its EC2NodeClass
    (`CapacityReservationDrift`). Whether it is deleted or replaced is decided by re-simulating its
    pods (`consolidation.py`).
With the ReservedCapacity gate off there is no demotion and no drift (a feature flag does not
relabel running nodes); capacity blocks still end, so expiry still applies.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from .capacityblocks import CapacityBlockTiming, capacity_block_timing
from .cluster import Node, World
from .instances import Instance, instance_id
from .labels import (
    CAPACITY_TYPE, NODEPOOL, RESERVATION_CAPACITY_BLOCK, RESERVATION_ID, RESERVATION_LABELS, RESERVATION_TYPE,
    RESERVED,
)
from .reservations import CapacityReservation
from .selectors import NodeClassReservations
from .timeutil import format_time

# Expiry decisions are listed this long before they are due.
EXPIRY_NOTICE = timedelta(hours=1)


# what the world says about each node -------------------------------------------------------------


class NodeReservations:
    """Per node: the instance EC2 reports for it and the reservation it is in."""

    def __init__(self, world: World):
        self.world = world
        self.reservations = {r.id: r for r in world.reservations}
        self.instances = None if world.instances is None else {i.id: i for i in world.instances}

    def instance(self, node: Node) -> Instance | None:
        if self.instances is None:
            return None
        found = self.instances.get(instance_id(node.provider_id))
        return found if found is not None and found.live else None

    def reservation_id(self, node: Node) -> str | None:
        """The reservation the node's instance is in: EC2's word when `instances` has it and says
        it is reserved, else the node's label."""
        instance = self.instance(node)
        if instance is not None and instance.reserved:
            return instance.reservation_id
        return node.labels.get(RESERVATION_ID) or None

    def reservation(self, node: Node) -> CapacityReservation | None:
        rid = self.reservation_id(node)
        return self.reservations.get(rid) if rid else None


# demotion ----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Demotion:
    node: Node
    reservation_id: str | None
    cause: str
    remove_labels: tuple[str, ...]

    def as_dict(self) -> dict:
        return {"node": self.node.name, "reservationID": self.reservation_id, "from": RESERVED, "to": "on-demand",
                "removeLabels": list(self.remove_labels), "reason": self.cause}


def demotions(world: World, known: NodeReservations) -> list[Demotion]:
    if not world.reserved_capacity:
        return []
    result = []
    for node in sorted(world.nodes, key=lambda n: n.name):
        if node.deleting or node.labels.get(CAPACITY_TYPE) != RESERVED:
            continue
        cause = demotion_cause(node, known, world.now)
        if cause is not None:
            result.append(Demotion(node, known.reservation_id(node), cause,
                                   tuple(label for label in RESERVATION_LABELS if label in node.labels)))
    return result


def demotion_cause(node: Node, known: NodeReservations, now: datetime) -> str | None:
    rid = known.reservation_id(node)
    instance = known.instance(node)
    if rid is None:
        if instance is not None and instance.reserved:
            return None
        return "the node carries no capacity-reservation-id label and EC2 reports no reservation for it"
    reservation = known.reservations.get(rid)
    if reservation is None:
        return f"reservation {rid} is gone from DescribeCapacityReservations"
    if reservation.state_at(now) != "active":
        return f"reservation {rid} is {reservation.state_at(now)}"
    if reservation.end is not None and reservation.end <= now:
        return f"reservation {rid} ended at {format_time(reservation.end)}"
    if instance is not None and not instance.reserved and instance.lifecycle != "spot":
        where = (f"it has preference {instance.preference}" if instance.reservation_id
                 else "it has no CapacityReservationId")
        return f"instance {instance.id} is no longer in reservation {rid} ({where})"
    return None


# capacity-block expiry ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Expiry:
    node: Node
    reservation: CapacityReservation
    timing: CapacityBlockTiming

    def due(self, now: datetime) -> bool:
        return self.timing.is_expiring(now)

    def as_dict(self) -> dict:
        return {"action": "delete", "reason": "capacity-block-expiring", "nodes": [self.node.name],
                "drainAt": format_time(self.timing.drain_at), "reservationID": self.reservation.id,
                "terminationAt": format_time(self.timing.termination_at), "endsAt": format_time(self.timing.end),
                "ultraServer": self.timing.ultraserver}


def expiries(world: World, known: NodeReservations) -> list[Expiry]:
    """Nodes of capacity blocks whose drain is due or less than EXPIRY_NOTICE away."""
    horizon = world.now + EXPIRY_NOTICE
    result = []
    for node in world.nodes:
        if node.deleting:
            continue
        reservation = known.reservation(node)
        in_block = node.labels.get(RESERVATION_TYPE) == RESERVATION_CAPACITY_BLOCK or (
            reservation is not None and reservation.is_capacity_block)
        if not in_block or reservation is None or reservation.end is None:
            continue
        timing = reservation.timing or _block_timing(reservation)
        if timing.drain_at <= horizon:
            result.append(Expiry(node, reservation, timing))
    result.sort(key=lambda e: (e.timing.drain_at, e.node.name))
    return result


def _block_timing(reservation: CapacityReservation) -> CapacityBlockTiming:
    """A node labelled capacity-block whose reservation EC2 reports as `default`: trust the label."""
    return capacity_block_timing(reservation.end, ultraserver=bool(reservation.ultraserver_type))


# reservation drift -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Drift:
    node: Node
    reservation_id: str
    node_class: str

    @property
    def message(self) -> str:
        return f"reservation {self.reservation_id} is no longer selected by EC2NodeClass {self.node_class}"


def drifts(world: World, known: NodeReservations, resolved: dict[str, NodeClassReservations],
           demoted: set[str]) -> list[Drift]:
    """Reserved nodes whose reservation their EC2NodeClass no longer selects. A class that is
    missing or has invalid selector terms drifts nothing: a typo must not recycle every node."""
    if not world.reserved_capacity:
        return []
    pools = {p.name: p for p in world.node_pools}
    result = []
    for node in world.nodes:
        if node.deleting or node.name in demoted or node.labels.get(CAPACITY_TYPE) != RESERVED:
            continue
        pool = pools.get(node.labels.get(NODEPOOL, ""))
        status = resolved.get(pool.node_class) if pool is not None else None
        rid = known.reservation_id(node)
        if status is None or not status.valid or rid is None:
            continue
        if rid not in {r.id for r in status.reservations}:
            result.append(Drift(node, rid, pool.node_class))
    return result
