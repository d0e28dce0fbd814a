"""Redis (the Celery broker and result store) restarted in the middle of a run: the loop goes on
with the next tasks on a fresh Redis, and every TaskRun and Decision is in the database."""

import pytest
from celery import Celery
from celery.contrib.testing.worker import start_worker

from scheduling.models import Decision, TaskRun
from tests.support.logging_state import logging_left_as_found

from .redis_server import ThrowawayRedis

pytestmark = [
    pytest.mark.django_db(transaction=True),
    # karpweb sets worker_cancel_long_running_tasks_on_connection_loss=False on purpose (settings.py);
    # Celery warns about its future default whenever a connection is lost.
    pytest.mark.filterwarnings("ignore::celery.exceptions.CPendingDeprecationWarning"),
]
WAIT = 60


@pytest.fixture
def redis_server(tmp_path):
    server = ThrowawayRedis(tmp_path)
    server.start()
    yield server
    server.kill()


@pytest.fixture
def app(redis_server):
    """karpweb's Celery configuration on the throwaway Redis (the tasks are shared tasks)."""
    import scheduling.tasks  # noqa: F401 - registers the shared tasks

    app = Celery("karpweb-faults", set_as_current=False)
    app.config_from_object("django.conf:settings", namespace="CELERY")
    app.conf.update(broker_url=redis_server.url, result_backend=redis_server.url, task_ignore_result=False,
                    broker_connection_retry=True, broker_connection_max_retries=None,
                    # Publishing retries a lost connection for a while (a restart takes a moment).
                    task_publish_retry_policy={"max_retries": 20, "interval_start": 0.2, "interval_step": 0.2,
                                               "interval_max": 1})
    app.finalize()
    yield app
    app.close()


def run(app, name):
    return app.tasks[name].apply_async().get(timeout=WAIT)


def test_redis_killed_and_restarted_between_tasks(demo, app, redis_server, settings):
    settings.KARPWEB_MODE = "control"
    with logging_left_as_found(), start_worker(app, pool="solo", perform_ping_check=False, shutdown_timeout=20) as worker:
        assert run(app, "karpweb.sync_ec2")["samples"] > 0
        assert run(app, "karpweb.sync_kubernetes")["pods_created"] > 0

        redis_server.restart()  # SIGKILL and a fresh, empty Redis on the same port

        counts = run(app, "karpweb.provision")
        assert counts["launched"] == counts["claims_planned"] > 0

        redis_server.restart()

        assert run(app, "karpweb.status")["node_pools_changed"] >= 0
        assert run(app, "karpweb.sync_ec2")["samples"] > 0
        assert worker.consumer.connection is not None

    assert redis_server.starts == 3
    runs = list(TaskRun.objects.order_by("started_at").values_list("task", "status"))
    assert runs == [("sync_ec2", "succeeded"), ("sync_kubernetes", "succeeded"), ("provision", "succeeded"),
                    ("status", "succeeded"), ("sync_ec2", "succeeded")]
    assert all(run.finished_at and run.counts for run in TaskRun.objects.all())
    assert Decision.objects.filter(kind="launch", outcome="acted").count() == counts["launched"]


def test_redis_killed_while_a_task_runs(demo, app, redis_server, settings, monkeypatch):
    """The step finishes and records its run while the broker is gone; the next tasks run as usual."""
    from scheduling.loop import steps

    settings.KARPWEB_MODE = "control"
    real_status = steps.status

    def status_with_a_redis_crash(now=None):
        redis_server.restart()
        return real_status(now)

    monkeypatch.setattr(steps, "status", status_with_a_redis_crash)
    with logging_left_as_found(), start_worker(app, pool="solo", perform_ping_check=False, shutdown_timeout=20):
        assert run(app, "karpweb.sync_kubernetes")["pods_created"] > 0
        app.tasks["karpweb.status"].apply_async()
        wait_for(lambda: TaskRun.objects.filter(task="status", finished_at__isnull=False).exists())
        counts = run(app, "karpweb.provision")
        assert counts["launched"] == counts["claims_planned"] > 0

    status_runs = TaskRun.objects.filter(task="status")
    assert [r.status for r in status_runs] == ["succeeded"], "recorded once, not lost and not run twice"
    assert TaskRun.objects.get(task="provision").status == "succeeded"
    assert Decision.objects.filter(kind="launch", outcome="acted").count() == counts["launched"]


def wait_for(condition, seconds=WAIT):
    import time

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    raise AssertionError(f"not within {seconds} s")
