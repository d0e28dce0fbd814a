import datetime
import json
from collections import defaultdict

from django.conf import settings
from django.db.models import Count, Prefetch, Sum
from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.urls import reverse
from django.utils.http import urlencode
from django.utils import timezone
from django.views import View
from django.views.generic import TemplateView

from fleet.scope import current_cluster
from karpweb.csvexport import CsvExport
from karpweb.jsonsafe import printable
from karpweb.roles import OperatorRequiredMixin, ViewerRequiredMixin
from karpweb.urlcache import cluster_detail_url
from karpweb.views_generic import ObjectListView
from reservations.forms import EditorInputError, RecommendationApplyForm, UsageRangeForm, apply_action, editor_rows, terms_from_post
from reservations.selector_terms import (
    InvalidSelectorTerms,
    SelectorTermConflict,
    preview,
    save_selector_terms,
    terms_diff,
    validation_problems,
)
from reservations import exports
from reservations.filtersets import (BuyAdviceFilterSet, CapacityReservationFilterSet, EC2NodeClassFilterSet,
                                     RecommendationFilterSet)
from reservations.doctor import active_findings
from reservations.models import (
    BuyAdvice, CapacityReservation, CapacityReservationGroup, DoctorFinding, EC2NodeClass, OpenReservationInstance, Recommendation,
    UtilizationHour, hour_of,
)
from reservations.recommendation_actions import APPLICABLE, CONFIRM_NOT_ADVISED, ApplyRefused, cli_command, share_command
from reservations.recommendations import policy_from_settings
from reservations.holders import reserved_units_held
from reservations.utilization import hourly_span
from scheduling.engine.doctor import SEVERITIES
from scheduling.engine.recommendations import Hour, history_days, needed_days
from scheduling.pod_placement import classes_selecting
from scheduling.upcoming import upcoming_uses
from reservations.recommendation_actions import apply as apply_recommendation
from reservations.open_mode import OpenModeConflict, set_open_mode
from reservations.tables import BuyAdviceTable, CapacityReservationTable, EC2NodeClassTable, RecommendationTable
from scheduling.engine.groups import group_arns
from scheduling.engine.instances import instance_id
from scheduling.models import AuditEntry, Mode, Node
from scheduling.modes import control_refusal, global_mode
from reservations.block_fees import attach_fees, idle_value
from scheduling.queries import idle_cost_per_hour, on_demand_prices

CHART_DAYS = datetime.timedelta(days=7)  # hourly means
BLOCK_NODES_SHOWN = 5  # node names per block on the countdown page


class ReservationListView(ObjectListView):
    title = "Capacity reservations"
    filterset_class = CapacityReservationFilterSet
    table_class = CapacityReservationTable
    refreshes = True
    csv_exports = {"csv": CsvExport("reservations", "CSV", exports.RESERVATION_COLUMNS, exports.reservation_rows),
                   "hours": CsvExport("reservation-hours", "hourly use CSV", exports.HOUR_COLUMNS, exports.hour_rows)}

    def get_queryset(self):
        # The table shows neither tags nor allocations (JSON): not read, not decoded.
        return CapacityReservation.objects.with_recent_utilization().defer("tags", "capacity_allocations").order_by("reservation_id")


