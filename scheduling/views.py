import json

from django.conf import settings
from django.contrib import messages
from django.db.models import Count, Q, Sum
from django.db.models.functions import TruncDate
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.utils import timezone
from django.views import View
from django.views.generic import TemplateView

from fleet.models import Cluster
from fleet.scope import current_cluster_id, scope_of
from karpweb.jsonsafe import printable
from karpweb.roles import FleetAdminRequiredMixin, OperatorRequiredMixin, ViewerRequiredMixin
from karpweb.views_generic import ObjectListView
from reservations.commitments import price_status
from reservations.models import CapacityReservation, Recommendation, UtilizationHour, hour_of
from reservations.utilization import hourly_span
from reservations.views import upcoming_capacity_blocks
from scheduling.audit import diff, record_change
from scheduling.claim_hashes import PROVISIONER_LABEL
from scheduling.filtersets import (
    AuditEntryFilterSet, DecisionFilterSet, InstanceTypeFilterSet, KarpenterLaunchFilterSet, NodeClaimFilterSet, NodeFilterSet, NodePoolFilterSet,
    PodFilterSet,
)
from scheduling.models import (
    AuditEntry, Decision, InstanceType, KarpenterLaunch, Mode, Node, NodeClaim, NodePool, Pod, StandingOpportunity,
)
from scheduling.engine.quantities import MEMORY, format_resource
from scheduling.loop.health import failing_steps, loop_health, watch_health, with_health
from scheduling.loop.coexistence import ControlNotAllowed, allow_control
from karpweb.csvexport import CsvExport
from scheduling import exports
from scheduling.loop.karpenter_audit import plans_beside_karpenter
from scheduling.modes import control_refusal, controller_status, effective_mode, global_mode
from scheduling.nodepool_health import health, node_class_name
from scheduling.pod_placement import decisions_about, placement
from scheduling.queries import capacity_totals, catalogue_notice, count_by, on_demand_prices, pod_count, pod_requests
from scheduling.templatetags.karpweb import freshness_note
from scheduling.totals import freshness, node_list_totals, pool_usage
from scheduling.tables import (
    AuditEntryTable, DecisionTable, InstanceTypeTable, KarpenterLaunchTable, NodeClaimTable, NodePoolTable, NodeTable, PodTable,
)
from karpweb.costlimit import EngineBusy, engine_run
from scheduling.upcoming import upcoming_uses
from scheduling.whatif import MAX_WORLD_BYTES, SimulationOutcome, current_outcome, pod_outcome, pretty, run_world_text
from scheduling.whatif_edits import WorldEditForm, before_and_after
from scheduling.world import current_world, extended_resources, node_memory_bytes

RECENT_DECISIONS = 10
CHART_HOURS = 48
STANDING_SHOWN = 10


