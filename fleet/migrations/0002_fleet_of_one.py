"""The fleet, step 2: an install of one cluster becomes a fleet of one.

One AwsAccount (the owner most reservations carry, else 000000000000 named "default") and one Cluster (named after KARPWEB_CLUSTER_NAME, else "default"; connection from
KARPWEB_CLUSTER and KUBECONFIG; flagged default), both from fleet.defaults, the same rules an empty
database's first cluster follows. Every Kubernetes-side row goes to that cluster; every reservation
is recorded as seen by that account (owned when its owner_id is the account's, else shared), and
linked to its owner account when the owner is that account. Nothing is deleted.

Backwards: the cluster columns and visibilities are emptied (the next step back drops them); the
account and cluster stay until fleet's 0001 is reversed. Refused when the fleet has more than one
cluster: their rows would collide on the names that were unique before."""

from django.conf import settings
from django.db import migrations

from fleet.defaults import account_fields, cluster_fields

CLUSTER_SIDE = [
    ("reservations", "EC2NodeClass"),
    ("scheduling", "NodePool"), ("scheduling", "NodeClaim"), ("scheduling", "Node"), ("scheduling", "Pod"),
    ("scheduling", "Decision"), ("scheduling", "KarpenterLaunch"), ("scheduling", "StandingOpportunity"),
    ("scheduling", "ControllerGuard"), ("scheduling", "AuditEntry"), ("scheduling", "WatchState"),
    ("scheduling", "SimulatedInstance"),
]
BATCH = 2000


def forwards(apps, schema_editor):
    AwsAccount = apps.get_model("fleet", "AwsAccount")
    Cluster = apps.get_model("fleet", "Cluster")
    CapacityReservation = apps.get_model("reservations", "CapacityReservation")
    ReservationVisibility = apps.get_model("reservations", "ReservationVisibility")

    fields = account_fields(settings, CapacityReservation.objects.values_list("owner_id", flat=True).iterator())
    account, _ = AwsAccount.objects.get_or_create(account_id=fields.pop("account_id"), defaults=fields)
    fields = cluster_fields(settings)
    cluster = (Cluster.objects.filter(is_default=True).first()
               or Cluster.objects.get_or_create(name=fields.pop("name"), defaults={**fields, "account": account})[0])

    for app_label, model_name in CLUSTER_SIDE:
        apps.get_model(app_label, model_name).objects.filter(cluster__isnull=True).update(cluster=cluster)

    CapacityReservation.objects.filter(owner_id=account.account_id, owner_account__isnull=True).update(owner_account=account)
    seen = set(ReservationVisibility.objects.filter(account=account).values_list("reservation_id", flat=True))
    rows = []
    for pk, owner_id in CapacityReservation.objects.order_by("pk").values_list("pk", "owner_id").iterator():
        if pk not in seen:
            rows.append(ReservationVisibility(reservation_id=pk, account=account, shared=owner_id != account.account_id))
        if len(rows) >= BATCH:
            ReservationVisibility.objects.bulk_create(rows)
            rows = []
    ReservationVisibility.objects.bulk_create(rows)


def backwards(apps, schema_editor):
    Cluster = apps.get_model("fleet", "Cluster")
    if Cluster.objects.count() > 1:
        raise RuntimeError("fleet 0002 backwards: the fleet has several clusters; a single-cluster karpweb can keep "
                           "one only (delete the others first)")
    for app_label, model_name in CLUSTER_SIDE:
        apps.get_model(app_label, model_name).objects.update(cluster=None)
    apps.get_model("reservations", "ReservationVisibility").objects.all().delete()
    apps.get_model("reservations", "CapacityReservation").objects.update(owner_account=None)


class Migration(migrations.Migration):

    dependencies = [
        ("fleet", "0001_accounts_and_clusters"),
        ("reservations", "0006_fleet_accounts_and_cluster_column"),
        ("scheduling", "0018_fleet_cluster_columns"),
    ]

    operations = [migrations.RunPython(forwards, backwards)]