class ReservationDetailView(ViewerRequiredMixin, TemplateView):
    template_name = "reservations/reservation_detail.html"

    def get_context_data(self, reservation_id, **kwargs):
        context = super().get_context_data(**kwargs)
        now = timezone.now()
        reservation = get_object_or_404(
            CapacityReservation.objects.with_recent_utilization(now).prefetch_related("node_classes"),
            reservation_id=reservation_id,
        )
        hours = list(reservation.hours.filter(hour__gte=hour_of(now - CHART_DAYS)).order_by("hour"))
        chart = {
            "x": [row.hour.isoformat() for row in hours],
            "used": [round(row.used, 1) for row in hours],
            "available": [round(row.available, 1) for row in hours],
            "total": [round(row.total, 1) for row in hours],
        }
        chart_span = hourly_span([row.hour for row in hours])
        nodes = reservation.nodes.select_related("node_pool", "node_claim").order_by("name")
        prices = on_demand_prices([reservation.instance_type])
        context.update(
            reservation=reservation,
            timing=reservation.timing,
            nodes=nodes,
            open_instances=open_instance_nodes(reservation.open_instances.order_by("instance_id")),
            instances=reservation.instances.select_related("cluster").order_by("instance_id"),
            groups=reservation.groups.order_by("arn"),
            # The same rule "NodePools that will use it" (scheduling.upcoming) follows: one not started yet is
            # selected by the classes whose terms will select it once active.
            node_classes=classes_selecting(now, reservation),
            chart=chart,
            chart_span=chart_span,
            low_utilization=reservation.is_low_utilization(now),
            idle=idle_value(reservation, prices, now),
            recommendations=reservation.recommendations.filter(state=Recommendation.State.OPEN),
            last_reclaim=reservation.recommendations.filter(kind=Recommendation.Kind.RECLAIM).order_by("-computed_at", "-id").first(),
            fleet_use=reservation.uses.order_by("-sampled_at").first(),  # the fleet ledger (reservations/ledger.py)
            contentions=reservation.contentions.select_related("cluster")[:20],
            doctor=active_findings().filter(reservation_id=reservation.reservation_id).select_related("cluster"),
            now=now,
            upcoming=reservation.is_upcoming(now),
            upcoming_use=(upcoming_uses(now, [reservation]) or [None])[0] if reservation.is_upcoming(now) else None,
            **history_for_recommendations(reservation, now),
        )
        return context


def history_for_recommendations(reservation, now) -> dict:
    """How many days of the hourly use the use-based recommendations need this reservation has: with
    fewer, "no recommendation" means "not enough history yet", not "its use calls for no change"."""
    needed = needed_days(reservation.reservation_type, policy_from_settings())
    if needed is None:
        return {"history_needed": None, "history_days": None, "history_short": False}
    policy = policy_from_settings()
    starts = reservation.hours.filter(hour__gte=now - datetime.timedelta(days=needed), hour__lt=now).values_list("hour", flat=True)
    days, enough = history_days([Hour(h, 0, 0) for h in starts], now, needed, policy.coverage)
    return {"history_needed": needed, "history_days": days, "history_short": not enough}


def upcoming_capacity_blocks(now, *, with_nodes=True):
    """Active capacity blocks that have not ended, soonest end first, each with `node_count` and
    (`with_nodes`) the first names of the nodes in it and `more_nodes`, how many are not listed."""
    blocks = (
        CapacityReservation.objects.filter(
            reservation_type=CapacityReservation.ReservationType.CAPACITY_BLOCK,
            state=CapacityReservation.State.ACTIVE,
            end_date__gt=now,
        )
        .annotate(node_count=Count("nodes"))
        .defer("tags", "capacity_allocations")
        .order_by("end_date")
    )
    if with_nodes:
        # Only what the page shows: the first names of each block's nodes (the rest are on its page).
        shown = Node.objects.only("pk", "name", "reservation_id", "cluster_id").order_by("name")[:BLOCK_NODES_SHOWN]
        blocks = blocks.prefetch_related(Prefetch("nodes", queryset=shown, to_attr="shown_nodes"))  # sliced: needs to_attr
    blocks = list(blocks)
    for block in blocks:
        block.more_nodes = max(0, block.node_count - BLOCK_NODES_SHOWN) if with_nodes else 0
    return [(block, block.timing) for block in blocks]


# The by-cluster chart's colours, in turn (the same palette order as the other charts start with).
PALETTE = ["#2f6fde", "#12b76a", "#f79009", "#7a5af8", "#ee46bc", "#06aed4", "#f04438", "#667085"]


