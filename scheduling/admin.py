from axes.admin import AccessAttemptAdmin as AxesAccessAttemptAdmin
from axes.models import AccessAttempt
from django_celery_beat.admin import PeriodicTaskAdmin
from django_celery_beat.models import PeriodicTask
from django.contrib import admin, messages
from django.db.models import Count

from scheduling.admin_forms import NodePoolAdminForm
from scheduling.admin_mixins import (
    KARPWEB_NOTE, KUBERNETES_NOTE, AuditedAuthorityAdmin, FullyMirroredAdmin, MirroredAdmin, ReadOnlyAdmin,
)
from scheduling.audit import record_change
from scheduling.modes import control_refusal
from scheduling.models import (
    AuditEntry,
    ClusterTotals,
    NodeGroupTotals,
    NodePoolTotals,
    ControllerGuard,
    Decision,
    EventCount,
    InstanceType,
    KubeObject,
    KarpenterLaunch,
    Lease,
    WatchState,
    Mode,
    Node,
    NodeClaim,
    NodePool,
    Offering,
    Pod,
    SimulatedInstance,
    StandingOpportunity,
    TaskRun,
)


CATALOGUE_NOTE = ("Mirrored from EC2's catalogue and prices: the next catalogue sync overwrites any change made here, "
                  "so these fields are read-only.")


class OfferingInline(admin.TabularInline):
    model = Offering
    extra = 0
    fields = ("capacity_type", "zone", "zone_id", "price", "available", "reservation")
    readonly_fields = fields

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(InstanceType)
class InstanceTypeAdmin(FullyMirroredAdmin):
    note = CATALOGUE_NOTE
    list_display = ("name", "vcpus", "memory_gib", "max_pods", "arch", "gpu_count", "family")
    list_filter = ("arch", "family", "gpu_count")
    search_fields = ("name", "family")
    inlines = (OfferingInline,)


@admin.register(Offering)
class OfferingAdmin(FullyMirroredAdmin):
    note = CATALOGUE_NOTE
    list_display = ("instance_type", "capacity_type", "zone", "price", "available", "reservation", "updated_at")
    list_filter = ("capacity_type", "zone", "available")
    search_fields = ("instance_type__name", "reservation__reservation_id")
    list_select_related = ("instance_type", "reservation")
    raw_id_fields = ("instance_type", "reservation")


@admin.register(NodePool)
class NodePoolAdmin(MirroredAdmin):
    form = NodePoolAdminForm
    list_display = ("name", "weight", "node_class", "effective_mode", "consolidation_policy", "node_count", "ready", "synced_at")
    list_filter = ("mode", "consolidation_policy", "keep_idle_reserved_nodes")
    search_fields = ("name",)
    list_select_related = ("node_class",)
    raw_id_fields = ("node_class",)
    actions = ("set_mode_observe", "set_mode_control", "follow_global_mode")
    # nodeClassRef follows the EC2NodeClass chosen (NodePoolAdminForm): the two never disagree.
    mirrored = ("uid", "resource_version", "node_class_ref", "conditions", "status_resources", "registration_health",
                "created_at", "synced_at")
    spec = ("name", "weight", "node_class", "requirements", "taints", "startup_taints", "labels", "limits",
            "consolidation_policy", "consolidate_after", "budgets", "expire_after")

    def get_fieldsets(self, request, obj=None):
        return [
            ("karpweb", {"description": KARPWEB_NOTE, "fields": ("mode", "keep_idle_reserved_nodes")}),
            ("Spec", {"description": self.spec_note(obj), "fields": self.spec}),
            ("Status", {"description": KUBERNETES_NOTE, "fields": self.mirrored}),
        ]

    def has_add_permission(self, request):
        # On a real cluster a NodePool is made with kubectl: a row added here would be gone at the next sync.
        return not self.cluster_owns_spec() and super().has_add_permission(request)

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(nodes_count=Count("nodes"))

    @admin.display(description="nodes", ordering="nodes_count")
    def node_count(self, obj):
        return obj.nodes_count

    @admin.display(description="mode")
    def effective_mode(self, obj):
        return obj.mode or "global"

    @admin.display(description="Ready")
    def ready(self, obj):
        return obj.condition_status("Ready")

    @admin.action(description="Set mode: observe (recommend only)")
    def set_mode_observe(self, request, queryset):
        self.record_bulk_change(request, queryset, "mode", Mode.OBSERVE)

    @admin.action(description="Set mode: control (act on decisions)")
    def set_mode_control(self, request, queryset):
        if refusal := control_refusal():
            self.message_user(request, f"Control is refused: {refusal}.", level=messages.ERROR)
            return
        self.record_bulk_change(request, queryset, "mode", Mode.CONTROL)

    @admin.action(description="Follow the global mode")
    def follow_global_mode(self, request, queryset):
        self.record_bulk_change(request, queryset, "mode", "")


