"""The CSV downloads of the reservation lists (`?export=` on the page, karpweb/csvexport.py): the
columns, raw values rather than the page's words, so that a spreadsheet can add them up."""

import json

from django.http import HttpResponseBadRequest

from reservations.filtersets import UtilizationHourFilterSet
from reservations.models import UtilizationHour


def _tags(reservation) -> str:
    return json.dumps(reservation.tags, sort_keys=True) if reservation.tags else ""


RESERVATION_COLUMNS = [
    ("reservation_id", lambda r: r.reservation_id),
    ("type", lambda r: r.reservation_type),
    ("instance_type", lambda r: r.instance_type),
    ("availability_zone", lambda r: r.availability_zone),
    ("region", lambda r: r.region),
    ("owner_id", lambda r: r.owner_id),
    ("state", lambda r: r.state),
    ("total", lambda r: r.total_instance_count),
    ("available", lambda r: r.available_instance_count),
    ("used", lambda r: r.used_instance_count),
    ("utilization_24h", lambda r: None if r.recent_utilization is None else round(r.recent_utilization, 4)),
    ("instance_match_criteria", lambda r: r.instance_match_criteria),
    ("start_date", lambda r: r.start_date),
    ("end_date", lambda r: r.end_date),
    ("tags", _tags),
]


def reservation_rows(view, reservations):
    return reservations.defer(None)  # the page defers the tags; the file has them


HOUR_COLUMNS = [
    ("reservation_id", lambda h: h.reservation.reservation_id),
    ("hour", lambda h: h.hour),
    ("samples", lambda h: h.samples),
    ("used", lambda h: round(h.used, 3)),
    ("peak_used", lambda h: h.peak_used),
    ("available", lambda h: round(h.available, 3)),
    ("total", lambda h: round(h.total, 3)),
    ("utilization", lambda h: round(h.share_sum / h.share_samples, 4) if h.share_samples else None),
]


def hour_rows(view, reservations):
    """The hourly means of the reservations the list's filters keep; `since` / `until` (ISO 8601,
    UTC) bound the hours' starts, as in the API."""
    window = UtilizationHourFilterSet(view.request.GET, queryset=UtilizationHour.objects.filter(
        reservation__in=reservations.order_by().values("pk")).select_related("reservation"))
    if not window.is_valid():
        return HttpResponseBadRequest("; ".join(f"{field}: {' '.join(errors)}" for field, errors in window.errors.items()),
                                      content_type="text/plain; charset=utf-8")
    return window.qs.order_by("reservation__reservation_id", "hour")


RECOMMENDATION_COLUMNS = [
    ("id", lambda r: r.pk),
    ("kind", lambda r: r.kind),
    ("reservation_id", lambda r: r.reservation.reservation_id),
    ("state", lambda r: r.state),
    ("savings_per_month", lambda r: round(r.savings_per_month, 2)),
    ("money", lambda r: r.money_text),
    ("target_count", lambda r: r.target_count),
    ("end_date", lambda r: r.end_date),
    ("reason", lambda r: r.reason),
    ("computed_at", lambda r: r.computed_at),
    ("applied_at", lambda r: r.applied_at),
    ("applied_by", lambda r: r.applied_by),
]


def recommendation_rows(view, recommendations):
    return recommendations.select_related("reservation")
