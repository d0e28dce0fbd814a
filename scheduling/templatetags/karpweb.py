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
def cluster_of(row):
    """The Cluster a Kubernetes-side row belongs to, from the process's kept list (no query; None for
    a row without one): what a detail page's heading names."""
    from fleet.scope import kept_cluster

    cluster_id = getattr(row, "cluster_id", None)
    return None if cluster_id is None else kept_cluster(cluster_id)


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
def kube_time(value) -> str:
    """A Kubernetes time as it comes in an object ("2026-11-25T19:40:00Z", e.g. a condition's
    lastTransitionTime) written as every page writes a time: "2026-11-25 19:40 UTC"; what does not parse is
    shown as it came."""
    if isinstance(value, datetime.datetime):
        moment = value
    else:
        try:
            moment = datetime.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
        except ValueError:
            return "" if value is None else str(value)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.timezone.utc)
    return f"{utc_minute(moment)} UTC"


@register.filter
def requirement(term: dict) -> str:
    """A node selector requirement read once: "kubernetes.io/arch In amd64, arm64", "...instance-gpu-count
    Exists". A filter, because a template's `r.values` on a requirement without values is the dict's own
    values() (its key and operator again)."""
    values = term.get("values") or []
    return " ".join([str(term.get("key", "")), str(term.get("operator", ""))] + ([", ".join(map(str, values))] if values else []))


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
    """A recurring cost, labelled as one, at AWS's price precision: "$1,234.57/h", "$0.0691/h" (four
    decimals under a dollar, as EC2 prices are quoted); a non-zero amount under that precision is
    "< $0.0001/h" (a reserved unit's modelled price), never a run of zeros; "—" for no price."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "—"
    if 0 < abs(value) < 0.0001:
        return "< $0.0001/h" if value > 0 else "> -$0.0001/h"
    return f"${value:.4f}/h" if 0 < abs(value) < 1 else f"{dollars(value)}/h"


@register.filter
def idle_value(value) -> str:
    """An idle figure and where it comes from (reservations.block_fees.IdleValue): "$60.00/h (block fee entered:
    $6,360.00 / (4 units x 53 h))", "$0.7680/h (on-demand list price)"."""
    from django.utils.html import format_html

    if value is None:
        return "—"
    basis = f": {value.unit.basis}" if value.unit.basis else ""
    return format_html('{} <span class="muted idle-source">({}{})</span>', per_hour(value.cost), value.source, basis)


@register.filter
def idle_sources(parts) -> str:
    """The idle total's parts by source (capacity_totals' `idle_sources`): "$60.00/h block fee entered, ..."."""
    return "; ".join(f"{per_hour(cost)} {source}" for source, cost in parts or [])


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


def freshness_note(what: str, found: dict, now=None) -> str:
    """What a page says of its totals: "Nodes and pods: as of each cluster's last loop step (the oldest
    12s ago); 1 cluster not counted by the loop yet, counted now." (`found`: freshness())."""
    note = f"{what}: as of each cluster's last loop step"
    if found["oldest"] is not None:
        note += f" (the oldest {countdown(found['oldest'], now or timezone.now())})"
    if found["uncounted"]:
        note += f"; {found['uncounted']} cluster{'s' if found['uncounted'] != 1 else ''} not counted by the loop yet, counted now"
    return note + "."
