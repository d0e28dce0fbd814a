"""Which reservation each instance sits in, from DescribeInstances (the input to demotion).

Upstream's rule (aws/karpenter-provider-aws `pkg/providers/instance/types.go`,
`capacityTypeFromInstance`): an instance is ``reserved`` iff it has a
``CapacityReservationId`` *and* its ``CapacityReservationSpecification`` preference is
``capacity-reservations-only``; ``spot`` if it has a ``SpotInstanceRequestId`` (or lifecycle spot);
``on-demand`` otherwise. ``InstanceLifecycle=capacity-block`` makes the reservation type
``capacity-block``; ``interruptible-capacity-reservation`` marks an interruptible ODCR. An
on-demand instance that still reports a ``CapacityReservationId`` (preference ``open``: EC2 matched
it to an open reservation) carries it as ``open_reservation_id``; it is counted in that
reservation, never relabelled.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .client import Caller
from .interface import (
    ON_DEMAND,
    RESERVATION_CAPACITY_BLOCK,
    RESERVATION_DEFAULT,
    RESERVED,
    SPOT,
    InstanceMembership,
)

LIVE_STATES = ("pending", "running", "stopping", "stopped", "shutting-down")
ID_CHUNK = 200


def capacity_type_of(
    instance: Mapping[str, Any], reserved_capacity: bool = True
) -> tuple[str, str | None, str | None, bool]:
    """(capacity type, reservation id, reservation type, interruptible) of one EC2 instance;
    never reserved with the ReservedCapacity gate off."""
    lifecycle = instance.get("InstanceLifecycle")
    preference = (instance.get("CapacityReservationSpecification") or {}).get("CapacityReservationPreference")
    reservation_id = instance.get("CapacityReservationId")
    if reserved_capacity and reservation_id and preference == "capacity-reservations-only":
        reservation_type = RESERVATION_CAPACITY_BLOCK if lifecycle == "capacity-block" else RESERVATION_DEFAULT
        return RESERVED, reservation_id, reservation_type, lifecycle == "interruptible-capacity-reservation"
    if instance.get("SpotInstanceRequestId") or lifecycle == "spot":
        return SPOT, None, None, False
    return ON_DEMAND, None, None, False


def membership(instance: Mapping[str, Any], reserved_capacity: bool = True) -> InstanceMembership:
    capacity_type, reservation_id, reservation_type, interruptible = capacity_type_of(instance, reserved_capacity)
    open_reservation_id = instance.get("CapacityReservationId") if capacity_type == ON_DEMAND else None
    return InstanceMembership(
        instance_id=instance["InstanceId"],
        instance_type=instance.get("InstanceType", ""),
        zone=(instance.get("Placement") or {}).get("AvailabilityZone", ""),
        state=(instance.get("State") or {}).get("Name", ""),
        capacity_type=capacity_type,
        reservation_id=reservation_id,
        reservation_type=reservation_type,
        interruptible=interruptible,
        capacity_reservation_preference=(instance.get("CapacityReservationSpecification") or {}).get(
            "CapacityReservationPreference"
        ),
        launch_time=instance.get("LaunchTime"),
        tags={t["Key"]: t["Value"] for t in instance.get("Tags") or []},
        open_reservation_id=open_reservation_id or None,
        image_id=instance.get("ImageId", ""),
        subnet_id=instance.get("SubnetId", ""),
        security_group_ids=tuple(sorted(g["GroupId"] for g in instance.get("SecurityGroups") or [] if g.get("GroupId"))),
    )


def describe(
    ec2: Any,
    call: Caller,
    instance_ids: Sequence[str] | None = None,
    tags: Mapping[str, str] | None = None,
    states: Sequence[str] = LIVE_STATES,
    reserved_capacity: bool = True,
) -> list[InstanceMembership]:
    """Instances by id and/or tags. Ids go in an ``instance-id`` filter, so unknown ids are simply
    absent instead of failing the whole call with ``InvalidInstanceID.NotFound``."""
    base = [{"Name": "instance-state-name", "Values": list(states)}]
    base += [{"Name": f"tag:{k}", "Values": [v]} for k, v in (tags or {}).items()]
    if instance_ids is not None and not instance_ids:
        return []
    chunks = [list(instance_ids[i : i + ID_CHUNK]) for i in range(0, len(instance_ids), ID_CHUNK)] if instance_ids else [None]
    found: dict[str, InstanceMembership] = {}
    for chunk in chunks:
        filters = base + ([{"Name": "instance-id", "Values": chunk}] if chunk else [])
        params: dict[str, Any] = {"Filters": filters, "MaxResults": 1000}
        seen: set[str] = set()
        while True:
            page = call(ec2, "describe_instances", **params)
            for reservation in page.get("Reservations", []):
                for instance in reservation.get("Instances", []):
                    found[instance["InstanceId"]] = membership(instance, reserved_capacity)
            token = page.get("NextToken")
            if not token or token in seen:
                break
            seen.add(token)
            params["NextToken"] = token
    return sorted(found.values(), key=lambda m: m.instance_id)
