import django_tables2 as tables
import karpweb.tables  # noqa: F401 - registers the shared column types before the tables below are built

from fleet.models import AwsAccount, Cluster


class AwsAccountTable(tables.Table):
    name = tables.Column(linkify=True)
    account_id = tables.Column(verbose_name="Account ID")
    role_arn = tables.Column(verbose_name="Role", default="karpweb's own credentials")
    regions = tables.Column(orderable=False)
    cluster_count = tables.Column(verbose_name="Clusters")

    class Meta:
        model = AwsAccount
        fields = ("name", "account_id", "role_arn", "regions", "cluster_count")
        attrs = {"class": "table"}
        order_by = ("name",)

    def render_regions(self, value):
        return ", ".join(value) or "—"


class ClusterTable(tables.Table):
    name = tables.Column(linkify=True)
    account = tables.Column(linkify=True, order_by=("account__name",))
    mode = tables.Column(verbose_name="Mode", default="global")
    node_count = tables.Column(verbose_name="Nodes")
    pod_count = tables.Column(verbose_name="Pods")

    class Meta:
        model = Cluster
        fields = ("name", "account", "region", "connection", "mode", "karpenter", "shard", "is_default", "node_count",
                  "pod_count")
        attrs = {"class": "table"}
        order_by = ("name",)
