"""The default manager of every Kubernetes-side model: the active cluster's rows inside a cluster
scope, the whole fleet outside one (fleet/scope.py). In loop code (a step, the watch) a query or a
save with neither a cluster scope nor an explicit `unscoped()` raises NoClusterScope
(fleet.scope.require_scope); `Model.objects.fleet()` says fleet-wide itself.

Django builds related managers (`node_pool.nodes`, `node.pods`) and the admin's and DRF's querysets
from the default manager, so they follow the same rule. A ForeignKey read (`pod.node`) goes through
the base manager and is never filtered: a row's own links stay readable in any scope."""

from django.db import models

from fleet import access, scope


class ClusterScopedQuerySet(access.RequesterQuerySet):
    def requester_q(self, requester):
        return access.in_scope_clusters(requester)

    def in_cluster(self, cluster):
        """One cluster's rows, whatever scope is open (a Cluster or its primary key)."""
        return self.filter(cluster=cluster)

    def bulk_create(self, objs, *args, **kwargs):
        """Rows without a cluster get the working one (bulk_create sends no pre_save signal)."""
        objs = list(objs)
        fill_clusters(self.model, objs)
        return super().bulk_create(objs, *args, **kwargs)


class ClusterScopedManager(models.Manager.from_queryset(ClusterScopedQuerySet)):
    """`Model.objects`: scoped. `Model.objects.fleet()`: every cluster's rows, whatever the scope."""

    def get_queryset(self):
        queryset = self.fleet()
        cluster_id = scope.current_cluster_id()
        if cluster_id is None:
            scope.require_scope(self.model)
            return queryset
        return queryset.filter(cluster_id=cluster_id)

    def fleet(self):
        """Every cluster's rows (those the requester may see: fleet/access.py), whatever the cluster scope."""
        return super().get_queryset()


def scoped_manager(queryset_class: type[models.QuerySet]) -> ClusterScopedManager:
    """A scoped manager for a model that has a QuerySet class of its own (its methods stay)."""
    mixed = type(f"ClusterScoped{queryset_class.__name__}", (ClusterScopedQuerySet, queryset_class), {})
    return type(f"ClusterScoped{queryset_class.__name__}Manager", (ClusterScopedManager.from_queryset(mixed),), {})()


def cluster_field(related_name: str = "+", **kwargs) -> models.ForeignKey:
    """The `cluster` of a Kubernetes-side model: required in the database, deleted with its cluster.
    A row written without one gets the working cluster (fleet.scope.working_cluster_id) as it is
    saved or bulk-created, not as it is made: an unsaved object (a what-if's, a test's) needs no
    database and no cluster. Forms may leave it blank for the same reason."""
    kwargs.setdefault("on_delete", models.CASCADE)
    return models.ForeignKey("fleet.Cluster", related_name=related_name, blank=True, **kwargs)


def fill_clusters(model, objs) -> None:
    """Give each of `objs` without a cluster the working cluster (None where the model allows a
    fleet-wide row and no cluster can be told)."""
    missing = [obj for obj in objs if obj.cluster_id is None]
    if not missing:
        return
    field = model._meta.get_field("cluster")
    cluster_id = scope.working_cluster_id_or_none() if field.null else scope.working_cluster_id()
    for obj in missing:
        obj.cluster_id = cluster_id


def fill_cluster_on_save(sender, instance, raw=False, **kwargs) -> None:
    """pre_save of every model whose default manager is a ClusterScopedManager (fleet.apps)."""
    if not raw:
        scope.require_scope(sender)
        fill_clusters(sender, [instance])
