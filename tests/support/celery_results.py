"""Results through Redis for a test's in-process Celery worker, and back to none afterwards."""

from __future__ import annotations


def results_through(app, url: str | None, **conf) -> None:
    """Set the app's result backend to `url` (None: no results kept) and forget the backend object it
    made before: Celery keeps one for good once made (a thread-safe backend such as the disabled one
    in `_backend_cache`), so an earlier test that asked for a result would leave it disabled."""
    app.conf.update(result_backend=url, task_ignore_result=url is None, **conf)
    app._backend_cache = None
    app._local.__dict__.pop("backend", None)
