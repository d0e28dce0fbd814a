from django.conf import settings
from django.contrib import admin, messages
from django.db.models import F
from django.urls import reverse
from django.utils.html import format_html

from reservations.models import (
    Recommendation,
    CapacityReservation, CapacityReservationGroup, EC2NodeClass, OpenReservationInstance, ReservationContention,
    ReservationHold, ReservationUse, ReservationVisibility, UtilizationHour, UtilizationSample,
)
from reservations.open_mode import OpenModeConflict, set_open_mode
from reservations.selector_terms import InvalidSelectorTerms, SelectorTermConflict, save_selector_terms
from scheduling.admin_forms import EC2NodeClassAdminForm
from scheduling.admin_mixins import AuditedAdmin, ReadOnlyAdmin
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
class CapacityReservationAdmin(AuditedAdmin):
    list_display = (
        "reservation_id", "instance_type", "availability_zone", "reservation_type", "state",
        "usage", "utilization_percent", "end_date", "owner_id", "last_seen",
    )
    list_filter = (
        "reservation_type", "state", "availability_zone", "instance_match_criteria", "interruptible",
        EndsWithinFilter, IdleFilter,
    )
    search_fields = ("reservation_id", "instance_type", "owner_id", "arn")
    readonly_fields = ("last_seen", "samples_link")
    date_hierarchy = "end_date"
    fieldsets = (
        (None, {"fields": ("reservation_id", "arn", "owner_id", "region", "state", "reservation_type",
                           "instance_match_criteria", "interruptible", "ultraserver_type")}),
        ("Capacity", {"fields": ("instance_type", "instance_platform", "tenancy", "availability_zone",
                                 "availability_zone_id", "total_instance_count", "available_instance_count",
                                 "capacity_allocations", "samples_link")}),
        ("Dates", {"fields": ("create_date", "start_date", "end_date", "end_date_type", "last_seen")}),
        ("More", {"classes": ("collapse",), "fields": (
            "ebs_optimized", "ephemeral_storage", "placement_group_arn", "outpost_arn",
            "unused_reservation_billing_owner_id", "tags")}),
    )

    @admin.display(description="used / available / total")
    def usage(self, obj):
        return f"{obj.used_instance_count} / {obj.available_instance_count} / {obj.total_instance_count}"

    @admin.display(description="utilization", ordering="available_instance_count")
    def utilization_percent(self, obj):
        return f"{obj.utilization:.0%}"

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

    def has_delete_permission(self, request, obj=None):
        # Deleting a reservation deletes its visibilities with it (the next sync records them again).
        return admin.ModelAdmin.has_delete_permission(self, request, obj)


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
class EC2NodeClassAdmin(AuditedAdmin):
    form = EC2NodeClassAdminForm
    list_display = ("name", "term_count", "reservation_count", "ready", "open_reservations", "synced_at")
    list_filter = ("open_reservations",)
    search_fields = ("name",)
    filter_horizontal = ("selected_reservations",)
    readonly_fields = ("uid", "resource_version", "status_capacity_reservations", "conditions", "created_at", "synced_at")

    def get_readonly_fields(self, request, obj=None):
        # On a real cluster the spec and annotations are the cluster's: an edit here would be undone by the next sync.
        if settings.KARPWEB_CLUSTER == "kubernetes":
            return (*self.readonly_fields, "spec", "annotations")
        return self.readonly_fields

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


@admin.register(OpenReservationInstance)
class OpenReservationInstanceAdmin(ReadOnlyAdmin):
    list_display = ("instance_id", "reservation", "instance_type", "availability_zone", "node_name", "first_seen", "last_seen")
    list_filter = ("availability_zone",)
    search_fields = ("instance_id", "node_name", "reservation__reservation_id")
    list_select_related = ("reservation",)
