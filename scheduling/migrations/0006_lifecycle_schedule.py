"""The four 60 s steps (capacity-block drain, demotion, consolidation and drift, conditions) each ran
the engine on the whole world; at 5,000 nodes that is seconds each. They now share one engine run
in the `lifecycle` task: one beat entry replaces four."""

from django.db import migrations
from django.utils import timezone

SEPARATE = [
    ("consolidate", "karpweb.consolidate"),
    ("capacity-block expiry (drain)", "karpweb.expire_capacity_blocks"),
    ("demote reserved nodes that left their reservation", "karpweb.demote"),
    ("EC2NodeClass and NodePool status", "karpweb.status"),
]
LIFECYCLE = ("lifecycle: capacity-block drain, demotion, consolidation, drift, conditions", "karpweb.lifecycle")
EVERY = 60


def _schedule(apps, entries, remove):
    IntervalSchedule = apps.get_model("django_celery_beat", "IntervalSchedule")
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    PeriodicTask.objects.filter(name__in=[name for name, _ in remove]).delete()
    interval, _ = IntervalSchedule.objects.get_or_create(every=EVERY, period="seconds")
    for name, task in entries:
        PeriodicTask.objects.update_or_create(name=name, defaults={
            "task": task, "interval": interval, "enabled": True, "expire_seconds": EVERY - 1,
        })
    # Tell a running beat that the schedule changed.
    apps.get_model("django_celery_beat", "PeriodicTasks").objects.update_or_create(
        ident=1, defaults={"last_update": timezone.now()})


def forwards(apps, schema_editor):
    _schedule(apps, [LIFECYCLE], SEPARATE)


def backwards(apps, schema_editor):
    _schedule(apps, SEPARATE, [LIFECYCLE])


class Migration(migrations.Migration):
    dependencies = [("scheduling", "0005_decision_scheduled"), ("django_celery_beat", "0019_alter_periodictasks_options")]
    operations = [migrations.RunPython(forwards, backwards)]