class UsageView(ViewerRequiredMixin, TemplateView):
    """Reserved units over a time range (24 hours, 7 days, 30 days or custom): used and idle, and used
    per cluster of the fleet; and who holds the reserved units now, by namespace and by team label."""

    template_name = "reservations/usage.html"

    def get(self, request, *args, **kwargs):
        form = UsageRangeForm(request.GET or None)
        if form.is_bound and not form.is_valid():
            return self.render_to_response(self.get_context_data(form=form), status=400)
        return self.render_to_response(self.get_context_data(form=form))

    def get_context_data(self, form, **kwargs):
        context = super().get_context_data(**kwargs)
        now = timezone.now()
        if form.is_bound and not form.is_valid():
            return {**context, "form": form}
        since, until = form.window(now) if form.is_bound else (now - UsageRangeForm.RANGES["24h"], now)
        hours = UtilizationHour.objects.filter(hour__gte=hour_of(since), hour__lt=until)
        if current_cluster() is not None:  # the header's cluster: the reservations its account sees
            hours = hours.filter(reservation__in=CapacityReservation.objects.all())
        used, total, clusters = defaultdict(float), defaultdict(float), defaultdict(lambda: defaultdict(float))
        for hour, hour_used, hour_total, per_cluster in hours.values_list("hour", "used", "total", "clusters"):
            used[hour] += hour_used
            total[hour] += hour_total
            for name, units in (per_cluster or {}).items():
                clusters[name][hour] += units
        x = sorted(used)
        names = sorted(clusters)
        by_cluster = {"x": [h.isoformat() for h in x]}
        for index, name in enumerate(names):
            by_cluster[f"c{index}"] = [round(clusters[name][h], 2) for h in x]
        by_cluster["other"] = [round(max(0.0, used[h] - sum(clusters[n][h] for n in names)), 2) for h in x]
        series = [[f"c{index}", name, PALETTE[index % len(PALETTE)]] for index, name in enumerate(names)]
        held = reserved_units_held(settings.KARPWEB_TEAM_LABEL)
        context.update(
            form=form, since=since, until=until, chosen=(form.cleaned_data.get("range") if form.is_bound else "") or "24h",
            span=hourly_span(x),
            chart={"x": by_cluster["x"], "used": [round(used[h], 1) for h in x],
                   "idle": [round(total[h] - used[h], 1) for h in x]},
            by_cluster=by_cluster,
            by_cluster_series=json.dumps(series + [["other", "no cluster of the fleet", "#98a2b3"]]),
            team_label=settings.KARPWEB_TEAM_LABEL,
            by_namespace=held["namespace"], by_team=held["team"],
            held_total=sum(units for _, units in held["namespace"]),
        )
        return context


class CapacityBlockView(ViewerRequiredMixin, TemplateView):
    template_name = "reservations/capacity_blocks.html"

    def get_template_names(self):
        if self.request.htmx:
            return ["htmx/capacity_block_countdowns.html"]
        return [self.template_name]

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        now = timezone.now()
        context.update(blocks=upcoming_capacity_blocks(now), now=now)
        return context


class NodeClassListView(ObjectListView):
    title = "EC2NodeClasses"
    filterset_class = EC2NodeClassFilterSet
    table_class = EC2NodeClassTable

    def get_queryset(self):
        return EC2NodeClass.objects.annotate(
            reservation_count=Count("selected_reservations", distinct=True), pool_count=Count("node_pools", distinct=True)
        ).order_by("name")


class NodeClassDetailView(ViewerRequiredMixin, TemplateView):
    template_name = "reservations/nodeclass_detail.html"

    def get_context_data(self, name, **kwargs):
        context = super().get_context_data(**kwargs)
        node_class = get_object_or_404(EC2NodeClass, name=name)
        context.update(
            node_class=node_class,
            groups=groups_of(node_class),
            # By name, then only those whose node is this cluster's (another may have a node of the name).
            open_instances=[i for i in open_instance_nodes(OpenReservationInstance.objects.filter(
                node_name__in=Node.objects.filter(node_pool__node_class=node_class).values("name")
            ).select_related("reservation").order_by("instance_id")) if i.node_cluster_id in (None, node_class.cluster_id)],
            reservations=node_class.selected_reservations.order_by("reservation_id"),
            pools=node_class.node_pools.order_by("-weight", "name"),
            terms_json=json.dumps(node_class.capacity_reservation_selector_terms, indent=2),
            doctor=active_findings().filter(cluster=node_class.cluster_id, node_class_name=node_class.name)
            .select_related("cluster"),
        )
        return context


