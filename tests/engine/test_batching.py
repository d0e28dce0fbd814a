"""The provisioning batch window on its own: 1 s of quiet closes it, 10 s in all closes it however
often it is triggered, nothing is due before the first trigger."""

from hypothesis import given, strategies as st

from scheduling.engine.batching import BatchWindow


def test_quiet_closes_the_window():
    window = BatchWindow()
    assert not window.due(0.0)
    window.trigger(0.0)
    window.trigger(0.6)
    assert not window.due(1.5) and window.due(1.6)
    window.close()
    assert not window.open and not window.due(100.0)


def test_a_steady_stream_is_cut_at_the_maximum():
    window = BatchWindow(idle_seconds=1.0, max_seconds=10.0)
    t = 0.0
    while t < 9.9:
        window.trigger(t)
        assert not window.due(t)
        t += 0.5
    assert window.due(10.0)


@given(st.lists(st.floats(0, 0.99), min_size=1, max_size=60))
def test_never_due_before_a_second_of_quiet_unless_ten_seconds_passed(gaps):
    window, t = BatchWindow(), 0.0
    for gap in gaps:
        t += gap
        window.trigger(t)
        assert window.due(t) == (t - window.opened_at >= 10.0)
