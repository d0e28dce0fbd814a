"""The fleet's pages: the accounts and clusters karpweb knows, each with its own page. They read
the whole fleet (no cluster scope, fleet/scope.py)."""

from django.db.models import Count, OuterRef, Subquery
from django.db.models.functions import Coalesce
from django.shortcuts import get_object_or_404
from django.views.generic import TemplateView

from fleet.filtersets import AwsAccountFilterSet, ClusterFilterSet
from fleet.models import AwsAccount, Cluster
from fleet.tables import AwsAccountTable, ClusterTable
from karpweb.roles import ViewerRequiredMixin
from karpweb.views_generic import ObjectListView
from reservations.models import CapacityReservation, EC2NodeClass
from scheduling.models import Node, NodePool, Pod


def _count(model):
    """How many of a Kubernetes-side model's rows each cluster has (a subquery, so no join fans out)."""
    rows = model.objects.fleet().filter(cluster=OuterRef("pk")).order_by().values("cluster")
    return Coalesce(Subquery(rows.annotate(n=Count("pk")).values("n")), 0)


class AwsAccountListView(ObjectListView):
    title = "AWS accounts"
    filterset_class = AwsAccountFilterSet
    table_class = AwsAccountTable

    def get_queryset(self):
        return AwsAccount.objects.annotate(cluster_count=Count("clusters")).order_by("name")


class ClusterListView(ObjectListView):
    title = "Clusters"
    filterset_class = ClusterFilterSet
    table_class = ClusterTable

    def get_queryset(self):
        return Cluster.objects.select_related("account").annotate(
            node_count=_count(Node), pod_count=_count(Pod)).order_by("name")


class AwsAccountDetailView(ViewerRequiredMixin, TemplateView):
    template_name = "fleet/account_detail.html"

    def get_context_data(self, account_id, **kwargs):
        context = super().get_context_data(**kwargs)
        account = get_object_or_404(AwsAccount, account_id=account_id)
        seen = CapacityReservation.objects.fleet().seen_by(account)
        context.update(account=account, clusters=account.clusters.order_by("name"),
                       owned=seen.filter(owner_account=account).count(), shared=seen.exclude(owner_account=account).count())
        return context


class ClusterDetailView(ViewerRequiredMixin, TemplateView):
    template_name = "fleet/cluster_detail.html"

    def get_context_data(self, name, **kwargs):
        context = super().get_context_data(**kwargs)
        cluster = get_object_or_404(Cluster.objects.select_related("account"), name=name)
        counts = [(model._meta.verbose_name_plural, model.objects.fleet().filter(cluster=cluster).count())
                  for model in (EC2NodeClass, NodePool, Node, Pod)]
        context.update(cluster=cluster, counts=counts,
                       reservations=CapacityReservation.objects.fleet().visible_to(cluster).count())
        return context
