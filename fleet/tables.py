import django_tables2 as tables
import karpweb.tables  # noqa: F401 - registers the shared column types before the tables below are built
from django.utils.safestring import mark_safe
from karpweb.tables import PlainRowsTable, choice_labels, link
from karpweb.urlcache import detail_url

from fleet.models import AwsAccount, Cluster
from scheduling.loop.health import failing_steps


OWN_CREDENTIALS = "karpweb's own credentials"


class AwsAccountTable(PlainRowsTable):
    """The fleet's AWS accounts, their rows written by row_cells() (PlainRowsTable); header, sorting and pages
    stay django-tables2's, whose columns below stay for its own rendering (tests compare the two)."""

    name = tables.Column(linkify=True)
    account_id = tables.Column(verbose_name="Account ID")
    role_arn = tables.Column(verbose_name="Role", default=OWN_CREDENTIALS)
    regions = tables.Column(orderable=False)
    cluster_count = tables.Column(verbose_name="Clusters")

    class Meta:
        model = AwsAccount
        fields = ("name", "account_id", "role_arn", "regions", "cluster_count")
        attrs = {"class": "table"}
        order_by = ("name",)

    def row_cells(self):
        def cells(record):
            name, regions = record.name, record.regions
            return (name and link(detail_url("fleet:account", record.account_id), name), record.account_id,
                    record.role_arn or OWN_CREDENTIALS, None if regions in (None, "") else self.render_regions(regions),
                    getattr(record, "cluster_count", None))

        return cells

    def render_regions(self, value):
        return ", ".join(value) or "—"


class ClusterTable(PlainRowsTable):
    """Every cluster of the fleet, its rows written by row_cells() (PlainRowsTable: django-tables2's per-cell calls
    were most of the page's CPU); header, sorting and pages stay django-tables2's."""

    name = tables.Column(linkify=True)
    account = tables.Column(linkify=True, order_by=("account__name",))
    mode = tables.Column(verbose_name="Mode", default="global")
    node_count = tables.Column(verbose_name="Nodes")
    pod_count = tables.Column(verbose_name="Pods")
    # Its failing loop steps (scheduling.loop.health.failing_steps: the view annotates them).
    failing = tables.Column(verbose_name="Failing steps", orderable=False, empty_values=(), default="")

    class Meta:
        model = Cluster
        fields = ("name", "account", "region", "connection", "mode", "karpenter", "shard", "is_default", "node_count",
                  "pod_count", "failing")
        attrs = {"class": "table"}
        order_by = ("name",)

    CONNECTIONS, MODES, KARPENTERS = (choice_labels(Cluster, name) for name in ("connection", "mode", "karpenter"))
    # What BooleanColumn renders for is_default.
    YES_NO = {True: mark_safe('<span class="true">✔</span>'), False: mark_safe('<span class="false">✘</span>')}

    def row_cells(self):
        connections, modes, karpenters, yes_no, account_links = self.CONNECTIONS, self.MODES, self.KARPENTERS, self.YES_NO, {}

        def cells(record):
            account = record.account
            if account.pk not in account_links:
                account_links[account.pk] = link(detail_url("fleet:account", account.account_id), account)
            return (record.name and link(detail_url("fleet:cluster", record.name), record.name), account_links[account.pk], record.region,
                    connections.get(record.connection, record.connection),
                    modes.get(record.mode, record.mode) if record.mode else "global",
                    karpenters.get(record.karpenter, record.karpenter), record.shard, yes_no[record.is_default],
                    getattr(record, "node_count", None), getattr(record, "pod_count", None), failing_text(record) or "—")

        return cells

    def render_failing(self, record):
        return failing_text(record) or "—"


def failing_text(cluster) -> str:
    """"sync_kubernetes since 2026-11-28 06:00 UTC: the error's line; ..." or "" (none failing)."""
    return "; ".join(f"{step.step} since {step.since:%Y-%m-%d %H:%M} UTC: {step.error}" for step in failing_steps(cluster))
