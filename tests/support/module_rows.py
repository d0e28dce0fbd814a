"""Rows made once for a module and shared by its tests, rolled back at the module's end.

For set-up that costs seconds and that every test of a module only builds on (the demo world, a
synced catalogue). The rows are written in a transaction opened for the module; each test then runs
in pytest-django's own per-test transaction, which nests in it as a savepoint and is rolled back
after the test, so a test sees the shared rows and nothing another test wrote, and the module's end
rolls the shared rows back too: no other module sees them.

Only for modules whose every test uses the shared rows through the ``db`` fixture: a test of the
module without them would see them anyway, and a transactional test (``transactional_db``,
``live_server``) empties the tables at its end, shared rows included.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from django.db import transaction

T = TypeVar("T")


@contextmanager
def rolled_back_at_the_end(django_db_blocker, build: Callable[[], T]) -> Iterator[T]:
    """``build()`` once, in a transaction that stays open (the tests nest in it) until the block ends,
    then is rolled back; the block gets what ``build`` returned."""
    outer = transaction.atomic()
    # It wraps the module's tests as Django's TestCase wraps a test (and is marked so): code asking
    # whether it runs in a transaction of its own (fleet/scope.py) does not count this one.
    outer._from_testcase = True
    forget_fleet()  # what the process kept of the clusters may be gone (a transactional test flushed them)
    with django_db_blocker.unblock():
        outer.__enter__()
        try:
            made = build()
        except BaseException:
            outer.__exit__(*sys.exc_info())
            raise
    try:
        yield made
    finally:
        with django_db_blocker.unblock():
            transaction.set_rollback(True)
            outer.__exit__(None, None, None)
        forget_fleet()  # the clusters the rows made or changed are rolled back with them


def forget_fleet() -> None:
    """Forget the clusters the process keeps (fleet/scope.py: the one list the default cluster and the
    pages' picker read): rows written or rolled back here send no signal that would."""
    from fleet.scope import forget_default

    forget_default()