def groups_of(node_class):
    """The Capacity Reservation groups the class's terms name, with the members karpweb stored."""
    stored = {g.arn: g for g in CapacityReservationGroup.objects.filter(arn__in=group_arns(node_class.capacity_reservation_selector_terms))}
    return [(arn, stored.get(arn)) for arn in group_arns(node_class.capacity_reservation_selector_terms)]


def _bounded(version: str | None) -> str | None:
    """A version from a form, cut to what a version can be (its error message shows it)."""
    return None if version is None else version[:64]


class NodeClassOpenModeView(OperatorRequiredMixin, View):
    """Operators turn open mode on or off (audited; an annotation on a real cluster)."""

    def post(self, request, name):
        node_class = get_object_or_404(EC2NodeClass, name=name)
        value = request.POST.get("open_reservations", "")
        if value not in ("true", "false"):
            messages.error(request, f'open_reservations: "{printable(value)}" is not one of true, false')
            return redirect(node_class)
        try:
            changed = set_open_mode(node_class, value == "true", user=request.user, source=AuditEntry.Source.UI,
                                    read_version=_bounded(request.POST.get("resource_version")))
        except OpenModeConflict as exc:
            messages.error(request, f"Not changed: {exc}")
            return redirect(node_class)
        if changed:
            state = "on: its on-demand launches may use open reservations" if value == "true" else "off"
            messages.success(request, f"Open mode of {node_class.name} is {state}.")
        return redirect(node_class)


class NodeClassEditView(OperatorRequiredMixin, TemplateView):
    """The selector-term editor: rows, live validation, preview with diff, conflict-safe save."""

    template_name = "reservations/nodeclass_edit.html"

    def get_template_names(self):
        return ["htmx/selector_term_editor.html"] if self.request.htmx else [self.template_name]

    def get(self, request, name):
        node_class = get_object_or_404(EC2NodeClass, name=name)
        terms = node_class.capacity_reservation_selector_terms or []
        return self.render(node_class, terms, node_class.resource_version)

    def post(self, request, name):
        node_class = get_object_or_404(EC2NodeClass, name=name)
        version = request.POST.get("resource_version", "")
        try:
            terms = terms_from_post(request.POST)
        except EditorInputError as exc:
            return self.render(node_class, node_class.capacity_reservation_selector_terms or [], version, errors=[str(exc)])
        action = request.POST.get("action", "preview")
        if action == "save":
            try:
                save_selector_terms(node_class, terms, version, user=request.user, source=AuditEntry.Source.UI)
            except InvalidSelectorTerms as exc:
                return self.render(node_class, terms, version, problems=exc.problems)
            except SelectorTermConflict as exc:
                node_class.refresh_from_db()
                return self.render(node_class, terms, version, conflict=str(exc), show_preview=True)
            messages.success(request, f"Saved the selector terms of {node_class.name}.")
            response = redirect(node_class)
            if request.htmx:
                response = HttpResponse(status=204, headers={"HX-Redirect": node_class.get_absolute_url()})
            return response
        if action != "preview":
            terms = apply_action(terms, action)
        return self.render(node_class, terms, version, show_preview=action == "preview")

    def render(self, node_class, terms, version, *, problems=None, errors=(), conflict="", show_preview=False):
        problems = validation_problems(terms) if problems is None else problems
        result = preview(node_class, terms) if show_preview and not problems else None
        current = {r["id"] for r in node_class.status_capacity_reservations or []}
        context = self.get_context_data(
            node_class=node_class,
            rows=editor_rows(terms, problems),
            problems=problems,
            errors=errors,
            version=version,
            conflict=conflict,
            server_terms_json=json.dumps(node_class.capacity_reservation_selector_terms, indent=2) if conflict else "",
            result=result,
            added=sorted({r.id for r in result.reservations} - current) if result else [],
            removed=sorted(current - {r.id for r in result.reservations}) if result else [],
            terms_diff=terms_diff(node_class.capacity_reservation_selector_terms or [], terms) if show_preview else "",
            plan_url=plan_url(node_class, terms) if result else "",
            match_criteria=["", "open", "targeted"],
        )
        return self.render_to_response(context)


def plan_url(node_class: EC2NodeClass, terms: list) -> str:
    """The what-if page with the class's selector terms replaced by these: the plan the change makes, in the
    class's own cluster (a what-if plans one cluster)."""
    query = {"cluster": node_class.cluster.name, "nodeclass": node_class.name, "terms": json.dumps(terms)}
    return f"{reverse('scheduling:whatif')}?{urlencode(query)}"