class OverviewView(ViewerRequiredMixin, TemplateView):
    template_name = "overview.html"

    def get_template_names(self):
        return ["htmx/overview_stats.html"] if self.request.htmx else [self.template_name]

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        now = timezone.now()
        # Every usable reservation, but only the columns the totals, idle cost and alarms read.
        reservations = list(CapacityReservation.objects.usable(now).with_recent_utilization(now).only(
            "reservation_id", "instance_type", "availability_zone", "total_instance_count", "available_instance_count",
            "state", "reservation_type", "start_date", "end_date", "interruptible_allocation",  # used = total - available - lent
        ).order_by("reservation_id"))
        totals = capacity_totals(reservations, on_demand_prices({r.instance_type for r in reservations}), now)
        pool_healths = pools_with_health()
        open_recommendations = list(Recommendation.objects.filter(state=Recommendation.State.OPEN)
                                    .select_related("reservation").order_by("-savings_per_month", "kind", "id"))
        drains = upcoming_capacity_blocks(now, with_nodes=False)
        context.update(
            now=now, catalogue_notice=catalogue_notice(), refresh_seconds=settings.KARPWEB_PAGE_REFRESH_SECONDS,
            # Which prices the figures use (zonal RIs, Savings Plans, or list and why).
            prices=price_status() if not self.request.htmx else None,
            used=totals["used"], idle=totals["idle"], total=totals["total"], lent=totals["lent"],
            idle_cost=totals["idle_cost"], idle_sources=totals["idle_sources"], unpriced=totals["unpriced"],
            low_utilization=[r for r in reservations if r.is_low_utilization(now)],
            drains=drains[:5],
            block_alarms=[block for block, _timing in drains if block.block_alarm(block.node_count, now)],
            pools_not_ready=[(p, h) for p, h in pool_healths if not h.is_ready],
            pools_over_limits=[(p, h) for p, h in pool_healths if h.over_limits],
            decisions=Decision.objects.select_related("node_pool").order_by("-created_at")[:RECENT_DECISIONS],
            global_mode=global_mode(),
            # By monthly saving: one-off extensions (saving nothing a month) are counted apart.
            top_recommendations=[rec for rec in open_recommendations if rec.is_monthly][:3],
            one_off_recommendations=sum(1 for rec in open_recommendations if rec.money == "one-off"),
            loop=loop_health(now),
            # loop_health is the fleet's newest run of each step: in a cluster's scope its own failing steps too.
            **self.scope_health(),
            watch=(watch := watch_health(now)),
            cluster_state=watch.state,  # the header's, read once
            **controller_status(),
        )
        if not self.request.htmx:  # the 30 s refresh redraws the figures, not the chart
            context["chart"] = utilization_chart(now)
        return context


    @staticmethod
    def scope_health() -> dict:
        cluster_id = current_cluster_id()
        if cluster_id is None:
            return {}
        cluster = with_health(Cluster.objects.filter(pk=cluster_id)).first()
        return {} if cluster is None else {"scope_cluster": cluster, "scope_failing": failing_steps(cluster)}


class UpcomingReservationsView(ViewerRequiredMixin, TemplateView):
    """The overview's "Upcoming reservations" panel, loaded after the page (it reasons about every pod not
    in reserved capacity: scheduling/upcoming.py); empty when no reservation waits for its start."""

    template_name = "scheduling/upcoming_reservations.html"

    def get_context_data(self, **kwargs):
        now = timezone.now()
        return {**super().get_context_data(**kwargs), "now": now, "upcoming_reservations": upcoming_uses(now)}


def utilization_chart(now) -> dict:
    """Mean used and idle reserved instances per hour, summed over all reservations (the hourly roll-up)."""
    rows = list(
        UtilizationHour.objects.filter(hour__gte=hour_of(now - timezone.timedelta(hours=CHART_HOURS)))
        .order_by().values("hour").annotate(used=Sum("used"), total=Sum("total")).order_by("hour")
    )
    return {
        "x": [row["hour"].isoformat() for row in rows],
        "used": [round(row["used"], 1) for row in rows],
        "idle": [round(row["total"] - row["used"], 1) for row in rows],
        "span": hourly_span([row["hour"] for row in rows]),
    }


# What a pool's health and its line on the overview read: not its requirements, taints, budgets or its
# class's spec (a dozen JSON documents a pool, decoded for nothing at 150 pools).
HEALTH_FIELDS = ("cluster", "name", "weight", "node_class_ref", "conditions", "limits",
                 "node_class__name", "node_class__conditions")


def pools_with_health() -> list:
    """[(pool, PoolHealth)] with its nodes' allocatable against its limits, in one query (a class is looked up
    by name only for a pool whose link and nodeClassRef disagree). The nodes and their allocatable are the
    pool's running totals, as its cluster's last loop step counted them (scheduling/totals.py)."""
    pools = NodePool.objects.select_related("node_class").only(*HEALTH_FIELDS).annotate(**pool_usage()) \
        .order_by("-weight", "name")
    return [(p, health(p, usage={"cpu": p.used_cpu or 0, "memory": p.used_memory or 0, "nodes": p.node_count}))
            for p in pools]


class NodePoolListView(ObjectListView):
    title = "NodePools"
    filterset_class = NodePoolFilterSet
    table_class = NodePoolTable

    def get_queryset(self):
        # Nodes and allocatable from the pools' running totals, not a join over every node per request.
        return NodePool.objects.select_related("node_class").annotate(**pool_usage()).order_by("-weight", "name")

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        return {**context, "totals_note": freshness_note("Nodes and their CPU and memory", freshness(), timezone.now())}


