"""The fleet overview (/fleet/): every account and cluster on one page, whatever cluster the header
shows. Its accounts, its clusters (mode, Karpenter, nodes, pending pods, when each was last synced),
every reservation with the accounts that see it and the clusters whose nodes run in it, idle prepaid
cost per hour, the Capacity Blocks that end soonest, the loop's failing steps and the top
recommendations. A fixed number of queries whatever the fleet's size (tests/fleet/test_overview.py);
the clusters' nodes and pending pods and the reservations' nodes by cluster are the running totals
each cluster's last loop step counted (scheduling/totals.py), not a count of the fleet's rows."""

from collections import defaultdict

from django.db.models import Case, CharField, Count, F, IntegerField, OuterRef, Q, Subquery, Value, When
from django.db.models.functions import Coalesce
from django.template.defaultfilters import pluralize
from django.utils import timezone
from django.views.generic import TemplateView

from fleet.models import AwsAccount, Cluster
from fleet.scope import unscoped
from karpweb.roles import ViewerRequiredMixin
from reservations.commitments import price_words
from reservations.models import CapacityReservation, PriceCommitments, Recommendation, ReservationVisibility
from reservations.views import upcoming_capacity_blocks
from scheduling.loop.health import failing_steps, health_annotations, loop_health
from scheduling.models import ControllerGuard, KarpenterLaunch, WatchState
from scheduling.modes import configured_mode
from reservations.block_fees import idle_value
from scheduling.adapters.ec2.client import setting
from scheduling.queries import capacity_totals, on_demand_prices
from scheduling.templatetags.karpweb import freshness_note, utc_minute
from scheduling.totals import cluster_counts, nodes_by_reservation

BLOCKS_SHOWN = 5
# The reservations listed: those idling the most money first (the totals count every one).
RESERVATIONS_SHOWN = 25
RECOMMENDATIONS_SHOWN = 5


def _per_cluster(queryset, value=None):
    """A correlated subquery over one of the fleet's Kubernetes-side rows per cluster: their count, or a
    field of the cluster's one row (`value`)."""
    rows = queryset.filter(cluster=OuterRef("pk")).order_by()
    if value is not None:
        return Subquery(rows.values(value)[:1])
    return Coalesce(Subquery(rows.values("cluster").annotate(n=Count("pk")).values("n"), output_field=IntegerField()), 0)


def _commitments(field):
    """A field of the cluster's account and region's PriceCommitments row (a blank region: the settings')."""
    rows = PriceCommitments.objects.filter(account_id=OuterRef("account__account_id"), region=OuterRef("ec2_region"))
    return Subquery(rows.values(field)[:1])


def fleet_clusters():
    """Every cluster with its account, node count and pending pods (its running totals, as its last loop
    step counted them: scheduling/totals.py), last sync and Karpenter check, and the commitments its
    prices know (zonal RIs, Savings Plans: reservations/commitments.py); one query."""
    counts = cluster_counts()
    default_region = setting("KARPWEB_AWS_REGION") or setting("AWS_REGION") or setting("AWS_DEFAULT_REGION") or ""
    return list(Cluster.objects.select_related("account").annotate(
        ec2_region=Case(When(region="", then=Value(default_region)), default=F("region"),
                        output_field=CharField())).annotate(
        commitments_read_at=_commitments("read_at"), commitment_ris=_commitments("reserved_instances"),
        commitment_plans=_commitments("savings_plans"), commitment_refusals=_commitments("list_prices_because"),
        node_count=counts["node_count"], pending_pods=counts["pending_pods"], totals_at=counts["totals_at"],
        world_as_of=_per_cluster(WatchState.objects.fleet(), "world_as_of"),
        karpenter_live=_per_cluster(ControllerGuard.objects.fleet(), "karpenter_live"),
        karpenter_checked_at=_per_cluster(ControllerGuard.objects.fleet(), "checked_at"),
        karpenter_reason=_per_cluster(ControllerGuard.objects.fleet(), "reason"),
        karpenter_launch_count=_per_cluster(KarpenterLaunch.objects.fleet()),
        **health_annotations(),
    ).order_by("name"))


def karpenter_presence(cluster) -> str:
    """Whether Karpenter runs in it, in words: as declared, else what the last check found (its leader
    Lease and Deployment, at each Kubernetes sync: scheduling/loop/coexistence.py) and when; a simulated
    cluster has no Karpenter to check (nothing ever checks it). Then what the Karpenter audit found:
    the NodeClaims karpweb did not create."""
    if cluster.karpenter != Cluster.Karpenter.AUTO:
        found = f"{cluster.karpenter} (declared)"
    elif cluster.karpenter_checked_at is not None:
        found = (f"{'running' if cluster.karpenter_live else 'not running'}"
                 f"{': ' + cluster.karpenter_reason if cluster.karpenter_reason else ''}"
                 f" (checked {utc_minute(cluster.karpenter_checked_at)} UTC)")
    elif cluster.connection == Cluster.Connection.SIMULATED:
        found = "none: a simulated cluster, where karpweb is the only controller"
    else:
        found = "not checked yet: its first Kubernetes sync checks"
    launched = getattr(cluster, "karpenter_launch_count", 0) or 0
    if launched:
        found += f"; the audit found {launched} NodeClaim{pluralize(launched)} karpweb did not create"
    return found


