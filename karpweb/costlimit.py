"""A cost limit for the engine endpoints (the API's simulate, the what-if pages): one simulation of a
large world takes seconds of a web worker's CPU, so a viewer looping on it slowed everyone's pages.

Per user, two limits, counted in the shared cache (Redis with KARPWEB_CACHE_URL, so that they hold
across processes and replicas; per process without it):
- at most KARPWEB_ENGINE_RUNS_PER_USER engine runs at once;
- at most KARPWEB_ENGINE_SECONDS_PER_MINUTE seconds of engine time in a clock minute. A run that
  starts under the budget finishes; the next one waits for the next minute.
Over a limit: EngineBusy, which the API answers 429 with Retry-After and the pages as a message."""

import math
import time
from contextlib import contextmanager

from django.conf import settings
from django.core.cache import cache

# A process that dies mid-run never gives its slot back: the count expires after the longest run.
RUNNING_KEY_SECONDS = 600


class EngineBusy(Exception):
    def __init__(self, message: str, retry_after: int):
        super().__init__(message)
        self.retry_after = retry_after


def _running_key(user_id) -> str:
    return f"karpweb:engine:running:{user_id}"


def _spent_key(user_id, minute: int) -> str:
    return f"karpweb:engine:ms:{user_id}:{minute}"


@contextmanager
def engine_run(user):
    """Hold one of the user's engine slots while the body runs, and charge its time to the minute."""
    now = time.time()
    minute = int(now // 60)
    budget_ms = settings.KARPWEB_ENGINE_SECONDS_PER_MINUTE * 1000
    if (cache.get(_spent_key(user.pk, minute)) or 0) >= budget_ms:
        wait = max(1, math.ceil(60 - now % 60))
        raise EngineBusy(f"engine budget used: {settings.KARPWEB_ENGINE_SECONDS_PER_MINUTE} s of simulation per "
                         f"minute per user; try again in {wait} s", wait)
    running = _running_key(user.pk)
    cache.add(running, 0, RUNNING_KEY_SECONDS)
    if cache.incr(running) > settings.KARPWEB_ENGINE_RUNS_PER_USER:
        _release(running)
        raise EngineBusy(f"engine busy: at most {settings.KARPWEB_ENGINE_RUNS_PER_USER} simulation(s) at once per "
                         "user; wait for the running one", 2)
    started = time.monotonic()
    try:
        yield
    finally:
        _release(running)
        _charge(user.pk, minute, int((time.monotonic() - started) * 1000))


def _release(key: str) -> None:
    try:
        cache.decr(key)
    except ValueError:
        pass  # expired meanwhile (a run longer than RUNNING_KEY_SECONDS): nothing to give back


def _charge(user_id, minute: int, milliseconds: int) -> None:
    key = _spent_key(user_id, minute)
    cache.add(key, 0, 120)
    try:
        cache.incr(key, max(1, milliseconds))
    except ValueError:
        cache.set(key, max(1, milliseconds), 120)
