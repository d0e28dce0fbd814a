"""The loop's own history is pruned: task runs and decisions past their retention go, a run still
marked running stays (its lease-expiry handling says how it ended), manual overrides stay for ever."""

import datetime

import pytest
from django.test import override_settings
from django.utils import timezone

from scheduling.audit import record_change
from scheduling.loop import steps
from scheduling.models import AuditEntry, Decision, NodePool, TaskRun
from tests.factories.scheduling import DecisionFactory, NodePoolFactory

pytestmark = pytest.mark.django_db
DAY = datetime.timedelta(days=1)


@override_settings(KARPWEB_TASK_RUN_RETENTION_DAYS=14, KARPWEB_DECISION_RETENTION_DAYS=90)
def test_history_past_its_retention_is_pruned_and_overrides_are_kept():
    now = timezone.now()
    for age, status in ((15, "succeeded"), (15, "failed"), (15, "running"), (13, "succeeded")):
        TaskRun.objects.create(task="provision", started_at=now - age * DAY, finished_at=now - age * DAY, status=status)
    for age in (91, 89):
        DecisionFactory(created_at=now - age * DAY)
    pool = NodePoolFactory(name="web")
    old = record_change(user=None, source=AuditEntry.Source.ADMIN, obj=pool, action=AuditEntry.Action.CHANGE,
                        changes={"weight": [1, 2]})
    AuditEntry.objects.filter(pk=old.pk).update(created_at=now - 1000 * DAY)

    assert steps.prune_history(now) == {"task_runs_pruned": 2, "decisions_pruned": 1, "doctor_findings_pruned": 0}
    assert sorted(TaskRun.objects.values_list("status", flat=True)) == ["running", "succeeded"]
    # The manual change is a decision too (kind override), written now, so kept.
    assert Decision.objects.exclude(kind="override").count() == 1 and AuditEntry.objects.filter(pk=old.pk).exists()
    assert NodePool.objects.filter(name="web").exists()
    assert steps.prune_history(now) == {"task_runs_pruned": 0, "decisions_pruned": 0, "doctor_findings_pruned": 0}


def test_the_sync_step_prunes(db):
    counts = steps.sync_ec2()
    assert {"task_runs_pruned", "decisions_pruned", "samples_pruned", "hours_pruned"} <= set(counts)
