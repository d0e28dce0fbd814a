import django_tables2 as tables
import karpweb.tables  # noqa: F401 - registers the shared column types before the tables below are built
from django.template.defaultfilters import pluralize
from django.utils import timezone
from django.utils.functional import cached_property
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe
from django.utils.timesince import timesince

from karpweb.tables import ClusterColumn, PlainRowsTable, choice_labels, id_link, link, short_datetimes
from karpweb.urlcache import cluster_detail_url, detail_url

from scheduling.engine.commitments import LIST, basis_words
from scheduling.engine.quantities import CPU, MEMORY, format_resource
from scheduling.engine.ec2types import (
    INSTANCE_CATEGORY, INSTANCE_GENERATION, INSTANCE_LOCAL_NVME, INSTANCE_NETWORK_BANDWIDTH,
)
from scheduling.queries import PREPAID, node_cost_per_hour, node_totals, paid_prices
from scheduling.templatetags.karpweb import per_hour
from scheduling.models import CapacityType, Decision, InstanceType, KarpenterLaunch, Node, NodeClaim, NodePool, Pod


def _reservation_url(record):
    return record.reservation.get_absolute_url() if record.reservation_id else None


def _node_url(record):
    return cluster_detail_url("scheduling:node", record.cluster_id, record.node_name) if record.node_name else None


class NodePoolTable(PlainRowsTable):
    """The NodePools, their rows written by row_cells() (PlainRowsTable); header, sorting and pages stay
    django-tables2's, whose render_ methods below stay for its own rendering (tests compare the two)."""

    name = tables.Column(linkify=True)
    node_class = tables.Column(verbose_name="EC2NodeClass", empty_values=(), orderable=False)
    nodes = tables.Column(accessor="node_count", verbose_name="Nodes", orderable=False)
    ready = tables.Column(empty_values=(), orderable=False, verbose_name="Ready")
    mode = tables.Column(empty_values=(), verbose_name="Mode")

    cluster = ClusterColumn()

    class Meta:
        model = NodePool
        sequence = ("cluster", "...")
        fields = ("name", "weight", "node_class", "nodes", "consolidation_policy", "ready", "mode")
        attrs = {"class": "table"}

    def _health(self, record):
        """The pool's health as on its page (scheduling/nodepool_health.py); a class is looked up by name only for
        a pool whose link and nodeClassRef disagree. Worked out once a row (two columns show it)."""
        from scheduling.nodepool_health import health

        known = self.__dict__.setdefault("_healths", {})
        if id(record) in known and known[id(record)][0] is record:
            return known[id(record)][1]
        usage = {"cpu": getattr(record, "used_cpu", None) or 0, "memory": getattr(record, "used_memory", None) or 0,
                 "nodes": getattr(record, "node_count", None) or 0}
        known[id(record)] = (record, health(record, None, usage))  # the record kept: its id is not reused meanwhile
        return known[id(record)][1]

    def render_node_class(self, record):
        from scheduling.nodepool_health import node_class_name

        node_class = self._health(record).node_class
        if node_class is not None:
            return format_html('<a href="{}">{}</a>', node_class.get_absolute_url(), node_class.name)
        return format_html('<span class="badge bad">{} (not found)</span>', node_class_name(record) or "none")

    def render_ready(self, record):
        pool_health = self._health(record)
        ready = (mark_safe('<span class="badge ok">True</span>') if pool_health.is_ready else
                 format_html('<span class="badge bad" title="{}">{}</span> {}', pool_health.why_not_ready,
                             pool_health.ready["status"], pool_health.why_not_ready))
        if pool_health.over_limits:
            ready = format_html('{} <span class="badge warn over-limits">over its limits: {}</span>', ready,
                                "; ".join(pool_health.over_limits))
        return ready

    def render_mode(self, record):
        return record.mode or "global"

    POLICIES = choice_labels(NodePool, "consolidation_policy")

    def row_cells(self):
        policies = self.POLICIES

        def cells(record):
            policy = record.consolidation_policy
            return (record.name and link(record.get_absolute_url(), record.name), record.weight,
                    self.render_node_class(record), getattr(record, "node_count", None), policies.get(policy, policy),
                    self.render_ready(record), record.mode or "global")

        return cells


