"""The worker entry point of the worker-killed test: ``celery -A tests.faults.celery_app worker``.

karpweb's own Celery app (karpweb/celery.py, settings from the environment), with what only this
test needs: its own queue and result store on the test's throwaway Redis, and a short visibility
timeout, looked at every second, so that the message of a killed worker comes back within seconds
instead of an hour. Test-only: the product has no crash hooks; the test slows EC2 down and kills
this process."""

import os

from karpweb.celery import app

app.conf.update(
    task_default_queue=os.environ["KARPWEB_TEST_QUEUE"],
    result_backend=os.environ["REDIS_URL"],
    task_ignore_result=False,
    # Look for messages past their visibility timeout every second and scan each time (kombu's
    # defaults: a look every 10 s, a scan on every tenth look, so up to 100 s); a scan lock left by
    # the killed worker lapses after 5 s (default 300 s).
    broker_transport_options={"visibility_timeout": float(os.environ["KARPWEB_TEST_VISIBILITY_TIMEOUT"]),
                              "unacked_restore_interval": 1, "unacked_restore_throttle": 1,
                              "unacked_mutex_expire": 5},
)

__all__ = ["app"]
