"""The migration to the fleet: a populated single-cluster database, migrated forward, loses nothing
and attributes everything to one account and one cluster; backwards gives the single-cluster
tables back as they were."""

import datetime

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

pytestmark = pytest.mark.django_db(transaction=True)

NOW = datetime.datetime(2026, 11, 26, 12, 0, tzinfo=datetime.timezone.utc)
CLUSTER_SIDE = ["EC2NodeClass", "NodePool", "NodeClaim", "Node", "Pod", "Decision", "KarpenterLaunch",
                "StandingOpportunity", "ControllerGuard", "AuditEntry", "WatchState", "SimulatedInstance"]
APP = {"EC2NodeClass": "reservations"}


def _node(executor, app: str, name_part: str) -> tuple[str, str]:
    matches = [key for key in executor.loader.graph.nodes if key[0] == app and name_part in key[1]]
    assert len(matches) == 1, matches
    return matches[0]


def before_the_fleet(executor) -> list[tuple[str, str | None]]:
    """The last migrations before the fleet's (found by name: the lead renumbers on merge)."""
    targets = [("fleet", None)]
    for app, part in (("reservations", "fleet_accounts_and_cluster_column"), ("scheduling", "fleet_cluster_columns")):
        first = _node(executor, app, part)
        parents = [p for p in executor.loader.graph.node_map[first].parents if p.key[0] == app]
        targets.append(parents[0].key)
    return targets


def latest(executor) -> list[tuple[str, str]]:
    return executor.loader.graph.leaf_nodes()


def migrate(targets):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return MigrationExecutor(connection).loader.project_state([t for t in targets if t[1] is not None]).apps


def populate(apps):
    """One of everything the fleet attributes, written through the old (single-cluster) models."""
    User = apps.get_model("auth", "User")
    ContentType = apps.get_model("contenttypes", "ContentType")
    get = lambda model: apps.get_model(APP.get(model, "scheduling"), model)  # noqa: E731
    Reservation = apps.get_model("reservations", "CapacityReservation")
    for n, owner in enumerate(["111111111111", "111111111111", "111111111111", "999999999999"]):
        Reservation.objects.create(reservation_id=f"cr-m{n}", owner_id=owner, region="us-east-1",
                                   instance_type="m5.large", availability_zone="us-east-1a",
                                   total_instance_count=2, available_instance_count=1)
    node_class = get("EC2NodeClass").objects.create(name="default")
    pool = get("NodePool").objects.create(name="default", node_class=node_class)
    claim = get("NodeClaim").objects.create(name="default-abc", node_pool=pool)
    node = get("Node").objects.create(name="ip-10-0-0-1", node_pool=pool, node_claim=claim)
    get("Pod").objects.create(namespace="default", name="web-0", node=node, node_name=node.name)
    get("Decision").objects.create(kind="launch", mode="observe", subject="pod default/web-0", reason="r")
    get("KarpenterLaunch").objects.create(claim_name="k-1", instance_type="m5.large", zone="us-east-1a",
                                          capacity_type="on-demand", launched_at=NOW, outcome="no-free-unit",
                                          reason="r")
    get("StandingOpportunity").objects.create(computed_at=NOW, nodes=["n"], capacity_type="on-demand",
                                              reservation_label="cr-m0", replacement_instance_type="m5.large",
                                              savings_per_hour=0.1, reason="r")
    get("ControllerGuard").objects.create(pk=1, checked_at=NOW)
    user = User.objects.create(username="migrator")
    get("AuditEntry").objects.create(user=user, actor="migrator", source="admin", action="change",
                                     content_type=ContentType.objects.get(app_label="scheduling", model="nodepool"),
                                     object_id=str(pool.pk), object_repr="default")
    get("WatchState").objects.create(pk=1, events=42)
    get("SimulatedInstance").objects.create(instance_id="i-0m", client_token="t-0m", instance_type="m5.large",
                                            zone="us-east-1a", capacity_type="on-demand")


def counts(apps) -> dict[str, int]:
    found = {model: apps.get_model(APP.get(model, "scheduling"), model).objects.count() for model in CLUSTER_SIDE}
    found["CapacityReservation"] = apps.get_model("reservations", "CapacityReservation").objects.count()
    return found


def test_a_single_cluster_install_becomes_a_fleet_of_one_and_back(settings):
    settings.KARPWEB_CLUSTER_NAME = "Prod_EU"
    settings.KARPWEB_CLUSTER = "kubernetes"
    settings.KARPWEB_KUBECONFIG = ""
    executor = MigrationExecutor(connection)
    before, after = before_the_fleet(executor), latest(executor)
    try:
        old = migrate(before)
        populate(old)
        had = counts(old)
        assert all(had.values()), had

        new = migrate(after)
        assert counts(new) == had  # nothing lost
        Cluster, AwsAccount = new.get_model("fleet", "Cluster"), new.get_model("fleet", "AwsAccount")
        cluster = Cluster.objects.get()
        assert (cluster.name, cluster.connection, cluster.is_default) == ("prod-eu", "in-cluster", True)
        account = AwsAccount.objects.get()
        assert account.account_id == "111111111111" and cluster.account_id == account.pk  # most reservations' owner
        for model in CLUSTER_SIDE:  # everything attributed
            rows = new.get_model(APP.get(model, "scheduling"), model).objects
            assert rows.filter(cluster=cluster).count() == had[model], model
        Visibility = new.get_model("reservations", "ReservationVisibility")
        assert sorted(Visibility.objects.filter(account=account).values_list(
            "reservation__reservation_id", "shared")) == [
            ("cr-m0", False), ("cr-m1", False), ("cr-m2", False), ("cr-m3", True)]
        Reservation = new.get_model("reservations", "CapacityReservation")
        assert Reservation.objects.filter(owner_account=account).count() == 3
        assert new.get_model("scheduling", "WatchState").objects.get(cluster=cluster).events == 42

        back = migrate(before)
        assert counts(back) == had  # and back again, nothing lost
        assert back.get_model("scheduling", "Pod").objects.get().name == "web-0"
    finally:
        migrate(after)
