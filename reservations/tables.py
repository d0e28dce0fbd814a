import django_tables2 as tables
import karpweb.tables  # noqa: F401 - registers the shared column types before the tables below are built
from django.template.defaultfilters import pluralize
from django.utils import timezone
from django.utils.functional import cached_property
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe

from karpweb.tables import BLANK, ClusterColumn, PlainRowsTable, choice_labels, id_link, link, short_datetimes
from karpweb.urlcache import cluster_detail_url
from reservations.models import BuyAdvice, CapacityReservation, EC2NodeClass, Recommendation
from reservations.block_fees import fees_by_reservation, idle_value
from scheduling.queries import capacity_totals, on_demand_prices
from scheduling.templatetags.karpweb import idle_value as idle_value_html
from scheduling.templatetags.karpweb import countdown, per_hour, utc_minute


def usage_bar(record, utilization: float) -> SafeString:
    """used / available / total with a bar: an f-string, not format_html (numbers only, nothing to escape)."""
    return mark_safe(f'<div class="usage"><div class="bar"><span style="width:{round(utilization * 100)}%"></span></div>'
                     f"{record.used_instance_count} / {record.available_instance_count} / {record.total_instance_count}</div>")


class UsageColumn(tables.Column):
    """used / available / total with a bar."""

    def render(self, record):
        return usage_bar(record, record.utilization)


class CapacityReservationTable(PlainRowsTable):
    """The reservations, each with its idle prepaid cost, and a totals row over every reservation the filter
    keeps (not only the page's): instances and idle cost of the usable ones. Its rows are written by
    row_cells() (PlainRowsTable); the header, sorting, pages and the totals footer stay django-tables2's, whose
    render_ methods below stay for its own rendering (tests compare the two) and give row_cells() its cells."""

    reservation_id = tables.Column(verbose_name="ID", footer="Totals")
    reservation_type = tables.Column(verbose_name="Type")
    usage = UsageColumn(empty_values=(), orderable=False, verbose_name="Used / available / total",
                        footer=lambda table: format_html(
                            '<span class="nowrap" id="reservation-totals">{} / {} / {}</span> <span class="muted">'
                            "in {} usable reservation{}{}</span>", table.totals["used"], table.totals["idle"],
                            table.totals["total"], table.totals["reservations"], pluralize(table.totals["reservations"]),
                            "".join(f" ({table.totals[key]} {words}, not counted)" for key, words in
                                    (("unusable", "ended"), ("upcoming", "not started")) if table.totals.get(key))))
    utilization = tables.Column(empty_values=(), order_by=("available_instance_count",), verbose_name="Utilization")
    idle_cost = tables.Column(empty_values=(), orderable=False, verbose_name="Idle (prepaid $/h, source)",
                              footer=lambda table: format_html(
                                  '<span class="nowrap" id="idle-cost-total">{}</span>{}', per_hour(table.totals["idle_cost"]),
                                  f" ({table.totals['unpriced']} without a known price)" if table.totals["unpriced"] else ""))
    flags = tables.Column(empty_values=(), orderable=False, verbose_name="Notes")

    class Meta:
        model = CapacityReservation
        fields = ("reservation_id", "instance_type", "availability_zone", "reservation_type", "state",
                  "instance_match_criteria", "usage", "utilization", "idle_cost", "end_date", "owner_id", "flags")
        attrs = {"class": "table reservations"}
        order_by = ("reservation_id",)

    @cached_property
    def _summary(self):
        """The filtered reservations' totals, and the list prices and Capacity Block fees the rows need: the same
        queries whatever the number of rows (the page's rows are among the filtered ones)."""
        now = timezone.now()
        rows = list(CapacityReservation.objects.filter(pk__in=self.data.data.values("pk")).only(
            "reservation_id", "instance_type", "availability_zone", "total_instance_count", "available_instance_count",
            "state", "reservation_type", "end_date", "start_date", "interruptible_allocation"))  # used leaves lent units out
        prices = on_demand_prices({r.instance_type for r in rows})
        return now, prices, capacity_totals(rows, prices, now), fees_by_reservation(rows)

    @property
    def totals(self) -> dict:
        return self._summary[2]

    TYPES, MATCHES = (choice_labels(CapacityReservation, name) for name in ("reservation_type", "instance_match_criteria"))

    def row_cells(self):
        types, matches, when = self.TYPES, self.MATCHES, short_datetimes()

        def cells(record):
            kind, state, match, utilization, end = (record.reservation_type, record.state, record.instance_match_criteria,
                                                    record.utilization, record.end_date)
            return (record.reservation_id and self.render_reservation_id(record), record.instance_type,
                    record.availability_zone, types.get(kind, kind), state and self.render_state(record),
                    matches.get(match, match), usage_bar(record, utilization), f"{utilization:.0%}",
                    self.render_idle_cost(record), end and when(end), record.owner_id, self.render_flags(record) or BLANK)

        return cells

    def render_reservation_id(self, record):
        return id_link(record.get_absolute_url(), record.reservation_id)

    def render_utilization(self, record):
        return f"{record.utilization:.0%}"

    def render_state(self, record):
        """A reservation that has not started: its state and the countdown to its start."""
        now = self._summary[0]
        if record.is_upcoming(now) and record.start_date is not None:
            return format_html('{} <span class="muted" title="{} UTC">starts {}</span>', record.state,
                               utc_minute(record.start_date), countdown(record.start_date, now))
        return record.state

    def render_idle_cost(self, record):
        now, prices, _totals, fees = self._summary
        if record.is_upcoming(now):
            return mark_safe('<span class="muted">not started</span>')
        if not record.is_usable(now):
            return mark_safe('<span class="muted">ended</span>')
        return idle_value_html(idle_value(record, prices, now, fees))

    def render_flags(self, record):
        flags = []
        if record.is_low_utilization():
            flags.append('<span class="badge warn" title="Under 20 % utilization for 24 hours">low use</span>')
        if record.interruptible:
            flags.append('<span class="badge">interruptible</span>')
        if record.lent_count:
            flags.append(format_html('<span class="badge" title="Lent as interruptible capacity: neither used by the fleet '
                                     'nor free for it, not idle">lends {}{}</span>', record.lent_count,
                                     f", reclaiming {record.reclaiming}" if record.reclaiming else ""))
        if record.is_ultraserver:
            flags.append('<span class="badge">UltraServer</span>')
        if record.is_committed(self._summary[0]):
            flags.append(format_html('<span class="badge" title="CommitmentInfo: no cancel, no shrink below {} before {} UTC">'
                                     "committed {}, ends {}</span>", record.committed_instance_count,
                                     utc_minute(record.commitment_end_date), record.committed_instance_count,
                                     countdown(record.commitment_end_date, self._summary[0])))
        return mark_safe("".join(flags)) if flags else ""


