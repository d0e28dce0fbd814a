import datetime

from django import template
from django.utils import timezone

from scheduling.engine.quantities import CPU, MEMORY, format_resource

register = template.Library()


def _span(seconds: int) -> str:
    seconds = abs(int(seconds))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, seconds = divmod(rest, 60)
    if days:
        return f"{days}d {hours}h {minutes:02d}m"
    if hours:
        return f"{hours}h {minutes:02d}m {seconds:02d}s"
    return f"{minutes}m {seconds:02d}s"


@register.filter
def countdown(moment: datetime.datetime | None, now: datetime.datetime | None = None) -> str:
    """'in 1h 02m 05s' or '4m 10s ago'."""
    if moment is None:
        return "—"
    now = now or timezone.now()
    delta = (moment - now).total_seconds()
    return f"in {_span(delta)}" if delta >= 0 else f"{_span(delta)} ago"


@register.filter
def utc_minute(moment: datetime.datetime | None) -> str:
    """'2026-11-25 19:40', in UTC whatever the active time zone (the pages say "UTC" beside it);
    a strftime, not the date filter's format machinery (300 of them on the capacity-blocks page)."""
    if moment is None:
        return ""
    return moment.astimezone(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M")


@register.filter
def is_past(moment: datetime.datetime | None, now: datetime.datetime | None = None) -> bool:
    return moment is not None and moment <= (now or timezone.now())


@register.filter
def percent(value: float | None) -> str:
    return "—" if value is None else f"{value:.0%}"


@register.filter
def dollars(value: float | None) -> str:
    # Anything but a number (a missing key in a decision's details renders as "") is no price.
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "—"
    return f"${value:,.2f}"


@register.filter
def per_hour(value: float | None) -> str:
    """Dollars per hour to the cent (`$1,234.57/h`); a non-zero amount under a cent is `< $0.01/h`
    (a reserved unit's modelled price, a tiny saving), never a run of zeros."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "—"
    if 0 < abs(value) < 0.01:
        return "< $0.01/h" if value > 0 else "> -$0.01/h"
    return f"{dollars(value)}/h"


@register.filter
def condition_badge(status: str) -> str:
    return {"True": "ok", "False": "bad"}.get(status, "unknown")


@register.filter
def cpu(millicores: int | None) -> str:
    """`96`, `250m`: CPU as a pod spec writes it."""
    return "—" if millicores is None else format_resource(CPU, millicores)


@register.filter
def memory(amount: int | None) -> str:
    """`256Mi`, `1Ti`: bytes with the binary suffix Kubernetes uses."""
    return "—" if amount is None else format_resource(MEMORY, amount)
