"""The default manager of every Kubernetes-side model: the active cluster's rows inside a cluster
scope, the whole fleet outside one (fleet/scope.py).

Django builds related managers (`node_pool.nodes`, `node.pods`) and the admin's and DRF's querysets
from the default manager, so they follow the same rule. A ForeignKey read (`pod.node`) goes through
the base manager and is never filtered: a row's own links stay readable in any scope."""

from django.db import models

from fleet import scope


class ClusterScopedQuerySet(models.QuerySet):
    def in_cluster(self, cluster):
        """One cluster's rows, whatever scope is open (a Cluster or its primary key)."""
        return self.filter(cluster=cluster)


class ClusterScopedManager(models.Manager.from_queryset(ClusterScopedQuerySet)):
    """`Model.objects`: scoped. `Model.objects.fleet()`: every cluster's rows, whatever the scope."""

    def get_queryset(self):
        queryset = super().get_queryset()
        cluster_id = scope.current_cluster_id()
        return queryset if cluster_id is None else queryset.filter(cluster_id=cluster_id)

    def fleet(self):
        return super().get_queryset()


def scoped_manager(queryset_class: type[models.QuerySet]) -> ClusterScopedManager:
    """A scoped manager for a model that has a QuerySet class of its own (its methods stay)."""
    mixed = type(f"ClusterScoped{queryset_class.__name__}", (ClusterScopedQuerySet, queryset_class), {})
    return type(f"ClusterScoped{queryset_class.__name__}Manager", (ClusterScopedManager.from_queryset(mixed),), {})()


def cluster_field(related_name: str = "+", **kwargs) -> models.ForeignKey:
    """The `cluster` of a Kubernetes-side model: required, defaulting to the scope's cluster (else
    the default one), deleted with its cluster."""
    return models.ForeignKey("fleet.Cluster", on_delete=models.CASCADE, related_name=related_name,
                             default=scope.working_cluster_id, **kwargs)
