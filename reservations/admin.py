from django.contrib import admin, messages
from django.db.models import F
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html

from reservations.models import (
    BuyAdvice,
    CapacityBlockPurchase,
    PriceCommitments,
    CapacityBlockFee,
    DoctorFinding,
    Recommendation,
    CapacityReservation, CapacityReservationGroup, ClusterLaunchTemplate, EC2NodeClass, OpenReservationInstance,
    ReservationContention,
    ReservationHold, ReservationInstance, ReservationUse, ReservationVisibility, UtilizationHour, UtilizationSample,
)
from reservations.open_mode import OpenModeConflict, set_open_mode
from reservations.selector_terms import InvalidSelectorTerms, SelectorTermConflict, save_selector_terms
from scheduling.admin_forms import CapacityReservationAdminForm, EC2NodeClassAdminForm
from scheduling.admin_mixins import EC2_NOTE, KARPWEB_NOTE, KUBERNETES_NOTE, AuditedAdmin, MirroredAdmin, ReadOnlyAdmin
from scheduling.engine.timeutil import format_time
from scheduling.models import AuditEntry


class EndsWithinFilter(admin.SimpleListFilter):
    title = "ends"
    parameter_name = "ends"

    def lookups(self, request, model_admin):
        return [("1h", "within an hour"), ("24h", "within a day"), ("never", "no end date")]

    def queryset(self, request, queryset):
        import datetime

        from django.utils import timezone

        now = timezone.now()
        if self.value() == "1h":
            return queryset.filter(end_date__gt=now, end_date__lte=now + datetime.timedelta(hours=1))
        if self.value() == "24h":
            return queryset.filter(end_date__gt=now, end_date__lte=now + datetime.timedelta(days=1))
        if self.value() == "never":
            return queryset.filter(end_date__isnull=True)
        return queryset


class IdleFilter(admin.SimpleListFilter):
    title = "idle capacity"
    parameter_name = "idle"

    def lookups(self, request, model_admin):
        return [("any", "some capacity idle"), ("all", "entirely idle"), ("full", "full")]

    def queryset(self, request, queryset):
        if self.value() == "any":
            return queryset.filter(available_instance_count__gt=0)
        if self.value() == "all":
            return queryset.filter(available_instance_count=F("total_instance_count"), total_instance_count__gt=0)
        if self.value() == "full":
            return queryset.filter(available_instance_count=0)
        return queryset


