"""A test's in-process Celery worker: results through Redis and a default queue of its own, and
back to the settings' afterwards."""

from __future__ import annotations

# What the app makes once and keeps (kombu cached_property): the task sender fixes its default queue
# when it is first made, and the queues the first time they are read.
KEPT_BY_AMQP = ("send_task_message", "default_queue", "queues", "router")


def results_through(app, url: str | None, **conf) -> None:
    """Set the app's result backend to `url` (None: no results kept) and `conf` (the default queue),
    and forget what the app made from the earlier configuration: its result backend (a thread-safe
    one, such as the disabled one, is kept in `_backend_cache` for good) and its queues and task
    sender (an earlier test that sent a task would leave this one's tasks on the old default queue)."""
    app.conf.update(result_backend=url, task_ignore_result=url is None, **conf)
    # A task reads task_ignore_result once, when it is first bound: one used by an earlier test (the
    # front page's, say) would keep ignoring its results, and its result's get() answer None at once.
    for task in app.tasks.values():
        task.ignore_result = url is None
    app._backend_cache = None
    app._local.__dict__.pop("backend", None)
    for name in KEPT_BY_AMQP:
        app.amqp.__dict__.pop(name, None)
