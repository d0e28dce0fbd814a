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
    audit_as_decision = True  # also a manual override on the decisions page (False: the audit log alone)

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
                as_decision=self.audit_as_decision,
            )

    def delete_model(self, request, obj):
        record_change(user=request.user, source=AuditEntry.Source.ADMIN, obj=obj, action=AuditEntry.Action.DELETE,
                      as_decision=self.audit_as_decision)
        super().delete_model(request, obj)

    def delete_queryset(self, request, queryset):
        for obj in queryset:
            record_change(user=request.user, source=AuditEntry.Source.ADMIN, obj=obj, action=AuditEntry.Action.DELETE,
                          as_decision=self.audit_as_decision)
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


EC2_NOTE = ("Mirrored from EC2: the next sync overwrites any change made here, so these fields are read-only. "
            "Change the reservation in EC2 (or apply a recommendation).")
KUBERNETES_NOTE = ("Mirrored from Kubernetes: the next sync overwrites any change made here, so these fields are "
                   "read-only. Change the object in the cluster.")
SPEC_NOTE_CLUSTER = ("The object's spec, mirrored from the cluster: the next sync overwrites any change made here, "
                     "so these fields are read-only. Change it with kubectl.")
SPEC_NOTE_SIMULATED = ("The object's spec. On a real cluster the next sync overwrites these (they are read-only "
                       "there); in the simulated world these rows are the cluster, so they are edited here.")
KARPWEB_NOTE = "karpweb's own settings: no sync touches them. Every change is audited."


def model_fields(model, *, exclude=()) -> tuple[str, ...]:
    """The editable concrete fields of a model, in declaration order (the id left out)."""
    return tuple(f.name for f in model._meta.fields if f.editable and not f.primary_key and f.name not in exclude)


class MirroredAdmin(AuditedAdmin):
    """An admin for a model the sync mirrors from EC2 or Kubernetes: the `mirrored` fields are shown,
    never in the form (the next sync would overwrite an edit), each fieldset saying so; `spec`
    fields are read-only where a real cluster owns them; what karpweb owns stays editable."""

    mirrored: tuple[str, ...] = ()
    spec: tuple[str, ...] = ()  # read-only where a real cluster owns the object (its cluster's connection)

    @staticmethod
    def cluster_owns_spec(obj=None) -> bool:
        """Whether the object's own cluster (a new object: the settings' cluster) is a real API server."""
        from scheduling.adapters.kube.clusters import owns_its_objects

        return owns_its_objects(obj.cluster if getattr(obj, "cluster_id", None) else None)

    def get_readonly_fields(self, request, obj=None):
        fields = [*super().get_readonly_fields(request, obj), *self.mirrored]
        if self.cluster_owns_spec(obj):
            fields += self.spec
        return tuple(dict.fromkeys(fields))

    def has_delete_permission(self, request, obj=None):
        # Only where these rows are the cluster (the simulated world): elsewhere the next sync brings a
        # deleted row back, and the object stays in the cluster.
        return not self.cluster_owns_spec(obj) and super().has_delete_permission(request, obj)

    @staticmethod
    def spec_note(obj=None) -> str:
        return SPEC_NOTE_CLUSTER if MirroredAdmin.cluster_owns_spec(obj) else SPEC_NOTE_SIMULATED


class FullyMirroredAdmin(MirroredAdmin):
    """Every field mirrored (NodeClaims, Nodes, Pods, the catalogue): a page to read, none added, changed
    or deleted here (the next sync would bring a deleted row back; no dead Delete button)."""

    note = KUBERNETES_NOTE

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    def get_readonly_fields(self, request, obj=None):
        return tuple(dict.fromkeys([*super().get_readonly_fields(request, obj), *model_fields(self.model)]))

    def get_fieldsets(self, request, obj=None):
        return [("Mirrored", {"description": self.note, "fields": model_fields(self.model)})]


class AuditedAuthorityAdmin:
    """For rows that say who may do what, and when (users, groups, periodic tasks): every add, change
    and delete in the audit log with who, what and from where. Related rows (a user's groups, a
    group's permissions) are recorded by name, after they are saved; passwords never."""

    def save_related(self, request, form, formsets, change):
        super().save_related(request, form, formsets, change)
        fields = [name for name in (form.changed_data if change else form.cleaned_data) if "password" not in name]
        before = {name: _plain(form.initial.get(name)) for name in fields} if change else {}
        changes = diff(before, {name: _plain(form.cleaned_data.get(name)) for name in fields})
        if changes or not change:
            self._audit(request, form.instance, AuditEntry.Action.CHANGE if change else AuditEntry.Action.CREATE,
                        changes)

    def delete_model(self, request, obj):
        self._audit(request, obj, AuditEntry.Action.DELETE, {})
        super().delete_model(request, obj)

    def delete_queryset(self, request, queryset):
        for obj in queryset:
            self._audit(request, obj, AuditEntry.Action.DELETE, {})
        super().delete_queryset(request, queryset)

    def _audit(self, request, obj, action, changes):
        from karpweb.clientaddr import client_address

        record_change(user=request.user, source=AuditEntry.Source.ADMIN, obj=obj, action=action, as_decision=False,
                      changes={**changes, "ip_address": [None, client_address(request)]})


def _plain(value):
    """Related rows by name (sorted), anything else as it is."""
    if isinstance(value, (list, tuple, models.QuerySet)):
        return sorted(str(item) for item in value)
    return str(value) if isinstance(value, models.Model) else value