@admin.register(CapacityReservation)
class CapacityReservationAdmin(MirroredAdmin):
    """Everything EC2 says is read-only; karpweb's own override (keep karpweb from planning into it)
    is edited here, with who set it and when filled in, audited."""

    form = CapacityReservationAdminForm
    # Ten columns were cut off beside the filters: type, utilization and end date are shortened.
    list_display = ("reservation_id", "instance_type", "availability_zone", "kind", "state", "usage", "ends", "planning")
    list_filter = (
        "reservation_type", "state", "availability_zone", "instance_match_criteria", "interruptible",
        "planning_excluded", EndsWithinFilter, IdleFilter,
    )
    search_fields = ("reservation_id", "instance_type", "owner_id", "arn")
    date_hierarchy = "end_date"
    IDENTITY = ("reservation_id", "arn", "owner_id", "region", "state", "reservation_type", "instance_match_criteria",
                "interruptible", "ultraserver_type")
    CAPACITY = ("instance_type", "instance_platform", "tenancy", "availability_zone", "availability_zone_id",
                "total_instance_count", "available_instance_count", "used", "allocations")
    DATES = ("create_date", "start_date", "end_date", "end_date_type", "committed_instance_count",
             "commitment_end_date", "delivery_preference", "seen")
    MORE = ("ebs_optimized", "ephemeral_storage", "placement_group_arn", "outpost_arn",
            "unused_reservation_billing_owner_id", "capacity_reservation_fleet_id", "interruptible_allocation",
            "interruption_source_id", "tags")
    mirrored = (*IDENTITY, *CAPACITY, *DATES, *MORE, "samples_link")
    readonly_fields = ("planning_excluded_by", "planning_excluded_at")
    fieldsets = (
        ("Planning override (karpweb's own)", {"description": KARPWEB_NOTE + (
            " Excluded, karpweb neither launches nor consolidates into it (the decisions and each pod's "
            "\"why not reserved?\" say so); nodes already in it stay."),
            "fields": ("planning_excluded", "planning_excluded_reason", "planning_excluded_by", "planning_excluded_at")}),
        ("From EC2", {"description": EC2_NOTE, "fields": IDENTITY}),
        ("Capacity", {"description": EC2_NOTE, "fields": (*CAPACITY, "samples_link")}),
        ("Dates", {"description": EC2_NOTE, "fields": DATES}),
        ("More", {"classes": ("collapse",), "description": EC2_NOTE, "fields": MORE}),
    )

    def has_add_permission(self, request):
        return False  # reservations come from EC2 (or the simulated world's seed), never from this form

    def has_delete_permission(self, request, obj=None):
        return False  # EC2's: the next sync brings it back (and its samples and hours are not deleted here)

    def save_model(self, request, obj, form, change):
        if "planning_excluded" in form.changed_data:
            obj.planning_excluded_by = request.user.get_username() if obj.planning_excluded else ""
            obj.planning_excluded_at = timezone.now() if obj.planning_excluded else None
        super().save_model(request, obj, form, change)

    @admin.display(description="planning", boolean=False, ordering="planning_excluded")
    def planning(self, obj):
        return "excluded" if obj.planning_excluded else "—"

    @admin.display(description="used / available / total", ordering="available_instance_count")
    def usage(self, obj):
        return (f"{obj.used_instance_count} / {obj.available_instance_count} / {obj.total_instance_count} "
                f"({obj.utilization:.0%})")

    @admin.display(description="used")
    def used(self, obj):
        return obj.used_instance_count

    @admin.display(description="capacity allocations")
    def allocations(self, obj):
        """EC2's CapacityAllocations as it counted them at the last sync, in words."""
        return ", ".join(f"{a.get('AllocationType')}: {a.get('Count')}" for a in obj.capacity_allocations or []) or "none used"

    @admin.display(description="last seen (UTC)", ordering="last_seen")
    def seen(self, obj):
        """When EC2 last reported it (each sync), to the second."""
        return format_time(obj.last_seen).replace("T", " ") if obj.last_seen else "—"

    @admin.display(description="type", ordering="reservation_type")
    def kind(self, obj):
        return "block" if obj.is_capacity_block else "ODCR"

    @admin.display(description="ends (UTC)", ordering="end_date")
    def ends(self, obj):
        return format_time(obj.end_date).replace("T", " ")[:16] if obj.end_date else "—"

    @admin.display(description="utilization history")
    def samples_link(self, obj):
        if not obj.pk:
            return "-"
        url = reverse("admin:reservations_utilizationsample_changelist") + f"?reservation__id__exact={obj.pk}"
        hours = reverse("admin:reservations_utilizationhour_changelist") + f"?reservation__id__exact={obj.pk}"
        return format_html('<a href="{}">samples</a> · <a href="{}">hourly</a>', url, hours)


@admin.register(Recommendation)
class RecommendationAdmin(ReadOnlyAdmin):
    """Computed by the loop, applied on the Recommendations page or the API (audited there)."""

    list_display = ("kind", "reservation", "savings_per_month", "state", "computed_at", "applied_by")
    list_filter = ("kind", "state")
    search_fields = ("reservation__reservation_id", "reason")
    list_select_related = ("reservation",)


@admin.register(ReservationVisibility)
class ReservationVisibilityAdmin(ReadOnlyAdmin):
    """Which of the fleet's accounts see a reservation: written by the EC2 sync."""

    list_display = ("reservation", "account", "shared", "first_seen")
    list_filter = ("shared", "account")
    search_fields = ("reservation__reservation_id", "account__name", "account__account_id")
    list_select_related = ("reservation", "account")


@admin.register(UtilizationSample)
class UtilizationSampleAdmin(ReadOnlyAdmin):
    list_display = ("reservation", "sampled_at", "used", "available", "total")
    list_filter = ("reservation__reservation_type",)
    search_fields = ("reservation__reservation_id",)
    list_select_related = ("reservation",)
    date_hierarchy = "sampled_at"
    show_full_result_count = False


@admin.register(ReservationUse)
class ReservationUseAdmin(ReadOnlyAdmin):
    """The fleet ledger's attribution at each sync (reservations/ledger.py)."""

    list_display = ("reservation", "sampled_at", "used", "total", "clusters", "our_accounts", "other_accounts", "unknown")
    search_fields = ("reservation__reservation_id",)
    list_select_related = ("reservation",)
    date_hierarchy = "sampled_at"
    show_full_result_count = False


@admin.register(ReservationHold)
class ReservationHoldAdmin(ReadOnlyAdmin):
    """Units a cluster held for a launch (reservations/ledger.py): written by provisioning."""

    list_display = ("reservation", "cluster", "units", "claim_name", "state", "created_at", "expires_at")
    list_filter = ("state", "cluster")
    search_fields = ("reservation__reservation_id", "claim_name")
    list_select_related = ("reservation", "cluster")


