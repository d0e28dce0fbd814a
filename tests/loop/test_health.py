"""The overview says whether each scheduled loop step runs: its last run, last success, and what
is wrong (never ran, failing, or no success for three intervals)."""

import datetime
import importlib
import re
import time

import pytest
import time_machine
from django.apps import apps
from django.urls import reverse
from django.utils import timezone

from scheduling.loop import startup
from scheduling.loop.health import loop_health
from scheduling.models import TaskRun
from tests.support.clusters import use_cluster

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
    # Never ran, while the worker runs other steps: about to run (a starting worker runs each due step).
    assert health["sync_kubernetes"].problem == "" and health["sync_kubernetes"].note == "waiting for its first run"
    assert health["lifecycle"].last_success == now - 120 * S + S


def test_the_overview_shows_the_loop(viewer_client, schedules):
    run("lifecycle", 60 * S, status="failed", error="ClusterError: 503 from the API server")
    page = viewer_client.get(reverse("scheduling:overview"), HTTP_HX_REQUEST="true").content.decode()
    section = page.split('id="loop-health"')[1].split("</section>")[0]
    assert "the last run failed: ClusterError: 503 from the API server" in section
    # provision (every 10 s) is past three intervals since the worker was last seen; the slower steps
    # that never ran are waiting for their first run, not late.
    assert section.count('class="error"') == 2
    assert section.count("waiting for its first run") == 3


def test_no_worker_at_all_is_a_problem_for_every_step(schedules):
    health = loop_health(timezone.now())
    assert {step.problem for step in health} == {"has not run yet: is the Celery worker (and beat) running?"}


def test_a_starting_worker_runs_every_due_step_once_and_none_is_late(demo, schedules, celery_worker):
    # `celery worker` sends worker_ready once it consumes; celery.contrib.testing's worker does not,
    # so the test sends it as the real worker would, with the worker's consumer app.
    from celery.signals import worker_ready

    class Consumer:  # what the signal's sender offers the handler: the worker's app
        app = celery_worker

    worker_ready.send(sender=Consumer())
    steps = {"provision", "sync_ec2", "sync_kubernetes", "lifecycle", "sync_catalogue"}
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        done = set(TaskRun.objects.filter(finished_at__isnull=False).values_list("task", flat=True))
        if done >= steps:
            break
        time.sleep(0.5)
    runs = TaskRun.objects.exclude(status="skipped")
    assert sorted(runs.values_list("task", flat=True)) == sorted(steps)  # each once
    assert set(runs.values_list("status", flat=True)) == {"succeeded"}
    start = timezone.now()
    assert [(step.step, step.problem, step.note) for step in loop_health(start) if step.problem or step.note] == []
    # 40 minutes on with no beat: the 10 s to 60 s steps are due again and late; the hourly catalogue
    # sync is neither.
    with time_machine.travel(start + datetime.timedelta(minutes=40)):
        later = timezone.now()
        assert startup.due_steps(later) == sorted(f"karpweb.{step}" for step in steps - {"sync_catalogue"})
        late = {step.step for step in loop_health(later) if step.problem}
    assert late == steps - {"sync_catalogue"}


def test_due_steps_at_start(schedules):
    now = timezone.now()
    assert startup.due_steps(now) == sorted(["karpweb.lifecycle", "karpweb.provision", "karpweb.sync_catalogue",
                                             "karpweb.sync_ec2", "karpweb.sync_kubernetes"])
    run("sync_catalogue", 59 * 60 * S, now=now)  # hourly: not due for another minute
    run("sync_ec2", 31 * S, now=now)  # every 30 s: due
    run("provision", 2 * S, status="failed", now=now)  # ran (and failed) 2 s ago: the retry handles it
    run("lifecycle", 1 * S, status="skipped", now=now)  # another worker held the lease: not a run
    assert startup.due_steps(now) == ["karpweb.lifecycle", "karpweb.sync_ec2", "karpweb.sync_kubernetes"]


def test_the_overview_shows_the_watch(viewer_client, settings):
    from django.db.models import F

    from scheduling.models import WatchState

    url = reverse("scheduling:overview")
    watch_line = lambda: viewer_client.get(url).content.decode().split('id="watch-health"')[1].split("</p>")[0]  # noqa: E731
    use_cluster(connection="simulated")
    assert "not needed" in watch_line() and "never synced" in watch_line()
    use_cluster(connection="in-cluster")
    line = watch_line()
    assert 'class="error"' in line and "not running: the cluster is polled by the 30 s sync" in line
    now = timezone.now()
    WatchState.record(holder="web-1:42:ab", started_at=now - 300 * S, heartbeat_at=now - 1 * S,
                      last_event_at=now - 4 * S, world_as_of=now - 4 * S, events=F("events") + 1520, relists=1,
                      reconnects=2, lag_seconds=0.031, batches=7, last_batch_at=now - 60 * S)
    line = watch_line()
    assert 'class="error"' not in line
    for text in ("connected (web-1:42:ab)", "last event 0m 04s ago", "1520 events, 1 relist, 2 reconnects",
                 "lag 0.03 s", "7 provisioning batches, the last 1m 00s ago", "Cluster as of 0m 04s ago", "started 5m 00s ago"):
        assert text in line, (text, line)
    page = viewer_client.get(reverse("scheduling:pods")).content.decode()
    assert f'cluster as of {timezone.localtime(now - 4 * S):%Y-%m-%d %H:%M} UTC' in page  # every page's header
    metrics = viewer_client.get("/metrics").content.decode()
    for sample in ('karpweb_watch_connected{cluster="karpweb-test"} 1.0', 'karpweb_watch_events_total{cluster="karpweb-test"} 1520.0',
                   'karpweb_watch_relists_total{cluster="karpweb-test"} 1.0', 'karpweb_watch_lag_seconds{cluster="karpweb-test"} 0.031'):
        assert sample in metrics, sample
    WatchState.record(heartbeat_at=timezone.now() - 45 * S)  # not `now`: a busy machine's page comes seconds later
    assert re.search(r"no heartbeat for 4[5-9] s", watch_line())  # the page's wall clock moved on meanwhile
    assert 'karpweb_watch_connected{cluster="karpweb-test"} 0.0' in viewer_client.get("/metrics").content.decode()


