import django_tables2 as tables
import karpweb.tables  # noqa: F401 - registers the shared column types before the tables below are built
from django.utils.html import format_html
from django.utils.safestring import mark_safe

from reservations.models import CapacityReservation, EC2NodeClass, Recommendation


class UsageColumn(tables.Column):
    """used / available / total with a bar."""

    def render(self, record):
        percent = round(record.utilization * 100)
        return format_html(
            '<div class="usage"><div class="bar"><span style="width:{}%"></span></div>{} / {} / {}</div>',
            percent, record.used_instance_count, record.available_instance_count, record.total_instance_count,
        )


class CapacityReservationTable(tables.Table):
    reservation_id = tables.Column(linkify=True, verbose_name="ID")
    reservation_type = tables.Column(verbose_name="Type")
    usage = UsageColumn(empty_values=(), orderable=False, verbose_name="Used / available / total")
    utilization = tables.Column(empty_values=(), order_by=("available_instance_count",), verbose_name="Utilization")
    flags = tables.Column(empty_values=(), orderable=False, verbose_name="Notes")

    class Meta:
        model = CapacityReservation
        fields = ("reservation_id", "instance_type", "availability_zone", "reservation_type", "state",
                  "instance_match_criteria", "usage", "utilization", "end_date", "owner_id", "flags")
        attrs = {"class": "table"}
        order_by = ("reservation_id",)

    def render_utilization(self, record):
        return f"{record.utilization:.0%}"

    def render_flags(self, record):
        flags = []
        if record.is_low_utilization():
            flags.append('<span class="badge warn" title="Under 20 % utilization for 24 hours">low use</span>')
        if record.interruptible:
            flags.append('<span class="badge">interruptible</span>')
        if record.is_ultraserver:
            flags.append('<span class="badge">UltraServer</span>')
        return mark_safe("".join(flags)) if flags else ""


class EC2NodeClassTable(tables.Table):
    name = tables.Column(linkify=True)
    terms = tables.Column(empty_values=(), orderable=False, verbose_name="Selector terms")
    reservation_count = tables.Column(verbose_name="Reservations")
    pool_count = tables.Column(verbose_name="NodePools")
    ready = tables.Column(empty_values=(), orderable=False, verbose_name="CapacityReservationsReady")

    class Meta:
        model = EC2NodeClass
        fields = ("name", "terms", "reservation_count", "pool_count", "ready", "synced_at")
        attrs = {"class": "table"}

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