@admin.register(ReservationInstance)
class ReservationInstanceAdmin(ReadOnlyAdmin):
    """The instances EC2 reports in each reservation (mirrored by the EC2 step): read-only."""

    list_display = ("instance_id", "reservation", "instance_type", "state", "node_name", "launched_at")
    list_select_related = ("reservation",)
    search_fields = ("instance_id", "node_name", "reservation__reservation_id")


@admin.register(BuyAdvice)
class BuyAdviceAdmin(ReadOnlyAdmin):
    """Capacity Block offerings for waiting accelerator gangs (recomputed at each EC2 sync): read-only."""

    list_display = ("gang", "namespace", "cluster", "instance_count", "instance_type", "availability_zone", "start",
                    "hours", "upfront_fee")
    list_filter = ("instance_type", "cluster")
    list_select_related = ("cluster",)
    search_fields = ("gang", "namespace", "offering_id")


@admin.register(CapacityBlockPurchase)
class CapacityBlockPurchaseAdmin(ReadOnlyAdmin):
    """Capacity Blocks operators approved for waiting gangs and what karpweb bought: read-only (approve and buy on
    the pod page or through the API, which check the rules)."""

    list_display = ("gang", "namespace", "cluster", "state", "instance_count", "instance_type", "start", "upfront_fee",
                    "reservation_id", "approved_by", "purchased_by")
    list_filter = ("state", "cluster")
    list_select_related = ("cluster",)
    search_fields = ("gang", "namespace", "offering_id", "reservation_id")


@admin.register(PriceCommitments)
class PriceCommitmentsAdmin(ReadOnlyAdmin):
    """What each account already pays for, per region (the EC2 sync reads it): zonal Reserved Instances and
    Savings Plans that price the plans, consolidation, the audit and recommendations (reservations/commitments.py)."""

    list_display = ("account_id", "region", "read_at", "list_prices_because")
    search_fields = ("account_id",)


@admin.register(ReservationContention)
class ReservationContentionAdmin(ReadOnlyAdmin):
    """Launches refused for capacity into units the fleet ledger called free."""

    list_display = ("reservation", "cluster", "created_at", "units_wanted", "ledger_free", "error_code", "explained_at")
    list_filter = ("error_code", "cluster")
    search_fields = ("reservation__reservation_id",)
    list_select_related = ("reservation", "cluster")


@admin.register(UtilizationHour)
class UtilizationHourAdmin(ReadOnlyAdmin):
    list_display = ("reservation", "hour", "samples", "used", "available", "total")
    list_filter = ("reservation__reservation_type",)
    search_fields = ("reservation__reservation_id",)
    list_select_related = ("reservation",)
    date_hierarchy = "hour"
    show_full_result_count = False


@admin.register(EC2NodeClass)
class EC2NodeClassAdmin(MirroredAdmin):
    form = EC2NodeClassAdminForm
    list_display = ("name", "term_count", "reservation_count", "ready", "open_reservations", "synced_at")
    list_filter = ("open_reservations",)
    search_fields = ("name",)
    # The status (selected reservations included: the sync writes them from status.capacityReservations).
    mirrored = ("uid", "resource_version", "selected_reservations", "status_capacity_reservations", "status_launch",
                "conditions", "created_at", "synced_at")
    # On a real cluster the spec and annotations are the cluster's: an edit here would be undone by the next sync.
    spec = ("spec", "annotations")

    def get_fieldsets(self, request, obj=None):
        return [
            (None, {"fields": ("name",)}),
            ("Written to the cluster by karpweb", {
                "description": "Saved as the selector-term editor saves them: checked, written to the cluster, "
                               "refused when the object changed since this page was read. Every change is audited.",
                "fields": ("capacity_reservation_selector_terms", "open_reservations", "read_version")}),
            ("Spec", {"description": self.spec_note(obj), "fields": self.spec}),
            ("Status", {"description": KUBERNETES_NOTE, "fields": self.mirrored}),
        ]

    def audited_fields(self, form, change):
        routed = form.routed_changes() if change else []
        return [name for name in super().audited_fields(form, change) if name not in routed and name != "read_version"]

    def save_model(self, request, obj, form, change):
        """Selector terms and open mode are left as stored here and saved in save_related."""
        form.routed = {name: getattr(obj, name) for name in (form.routed_changes() if change else [])}
        if form.routed:
            stored = EC2NodeClass.objects.get(pk=obj.pk)
            for name in form.routed:
                setattr(obj, name, getattr(stored, name))
        super().save_model(request, obj, form, change)

    def save_related(self, request, form, formsets, change):
        """After the plain fields and the reservation list: selector terms and open mode through the
        editor's functions (checked, written to the cluster, compare-and-swap on the version read,
        status refreshed, recorded once)."""
        super().save_related(request, form, formsets, change)
        routed, obj = getattr(form, "routed", {}), form.instance
        read_version = form.cleaned_data.get("read_version") or ""
        try:
            if "capacity_reservation_selector_terms" in routed:
                obj = save_selector_terms(obj, routed["capacity_reservation_selector_terms"], read_version,
                                          user=request.user, source=AuditEntry.Source.ADMIN)
                read_version = obj.resource_version
            if "open_reservations" in routed:
                set_open_mode(obj, routed["open_reservations"], user=request.user, source=AuditEntry.Source.ADMIN,
                              read_version=read_version)
        except (SelectorTermConflict, OpenModeConflict, InvalidSelectorTerms) as exc:
            self.message_user(request, f"Not saved: {exc}", messages.ERROR)

    def get_queryset(self, request):
        from django.db.models import Count

        return super().get_queryset(request).annotate(reservations_selected=Count("selected_reservations"))

    @admin.display(description="selector terms")
    def term_count(self, obj):
        return len(obj.capacity_reservation_selector_terms or [])

    @admin.display(description="reservations", ordering="reservations_selected")
    def reservation_count(self, obj):
        return obj.reservations_selected

    @admin.display(description="CapacityReservationsReady")
    def ready(self, obj):
        return obj.condition_status("CapacityReservationsReady")