class _AgeMixin:
    def render_created_at(self, value):
        # One unit, as kubectl's AGE column ("3 days", not "3 days, 14 hours"): the table stays narrow.
        return timesince(value, timezone.now(), depth=1) if value else "—"


def _amount(kind: str, value: int) -> str:
    """CPU in cores ("1.93", "908.1"), as eks-node-viewer shows it; memory as Kubernetes writes it ("13.8Gi")."""
    if kind == CPU:
        return f"{value / 1000:.2f}".rstrip("0").rstrip(".")
    return format_resource(kind, value)


def use_bar(requested: int, allocatable: int, kind: str) -> SafeString:
    """Requests over allocatable as a bar and words, as eks-node-viewer shows a node: "1.5 / 1.93 (78%)"."""
    share = requested / allocatable if allocatable else 0.0
    # An f-string, not format_html: every part is a number or a unit ("Mi", "Gi"), nothing to escape (two bars
    # a row of the node list, whose rows are written with as few Python calls as they can be).
    return mark_safe(f'<div class="usage"><div class="bar{" full" if share >= 1 else ""}"><span style="width:'
                     f'{min(100, round(share * 100))}%"></span></div>{_amount(kind, requested)} / '
                     f'{_amount(kind, allocatable)} ({share:.0%})</div>')


def cost_text(cost) -> SafeString | str:
    """A node's cost: its list price an hour, or "prepaid" for a reserved node (never a misleading $0)."""
    if cost == PREPAID:
        return mark_safe('<span class="badge" title="Its reservation is billed whether used or not: running it costs '
                         'nothing more">prepaid</span>')
    return per_hour(cost)


PAID = (CapacityType.ON_DEMAND, CapacityType.SPOT)


def totals_heading(totals: dict) -> SafeString:
    """The totals row's heading: with the loop's running totals, how fresh they are."""
    if not totals.get("kept"):
        return mark_safe("Totals")
    when = totals.get("as_of")
    # Only the time kept on one line: the words wrap, or they set the Name column's width (the list fits 1280 px).
    return format_html('Totals <span class="muted" title="Counted by each cluster\'s last loop step">as of {}</span>',
                       format_html('the last loop step, <span class="nowrap">{} UTC</span>', f"{when:%H:%M:%S}")
                       if when else "now")