class EC2NodeClassTable(PlainRowsTable):
    """The EC2NodeClasses, their rows written by row_cells() (PlainRowsTable); header, sorting and pages stay
    django-tables2's, whose render_ methods below stay for its own rendering (tests compare the two)."""

    name = tables.Column(linkify=True)
    terms = tables.Column(empty_values=(), orderable=False, verbose_name="Selector terms")
    reservation_count = tables.Column(verbose_name="Reservations")
    pool_count = tables.Column(verbose_name="NodePools")
    ready = tables.Column(empty_values=(), orderable=False, verbose_name="CapacityReservationsReady")

    cluster = ClusterColumn()

    class Meta:
        model = EC2NodeClass
        sequence = ("cluster", "...")
        fields = ("name", "terms", "reservation_count", "pool_count", "ready", "synced_at")
        attrs = {"class": "table"}

    def row_cells(self):
        when = short_datetimes()

        def cells(record):
            name, synced = record.name, record.synced_at
            return (name and link(record.get_absolute_url(), name), self.render_terms(record),
                    getattr(record, "reservation_count", None), getattr(record, "pool_count", None),
                    self.render_ready(record) or BLANK, synced and when(synced))

        return cells

    def render_terms(self, record):
        return len(record.capacity_reservation_selector_terms or [])

    def render_ready(self, record):
        return record.condition_status("CapacityReservationsReady")


class RecommendationTable(tables.Table):
    kind = tables.Column(linkify=True, verbose_name="Recommendation")
    reservation = tables.Column(linkify=True, verbose_name="Reservation")
    savings_per_month = tables.Column(verbose_name="Money (monthly or one-off)")
    reason = tables.Column(orderable=False, verbose_name="Why")
    state = tables.Column(verbose_name="State")
    computed_at = tables.DateTimeColumn(verbose_name="Computed")

    class Meta:
        model = Recommendation
        fields = ("kind", "reservation", "savings_per_month", "reason", "state", "computed_at")
        attrs = {"class": "table"}

    def render_reservation(self, record):
        return record.reservation.reservation_id

    def render_savings_per_month(self, record):
        return format_html('<span class="money money-{}" title="{}">{}</span>', record.money, record.money_basis, record.money_text)


class BuyAdviceTable(tables.Table):
    """Capacity Block offerings for waiting accelerator gangs (reservations/buying.py), with their purchase."""

    gang = tables.Column(verbose_name="Gang")
    namespace = tables.Column(verbose_name="Namespace")
    instance_type = tables.Column(verbose_name="Block")
    availability_zone = tables.Column(verbose_name="AZ")
    start = tables.DateTimeColumn(verbose_name="From (UTC)", format="Y-m-d H:i")
    hours = tables.Column(verbose_name="Hours")
    upfront_fee = tables.Column(verbose_name="Upfront fee")
    waiting = tables.Column(empty_values=(), orderable=False, verbose_name="Compared with waiting")
    purchase = tables.Column(empty_values=(), orderable=False, verbose_name="Purchase")

    class Meta:
        model = BuyAdvice
        fields = ("gang", "namespace", "instance_type", "availability_zone", "start", "hours", "upfront_fee", "waiting",
                  "purchase")
        attrs = {"class": "table"}

    def render_gang(self, record):
        first = (record.pods or [""])[0]
        if "/" not in first:
            return record.gang
        namespace, name = first.split("/", 1)
        url = cluster_detail_url("scheduling:pod", record.cluster_id, namespace, name)
        return format_html('<a href="{}">{}</a> ({} pod{})', url, record.gang, len(record.pods),
                           "" if len(record.pods) == 1 else "s")

    def render_instance_type(self, record):
        ultra = f", {record.ultraserver_type}" if record.ultraserver_type else ""
        return f"{record.instance_count} × {record.instance_type}{ultra} ({record.nodes_used} used)"

    def render_upfront_fee(self, value):
        return f"${value:,.2f}"

    def render_waiting(self, record):
        from reservations.purchases import waiting_for

        return waiting_for(record, timezone.now(), getattr(self, "prices", None)).words()

    def render_purchase(self, record):
        bought = (getattr(self, "purchases", None) or {}).get(record.key)
        if bought is None:
            return "not approved"
        return f"{bought.state}{f' ({bought.reservation_id})' if bought.reservation_id else ''} by {bought.approved_by}"