class NodePoolDetailView(ViewerRequiredMixin, TemplateView):
    template_name = "scheduling/nodepool_detail.html"

    def get_context_data(self, name, **kwargs):
        context = super().get_context_data(**kwargs)
        pool = get_object_or_404(NodePool.objects.select_related("node_class"), name=name)
        nodes = list(pool.nodes.order_by("name"))
        used_cpu = sum(node.allocatable_cpu_millicores for node in nodes)
        used_memory = sum(node.allocatable_memory_bytes for node in nodes)
        pool_health = health(pool, usage={"cpu": used_cpu, "memory": used_memory, "nodes": len(nodes)})
        # Only through a class that exists under the referenced name: a stale link lends no reservations.
        node_class = pool_health.node_class
        reservations = node_class.selected_reservations.order_by("reservation_id") if node_class else CapacityReservation.objects.none()
        context.update(
            pool=pool,
            health=pool_health,
            node_class=node_class,
            node_class_name=node_class_name(pool),
            nodes=nodes,
            by_capacity_type=count_by(nodes, lambda node: node.capacity_type or "unknown"),
            reservations=reservations,
            limits=limit_usage(pool.limits, used_cpu, used_memory, len(nodes)),
            mode=effective_mode(pool),
            pool_mode=pool.mode,
            global_mode=global_mode(),
            modes=Mode.choices,
            **controller_status(),
        )
        return context


_LIMIT_UNITS = {"cpu": "CPU", "memory": "memory", "nodes": "nodes"}


def limit_usage(limits: dict, cpu_millicores: int, memory_bytes: int, nodes: int) -> list[dict]:
    """[{resource, used, limit, text}] for display: "215.2 of 1000 CPU", "1.5Ti of 2Ti memory", with
    the NodePool's limit strings as set."""
    used = {"cpu": f"{cpu_millicores / 1000:g}", "memory": format_resource(MEMORY, memory_bytes), "nodes": str(nodes)}
    rows = [{"resource": key, "used": used.get(key, "—"), "limit": value} for key, value in sorted(limits.items())]
    rows = rows or [{"resource": "cpu", "used": used["cpu"], "limit": "no limit"}]
    for row in rows:
        unit = _LIMIT_UNITS.get(row["resource"], row["resource"])
        row["text"] = f"{row['used']} {unit} (no limit)" if row["limit"] == "no limit" else f"{row['used']} of {row['limit']} {unit}"
    return rows


class AllowControlView(OperatorRequiredMixin, View):
    """Karpenter went away: an operator lets karpweb control the cluster again (audited)."""

    def post(self, request):
        try:
            allow_control(request.user, AuditEntry.Source.UI, timezone.now())
        except ControlNotAllowed as exc:
            messages.error(request, f"Control not allowed: {exc}.")
        else:
            messages.success(request, "karpweb may now control the cluster; NodePools in control mode act from the next run.")
        return redirect("scheduling:overview")


class NodePoolModeView(OperatorRequiredMixin, View):
    """Operators switch a NodePool between observe, control and following the global mode."""

    def post(self, request, name):
        pool = get_object_or_404(NodePool, name=name)
        new_mode = request.POST.get("mode", "")
        if new_mode not in {"", Mode.OBSERVE, Mode.CONTROL}:
            messages.error(request, f'mode: "{printable(new_mode)}" is not one of observe, control or blank (follow global)')
            return redirect(pool)
        if new_mode == Mode.CONTROL and (refusal := control_refusal()):
            messages.error(request, f"mode: control is refused: {refusal}.")
            return redirect(pool)
        if new_mode != pool.mode:
            changes = diff({"mode": pool.mode}, {"mode": new_mode})
            pool.mode = new_mode
            pool.save(update_fields=["mode"])
            record_change(user=request.user, source=AuditEntry.Source.UI, obj=pool, action=AuditEntry.Action.CHANGE, changes=changes)
            messages.success(request, f"{pool.name} now runs in {effective_mode(pool)} mode.")
        return redirect(pool)


