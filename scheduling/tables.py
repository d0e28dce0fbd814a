import django_tables2 as tables
import karpweb.tables  # noqa: F401 - registers the shared column types before the tables below are built
from django.utils import timezone
from django.utils.timesince import timesince

from karpweb.urlcache import detail_url

from scheduling.models import Decision, Node, NodeClaim, NodePool, Pod


def _reservation_url(record):
    return record.reservation.get_absolute_url() if record.reservation_id else None


def _node_url(record):
    return detail_url("scheduling:node", record.node_name) if record.node_name else None


class NodePoolTable(tables.Table):
    name = tables.Column(linkify=True)
    node_class = tables.Column(verbose_name="EC2NodeClass", linkify=True)
    nodes = tables.Column(accessor="node_count", verbose_name="Nodes", orderable=False)
    ready = tables.Column(empty_values=(), orderable=False, verbose_name="Ready")
    mode = tables.Column(empty_values=(), verbose_name="Mode")

    class Meta:
        model = NodePool
        fields = ("name", "weight", "node_class", "nodes", "consolidation_policy", "ready", "mode")
        attrs = {"class": "table"}

    def render_ready(self, record):
        return record.condition_status("Ready")

    def render_mode(self, record):
        return record.mode or "global"


class _AgeMixin:
    def render_created_at(self, value):
        return timesince(value, timezone.now()) if value else "—"


class NodeTable(_AgeMixin, tables.Table):
    name = tables.Column(linkify=True)
    node_pool = tables.Column(linkify=True, verbose_name="NodePool")
    reservation_label = tables.Column(
        verbose_name="Reservation",
        linkify=_reservation_url,
    )
    created_at = tables.Column(verbose_name="Age")
    pods = tables.Column(accessor="pod_count", verbose_name="Pods", orderable=False)

    class Meta:
        model = Node
        fields = ("name", "node_pool", "instance_type", "zone", "capacity_type", "reservation_label", "created_at", "pods", "ready")
        attrs = {"class": "table"}


class NodeClaimTable(_AgeMixin, tables.Table):
    name = tables.Column(linkify=True)
    node_pool = tables.Column(linkify=True, verbose_name="NodePool")
    reservation_label = tables.Column(
        verbose_name="Reservation",
        linkify=_reservation_url,
    )
    node_name = tables.Column(verbose_name="Node", linkify=_node_url)
    created_at = tables.Column(verbose_name="Age")

    class Meta:
        model = NodeClaim
        fields = ("name", "node_pool", "instance_type", "zone", "capacity_type", "reservation_label", "node_name", "created_at")
        attrs = {"class": "table"}


class PodTable(tables.Table):
    name = tables.Column(linkify=True)
    node_name = tables.Column(verbose_name="Node", linkify=_node_url)

    class Meta:
        model = Pod
        fields = ("namespace", "name", "node_name", "phase", "cpu_request_millicores", "memory_request_bytes")
        attrs = {"class": "table"}


class DecisionTable(tables.Table):
    node_pool = tables.Column(verbose_name="NodePool", linkify=True)

    class Meta:
        model = Decision
        fields = ("created_at", "kind", "outcome", "mode", "subject", "reason", "node_pool")
        attrs = {"class": "table"}
        order_by = ("-created_at",)