def unselected_reservations(now):
    """Usable reservations no EC2NodeClass selects (the open-reservation trap: with reserved
    capacity on, on-demand launches opt out of open ODCRs, so these sit idle but billed), each with
    its idle cost and the on-demand nodes of the same type and zone that could have used it."""
    reservations = list(
        CapacityReservation.objects.usable(now).filter(node_classes__isnull=True, available_instance_count__gt=0)
        .order_by("-instance_match_criteria", "reservation_id")
    )
    prices = on_demand_prices({r.instance_type for r in reservations})
    attach_fees(reservations)  # the blocks' fees, one query
    pools = {(r.instance_type, r.availability_zone) for r in reservations}
    on_demand = (
        Node.objects.filter(capacity_type="on-demand", instance_type__in={t for t, _ in pools}, zone__in={z for _, z in pools})
        .order_by("name").values_list("instance_type", "zone", "cluster_id", "name", "provider_id")
    )
    inside = defaultdict(list)
    for instance in open_instance_nodes(OpenReservationInstance.objects.filter(reservation__in=reservations)
                                        .only("instance_id", "node_name", "reservation").order_by("instance_id")):
        inside[instance.reservation_id].append(instance)
    matching = defaultdict(list)
    for instance_type, zone, cluster_id, name, provider_id in on_demand:
        matching[instance_type, zone].append((cluster_id, name, instance_id(provider_id)))
    rows = []
    for r in reservations:
        # Its open instances, and their nodes (names are unique per cluster only): not among those that could use it.
        in_it = inside[r.pk]
        taken = {i.instance_id for i in in_it} | {(i.node_cluster_id, i.node_name) for i in in_it if i.node_name}
        rows.append({
            "reservation": r, "idle_cost": idle_cost_per_hour(r, prices),
            "in_it": [(i.node_name or i.instance_id, i.node_url) for i in in_it],
            "on_demand_nodes": [(name, cluster_detail_url("scheduling:node", cluster_id, name))
                                for cluster_id, name, iid in matching[r.instance_type, r.availability_zone]
                                if iid not in taken and (cluster_id, name) not in taken]})
    return rows


def open_instance_nodes(instances) -> list[OpenReservationInstance]:
    """`instances` (open-mode OpenReservationInstance rows), each given `node_cluster_id` and `node_url`:
    the cluster of the node running on it and that node's page. Node names are unique per cluster only,
    instance ids in all of EC2: the node is the one whose providerID names the instance, else the only
    node of its name; neither (None) links to the route without a cluster, which asks which cluster."""
    instances = list(instances)
    nodes = defaultdict(list)
    for cluster_id, name, provider_id in Node.objects.fleet().filter(
            name__in={i.node_name for i in instances if i.node_name}).values_list("cluster_id", "name", "provider_id"):
        nodes[name].append((cluster_id, instance_id(provider_id)))
    for i in instances:
        found = nodes[i.node_name]
        i.node_cluster_id = next((cluster_id for cluster_id, iid in found if iid == i.instance_id),
                                 found[0][0] if len(found) == 1 else None)
        i.node_url = cluster_detail_url("scheduling:node", i.node_cluster_id, i.node_name) if i.node_name else ""
    return instances


class UnselectedReservationsView(ViewerRequiredMixin, TemplateView):
    template_name = "reservations/unselected.html"

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        rows = unselected_reservations(timezone.now())
        context.update(rows=rows, idle_cost=sum(row["idle_cost"] or 0 for row in rows))
        return context


