"""The fleet in the admin: accounts and clusters (every change audited, as elsewhere)."""

from django.contrib import admin

from fleet.models import AwsAccount, Cluster
from scheduling.admin_mixins import AuditedAdmin


class ClusterInline(admin.TabularInline):
    model = Cluster
    fields = ("name", "region", "connection", "mode", "shard", "is_default")
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(AwsAccount)
class AwsAccountAdmin(AuditedAdmin):
    list_display = ("name", "account_id", "assumes_role", "region_list", "cluster_count", "updated_at")
    search_fields = ("name", "account_id", "role_arn")
    readonly_fields = ("created_at", "updated_at")
    fields = ("account_id", "name", "role_arn", "external_id", "regions", "created_at", "updated_at")
    inlines = [ClusterInline]

    def get_queryset(self, request):
        from django.db.models import Count

        return super().get_queryset(request).annotate(clusters_count=Count("clusters"))

    @admin.display(description="role", boolean=True)
    def assumes_role(self, obj):
        return bool(obj.role_arn)

    @admin.display(description="regions")
    def region_list(self, obj):
        return ", ".join(obj.regions or []) or "-"

    @admin.display(description="clusters", ordering="clusters_count")
    def cluster_count(self, obj):
        return obj.clusters_count


@admin.register(Cluster)
class ClusterAdmin(AuditedAdmin):
    list_display = ("name", "account", "region", "connection", "mode_shown", "karpenter", "shard", "is_default",
                    "updated_at")
    list_filter = ("connection", "mode", "karpenter", "shard", "is_default", "account")
    search_fields = ("name", "region", "endpoint", "account__name", "account__account_id")
    list_select_related = ("account",)
    readonly_fields = ("queue", "created_at", "updated_at")
    fieldsets = (
        (None, {"fields": ("name", "account", "region", "is_default")}),
        ("Connection", {"fields": ("connection", "kubeconfig")}),
        ("Nodes join it with", {
            "description": "What a launched node needs to join the cluster, and where its interruption events arrive. "
                           "Blank: asked of EKS (DescribeCluster), and no queue; the default cluster's blanks take "
                           "the KARPWEB_CLUSTER_* settings and KARPWEB_INTERRUPTION_QUEUE as before the fleet.",
            "fields": ("endpoint", "ca_bundle", "service_cidr", "interruption_queue")}),
        ("Control", {"fields": ("mode", "karpenter", "karpenter_role_arn", "shard", "queue")}),
        ("Recorded", {"fields": ("created_at", "updated_at")}),
    )

    @admin.display(description="mode", ordering="mode")
    def mode_shown(self, obj):
        return obj.get_mode_display() if obj.mode else "global (KARPWEB_MODE)"

    @admin.display(description="Celery queue")
    def queue(self, obj):
        return obj.queue
