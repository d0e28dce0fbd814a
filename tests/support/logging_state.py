"""Logging put back as a test found it.

celery.contrib.testing's ``start_worker`` sets logging up as a worker does: the root logger at the
worker's level (ERROR) and Celery's handlers in place of the others. Left so, every later test in the
process loses its WARNING records (``caplog`` sees nothing), so whether a test passes depends on
whether a worker ran before it in the same process."""

import logging
from collections.abc import Iterator
from contextlib import contextmanager

CELERY_LOGGERS = ("", "celery", "celery.task", "celery.redirected")  # "" is the root logger


@contextmanager
def logging_left_as_found() -> Iterator[None]:
    loggers = [logging.getLogger(name) for name in CELERY_LOGGERS]
    saved = [(logger.level, list(logger.handlers), logger.propagate, logger.disabled) for logger in loggers]
    try:
        yield
    finally:
        for logger, (level, handlers, propagate, disabled) in zip(loggers, saved):
            logger.setLevel(level)
            logger.handlers[:] = handlers
            logger.propagate, logger.disabled = propagate, disabled
