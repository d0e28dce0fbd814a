"""EC2NodeClass status from the reservations karpweb knows: the engine decides, this writes it.

`write_node_class_status` is the one writer of `status.capacityReservations`, the
`CapacityReservationsReady` condition and the selected-reservations join, whoever computed the
result (this module from the database, the EC2 sync from a live DescribeCapacityReservations)."""

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from reservations.models import CapacityReservation, EC2NodeClass
from scheduling.engine.selectors import NodeClassReservations, resolve_node_class
from scheduling.engine.timeutil import format_time
from scheduling.engine.world import parse_world


def resolve_from_database(node_classes, now) -> dict[str, NodeClassReservations]:
    """What each EC2NodeClass's terms select among the reservations in the database."""
    from scheduling.world import reservation_item, world_groups

    world = parse_world({
        "now": format_time(now),
        "capacityReservations": [reservation_item(r) for r in CapacityReservation.objects.order_by("reservation_id")],
        "capacityReservationGroups": world_groups(),
    })
    return {
        nc.name: resolve_node_class(
            nc.name, nc.capacity_reservation_selector_terms, world.reservations, now, world.reservation_groups,
            enabled=settings.KARPWEB_FEATURE_RESERVED_CAPACITY,
        )
        for nc in node_classes
    }


def write_node_class_status(node_class: EC2NodeClass, result: NodeClassReservations, now, condition: dict | None = None) -> bool:
    """Store one class's resolved status; `condition` overrides the engine's (e.g. an EC2 error).
    Returns True when anything changed."""
    entries = [r.status_entry(now) for r in result.reservations]
    condition = condition or result.condition
    changed = entries != node_class.status_capacity_reservations
    node_class.status_capacity_reservations = entries
    if condition:
        changed |= node_class.set_condition(condition["type"], condition["status"], condition["reason"],
                                            condition["message"], now=now)
    node_class.synced_at = now
    node_class.save(update_fields=["status_capacity_reservations", "conditions", "synced_at"])
    node_class.selected_reservations.set(
        CapacityReservation.objects.filter(reservation_id__in=[r.id for r in result.reservations])
    )
    return changed


@transaction.atomic
def refresh_node_class_status(now=None) -> int:
    """Recompute every EC2NodeClass's status from the database; returns how many changed."""
    now = now or timezone.now()
    node_classes = list(EC2NodeClass.objects.select_for_update().order_by("name"))
    results = resolve_from_database(node_classes, now)
    return sum(write_node_class_status(nc, results[nc.name], now) for nc in node_classes)
