import json

from django.db.models import Count, Prefetch
from django.shortcuts import get_object_or_404
from django.utils import timezone
from django.views.generic import TemplateView

from karpweb.roles import ViewerRequiredMixin
from karpweb.views_generic import ObjectListView
from reservations.filtersets import CapacityReservationFilterSet, EC2NodeClassFilterSet
from reservations.models import CapacityReservation, EC2NodeClass
from reservations.tables import CapacityReservationTable, EC2NodeClassTable
from scheduling.models import Node
from scheduling.queries import idle_cost_per_hour, on_demand_prices

SAMPLES_SHOWN = 7 * 24 * 2  # a week of half-hourly samples


class ReservationListView(ObjectListView):
    title = "Capacity reservations"
    filterset_class = CapacityReservationFilterSet
    table_class = CapacityReservationTable

    def get_queryset(self):
        return CapacityReservation.objects.with_recent_utilization().order_by("reservation_id")


class ReservationDetailView(ViewerRequiredMixin, TemplateView):
    template_name = "reservations/reservation_detail.html"

    def get_context_data(self, reservation_id, **kwargs):
        context = super().get_context_data(**kwargs)
        now = timezone.now()
        reservation = get_object_or_404(
            CapacityReservation.objects.with_recent_utilization(now).prefetch_related("node_classes"),
            reservation_id=reservation_id,
        )
        samples = list(reversed(reservation.samples.order_by("-sampled_at")[:SAMPLES_SHOWN]))
        chart = {
            "x": [sample.sampled_at.isoformat() for sample in samples],
            "used": [sample.used for sample in samples],
            "available": [sample.available for sample in samples],
            "total": [sample.total for sample in samples],
        }
        nodes = reservation.nodes.select_related("node_pool", "node_claim").order_by("name")
        prices = on_demand_prices([reservation.instance_type])
        context.update(
            reservation=reservation,
            timing=reservation.timing,
            nodes=nodes,
            node_classes=reservation.node_classes.all(),
            chart=chart,
            low_utilization=reservation.is_low_utilization(now),
            idle_cost=idle_cost_per_hour(reservation, prices),
            now=now,
        )
        return context


def upcoming_capacity_blocks(now):
    """Active capacity blocks that have not ended, soonest end first, with the nodes in them."""
    blocks = (
        CapacityReservation.objects.filter(
            reservation_type=CapacityReservation.ReservationType.CAPACITY_BLOCK,
            state=CapacityReservation.State.ACTIVE,
            end_date__gt=now,
        )
        .prefetch_related(Prefetch("nodes", queryset=Node.objects.order_by("name")))
        .order_by("end_date")
    )
    return [(block, block.timing) for block in blocks]


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
            reservations=node_class.selected_reservations.order_by("reservation_id"),
            pools=node_class.node_pools.order_by("-weight", "name"),
            terms_json=json.dumps(node_class.capacity_reservation_selector_terms, indent=2),
        )
        return context
