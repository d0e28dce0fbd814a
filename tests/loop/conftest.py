import os

import pytest
from celery.contrib.testing.worker import start_worker
from django.core.management import call_command

from karpweb.celery import app as celery_app
from tests.support.celery_results import results_through
from tests.support.logging_state import logging_left_as_found


@pytest.fixture
def demo(transactional_db):
    # One cluster: these tests follow each task's own run (a fleet's tasks dispatch: tests/fleet).
    call_command("seed_demo", "--one-cluster")


@pytest.fixture
def celery_worker(transactional_db, settings):
    """An in-process worker on the real Redis broker; results go back through Redis too."""
    assert settings.CELERY_BROKER_URL.startswith("redis://"), "the loop tests need REDIS_URL"
    # A queue of this test process's own (each xdist worker, each concurrent run on one Redis):
    # no worker ever takes another's tasks. Results are keyed by task id.
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    results_through(celery_app, settings.CELERY_BROKER_URL, task_default_queue=f"karpweb-test-{worker}-{os.getpid()}")
    with logging_left_as_found(), start_worker(celery_app, pool="solo", perform_ping_check=False, shutdown_timeout=10):
        yield celery_app
    results_through(celery_app, None, task_default_queue="celery")
