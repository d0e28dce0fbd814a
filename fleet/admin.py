"""The fleet in the admin: accounts and clusters (every change audited, as elsewhere). Staff may look;
only fleet administrators (the fleet-admin role or a superuser) add, change or delete, since these
rows say what karpweb assumes, connects to and trusts. An account's external ID is made by karpweb
and shown once, in the message after the account is added or its external ID is made anew."""

from django import forms
from django.contrib import admin, messages
from django.http import HttpResponseRedirect
from django.urls import reverse

from fleet.external_ids import renew_external_id
from fleet.models import AwsAccount, Cluster, RoleBinding
from scheduling.loop.removal import RemovalError, remove_cluster
from karpweb.roles import can_administer_fleet
from reservations.models import ReservationVisibility
from scheduling.admin_mixins import AuditedAdmin, AuditedAuthorityAdmin
from scheduling.loop.coexistence import ControlNotAllowed, refuse_loosening
from scheduling.models import AuditEntry, Decision, TaskRun


class FleetAdminOnly:
    """Writes for fleet administrators alone; any staff member with the view permission may look.
    Their changes are the fleet's configuration, in the audit log, not a cluster's decisions."""

    audit_as_decision = False

    def has_add_permission(self, request, *args):
        return can_administer_fleet(request.user) and super().has_add_permission(request, *args)

    def has_change_permission(self, request, obj=None):
        return can_administer_fleet(request.user) and super().has_change_permission(request, obj)

    def has_delete_permission(self, request, obj=None):
        return can_administer_fleet(request.user) and super().has_delete_permission(request, obj)


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
class AwsAccountAdmin(FleetAdminOnly, AuditedAdmin):
    list_display = ("name", "account_id", "assumes_role", "region_list", "cluster_count", "updated_at")
    search_fields = ("name", "account_id", "role_arn")
    readonly_fields = ("created_at", "updated_at")
    fields = ("account_id", "name", "role_arn", "regions", "created_at", "updated_at")
    inlines = [ClusterInline]
    actions = ["make_new_external_id"]

    def save_model(self, request, obj, form, change):
        super().save_model(request, obj, form, change)
        if not change:
            self._show_once(request, obj)

    @admin.action(description="Make a new external ID (shown once)")
    def make_new_external_id(self, request, queryset):
        if not can_administer_fleet(request.user):
            self.message_user(request, "Only fleet administrators may do that.", messages.ERROR)
            return
        for account in queryset:
            self._show_once(request, renew_external_id(account, user=request.user, source=AuditEntry.Source.ADMIN))

    def _show_once(self, request, account):
        self.message_user(request, f"{account}: karpweb's external ID is {account.external_id} . Put it in the role's "
                                   'trust policy (Condition StringEquals "sts:ExternalId"); it is not shown again.',
                          messages.WARNING)

    def get_queryset(self, request):
        from django.db.models import Count

        return super().get_queryset(request).annotate(clusters_count=Count("clusters"))

    def has_delete_permission(self, request, obj=None):
        # An account with clusters is protected (Cluster.account): no Delete that can only answer "Cannot delete".
        return super().has_delete_permission(request, obj) and not (obj is not None and obj.clusters.exists())

    def get_deleted_objects(self, objs, request):
        # Which reservations it sees goes with it (the EC2 sync's rows, which nobody deletes one by one).
        deleted, model_count, perms_needed, protected = super().get_deleted_objects(objs, request)
        visibility = str(ReservationVisibility._meta.verbose_name)
        return deleted, model_count, {name for name in perms_needed if str(name) != visibility}, protected

    @admin.display(description="role", boolean=True)
    def assumes_role(self, obj):
        return bool(obj.role_arn)

    @admin.display(description="regions")
    def region_list(self, obj):
        return ", ".join(obj.regions or []) or "-"

    @admin.display(description="clusters", ordering="clusters_count")
    def cluster_count(self, obj):
        return obj.clusters_count


class ClusterAdminForm(forms.ModelForm):
    def clean(self):
        cleaned = super().clean()
        if self.instance.pk is not None:
            try:
                refuse_loosening(self.instance, karpenter=cleaned.get("karpenter"), mode=cleaned.get("mode"))
            except ControlNotAllowed as exc:
                raise forms.ValidationError(f"control not allowed: {exc}") from None
        return cleaned


@admin.register(Cluster)
class ClusterAdmin(FleetAdminOnly, AuditedAdmin):
    form = ClusterAdminForm
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

    # Deleting a cluster is scheduling/loop/removal.py's removal, whose authority is the fleet administrator's
    # (has_delete_permission): not Django's delete permission on every row that goes with it, which
    # no role has for the rows only the loop writes (decisions, guards, totals, watch state).
    def get_actions(self, request):
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)  # one cluster at a time, through the confirmation page
        return actions

    def get_deleted_objects(self, objs, request):
        _, model_count, _, _ = super().get_deleted_objects(objs, request)
        kept = {str(model._meta.verbose_name_plural) for model in (AuditEntry, Decision, TaskRun)}
        model_count = {label: count for label, count in model_count.items() if str(label) not in kept}
        summary = [f"Cluster: {obj} — its mirrored Kubernetes objects, holds and watch state go; its decisions, "
                   "audit entries and task runs stay as history; its nodes and instances are not touched"
                   for obj in objs]
        return summary, model_count, set(), []

    def delete_model(self, request, obj):
        remove_cluster(obj.name, user=request.user, source=AuditEntry.Source.ADMIN)

    def delete_view(self, request, object_id, extra_context=None):
        try:
            return super().delete_view(request, object_id, extra_context)
        except RemovalError as exc:
            self.message_user(request, str(exc), messages.ERROR)
            return HttpResponseRedirect(reverse("admin:fleet_cluster_change", args=[object_id]))


@admin.register(RoleBinding)
class RoleBindingAdmin(FleetAdminOnly, AuditedAuthorityAdmin, admin.ModelAdmin):
    """Who holds which role where (fleet/access.py); every grant and removal audited."""

    list_display = ("__str__", "user", "group", "role", "account", "cluster", "created_at")
    list_filter = ("role", "account", "cluster")
    search_fields = ("user__username", "group", "cluster__name", "account__account_id")
    list_select_related = ("user", "account", "cluster")
    fields = ("user", "group", "role", "account", "cluster")
