"""The overview says whether each scheduled loop step runs: its last run, last success, and what
is wrong (never ran, failing, or no success for three intervals)."""

import datetime
import importlib

import pytest
from django.apps import apps
from django.urls import reverse
from django.utils import timezone

from scheduling.loop.health import loop_health
from scheduling.models import TaskRun

pytestmark = pytest.mark.django_db
S = datetime.timedelta(seconds=1)


@pytest.fixture
def schedules(db):
    """The beat entries the migrations create (a test database may have been flushed of them)."""
    importlib.import_module("scheduling.migrations.0004_beat_schedules").create(apps, None)
    importlib.import_module("scheduling.migrations.0006_lifecycle_schedule").forwards(apps, None)


def run(task, ago, status="succeeded", error="", now=None):
    started = (now or timezone.now()) - ago
    return TaskRun.objects.create(task=task, started_at=started, finished_at=started + S, status=status, error=error)


def test_each_step_says_what_is_wrong(schedules):
    now = timezone.now()
    run("provision", 25 * S, now=now)  # every 10 s: last success 25 s ago is within 3 intervals
    run("sync_ec2", 200 * S, now=now)  # every 30 s: 200 s without success
    run("lifecycle", 120 * S, now=now)
    run("lifecycle", 60 * S, status="failed", error="WorldError: something\nmore", now=now)
    run("sync_kubernetes", 5 * S, status="skipped", now=now)  # another worker held the lease: not a run
    health = {step.step: step for step in loop_health(now)}
    assert set(health) == {"provision", "sync_ec2", "sync_kubernetes", "lifecycle", "sync_catalogue"}
    assert health["provision"].problem == "" and health["provision"].every == 10
    assert health["sync_ec2"].problem == "no successful run for 199 s (it runs every 30 s)"  # finished 1 s after it started
    assert health["lifecycle"].problem == "the last run failed: WorldError: something"
    assert health["sync_kubernetes"].problem.startswith("has not run yet")
    assert health["lifecycle"].last_success == now - 120 * S + S


def test_the_overview_shows_the_loop(viewer_client, schedules):
    run("lifecycle", 60 * S, status="failed", error="ClusterError: 503 from the API server")
    page = viewer_client.get(reverse("scheduling:overview"), HTTP_HX_REQUEST="true").content.decode()
    section = page.split('id="loop-health"')[1].split("</section>")[0]
    assert "the last run failed: ClusterError: 503 from the API server" in section
    assert section.count('class="error"') == 5  # nothing else has run either