class NodeListView(ObjectListView):
    title = "Nodes"
    filterset_class = NodeFilterSet
    table_class = NodeTable
    refreshes = True

    def get_queryset(self):
        # A correlated count for the 50 nodes of a page, not a join and GROUP BY over every node.
        # The pods' requests likewise (the CPU and memory bars).
        return Node.objects.select_related("node_pool", "reservation").annotate(
            pod_count=pod_count(), cpu_requested=pod_requests("cpu_request_millicores"),
            memory_requested=pod_requests("memory_request_bytes")).order_by("name")

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        # The totals line from the node groups the loop keeps (scheduling/totals.py) when the filter is one
        # they answer; else NodeTable counts the filtered nodes (and their pods) itself.
        filterset, table = context["filterset"], context["table"]
        filtered = filterset.is_bound and filterset.is_valid()
        kept = node_list_totals(table.data.data, filterset.form.cleaned_data if filtered else None)
        if kept is not None:
            table.totals = kept
        return context


class InstanceTypeListView(ObjectListView):
    title = "Instance types"
    fleet_wide = True
    filterset_class = InstanceTypeFilterSet
    table_class = InstanceTypeTable

    def get_queryset(self):
        return InstanceType.objects.only(
            "name", "cpu_millicores", "memory_bytes", "max_pods", "arch", "labels", "resources").order_by("name")


class InstanceTypeDetailView(ViewerRequiredMixin, TemplateView):
    """One type as Karpenter sees it: its labels for NodePool requirements, what a node of it reports,
    and where it can be bought."""

    template_name = "scheduling/instancetype_detail.html"

    def get_context_data(self, name, **kwargs):
        context = super().get_context_data(**kwargs)
        it = get_object_or_404(InstanceType, name=name)
        offerings = it.offerings.select_related("reservation").order_by("capacity_type", "zone", "reservation__reservation_id")
        context.update(it=it, labels=sorted((it.labels or {}).items()), resources=sorted(extended_resources(it).items()),
                       node_memory=node_memory_bytes(it), offerings=offerings,
                       overhead_percent=settings.KARPWEB_VM_MEMORY_OVERHEAD_PERCENT * 100)
        return context


NODE_DECISIONS = 10


class NodeDetailView(ViewerRequiredMixin, TemplateView):
    template_name = "scheduling/node_detail.html"

    def get_context_data(self, name, **kwargs):
        context = super().get_context_data(**kwargs)
        node = get_object_or_404(Node.objects.select_related("node_pool", "node_claim", "reservation"), name=name)
        # Interruptions (rebalance recommendations included), drains and demotions about this node.
        decisions = Decision.objects.filter(subject=f"node {name}").order_by("-created_at", "-id")[:NODE_DECISIONS]
        context.update(node=node, pods=node.pods.order_by("namespace", "name"), decisions=decisions)
        return context


class NodeClaimListView(ObjectListView):
    title = "NodeClaims"
    filterset_class = NodeClaimFilterSet
    table_class = NodeClaimTable

    def get_queryset(self):
        return NodeClaim.objects.select_related("node_pool", "reservation").order_by("name")


class NodeClaimDetailView(ViewerRequiredMixin, TemplateView):
    template_name = "scheduling/nodeclaim_detail.html"

    def get_context_data(self, name, **kwargs):
        context = super().get_context_data(**kwargs)
        claim = get_object_or_404(
            NodeClaim.objects.select_related("node_pool", "node_class", "reservation", "node"), name=name
        )
        node = getattr(claim, "node", None)
        context.update(claim=claim, node=node, pods=node.pods.order_by("namespace", "name") if node else [],
                       launched_by_karpweb=PROVISIONER_LABEL in (claim.labels or {}))
        return context


class PodListView(ObjectListView):
    title = "Pods"
    filterset_class = PodFilterSet
    table_class = PodTable

    def get_queryset(self):
        return Pod.objects.order_by("namespace", "name")