class NodeTable(_AgeMixin, PlainRowsTable):
    """The nodes with what each costs an hour and how much of its CPU and memory its pods request, and a
    totals row over every node the filter keeps. Its rows are written by row_cells() (PlainRowsTable): the
    all-clusters list spent most of its CPU in django-tables2's per-cell calls (docs/operations.md#performance);
    the header, sorting, pages and the totals footer stay django-tables2's. The render_ methods stay for
    django-tables2's own rendering, which tests compare the rows with."""

    name = tables.Column(linkify=True, attrs={"a": {"class": "id"}}, footer=lambda table: totals_heading(table.totals))
    node_pool = tables.Column(linkify=True, verbose_name="NodePool")
    reservation_label = tables.Column(
        verbose_name="Reservation",
        linkify=_reservation_url, attrs={"a": {"class": "id"}},
    )
    created_at = tables.Column(verbose_name="Age")
    pods = tables.Column(accessor="pod_count", verbose_name="Pods", orderable=False,
                         footer=lambda table: format_html('<span id="node-totals">{} node{}</span>', table.totals["nodes"],
                                                          pluralize(table.totals["nodes"])))
    cost = tables.Column(empty_values=(), orderable=False, verbose_name="Cost (list $/h)",
                         footer=lambda table: format_html(
                             '<span class="nowrap" id="node-cost-total">{}</span> <span class="muted">{}</span>',
                             per_hour(table.totals["cost"]), "; ".join(filter(None, [
                                 f"+ {table.totals['reserved']} reserved (prepaid)" if table.totals["reserved"] else "",
                                 f"{table.totals['unpriced']} without a known price" if table.totals["unpriced"] else ""]))))
    cpu = tables.Column(empty_values=(), orderable=False, verbose_name="CPU requested (cores)",
                        footer=lambda table: use_bar(table.totals["cpu_requested"], table.totals["cpu_allocatable"], CPU))
    memory = tables.Column(empty_values=(), orderable=False, verbose_name="Memory requested",
                           footer=lambda table: use_bar(table.totals["memory_requested"], table.totals["memory_allocatable"],
                                                        MEMORY))

    cluster = ClusterColumn()

    class Meta:
        model = Node
        sequence = ("cluster", "...")
        fields = ("name", "node_pool", "instance_type", "zone", "capacity_type", "reservation_label", "created_at", "pods",
                  "cost", "cpu", "memory", "ready")
        attrs = {"class": "table nodes"}

    @cached_property
    def totals(self) -> dict:
        return node_totals(self.data.data)

    def render_cost(self, record):
        return cost_text(node_cost_per_hour(record, self.prices))

    @cached_property
    def prices(self) -> dict:
        """Every filtered node's types' prices (the page's too); with the loop's totals (scheduling/totals.py),
        which may predate a node of a new type, the page's types' as well when one is missing."""
        prices = self.totals["prices"]
        if self.totals.get("kept"):
            rows = [row.record for row in self.paginated_rows]
            if any((r.instance_type, r.zone, r.capacity_type) not in prices for r in rows if r.capacity_type in PAID):
                prices = {**prices, **paid_prices({r.instance_type for r in rows})}
        return prices

    CAPACITY_TYPES = choice_labels(Node, "capacity_type")
    # What BooleanColumn renders for the ready column.
    READY = {True: mark_safe('<span class="true">✔</span>'), False: mark_safe('<span class="false">✘</span>')}

    def row_cells(self):
        prices, labels, ready, now, pool_links = self.prices, self.CAPACITY_TYPES, self.READY, timezone.now(), {}

        def cells(record):
            pool, name, label = record.node_pool, record.name, record.reservation_label
            key = pool and (pool.pk, pool.name)  # not by name alone: two clusters may each have a pool "web"
            if pool is not None and key not in pool_links:
                pool_links[key] = link(pool.get_absolute_url(), pool)
            return (name and id_link(record.get_absolute_url(), name), pool and pool_links[key], record.instance_type,
                    record.zone, labels.get(record.capacity_type, record.capacity_type),
                    label and (id_link(record.reservation.get_absolute_url(), label) if record.reservation_id else label),
                    record.created_at and timesince(record.created_at, now, depth=1), getattr(record, "pod_count", None),
                    cost_text(node_cost_per_hour(record, prices)),
                    use_bar(getattr(record, "cpu_requested", 0) or 0, record.allocatable_cpu_millicores, CPU),
                    use_bar(getattr(record, "memory_requested", 0) or 0, record.allocatable_memory_bytes, MEMORY),
                    ready[record.ready])

        return cells

    def render_cpu(self, record):
        return use_bar(getattr(record, "cpu_requested", 0) or 0, record.allocatable_cpu_millicores, CPU)

    def render_memory(self, record):
        return use_bar(getattr(record, "memory_requested", 0) or 0, record.allocatable_memory_bytes, MEMORY)


class NodeClaimTable(_AgeMixin, PlainRowsTable):
    """The NodeClaims, their rows written by row_cells() (PlainRowsTable); header, sorting and pages stay
    django-tables2's, whose render and link settings below stay for its own rendering (tests compare the two)."""

    name = tables.Column(linkify=True)
    node_pool = tables.Column(linkify=True, verbose_name="NodePool")
    reservation_label = tables.Column(
        verbose_name="Reservation",
        linkify=_reservation_url,
    )
    node_name = tables.Column(verbose_name="Node", linkify=_node_url)
    created_at = tables.Column(verbose_name="Age")

    cluster = ClusterColumn()

    class Meta:
        model = NodeClaim
        sequence = ("cluster", "...")
        fields = ("name", "node_pool", "instance_type", "zone", "capacity_type", "reservation_label", "node_name", "created_at")
        attrs = {"class": "table"}

    CAPACITY_TYPES = choice_labels(NodeClaim, "capacity_type")

    def row_cells(self):
        labels, now, pool_links, reservation_links = self.CAPACITY_TYPES, timezone.now(), {}, {}

        def cells(record):
            pool, name, label, node_name = record.node_pool, record.name, record.reservation_label, record.node_name
            # Made once a rendering: the rows share a few pools and reservations (a pool by id: names repeat across clusters).
            if pool is not None and pool.pk not in pool_links:
                pool_links[pool.pk] = link(pool.get_absolute_url(), pool)
            if label and record.reservation_id and (record.reservation_id, label) not in reservation_links:
                reservation_links[record.reservation_id, label] = link(_reservation_url(record), label)
            return (name and link(record.get_absolute_url(), name), pool and pool_links[pool.pk], record.instance_type,
                    record.zone, labels.get(record.capacity_type, record.capacity_type),
                    label and (reservation_links[record.reservation_id, label] if record.reservation_id else label),
                    node_name and link(_node_url(record), node_name),
                    record.created_at and timesince(record.created_at, now, depth=1))

        return cells


