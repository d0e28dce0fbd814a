"""The control loop's periodic tasks, editable afterwards in the admin (django-celery-beat).

Each entry expires one second before its next run is due, so a backed-up queue never runs a
stale step twice in a row."""

from django.db import migrations

SCHEDULES = [
    # name, task, every (seconds)
    ("sync EC2 (reservations, utilization samples)", "karpweb.sync_ec2", 30),
    ("sync Kubernetes", "karpweb.sync_kubernetes", 30),
    ("provision", "karpweb.provision", 10),
    ("consolidate", "karpweb.consolidate", 60),
    ("capacity-block expiry (drain)", "karpweb.expire_capacity_blocks", 60),
    ("demote reserved nodes that left their reservation", "karpweb.demote", 60),
    ("EC2NodeClass and NodePool status", "karpweb.status", 60),
    ("sync EC2 catalogue (instance types, prices)", "karpweb.sync_catalogue", 3600),
]


def create(apps, schema_editor):
    IntervalSchedule = apps.get_model("django_celery_beat", "IntervalSchedule")
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    PeriodicTasks = apps.get_model("django_celery_beat", "PeriodicTasks")
    for name, task, seconds in SCHEDULES:
        interval, _ = IntervalSchedule.objects.get_or_create(every=seconds, period="seconds")
        PeriodicTask.objects.update_or_create(name=name, defaults={
            "task": task, "interval": interval, "enabled": True, "expire_seconds": max(seconds - 1, 1),
        })
    # Tell a running beat that the schedule changed.
    from django.utils import timezone

    PeriodicTasks.objects.update_or_create(ident=1, defaults={"last_update": timezone.now()})


def remove(apps, schema_editor):
    apps.get_model("django_celery_beat", "PeriodicTask").objects.filter(name__in=[s[0] for s in SCHEDULES]).delete()


class Migration(migrations.Migration):
    dependencies = [("scheduling", "0003_loop"), ("django_celery_beat", "0019_alter_periodictasks_options")]
    operations = [migrations.RunPython(create, remove)]