class DoctorView(ViewerRequiredMixin, TemplateView):
    """The reservation doctor: per reservation and per EC2NodeClass, what stops a reservation from
    being used (reservations/doctor.py stores the findings after each EC2 sync)."""

    template_name = "reservations/doctor.html"

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        now = timezone.now()
        active = list(active_findings().select_related("cluster"))
        by_reservation, by_node_class, others = {}, {}, []
        for f in active:
            if f.reservation_id:
                by_reservation.setdefault(f.reservation_id, []).append(f)
            elif f.node_class_name:  # per cluster: two clusters may each have an EC2NodeClass of the name
                by_node_class.setdefault((f.node_class_name, f.cluster_id), []).append(f)
            else:
                others.append(f)
        counts = {s: 0 for s in SEVERITIES}
        for f in active:
            counts[f.severity] += 1
        context.update(
            by_reservation=sorted(by_reservation.items()), others=others,
            by_node_class=[(name, findings[0].node_class_url, findings) for (name, _), findings in sorted(by_node_class.items())],
            cleared=DoctorFinding.objects.filter(cleared_at__gte=now - datetime.timedelta(days=1))
            .select_related("cluster").order_by("-cleared_at"),
            counts=counts,
        )
        return context


class RecommendationListView(ObjectListView):
    title = "Recommendations"
    template_name = "reservations/recommendations.html"
    filterset_class = RecommendationFilterSet
    table_class = RecommendationTable
    csv_exports = {"csv": CsvExport("recommendations", "CSV", exports.RECOMMENDATION_COLUMNS, exports.recommendation_rows)}

    def get_queryset(self):
        rows = Recommendation.objects.select_related("reservation")
        if current_cluster() is not None:
            # The header's chosen cluster: the recommendations about the reservations it sees (the scoped manager).
            rows = rows.filter(reservation__in=CapacityReservation.objects.all())
        if "advised" not in self.request.GET:
            # Open advice only: an extension dearer than the work it protects is shown on request (?advised=false).
            rows = rows.exclude(advised=False)
        return rows

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        filterset = context["filterset"]
        rows = filterset.qs if filterset.is_bound and filterset.is_valid() else self.get_queryset()
        context.update(monthly_and_one_off(rows.filter(state=Recommendation.State.OPEN)))
        return context


def monthly_and_one_off(open_recommendations) -> dict:
    """The list's money, by the one rule: recurring savings a month (each reservation counted once, at its
    largest: cancel and select are alternatives) apart from one-off extensions (fees and losses, never summed in)."""
    best = {}
    relocated = defaultdict(float)  # a move and a split of one reservation take different units: they add up
    one_off = []
    for rec in open_recommendations.select_related(None).only("kind", "reservation_id", "savings_per_month", "details"):
        if rec.money == "one-off":
            one_off.append(rec)
        elif rec.is_monthly and rec.kind in (Recommendation.Kind.SPLIT, Recommendation.Kind.MOVE):
            relocated[rec.reservation_id] += rec.savings_per_month
        elif rec.is_monthly:
            best[rec.reservation_id] = max(best.get(rec.reservation_id, 0.0), rec.savings_per_month)
    for reservation_id, saved in relocated.items():
        best[reservation_id] = max(best.get(reservation_id, 0.0), saved)
    return {"total_per_month": round(sum(best.values()), 2), "monthly_reservations": len(best),
            "one_off_count": len(one_off),
            "one_off_cost": round(sum((r.details or {}).get("oneOffCost") or 0.0 for r in one_off), 2),
            "one_off_loss": round(sum((r.details or {}).get("lostWork") or 0.0 for r in one_off), 2)}


class RecommendationDetailView(ViewerRequiredMixin, TemplateView):
    """The recommendation, its evidence, and the confirmation: what applying changes and its money."""

    template_name = "reservations/recommendation_detail.html"

    def get_context_data(self, pk, form=None, refused=None, **kwargs):
        context = super().get_context_data(**kwargs)
        rec = get_object_or_404(Recommendation.objects.select_related("reservation"), pk=pk)
        window = rec.computed_at - datetime.timedelta(days=14)
        hours = list(rec.reservation.hours.filter(hour__gte=window, hour__lt=rec.computed_at).order_by("hour"))
        context.update(
            rec=rec, reservation=rec.reservation, refused=refused,
            form=form or RecommendationApplyForm(initial={"computed_at": rec.computed_at.isoformat()}),
            # Three levels of one quantity (peak >= mean <= total), drawn as lines: never stacked.
            chart={"x": [h.hour.isoformat() for h in hours], "used": [round(h.used, 2) for h in hours],
                   "peak": [round(h.peak_used if h.peak_used is not None else h.used, 2) for h in hours],
                   "total": [round(h.total, 2) for h in hours], "stacked": False},
            chart_span=hourly_span([h.hour for h in hours]),
            cli=cli_command(rec), observe=global_mode() != Mode.CONTROL, control_refusal=control_refusal(),
            applicable=rec.kind in APPLICABLE and rec.can_apply[0], not_applicable=rec.can_apply[1],
            offerings=rec.details.get("offerings") or [],
            share_cli=share_command(rec) if rec.kind == Recommendation.Kind.SPLIT else "",
            after_total=rec.seen_total - int(rec.details.get("count") or 0),
        )
        return context


