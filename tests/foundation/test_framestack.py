"""karpweb/framestack.py: a request's calls never map and unmap CPython's frame-stack blocks."""

import resource
import sys

import pytest

from karpweb import framestack

CALLS = 2_000


def _leaf():
    return None


def _calls_at(depth: int) -> None:
    """CALLS calls of a small function, made `depth` frames below here."""
    if depth:
        return _calls_at(depth - 1)
    for _ in range(CALLS):
        _leaf()


def _worst_faults(run) -> int:
    """The most minor page faults CALLS calls cost, over every depth from 0 to 300 frames: one depth
    at least puts the calls across a block's edge."""
    worst = 0
    for depth in range(300):
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        run(depth)
        worst = max(worst, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
    return worst


@pytest.mark.skipif(sys.implementation.name != "cpython", reason="a CPython frame-stack layout")
def test_calls_in_room_fault_nothing_at_any_depth():
    if sys.version_info < (3, 13, 13):  # the bug's own versions: without room, some depth thrashes
        assert _worst_faults(_calls_at) >= CALLS
    assert _worst_faults(lambda depth: framestack.call_with_room(_calls_at, depth)) < 50


def test_room_returns_what_the_call_returns_and_raises_what_it_raises():
    assert framestack.call_with_room(dict, a=1) == {"a": 1}
    with pytest.raises(ZeroDivisionError):
        framestack.call_with_room(lambda: 1 / 0)


def test_the_wsgi_application_runs_its_requests_in_room(monkeypatch):
    import karpweb.wsgi

    seen = []
    monkeypatch.setattr(framestack, "call_with_room", lambda fn, *args: seen.append(fn) or "answered")
    assert karpweb.wsgi.application({}, None) == "answered"
    assert seen == [karpweb.wsgi.application.__wrapped__]