def blocks_for(pod) -> list:
    """The Capacity Block offerings the last EC2 sync found for the pending pod's gang (reservations/buying.py)."""
    from reservations.models import BuyAdvice

    found = BuyAdvice.objects.fleet().filter(cluster_id=pod.cluster_id, namespace=pod.namespace).order_by("upfront_fee", "start")
    return [advice for advice in found if str(pod) in advice.pods]


def buy_controls(pod, advice: list) -> dict:
    """The pod page's buying: the offerings for its gang with their purchase and how each compares with waiting, the
    blocks bought for it, and whether karpweb may buy here (control mode) or shows the AWS CLI command instead."""
    from reservations.models import CapacityBlockPurchase, EC2NodeClass
    from reservations.purchases import cli_command, node_classes_for, on_demand_offered, purchases_for, waiting_for

    now = timezone.now()
    purchases, prices = purchases_for(advice), on_demand_offered({a.instance_type for a in advice})
    classes = sorted(EC2NodeClass.objects.filter(cluster_id=pod.cluster_id).values_list("name", flat=True))
    rows = [{"advice": a, "purchase": purchases.get(a.key), "waiting": waiting_for(a, now, prices).words(),
             "cli": cli_command(a), "node_classes": node_classes_for(a) or classes} for a in advice]
    bought = [p for p in CapacityBlockPurchase.objects.fleet().filter(
        cluster_id=pod.cluster_id, namespace=pod.namespace, state=CapacityBlockPurchase.State.PURCHASED, end__gt=now)
        if str(pod) in p.pods]
    with scope_of(pod):
        control, refusal = global_mode() == Mode.CONTROL, control_refusal()
    return {"buy_advice": advice, "buy_rows": rows, "blocks_bought": bought, "buy_control": control,
            "buy_refusal": refusal}


class PodDetailView(ViewerRequiredMixin, TemplateView):
    template_name = "scheduling/pod_detail.html"

    def get_context_data(self, namespace, name, **kwargs):
        context = super().get_context_data(**kwargs)
        pod = get_object_or_404(Pod.objects.select_related("node", "node__reservation", "node__node_pool"), namespace=namespace, name=name)
        context.update(pod=pod, decisions=decisions_about(pod, RECENT_DECISIONS), spec_json=json.dumps(pod.spec, indent=2))
        engine_answer = None
        if pod.is_pending:
            # What the engine would do with this pod in the current world.
            with scope_of(pod):  # its own cluster's world, also in the all-clusters view
                outcome, answered_at = current_outcome()
            engine_answer = pod_outcome(outcome.decisions, str(pod)) if outcome.ok else None
            context["engine_answer"] = engine_answer
            context["engine_problems"] = outcome.problems
            context["engine_answered_at"] = answered_at
            context.update(buy_controls(pod, blocks_for(pod)))
        # "Why not reserved?": where it runs (or would), in what capacity, and what keeps it from a reservation.
        context["placement"] = placement(pod, timezone.now(), engine_answer)
        return context


class DecisionListView(ObjectListView):
    title = "Decisions"
    filterset_class = DecisionFilterSet
    table_class = DecisionTable
    template_name = "scheduling/decision_list.html"

    def get_queryset(self):
        # Only what the table shows: the decisions' and NodePools' JSON columns (details, the pods
        # involved, requirements, limits) were decoded for every row and never read.
        return (Decision.objects.select_related("node_pool").order_by("-created_at")
                .only(*DecisionTable.Meta.fields, "cluster_id", "cluster_name", "node_pool__name", "node_pool__cluster_id"))

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        context["global_mode"] = global_mode()
        return context