class RecommendationApplyView(OperatorRequiredMixin, View):
    def post(self, request, pk):
        from scheduling.loop import backends

        form = RecommendationApplyForm(request.POST)
        if not form.is_valid():
            return _rendered(request, pk, form=form, status=400)
        try:
            apply_recommendation(pk, seen_computed_at=form.cleaned_data["computed_at"], user=request.user,
                                 source=AuditEntry.Source.UI, cloud=backends.cloud_for_reservation,
                                 offering_id=form.cleaned_data.get("offering") or None,
                                 end_date=form.cleaned_data.get("end_date"),
                                 confirm_not_advised=form.cleaned_data.get("confirm_not_advised", False))
        except ApplyRefused as refused:
            field = {"offering": "offering", "end_date": "end_date", CONFIRM_NOT_ADVISED: "confirm_not_advised"}
            form.add_error(field.get(refused.field), refused.message)
            return _rendered(request, pk, form=form, status=refused.status)
        messages.success(request, "Applied.")
        return redirect("reservations:recommendation", pk=pk)


def _rendered(request, pk, *, form, status):
    view = RecommendationDetailView()
    view.setup(request, pk=pk)
    response = view.render_to_response(view.get_context_data(pk=pk, form=form))
    response.status_code = status
    return response


def open_trap_rows(traps) -> list[dict]:
    """Each trap with its fix as people read it, and whether karpweb may apply it in its cluster."""
    from fleet.scope import cluster_scope
    from reservations import open_trap

    rows = []
    for trap in traps:
        with cluster_scope(trap.cluster):
            control, refusal = global_mode() == Mode.CONTROL, control_refusal()
        rows.append({"trap": trap, "yaml": open_trap.fix_yaml(trap), "diff": open_trap.fix_diff(trap),
                     "versions": json.dumps(open_trap.versions(trap), sort_keys=True), "control": control,
                     "refusal": refusal, "slug": f"{trap.cluster}-{trap.reservation_id}"})
    return rows


class OpenTrapView(ViewerRequiredMixin, TemplateView):
    """Open reservations paid twice: idle units beside on-demand nodes that cannot launch into them."""

    template_name = "reservations/open_trap.html"

    def get_context_data(self, refused=None, **kwargs):
        from reservations import open_trap

        context = super().get_context_data(**kwargs)
        found = open_trap.summary(open_trap.find())
        context.update(rows=open_trap_rows(found["traps"]), total=found["total"], refused=refused)
        return context


class OpenTrapPanelView(ViewerRequiredMixin, TemplateView):
    """The overview's panel (loaded by htmx after the page): the total paid twice and a link."""

    template_name = "reservations/open_trap_panel_body.html"

    def get_context_data(self, **kwargs):
        from reservations import open_trap

        context = super().get_context_data(**kwargs)
        context["open_trap"] = open_trap.summary(open_trap.find())
        return context


class OpenTrapYamlView(ViewerRequiredMixin, View):
    """The fix of one trap as a file, for kubectl apply --server-side -f."""

    def get(self, request, cluster, reservation_id):
        from reservations import open_trap

        trap = open_trap.find_one(cluster, reservation_id) if open_trap.cluster_exists(cluster) else None
        if trap is None:
            return HttpResponse(f"# no open-reservation trap for {printable(reservation_id, 64)} in cluster "
                                f"{printable(cluster, 63)} now: nothing to apply\n", content_type="text/plain", status=404)
        response = HttpResponse(open_trap.fix_yaml(trap), content_type="application/yaml")
        response["Content-Disposition"] = f'attachment; filename="open-trap-{trap.cluster}-{trap.reservation_id}.yaml"'
        return response


