"""Lending idle units and reclaiming them (scheduling/engine/lending.py, the lend kind of
scheduling/engine/recommendations.py): pure, on hourly use."""

import datetime

from scheduling.engine import lending
from scheduling.engine.recommendations import LEND, WARNING, Policy, recommend
from tests.engine.test_recommendations import NOW, hours, odcr

HOUR = datetime.timedelta(hours=1)


def lends(facts, policy=Policy()):
    return [r for r in recommend([facts], NOW, policy) if r.kind == LEND]


def test_idle_units_forecast_to_stay_idle_are_lent_keeping_the_peak_and_a_margin():
    [rec] = lends(odcr())  # 10 units, at most 4 used in the history, 3 now
    assert rec.details["count"] == 10 - 4 - 1 and rec.details["peak"] == 4
    assert rec.savings_per_month == 0 and rec.details["money"] == WARNING
    assert "what a borrower pays is not known to karpweb" in rec.details["moneyBasis"]
    assert lends(odcr(), Policy(lend_margin_instances=3))[0].details["count"] == 10 - 4 - 3
    assert lends(odcr(fleet_used=8))[0].details["count"] == 10 - 8 - 1  # never what the fleet uses


def test_only_from_an_active_odcr_the_fleet_owns_with_no_end_date_lending_nothing_yet():
    assert lends(odcr(end=NOW + datetime.timedelta(days=90))) == []  # EC2 lends only from one with no end date
    assert lends(odcr(reservation_type="capacity-block")) == []
    assert lends(odcr(interruptible=True)) == []  # borrowed capacity is not lent on
    # Nor shrunk or cancelled: its units go back to their source by a reclaim.
    assert recommend([odcr(interruptible=True, selected_by=(), hours=hours(14, 0, peak=0), used_now=0)], NOW) == []
    assert lends(odcr(owned_by_us=False)) == []
    assert lends(odcr(lends_interruptible=True)) == []
    assert lends(odcr(state="scheduled")) == []
    assert lends(odcr(used_now=10, hours=hours(14, 10, peak=10))) == []  # nothing idle


def test_not_without_the_idle_window_of_history():
    assert lends(odcr(hours=hours(14, 3, peak=4)[:20])) == []  # 20 of 24 hours: below the coverage
    assert lends(odcr(hours=hours(14, 3, peak=4)[:22])) != []


def test_a_busy_hour_of_past_days_the_next_window_covers_keeps_its_units():
    # Idle in the last day, but the same hours a week ago (the next window covers them again) used 9.
    week_ago = NOW - datetime.timedelta(days=7)
    busy = lambda h: 9 if week_ago <= NOW - (h + 1) * HOUR < week_ago + 24 * HOUR else 1  # noqa: E731
    assert lends(odcr(used_now=1, hours=hours(14, 1, peak=busy))) == []
    [rec] = lends(odcr(used_now=1, hours=hours(14, 1, peak=1)))
    assert rec.details["count"] == 8


def test_reclaim_what_the_plan_needs_beyond_the_free_units_at_most_what_is_lent():
    assert lending.reclaim_for_plan(lent=4, planned_into=3, free_now=1) == 2
    assert lending.reclaim_for_plan(lent=1, planned_into=3, free_now=0) == 1
    assert lending.reclaim_for_plan(lent=4, planned_into=1, free_now=1) == 0


def test_reclaim_before_the_forecast_peak_of_the_next_hour():
    use = tuple(lending.UseHour(h.start, h.high) for h in hours(8, 1, peak=lambda h: 7 if h % 24 == 23 else 1))
    # 10 units, 6 lent: the same hour on past days used 7, 3 more than the 4 not lent.
    assert lending.reclaim_for_forecast(total=10, lent=6, hours=use, now=NOW, days=7) == (3, 7)
    assert lending.reclaim_for_forecast(total=10, lent=2, hours=use, now=NOW, days=7) == (0, 7)
    assert lending.reclaim_for_forecast(total=10, lent=6, hours=use, now=NOW + 2 * HOUR, days=7)[0] == 0