class PlacementColumnsMixin:
    """Short columns for NodeClaims and Nodes: eight or nine full ones did not fit beside the filters."""

    @admin.display(description="instance", ordering="instance_type")
    def instance(self, obj):
        return f"{obj.instance_type or '—'} in {obj.zone}" if obj.zone else (obj.instance_type or "—")

    @admin.display(description="reservation", ordering="reservation_label")
    def reservation_shown(self, obj):
        return obj.reservation_label or "—"


@admin.register(NodeClaim)
class NodeClaimAdmin(PlacementColumnsMixin, FullyMirroredAdmin):
    # The reservation by its id (its full name, with type and zone, pushed the columns past the window).
    list_display = ("name", "node_pool", "instance", "capacity_type", "reservation_shown", "node_name", "created_at")
    list_filter = ("capacity_type", "zone", "node_pool")
    search_fields = ("name", "node_name", "provider_id", "instance_type", "reservation_label")
    list_select_related = ("node_pool",)
    raw_id_fields = ("node_pool", "node_class", "reservation")
    date_hierarchy = "created_at"


@admin.register(KubeObject)
class KubeObjectAdmin(FullyMirroredAdmin):
    """The storage objects the scheduler's volume rules read, as the API server wrote them."""

    list_display = ("kind", "namespace", "name", "cluster", "synced_at")
    list_filter = ("kind", "cluster")
    search_fields = ("name", "namespace")
    list_select_related = ("cluster",)


@admin.register(Node)
class NodeAdmin(PlacementColumnsMixin, FullyMirroredAdmin):
    list_display = ("name", "node_pool", "instance", "capacity_type", "reservation_shown", "pod_count", "ready",
                    "cordoned")
    list_filter = ("capacity_type", "zone", "ready", "unschedulable", "node_pool")
    search_fields = ("name", "provider_id", "instance_type", "reservation_label")
    list_select_related = ("node_pool",)
    raw_id_fields = ("node_pool", "node_claim", "reservation")

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(pods_count=Count("pods"))

    @admin.display(description="pods", ordering="pods_count")
    def pod_count(self, obj):
        return obj.pods_count

    @admin.display(description="cordoned", boolean=True, ordering="unschedulable")
    def cordoned(self, obj):
        return obj.unschedulable


class PendingFilter(admin.SimpleListFilter):
    title = "binding"
    parameter_name = "bound"

    def lookups(self, request, model_admin):
        return [("no", "pending"), ("yes", "bound")]

    def queryset(self, request, queryset):
        if self.value() == "no":
            return queryset.filter(node_name="")
        if self.value() == "yes":
            return queryset.exclude(node_name="")
        return queryset


@admin.register(Pod)
class PodAdmin(FullyMirroredAdmin):
    list_display = ("__str__", "node_name", "phase", "cpu_request_millicores", "memory_request_bytes", "owner_kind", "created_at")
    list_filter = (PendingFilter, "phase", "namespace")
    search_fields = ("name", "namespace", "node_name", "owner_name")
    raw_id_fields = ("node",)
    show_full_result_count = False


@admin.register(Decision)
class DecisionAdmin(ReadOnlyAdmin):
    list_display = ("created_at", "kind", "outcome", "mode", "subject", "reason", "node_pool", "reservation")
    list_filter = ("kind", "outcome", "mode", "node_pool")
    search_fields = ("subject", "reason")
    list_select_related = ("node_pool", "reservation")
    date_hierarchy = "created_at"
    show_full_result_count = False


@admin.register(AuditEntry)
class AuditEntryAdmin(ReadOnlyAdmin):
    list_display = ("created_at", "actor", "source", "action", "content_type", "object_repr", "changes")
    list_filter = ("source", "action", "content_type")
    search_fields = ("actor", "object_repr", "object_id")
    list_select_related = ("content_type",)
    date_hierarchy = "created_at"