class KarpenterAuditView(ObjectListView):
    title = "Karpenter audit"
    filterset_class = KarpenterLaunchFilterSet
    table_class = KarpenterLaunchTable
    template_name = "scheduling/karpenter_audit.html"
    table_template = "scheduling/karpenter_audit_table.html"
    csv_exports = {"csv": CsvExport("karpenter-audit", "CSV", exports.KARPENTER_AUDIT_COLUMNS, exports.audit_rows)}

    def get_queryset(self):
        return KarpenterLaunch.objects.order_by("-launched_at", "-id")

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        filterset = context["filterset"]
        rows = filterset.qs if filterset.is_bound and filterset.is_valid() else self.get_queryset()
        missed = rows.filter(outcome=KarpenterLaunch.Outcome.MISSED)
        totals = missed.aggregate(n=Count("id"), dollars=Sum("missed_dollars"), running=Count("id", filter=Q(ended_at__isnull=True)),
                                  committed=Count("id", filter=~Q(price_basis="list")))
        labels = dict(KarpenterLaunch.Outcome.choices)
        context.update(
            missed_count=totals["n"], missed_dollars=totals["dollars"] or 0.0, running_missed=totals["running"],
            # Which prices the sum uses: list, unless commitments priced some paid nodes (each row says its basis).
            missed_basis="at list price" if not totals["committed"] else (
                f"at each paid node's price ({totals['committed']} at a Savings Plan rate or a zonal Reserved "
                "Instance's $0, the rest at list price)"),
            outcomes=[{"label": labels[row["outcome"]], "n": row["n"]}
                      for row in rows.order_by().values("outcome").annotate(n=Count("id")).order_by("outcome")],
            standing=StandingOpportunity.objects.all()[:STANDING_SHOWN],
            side_by_side=plans_beside_karpenter(),
            standing_totals=StandingOpportunity.objects.aggregate(n=Count("id"), per_hour=Sum("savings_per_hour")),
            by_day=list(missed.annotate(day=TruncDate("launched_at")).order_by()
                        .values("day", "reservation_label", "node_pool_name")
                        .annotate(n=Count("id"), dollars=Sum("missed_dollars")).order_by("-day", "-dollars")[:20]),
        )
        return context


