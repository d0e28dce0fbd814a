"""The fleet's pages: the accounts and clusters karpweb knows, each with its own page. They read
the whole fleet (no cluster scope, fleet/scope.py). Also the wrappers that give a Kubernetes-side
object's pages (unique per cluster and name) their cluster: `in_cluster` and `by_name`."""

import functools
from collections import defaultdict
from urllib.parse import quote

from django.db.models import Count
from django.http import Http404
from django.shortcuts import get_object_or_404, render
from django.urls import get_script_prefix, path
from django.views.generic import TemplateView

from fleet.access import visible_clusters
from fleet.filtersets import AwsAccountFilterSet, ClusterFilterSet
from fleet.models import AwsAccount, Cluster
from fleet.scope import cluster_name, cluster_named, cluster_scope, current_cluster, fleet_clusters, several_clusters
from fleet.tables import AwsAccountTable, ClusterTable
from scheduling.loop.health import failing_steps, with_health
from karpweb.jsonsafe import printable
from karpweb.roles import ViewerRequiredMixin, can_view
from karpweb.views_generic import ObjectListView
from reservations.models import CapacityReservation, EC2NodeClass, ReservationVisibility
from scheduling.models import Node, NodePool, Pod
from scheduling.templatetags.karpweb import freshness_note
from scheduling.totals import cluster_counts, freshness


class AwsAccountListView(ObjectListView):
    title = "AWS accounts"
    fleet_wide = True  # the fleet's own rows: "AWS accounts in all clusters" reads wrong
    filterset_class = AwsAccountFilterSet
    table_class = AwsAccountTable

    def get_queryset(self):
        return AwsAccount.objects.annotate(cluster_count=Count("clusters")).order_by("name")


class ClusterListView(ObjectListView):
    title = "Clusters"
    fleet_wide = True  # "Clusters in all clusters" reads wrong
    filterset_class = ClusterFilterSet
    table_class = ClusterTable
    def get_queryset(self):
        # Nodes and pods from each cluster's running totals (scheduling/totals.py), not counted per request.
        counts = cluster_counts()
        return with_health(Cluster.objects.select_related("account").annotate(
            node_count=counts["node_count"], pod_count=counts["pod_count"])).order_by("name")

    def get_context_data(self, **kwargs):
        from django.utils import timezone

        context = super().get_context_data(**kwargs)
        found = freshness(cluster_ids=[cluster.pk for cluster in visible_clusters(fleet_clusters())])
        return {**context, "totals_note": freshness_note("Nodes and pods", found, timezone.now())}


class AwsAccountDetailView(ViewerRequiredMixin, TemplateView):
    template_name = "fleet/account_detail.html"

    def get_context_data(self, account_id, **kwargs):
        context = super().get_context_data(**kwargs)
        account = get_object_or_404(AwsAccount, account_id=account_id)
        context.update(account=account, clusters=account.clusters.order_by("name"), **account_reservations(account))
        return context


def account_reservations(account) -> dict:
    """The reservations an account sees, each with the fleet's other accounts that see it: `owned` (each
    with `shared_with`, the accounts it is shared to) and `shared` (shared with it, each with its `owner`).
    Two queries whatever their number."""
    seen = list(CapacityReservation.objects.fleet().seen_by(account).select_related("owner_account")
                .only("reservation_id", "instance_type", "availability_zone", "reservation_type", "state",
                      "total_instance_count", "available_instance_count", "owner_id", "owner_account__name",
                      "owner_account__account_id", "interruptible_allocation").order_by("reservation_id"))
    others = defaultdict(list)
    for visibility in (ReservationVisibility.objects.filter(reservation__in=seen, shared=True)
                       .exclude(account=account).select_related("account").order_by("account__name")):
        others[visibility.reservation_id].append(visibility.account)
    for reservation in seen:
        reservation.shared_with = others[reservation.pk]
    return {"owned": [r for r in seen if r.owner_account_id == account.pk],
            "shared": [r for r in seen if r.owner_account_id != account.pk]}