@admin.register(KarpenterLaunch)
class KarpenterLaunchAdmin(ReadOnlyAdmin):
    """The Karpenter audit, written by the loop only."""

    list_display = ("launched_at", "claim_name", "node_pool_name", "instance_type", "zone", "capacity_type", "outcome",
                    "reservation_label", "missed_dollars")
    list_filter = ("outcome", "capacity_type", "zone")
    search_fields = ("claim_name", "reservation_label", "node_pool_name", "reason")
    date_hierarchy = "launched_at"


@admin.register(StandingOpportunity)
class StandingOpportunityAdmin(ReadOnlyAdmin):
    list_display = ("computed_at", "__str__", "capacity_type", "node_pool_name", "savings_per_hour")


@admin.register(ControllerGuard)
class ControllerGuardAdmin(ReadOnlyAdmin):
    """What the last Kubernetes sync found about Karpenter; operators allow control from the overview."""

    list_display = ("__str__", "karpenter_live", "reason", "checked_at", "last_live_at", "control_allowed_at",
                    "control_allowed_by")


@admin.register(TaskRun)
class TaskRunAdmin(ReadOnlyAdmin):
    list_display = ("task", "started_at", "duration", "status", "mode", "counts", "short_error", "worker")
    list_filter = ("task", "status", "mode")
    search_fields = ("task", "error", "task_id")
    date_hierarchy = "started_at"
    show_full_result_count = False

    @admin.display(description="error")
    def short_error(self, obj):
        return obj.error.splitlines()[0][:120] if obj.error else ""


@admin.register(Lease)
class LeaseAdmin(ReadOnlyAdmin):
    list_display = ("name", "holder", "expires_at")
    search_fields = ("name", "holder")


@admin.register(SimulatedInstance)
class SimulatedInstanceAdmin(ReadOnlyAdmin):
    list_display = ("instance_id", "instance_type", "zone", "capacity_type", "reservation_id", "state", "launched_at")
    list_filter = ("capacity_type", "state", "zone")
    search_fields = ("instance_id", "client_token", "reservation_id")


# django-axes' access attempts, with every unlock (deleting an attempt) in the audit log.
admin.site.unregister(AccessAttempt)


@admin.register(AccessAttempt)
class AuditedAccessAttemptAdmin(AxesAccessAttemptAdmin):
    def delete_model(self, request, obj):
        _audit_unlock(request, obj)
        super().delete_model(request, obj)

    def delete_queryset(self, request, queryset):
        for obj in queryset:
            _audit_unlock(request, obj)
        super().delete_queryset(request, queryset)


def _audit_unlock(request, attempt):
    record_change(user=request.user, source=AuditEntry.Source.ADMIN, obj=attempt, action=AuditEntry.Action.DELETE,
                  changes={"locked_out": [True, False], "username": [attempt.username, None],
                           "ip_address": [attempt.ip_address, None]})


@admin.register(WatchState)
class WatchStateAdmin(ReadOnlyAdmin):
    """The watch process's heartbeat and counts, and when the cluster's state was last applied."""

    list_display = ("holder", "heartbeat_at", "last_event_at", "events", "relists", "reconnects", "lag_seconds",
                    "batches", "world_as_of")


@admin.register(EventCount)
class EventCountAdmin(ReadOnlyAdmin):
    """Counts the loop keeps (exported at /metrics), e.g. interruption-queue messages by kind."""

    list_display = ("name", "label", "value")
    list_filter = ("name",)


@admin.register(ClusterTotals)
class ClusterTotalsAdmin(ReadOnlyAdmin):
    """A cluster's nodes and pods as its last loop step counted them (scheduling/totals.py)."""

    list_display = ("cluster", "nodes", "pods", "pending_pods", "refreshed_at")


@admin.register(NodePoolTotals)
class NodePoolTotalsAdmin(ReadOnlyAdmin):
    """A NodePool's nodes and allocatable as its cluster's last loop step counted them."""

    list_display = ("node_pool", "cluster", "nodes", "cpu_allocatable", "memory_allocatable")


@admin.register(NodeGroupTotals)
class NodeGroupTotalsAdmin(ReadOnlyAdmin):
    """A cluster's nodes by pool, type, zone, capacity type and reservation, with their pods' requests."""

    list_display = ("cluster", "node_pool", "instance_type", "zone", "capacity_type", "reservation", "nodes",
                    "cpu_requested", "cpu_allocatable")


# The loop's schedules: a changed or disabled periodic task changes what karpweb does, so it is audited.
admin.site.unregister(PeriodicTask)


@admin.register(PeriodicTask)
class AuditedPeriodicTaskAdmin(AuditedAuthorityAdmin, PeriodicTaskAdmin):
    pass