def _reading(cluster) -> PriceCommitments | None:
    """The cluster's annotated commitments as the row they came from (None: never read)."""
    if cluster.commitments_read_at is None:
        return None
    return PriceCommitments(reserved_instances=cluster.commitment_ris or [], savings_plans=cluster.commitment_plans or [],
                            list_prices_because=cluster.commitment_refusals or [], read_at=cluster.commitments_read_at)


class FleetOverviewView(ViewerRequiredMixin, TemplateView):
    template_name = "fleet/overview.html"

    def get(self, request, *args, **kwargs):
        # The whole fleet whatever the header's choice: rendered inside the fleet-wide scope, so a
        # lazy read in the template is not narrowed to the chosen cluster either.
        with unscoped():
            response = super().get(request, *args, **kwargs)
            return response.render()

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        now = timezone.now()
        clusters = fleet_clusters()  # Cluster.objects: the clusters the requester sees
        for cluster in clusters:
            cluster.karpenter_text = karpenter_presence(cluster)
            cluster.shown_mode = cluster.mode or configured_mode()
            cluster.failing_steps = failing_steps(cluster)
            cluster.prices = price_words(_reading(cluster))["words"]
        accounts = list(AwsAccount.objects.annotate(
            owned=Count("visible_reservations", filter=Q(visible_reservations__shared=False), distinct=True),
            shared_in=Count("visible_reservations", filter=Q(visible_reservations__shared=True), distinct=True),
        ).order_by("name"))
        clusters_of = defaultdict(list)
        for cluster in clusters:
            clusters_of[cluster.account_id].append(cluster)
        for account in accounts:
            account.fleet_clusters = clusters_of[account.pk]

        usable = list(CapacityReservation.objects.usable(now).only(
            "reservation_id", "instance_type", "availability_zone", "total_instance_count", "available_instance_count",
            "state", "start_date", "end_date", "reservation_type", "owner_id", "region",
            "interruptible_allocation").order_by("reservation_id"))  # used leaves lent units out
        prices = on_demand_prices({r.instance_type for r in usable})
        totals = capacity_totals(usable, prices, now)
        for reservation in usable:
            reservation.idle = idle_value(reservation, prices, now)
            reservation.idle_cost = reservation.idle.cost
        reservations = sorted(usable, key=lambda r: -(r.idle_cost or 0.0))[:RESERVATIONS_SHOWN]
        seen_by = defaultdict(list)
        for visibility in ReservationVisibility.objects.filter(reservation__in=[r.pk for r in reservations]) \
                .select_related("account").order_by("account__name"):
            seen_by[visibility.reservation_id].append(visibility)
        names = {cluster.pk: cluster.name for cluster in clusters}
        used_by = defaultdict(dict)
        uncounted = [cluster.pk for cluster in clusters if cluster.totals_at is None]
        for reservation_id, cluster_id, count in nodes_by_reservation([r.pk for r in reservations], uncounted):
            used_by[reservation_id][names.get(cluster_id, "?")] = count
        for reservation in reservations:
            reservation.owner = next((v.account for v in seen_by[reservation.pk] if not v.shared), None)
            # Written here, not looped over in the template: at 50 clusters a reservation is used by dozens.
            reservation.shared_with = ", ".join(v.account.name for v in seen_by[reservation.pk] if v.shared)
            reservation.nodes_by_cluster = ", ".join(f"{name}: {count}" for name, count in sorted(used_by[reservation.pk].items()))

        open_recommendations = list(Recommendation.objects.filter(state=Recommendation.State.OPEN, advised=True)
                                    .select_related("reservation").order_by("-savings_per_month", "kind", "id"))
        failing = [step for step in loop_health(now) if step.problem]
        counted = [cluster.totals_at for cluster in clusters if cluster.totals_at is not None]
        context.update(
            now=now, accounts=accounts, clusters=clusters,
            totals_note=freshness_note("Nodes and pending pods", {"oldest": min(counted, default=None),
                                                                  "uncounted": len(clusters) - len(counted)}, now), reservations=reservations,
            more_reservations=len(usable) - len(reservations),
            used=totals["used"], idle=totals["idle"], total=totals["total"], idle_cost=totals["idle_cost"], idle_sources=totals["idle_sources"],
            unpriced=totals["unpriced"],
            blocks=upcoming_capacity_blocks(now, with_nodes=False)[:BLOCKS_SHOWN],
            failing_steps=failing,
            failing_clusters=[cluster for cluster in clusters if cluster.failing_steps],
            # The one money rule: monthly savings ranked, one-off extensions counted apart, never summed.
            top_recommendations=[rec for rec in open_recommendations if rec.is_monthly][:RECOMMENDATIONS_SHOWN],
            one_off_recommendations=sum(1 for rec in open_recommendations if rec.money == "one-off"),
        )
        return context