class ClusterDetailView(ViewerRequiredMixin, TemplateView):
    template_name = "fleet/cluster_detail.html"

    def get_context_data(self, name, **kwargs):
        context = super().get_context_data(**kwargs)
        cluster = get_object_or_404(with_health(Cluster.objects.select_related("account")), name=name)
        counts = [(model._meta.verbose_name_plural, model.objects.fleet().filter(cluster=cluster).count())
                  for model in (EC2NodeClass, NodePool, Node, Pod)]
        context.update(cluster=cluster, counts=counts, failing_steps=failing_steps(cluster),
                       reservations=CapacityReservation.objects.fleet().visible_to(cluster).count())
        return context


# --- a Kubernetes-side object's pages: /clusters/<cluster>/<its route> and the route without a cluster ---

def in_cluster(view):
    """`view` at /clusters/<cluster>/...: the object's page in that cluster, whatever cluster the
    header's menu chose (the heading says which; the menu's choice is left as it was)."""

    @functools.wraps(view)
    def wrapped(request, cluster, **kwargs):
        found = cluster_named(cluster)
        if found is None:
            raise Http404(f'cluster: no cluster is named "{printable(cluster, 63)}"')
        fleet = getattr(request, "fleet", None)
        if fleet is not None:
            fleet.shown = found
        with cluster_scope(found):
            return view(request, **kwargs)

    return wrapped


def by_name(view, model, *fields):
    """`view` at its route without a cluster (the links before the fleet, bookmarks): in a fleet of one
    it answers as it always did. With several clusters the object is looked for by `fields` in the
    chosen cluster (or all): one found, the view answers in its cluster (old links and bookmarks keep
    working, whatever the method); several found, 300 with a link to each cluster's; none, 404 naming
    the clusters that do have one."""

    @functools.wraps(view)
    def wrapped(request, **kwargs):
        if not several_clusters() or not can_view(request.user):
            return view(request, **kwargs)  # as it always answered (one cluster), or its sign-in / 403
        lookup = {field: kwargs[field] for field in fields}
        label = "/".join(kwargs[field] for field in fields)
        kind = model._meta.verbose_name
        clusters = sorted({cluster_name(pk) for pk in model.objects.filter(**lookup).values_list("cluster_id", flat=True)})
        if len(clusters) == 1:  # the only one of that name: its page, as the link always showed
            if (fleet := getattr(request, "fleet", None)) is not None:
                fleet.shown = cluster_named(clusters[0])
            with cluster_scope(clusters[0]):
                return view(request, **kwargs)
        shown = current_cluster()
        if not clusters and shown is not None:
            elsewhere = sorted({cluster_name(pk) for pk in
                                model.objects.fleet().filter(**lookup).values_list("cluster_id", flat=True)})
            message = (f'{kind}: cluster "{shown.name}" has no {kind} "{label}"'
                       + (f"; {', '.join(elsewhere)} {'has' if len(elsewhere) == 1 else 'have'} one" if elsewhere else ""))
            return _choices(request, message, elsewhere, status=404)
        if not clusters:
            return view(request, **kwargs)  # its own 404
        message = (f'{kind}: {len(clusters)} clusters have a {kind} "{label}" ({", ".join(clusters)}); '
                   "choose the cluster")
        return _choices(request, message, clusters, status=300)

    return wrapped


def object_routes(route: str, view, name: str, model, *fields: str) -> list:
    """A Kubernetes-side object's page twice: /clusters/<cluster>/<route> (its links in a fleet of
    several, karpweb.urlcache.cluster_detail_url) and <route> (a fleet of one, old links: by_name)."""
    return [path(f"clusters/<str:cluster>/{route}", in_cluster(view), name=name),
            path(route, by_name(view, model, *fields), name=name)]


def _in_cluster_path(request, cluster: str) -> str:
    """This request's URL under /clusters/<cluster>/, its query kept."""
    prefix = get_script_prefix()
    path = f"{prefix}clusters/{quote(cluster, safe='')}/{request.path[len(prefix):]}"
    query = request.META.get("QUERY_STRING", "")
    return f"{path}?{query}" if query else path


def _choices(request, message: str, clusters: list[str], status: int):
    links = [(name, _in_cluster_path(request, name)) for name in clusters]
    return render(request, "fleet/choose_cluster.html", {"message": message, "links": links}, status=status)
