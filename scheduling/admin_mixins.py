"""Admin plumbing shared by both apps: every add, change and delete lands in the audit log."""

from django.contrib import admin
from django.db import models

from fleet.models import Cluster
from fleet.scope import several_clusters
from scheduling.admin_forms import StorableJSONField
from scheduling.audit import diff, record_change
from scheduling.models import AuditEntry


class ClusterListFilter(admin.SimpleListFilter):
    """By cluster, on the lists of Kubernetes-side rows: shown only once the fleet has several
    clusters (a filter with no choices is not shown)."""

    title = "cluster"
    parameter_name = "cluster"

    def lookups(self, request, model_admin):
        if not several_clusters():
            return []
        return list(Cluster.objects.order_by("name").values_list("name", "name"))

    def queryset(self, request, queryset):
        return queryset.filter(cluster__name=self.value()) if self.value() else queryset


class ClusterFilterMixin:
    """Adds ClusterListFilter to a model admin whose model has a cluster."""

    def get_list_filter(self, request):
        filters = tuple(super().get_list_filter(request))
        if any(f.name == "cluster" for f in self.model._meta.concrete_fields):
            filters += (ClusterListFilter,)
        return filters


class AuditedAdmin(ClusterFilterMixin, admin.ModelAdmin):
    """Records who changed what (old and new values) for every admin write. JSON fields refuse what
    cannot be stored with a field error (scheduling/admin_forms.py)."""

    formfield_overrides = {models.JSONField: {"form_class": StorableJSONField}}

    def get_readonly_fields(self, request, obj=None):
        """A Kubernetes-side row stays in the cluster it was made in (fleet/scope.py): its cluster is
        chosen when it is added, then only shown."""
        fields = tuple(super().get_readonly_fields(request, obj))
        if obj is not None and any(f.name == "cluster" for f in self.model._meta.concrete_fields) \
                and "cluster" not in fields:
            fields += ("cluster",)
        return fields

    def audited_fields(self, form, change) -> list[str]:
        """The fields whose old and new values this save records (a subclass drops those it records elsewhere)."""
        return form.changed_data if change else list(form.cleaned_data)

    def save_model(self, request, obj, form, change):
        fields = self.audited_fields(form, change)
        before = {name: form.initial.get(name) for name in fields} if change else {}
        after = {name: form.cleaned_data.get(name) for name in fields}
        super().save_model(request, obj, form, change)
        changes = diff(before, after)
        if changes or not change:
            record_change(
                user=request.user, source=AuditEntry.Source.ADMIN, obj=obj,
                action=AuditEntry.Action.CHANGE if change else AuditEntry.Action.CREATE, changes=changes,
            )

    def delete_model(self, request, obj):
        record_change(user=request.user, source=AuditEntry.Source.ADMIN, obj=obj, action=AuditEntry.Action.DELETE)
        super().delete_model(request, obj)

    def delete_queryset(self, request, queryset):
        for obj in queryset:
            record_change(user=request.user, source=AuditEntry.Source.ADMIN, obj=obj, action=AuditEntry.Action.DELETE)
        super().delete_queryset(request, queryset)

    def record_bulk_change(self, request, queryset, field: str, new_value):
        """For admin actions: set one field on every row, recording each change."""
        for obj in queryset:
            old_value = getattr(obj, field)
            if old_value == new_value:
                continue
            setattr(obj, field, new_value)
            obj.save(update_fields=[field])
            record_change(
                user=request.user, source=AuditEntry.Source.ADMIN, obj=obj,
                action=AuditEntry.Action.CHANGE, changes=diff({field: old_value}, {field: new_value}),
            )


class ReadOnlyAdmin(ClusterFilterMixin, admin.ModelAdmin):
    """For records that only the system writes (the audit log itself, decisions, samples)."""

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