class CpuColumn(tables.Column):
    """`96`, `250m`: CPU as a pod spec writes it (the model keeps millicores)."""

    def render(self, value):
        return format_resource(CPU, value)


class MemoryColumn(tables.Column):
    """`256Mi`, `1Ti`: bytes with Kubernetes' binary suffixes."""

    def render(self, value):
        return format_resource(MEMORY, value)


class PodTable(PlainRowsTable):
    """The pods, their rows written by row_cells() (PlainRowsTable); header, sorting and pages stay
    django-tables2's, whose columns below stay for its own rendering (tests compare the two)."""

    name = tables.Column(linkify=True)
    node_name = tables.Column(verbose_name="Node", linkify=_node_url)
    cpu_request_millicores = CpuColumn(verbose_name="CPU request")
    memory_request_bytes = MemoryColumn(verbose_name="Memory request")

    cluster = ClusterColumn()

    class Meta:
        model = Pod
        sequence = ("cluster", "...")
        fields = ("namespace", "name", "node_name", "phase", "cpu_request_millicores", "memory_request_bytes")
        attrs = {"class": "table"}

    def row_cells(self):
        # Made once a rendering: a node's link (its pods share it; by cluster, whose nodes' names may repeat)
        # and each request amount's words (pods of a workload ask the same).
        node_links, cpus, memories = {}, {}, {}

        def cells(record):
            name, node_name, cpu, memory = record.name, record.node_name, record.cpu_request_millicores, record.memory_request_bytes
            if node_name and (record.cluster_id, node_name) not in node_links:
                node_links[record.cluster_id, node_name] = link(_node_url(record), node_name)
            if cpu not in cpus:
                cpus[cpu] = format_resource(CPU, cpu)
            if memory not in memories:
                memories[memory] = format_resource(MEMORY, memory)
            return (record.namespace, name and link(record.get_absolute_url(), name),
                    node_name and node_links[record.cluster_id, node_name], record.phase, cpus[cpu], memories[memory])

        return cells


class DecisionTable(PlainRowsTable):
    node_pool = tables.Column(verbose_name="NodePool", linkify=True)

    cluster = ClusterColumn()

    class Meta:
        model = Decision
        sequence = ("cluster", "...")
        fields = ("created_at", "kind", "outcome", "mode", "subject", "reason", "node_pool")
        attrs = {"class": "table"}
        order_by = ("-created_at",)

    KINDS, OUTCOMES, MODES = (choice_labels(Decision, name) for name in ("kind", "outcome", "mode"))

    def row_cells(self):
        when, pool_links = short_datetimes(), {}  # the links by NodePool name: 50 rows share a few

        def cells(record):
            pool = record.node_pool
            key = pool and (pool.pk, pool.name)  # not by name alone: two clusters may each have a pool "default"
            if pool is not None and key not in pool_links:
                pool_links[key] = link(pool.get_absolute_url(), pool)
            return (when(record.created_at), self.KINDS.get(record.kind, record.kind),
                    self.OUTCOMES.get(record.outcome, record.outcome), self.MODES.get(record.mode, record.mode),
                    record.subject, record.reason, pool and pool_links[key])

        return cells