class WhatIfView(ViewerRequiredMixin, TemplateView):
    """What-if: changes to the current world in a form (the default tab), the plans before and after
    side by side; or a WORLD.json pasted or uploaded (`?tab=paste`; `?from=current` fills it with the
    current world) and its decisions. `?recommendation=ID` opens the form with that change filled in, and
    `?nodeclass=NAME&terms=JSON` with an EC2NodeClass's selector terms replaced (the selector editor's link)."""

    template_name = "scheduling/whatif.html"
    extra_context = {"max_world_bytes": MAX_WORLD_BYTES}

    def get(self, request):
        if request.GET.get("from") == "current" or request.GET.get("tab") == "paste":
            return self.get_paste(request)
        return self.get_edit(request)

    @staticmethod
    def cluster_needed(request) -> bool:
        """All clusters shown in a fleet of several: a world is one cluster's (names are unique per cluster
        only, and each cluster plans with the reservations its own account sees), so the page asks for one."""
        fleet = getattr(request, "fleet", None)
        return fleet is not None and fleet.several and fleet.shown is None

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        if self.cluster_needed(self.request):
            query = self.request.GET.copy()
            links = []
            for cluster in self.request.fleet.clusters:
                query["cluster"] = cluster.name
                links.append((cluster.name, f"{self.request.path}?{query.urlencode()}"))
            context["choose_cluster"] = links
        return context

    def post(self, request):
        paste = (request.POST.get("tab") == "paste" or "world" in request.POST or "world_file" in request.FILES
                 or getattr(request, "upload_too_large", None))
        return self.post_paste(request) if paste else self.post_edit(request)

    # --- paste or upload a WORLD.json ------------------------------------------------------------

    def paste_page(self, status=200, **context):
        return self.render_to_response(self.get_context_data(tab="paste", **context), status=status)

    def get_paste(self, request):
        if request.GET.get("from") != "current" or self.cluster_needed(request):
            return self.paste_page(world_text="")
        text = json.dumps(current_world(), indent=2)
        if request.GET.get("download"):
            response = HttpResponse(text, content_type="application/json")
            response["Content-Disposition"] = 'attachment; filename="WORLD.json"'
            return response
        if len(text) > MAX_WORLD_BYTES:
            # Tens of MiB in a text area help nobody: offer the file (to trim and upload, or run `simulate`).
            return self.paste_page(world_text="", current_too_large=len(text))
        return self.paste_page(world_text=text)

    def post_paste(self, request):
        upload = request.FILES.get("world_file")
        stopped = getattr(request, "upload_too_large", None)  # karpweb/uploads.py stopped it while it streamed
        if stopped or (upload is not None and upload.size > MAX_WORLD_BYTES):
            outcome, text = SimulationOutcome(problems=[f"{stopped or 'world_file'}: larger than {MAX_WORLD_BYTES // 2**20} MiB"]), ""
        else:
            text = upload.read().decode("utf-8", errors="replace") if upload else request.POST.get("world", "")
            if not text.strip():
                outcome = SimulationOutcome(problems=["world: paste a WORLD.json or choose a file"])
            else:
                try:
                    with engine_run(request.user):
                        outcome = run_world_text(text)
                except EngineBusy as busy:
                    return busy_response(self.paste_page(429, world_text=text, outcome=SimulationOutcome(problems=[str(busy)])), busy)
        return self.paste_page(world_text=text, outcome=outcome, decisions_json=pretty(outcome.decisions) if outcome.ok else "")

    # --- edit the current world in a form -------------------------------------------------------

    def edit_page(self, form, result=None, status=200, **context):
        return self.render_to_response(self.get_context_data(tab="edit", form=form, result=result, **context), status=status)

    def get_edit(self, request):
        if self.cluster_needed(request):
            return self.edit_page(None)
        initial = {}
        rec_id = request.GET.get("recommendation")
        if rec_id and rec_id.isdigit():
            from reservations.models import Recommendation

            rec = Recommendation.objects.select_related("reservation").filter(pk=int(rec_id)).first()
            if rec is not None and rec.kind == Recommendation.Kind.SHRINK:
                initial = {"count_id": rec.reservation.reservation_id, "count": rec.target_count}
            elif rec is not None and rec.kind == Recommendation.Kind.CANCEL:
                initial = {"remove_id": rec.reservation.reservation_id}
        elif request.GET.get("nodeclass"):  # the selector-term editor's preview: the plan its terms make
            initial = {"node_class": request.GET["nodeclass"], "node_class_terms": request.GET.get("terms", "")}
        form = WorldEditForm(initial=initial)
        result = None
        if initial:
            bound = WorldEditForm(initial)
            if bound.is_valid():
                form = bound
                try:
                    with engine_run(request.user):
                        result = before_and_after(bound.edits())
                except EngineBusy as busy:
                    form.add_error(None, str(busy))
                    return busy_response(self.edit_page(form, status=429), busy)
        return self.edit_page(form, result)

    def post_edit(self, request):
        if self.cluster_needed(request):
            return self.edit_page(None, status=400)
        form = WorldEditForm(request.POST)
        if not form.is_valid():
            return self.edit_page(form, status=400)
        edits = form.edits()
        if not edits:
            form.add_error(None, "fill in at least one change")
            return self.edit_page(form, status=400)
        try:
            with engine_run(request.user):
                result = before_and_after(edits)
        except EngineBusy as busy:
            form.add_error(None, str(busy))
            return busy_response(self.edit_page(form, status=429), busy)
        for problem in result["problems"]:
            form.add_error(None, problem)
        return self.edit_page(form, result, status=400 if result["problems"] else 200, edits=edits)


def busy_response(response, busy: EngineBusy):
    """A what-if page refused by the engine's cost limit (karpweb/costlimit.py): 429, and when to retry."""
    response["Retry-After"] = str(busy.retry_after)
    return response


def healthz(request):
    """Liveness and readiness: the database answers."""
    from django.db import connection
    from django.http import JsonResponse

    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return JsonResponse({"status": "ok"})


class WhatIfEditView(WhatIfView):
    """/what-if/edit/, where the form was before it became the page's default: the same page."""


class AuditLogView(FleetAdminRequiredMixin, ObjectListView):
    """Every change people made, token made or revoked, role and group change and sign-in, for fleet
    administrators: by user, cluster, action and date (the same FilterSet as GET /api/v1/audit/)."""

    title = "Audit log"
    fleet_wide = True
    filterset_class = AuditEntryFilterSet
    table_class = AuditEntryTable

    def get_queryset(self):
        return AuditEntry.objects.fleet().select_related("cluster", "content_type").order_by("-created_at", "-id")