class OpenTrapFixView(OperatorRequiredMixin, View):
    """The one confirmed click: the fix applied in control mode (refused, with the YAML shown, otherwise)."""

    def post(self, request):
        from reservations import open_trap

        cluster, reservation_id = request.POST.get("cluster", ""), request.POST.get("reservation", "")
        try:
            versions = json.loads(request.POST.get("versions") or "{}")
            if not isinstance(versions, dict) or not all(isinstance(v, str) for v in versions.values()):
                raise ValueError
        except ValueError:
            return self.refused(request, "versions: expected the {object: resourceVersion} the page carried; reload it")
        if request.POST.get("confirm") != "yes":
            return self.refused(request, "confirm: tick the box to confirm the change")
        try:
            result = open_trap.apply_fix(cluster, reservation_id, versions, user=request.user, source=AuditEntry.Source.UI)
        except open_trap.FixRefused as refused:
            return self.refused(request, f"{refused.field}: {refused.message}", status=400 if refused.field == "cluster" else 409)
        if result.nothing_to_do:
            messages.info(request, f"Nothing to do: {printable(reservation_id, 64)} is no longer trapped in {printable(cluster, 63)}.")
        else:
            messages.success(request, f"Applied: {', '.join(result.applied)}. Consolidation can now move the paid nodes "
                                      f"into {reservation_id}.")
        return redirect("reservations:open_trap")

    def refused(self, request, message, status=400):
        view = OpenTrapView()
        view.setup(request)
        response = view.render_to_response(view.get_context_data(refused=message))
        response.status_code = status
        return response


class BuyAdviceListView(ObjectListView):
    """Capacity Blocks that would hold each waiting accelerator gang (issue #50), with their approval and purchase:
    the controls are on the gang's pod page."""

    title = "Capacity Blocks to buy"
    filterset_class = BuyAdviceFilterSet
    table_class = BuyAdviceTable

    def get_queryset(self):
        return BuyAdvice.objects.select_related("cluster").order_by("namespace", "gang", "upfront_fee", "start")

    def get_context_data(self, **kwargs):
        from reservations.purchases import on_demand_offered, purchases_for

        context = super().get_context_data(**kwargs)
        table = context["table"]
        shown = [row.record for row in table.paginated_rows]  # the page's rows: their purchases and prices at once
        table.purchases = purchases_for(shown)
        table.prices = on_demand_offered({a.instance_type for a in shown})
        return context


class BuyApproveView(OperatorRequiredMixin, View):
    """The pod page's Approve: records the operator's approval of one offering for the pod's gang."""

    def post(self, request, pk):
        from reservations.purchases import PurchaseRefused, approve

        advice = get_object_or_404(BuyAdvice, pk=pk)
        try:
            approve(pk, user=request.user, source=AuditEntry.Source.UI, node_class=request.POST.get("node_class", "")[:253])
        except PurchaseRefused as refused:
            messages.error(request, f"{refused.field}: {refused.message}")
        else:
            messages.success(request, f"Approved offering {advice.offering_id} for {advice.gang}: an operator may buy it.")
        return _back_to_pod(advice)


class BuyPurchaseView(OperatorRequiredMixin, View):
    """The pod page's Buy: PurchaseCapacityBlock for the approved offering (control mode)."""

    def post(self, request, pk):
        from reservations.purchases import PurchaseRefused, purchase_advice
        from scheduling.loop import backends

        advice = get_object_or_404(BuyAdvice, pk=pk)
        try:
            bought = purchase_advice(pk, user=request.user, source=AuditEntry.Source.UI, cloud=backends.cloud)
        except PurchaseRefused as refused:
            messages.error(request, f"{refused.field}: {refused.message}")
        else:
            messages.success(request, f"Bought Capacity Block {bought.reservation_id} (${bought.paid_fee}) for {advice.gang}.")
        return _back_to_pod(advice)


def _back_to_pod(advice):
    namespace, name = (advice.pods or ["/"])[0].split("/", 1)
    return redirect(cluster_detail_url("scheduling:pod", advice.cluster_id, namespace, name))