class InstanceTypeTable(tables.Table):
    """The catalogue as NodePool authors need it: the labels they write requirements against."""

    name = tables.Column(linkify=True)
    vcpus = CpuColumn(accessor="cpu_millicores", verbose_name="vCPUs")
    memory = MemoryColumn(accessor="memory_bytes", verbose_name="Memory (EC2)")
    max_pods = tables.Column(verbose_name="Max pods")
    arch = tables.Column(verbose_name="Arch")
    # Label values: one column each, read from the labels map (their keys hold dots and slashes).
    category = tables.Column(accessor="labels", verbose_name="Category", orderable=False)
    generation = tables.Column(accessor="labels", verbose_name="Generation", orderable=False)
    accelerators = tables.Column(accessor="resources", verbose_name="Accelerators and devices", orderable=False)
    local_nvme = tables.Column(accessor="labels", verbose_name="Local NVMe (GB)", orderable=False)
    network = tables.Column(accessor="labels", verbose_name="Network (Mbps)", orderable=False)

    class Meta:
        model = InstanceType
        fields = ("name", "vcpus", "memory", "max_pods", "arch", "category", "generation", "accelerators", "local_nvme",
                  "network")
        attrs = {"class": "table"}

    def render_category(self, value):
        return value.get(INSTANCE_CATEGORY, "—")

    def render_generation(self, value):
        return value.get(INSTANCE_GENERATION, "—")

    def render_local_nvme(self, value):
        return value.get(INSTANCE_LOCAL_NVME, "—")

    def render_network(self, value):
        return value.get(INSTANCE_NETWORK_BANDWIDTH, "—")

    def render_accelerators(self, value):
        return ", ".join(f"{name} {count}" for name, count in sorted(value.items()) if name != "vpc.amazonaws.com/pod-eni") or "—"


def _claim_url(record):
    return cluster_detail_url("scheduling:nodeclaim", record.cluster_id, record.claim_name) if record.node_claim_id else None


def _launch_reservation_url(record):
    return detail_url("reservations:detail", record.reservation_label) if record.reservation_id else None


class KarpenterLaunchTable(tables.Table):
    """The audit: one row per NodeClaim karpweb did not create."""

    launched_at = tables.Column(verbose_name="Launched")
    claim_name = tables.Column(verbose_name="NodeClaim", linkify=_claim_url)
    node_pool_name = tables.Column(verbose_name="NodePool")
    reservation_label = tables.Column(verbose_name="Reservation", linkify=_launch_reservation_url)
    price_per_hour = tables.Column(verbose_name="Price per hour")
    missed_dollars = tables.Column(verbose_name="Missed (list price unless stated)")

    cluster = ClusterColumn()

    class Meta:
        model = KarpenterLaunch
        sequence = ("cluster", "...")
        fields = ("launched_at", "claim_name", "node_pool_name", "instance_type", "zone", "capacity_type", "outcome",
                  "reservation_label", "price_per_hour", "missed_dollars", "reason")
        attrs = {"class": "table"}
        order_by = ("-launched_at",)

    def render_price_per_hour(self, value, record):
        return f"${value:,.4f}{_basis_note(record)}"

    def render_missed_dollars(self, value, record):
        return f"${value:,.2f}{_basis_note(record)}" if record.outcome == KarpenterLaunch.Outcome.MISSED else "—"


def _basis_note(launch) -> str:
    """" (Savings Plan rate)" beside a figure not at list price (engine/commitments.py); "" at list price."""
    basis = launch.price_basis or LIST
    return "" if basis == LIST else f" ({basis_words(basis)})"


class AuditEntryTable(tables.Table):
    """The audit log: a few hundred rows a day at most, so django-tables2's own rendering."""

    created_at = tables.DateTimeColumn(verbose_name="When (UTC)", format="Y-m-d H:i:s")
    actor = tables.Column(verbose_name="User")
    source = tables.Column(verbose_name="Through")
    action = tables.Column()
    cluster = tables.Column(accessor="cluster__name", verbose_name="Cluster", default="fleet")
    object_repr = tables.Column(verbose_name="What", orderable=False)
    changes = tables.Column(orderable=False, empty_values=())

    class Meta:
        attrs = {"class": "table audit-log"}
        order_by = ("-created_at",)

    def render_source(self, value, record):
        return {"ui": "page", "api": "API", "admin": "admin", "cli": "command line"}.get(record.source, value)

    def render_object_repr(self, record, value):
        model = record.content_type.model_class()
        return f"{model._meta.verbose_name} {value}" if model else value

    def render_changes(self, value):
        return "; ".join(f"{field}: {old!s} -> {new!s}" for field, (old, new) in (value or {}).items()) or "-"
