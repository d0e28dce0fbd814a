"""Utilization alarms: a reservation under 20 % for 24 hours (AWS Health's own threshold) and a
capacity block still running instances 45 minutes before its end. One list, shown by the overview,
the API (`/api/v1/alarms/`) and the metrics."""

from __future__ import annotations

from django.db.models import Count, OuterRef, Subquery
from django.db.models.functions import Coalesce
from django.utils import timezone

from reservations.models import BLOCK_ALARM_LEAD, LOW_UTILIZATION_THRESHOLD, LOW_UTILIZATION_WINDOW, CapacityReservation

LOW_UTILIZATION = "LowUtilization"
BLOCK_RUNNING_NEAR_END = "CapacityBlockRunningNearEnd"


def with_running_nodes(queryset):
    """Annotate `running_nodes`: the nodes of this cluster in each reservation (a subquery, so it
    combines with the utilization aggregates)."""
    from scheduling.models import Node

    nodes = Node.objects.filter(reservation=OuterRef("pk")).order_by().values("reservation").annotate(n=Count("pk")).values("n")
    return queryset.annotate(running_nodes=Coalesce(Subquery(nodes), 0))


def reservation_alarms(reservation: CapacityReservation, now) -> list[dict]:
    """The alarms of one reservation (needs `with_recent_utilization` and `with_running_nodes`)."""
    alarms = []
    if reservation.is_low_utilization(now):
        alarms.append({
            "type": LOW_UTILIZATION, "reservationID": reservation.reservation_id,
            "message": (f"{reservation.reservation_id} averaged {reservation.recent_utilization:.0%} used over the last "
                        f"{LOW_UTILIZATION_WINDOW.total_seconds() / 3600:.0f} hours "
                        f"(under {LOW_UTILIZATION_THRESHOLD:.0%}); {reservation.available_instance_count} of "
                        f"{reservation.total_instance_count} idle"),
            "since": reservation.recent_since,
        })
    running = getattr(reservation, "running_nodes", 0)
    if reservation.block_alarm(running, now):
        minutes = max(0, int((reservation.end_date - now).total_seconds() // 60))
        alarms.append({
            "type": BLOCK_RUNNING_NEAR_END, "reservationID": reservation.reservation_id,
            "message": (f"capacity block {reservation.reservation_id} ends in {minutes} min with {running} node(s) still "
                        f"in it (alarm from {BLOCK_ALARM_LEAD.total_seconds() / 60:.0f} min before the end)"),
            "since": reservation.end_date - BLOCK_ALARM_LEAD,
        })
    return alarms


def current_alarms(now=None) -> list[dict]:
    """Every alarm of every usable reservation, by reservation id."""
    now = now or timezone.now()
    reservations = with_running_nodes(CapacityReservation.objects.usable(now).with_recent_utilization(now)).order_by("reservation_id")
    return [alarm for r in reservations for alarm in reservation_alarms(r, now)]