@admin.register(CapacityReservationGroup)
class CapacityReservationGroupAdmin(AuditedAdmin):
    """Groups a selector term names; EC2's are synced from ListGroupResources, the simulated
    world's are entered here."""

    list_display = ("name", "arn", "member_count", "synced_at")
    search_fields = ("arn",)
    filter_horizontal = ("reservations",)
    readonly_fields = ("synced_at",)

    @admin.display(description="members")
    def member_count(self, obj):
        return len(obj.reservation_ids or [])

    def save_related(self, request, form, formsets, change):
        super().save_related(request, form, formsets, change)
        # The reservations karpweb knows are picked in the list; ids it does not know (yet) stay in
        # reservation_ids as typed.
        obj = form.instance
        known = set(CapacityReservation.objects.filter(reservation_id__in=obj.reservation_ids or []).values_list("reservation_id", flat=True))
        picked = set(obj.reservations.values_list("reservation_id", flat=True))
        ids = sorted(picked | (set(obj.reservation_ids or []) - known))
        if ids != obj.reservation_ids:
            obj.reservation_ids = ids
            obj.save(update_fields=["reservation_ids"])


@admin.register(CapacityBlockFee)
class CapacityBlockFeeAdmin(AuditedAdmin):
    """What a Capacity Block cost up front (EC2 reports no block's fee): the `block fee` entered here prices its
    idle units at the block's own price per unit-hour (reservations/block_fees.py) when no paid fee is known."""

    list_display = ("reservation_id", "paid_fee", "block_fee", "extensions_paid", "estimated_fee", "estimated_hours",
                    "updated_at")
    search_fields = ("reservation_id",)
    fields = ("reservation_id", "block_fee", "paid_fee", "extensions_paid", "estimated_fee", "estimated_hours", "estimated_at")
    readonly_fields = ("paid_fee", "extensions_paid", "estimated_fee", "estimated_hours", "estimated_at")  # karpweb's and EC2's


@admin.register(OpenReservationInstance)
class OpenReservationInstanceAdmin(ReadOnlyAdmin):
    list_display = ("instance_id", "reservation", "instance_type", "availability_zone", "node_name", "first_seen", "last_seen")
    list_filter = ("availability_zone",)
    search_fields = ("instance_id", "node_name", "reservation__reservation_id")
    list_select_related = ("reservation",)


@admin.register(DoctorFinding)
class DoctorFindingAdmin(ReadOnlyAdmin):
    """The reservation doctor's findings (reservations/doctor.py writes them after each EC2 sync)."""

    list_display = ("code", "severity", "cluster", "reservation_id", "node_class_name", "first_seen", "last_seen",
                    "cleared_at")
    list_filter = ("severity", "code", "cluster")
    search_fields = ("reservation_id", "node_class_name", "evidence")


@admin.register(ClusterLaunchTemplate)
class ClusterLaunchTemplateAdmin(ReadOnlyAdmin):
    """Karpenter's launch templates per cluster, as the EC2 sync read them (the open-reservation trap)."""

    list_display = ("name", "cluster", "preference", "version", "node_class", "synced_at")
    list_filter = ("preference",)
    search_fields = ("name", "template_id", "node_class")
    list_select_related = ("cluster",)