def record(path, *lines):
    path.write_text("".join(line + "\n" for line in lines))
    return path


def test_the_quick_starts_worker_restart_says_why_the_loop_stopped(schedules, settings, tmp_path):
    settings.KARPWEB_WORKER_RESTARTS = record(
        tmp_path / "celery-restarts.log",
        "2026-11-28T06:40:00Z\t1\t2026-11-28T06:40:01Z\tan older exit",
        "2026-11-28T06:58:10Z\t1\t2026-11-28T06:58:12Z\tjson.decoder.JSONDecodeError: Expecting value: line 1 column 1",
        "2026-11-28T06:58",  # a line the supervisor was still writing: skipped
    )
    now = datetime.datetime(2026, 11, 28, 7, 5, tzinfo=datetime.UTC)
    run("sync_ec2", 600 * S, now=now)  # its last success (06:55) before the exit: the exit says why
    run("provision", 5 * S, now=now)  # succeeded since the exit: no problem, no note
    run("lifecycle", 400 * S, status="failed", error="WorldError: something", now=now)  # its own error says why
    health = {step.step: step for step in loop_health(now)}
    assert health["sync_ec2"].problem == (
        "no successful run for 599 s (it runs every 30 s) — the Celery worker exited with code 1 at 06:58:10 UTC "
        "(json.decoder.JSONDecodeError: Expecting value: line 1 column 1) and ./karpweb.sh run restarted it at "
        "06:58:12 UTC (3 restarts so far, var/celery-restarts.log); if it keeps stopping, read var/celery.log, "
        "then stop ./karpweb.sh run (Ctrl-C) and start it again")
    assert health["provision"].problem == ""
    assert health["lifecycle"].problem == "the last run failed: WorldError: something"
    settings.KARPWEB_WORKER_RESTARTS = record(tmp_path / "killed.log", "2026-11-28T06:58:10Z\t137\t2026-11-28T06:58:11Z\t")
    health = {step.step: step for step in loop_health(now)}
    assert "the Celery worker was killed by signal 9 at 06:58:10 UTC" in health["sync_ec2"].problem


def test_an_exit_before_the_last_success_or_no_record_adds_nothing(schedules, settings, tmp_path):
    now = datetime.datetime(2026, 11, 28, 7, 5, tzinfo=datetime.UTC)
    run("sync_ec2", 600 * S, now=now)
    expected = "no successful run for 599 s (it runs every 30 s)"
    settings.KARPWEB_WORKER_RESTARTS = record(tmp_path / "old.log", "2026-11-28T06:50:00Z\t1\t2026-11-28T06:50:01Z\tx")
    assert {step.step: step for step in loop_health(now)}["sync_ec2"].problem == expected
    settings.KARPWEB_WORKER_RESTARTS = tmp_path / "missing.log"  # ./karpweb.sh run not used
    assert {step.step: step for step in loop_health(now)}["sync_ec2"].problem == expected
    settings.KARPWEB_WORKER_RESTARTS = None  # production: the process manager restarts the worker
    assert {step.step: step for step in loop_health(now)}["sync_ec2"].problem == expected


def test_the_overview_shows_the_supervisors_record(viewer_client, schedules, settings, tmp_path):
    exited = timezone.now() - 60 * S
    stamp = f"{exited:%Y-%m-%dT%H:%M:%SZ}"
    settings.KARPWEB_WORKER_RESTARTS = record(
        tmp_path / "celery-restarts.log", f"{stamp}\t1\t{stamp}\tkombu.exceptions.DecodeError: Expecting value")
    page = viewer_client.get(reverse("scheduling:overview"), HTTP_HX_REQUEST="true").content.decode()
    section = page.split('id="loop-health"')[1].split("</section>")[0]
    assert f"the Celery worker exited with code 1 at {exited:%H:%M:%S} UTC" in section
    assert "kombu.exceptions.DecodeError: Expecting value" in section
    assert "stop ./karpweb.sh run (Ctrl-C) and start it again" in section
