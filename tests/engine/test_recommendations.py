"""Recommendations on their own: shrink, cancel, select, extend and end-date from hourly use, with
the money at list price; nothing said without enough history; a shrink never goes below the
window's peak (a property)."""

import datetime

from hypothesis import given, settings, strategies as st


from scheduling.engine.recommendations import (
    ExtensionOffering, Hour, Policy, ReservationFacts, headroom, recommend,
)
from tests.support.properties import examples

UTC = datetime.timezone.utc
NOW = datetime.datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
PRICE = 1.0  # $/h for one instance: a month of one instance is $730


def hours(days, used, total=10, peak=None):
    return tuple(Hour(NOW - datetime.timedelta(hours=h + 1), used(h) if callable(used) else used, total,
                      peak(h) if callable(peak) else peak) for h in range(days * 24))


def odcr(rid="cr-0a1", **changes):
    facts = dict(reservation_id=rid, instance_type="m5.large", zone="us-east-1a", reservation_type="default",
                 state="active", total=10, used_now=3, price_per_hour=PRICE, hours=hours(14, 3, peak=4),
                 selected_by=("default",), pools_could_use=True)
    facts.update(changes)
    return ReservationFacts(**facts)


def kinds(found):
    return {(r.kind, r.reservation_id): r for r in found}


def test_shrink_to_the_peak_plus_headroom_with_the_money():
    [rec] = recommend([odcr()], NOW)
    assert (rec.kind, rec.target_count, rec.savings_per_month) == ("shrink", 5, 5 * 730.0)
    assert "used at most 4 instances in the last 14 days; 5 (4 plus a headroom of 1) would do, freeing 5 idle" in rec.reason
    assert headroom(40, Policy()) == 4  # 10 % beats one instance past ten


def test_never_below_what_runs_now_never_a_block_and_not_without_history():
    assert [r.target_count for r in recommend([odcr(used_now=9)], NOW)] == [9]
    assert recommend([odcr(used_now=10)], NOW) == []
    assert recommend([odcr(reservation_type="capacity-block")], NOW) == []
    assert recommend([odcr(hours=hours(6, 3))], NOW) == []  # 6 days of a 14-day window


def test_cancel_an_unselected_or_unusable_reservation_under_twenty_percent():
    quiet = dict(hours=hours(14, 1, peak=1), used_now=1)
    found = kinds(recommend([odcr("cr-a", selected_by=(), **quiet), odcr("cr-b", pools_could_use=False, **quiet),
                             odcr("cr-c", **quiet)], NOW))
    assert found[("cancel", "cr-a")].savings_per_month == 9 * 730.0 and "no EC2NodeClass selects it" in found[("cancel", "cr-a")].reason
    assert "no pod of its NodePools could use it" in found[("cancel", "cr-b")].reason
    assert ("cancel", "cr-c") not in found and ("shrink", "cr-c") in found  # selected and usable: shrink instead
    assert ("shrink", "cr-a") not in found  # cancelling beats shrinking


def test_select_an_idle_reservation_beside_paid_nodes():
    found = kinds(recommend([odcr(selected_by=(), pools_could_use=False, hours=hours(14, 8, peak=8), used_now=8,
                                  matching_paid_nodes=("n-1", "n-2", "n-3"), node_class_of_paid_nodes="web")], NOW))
    rec = found[("select", "cr-0a1")]
    assert rec.savings_per_month == 2 * 730.0 and rec.details["term"] == {"id": "cr-0a1"} and rec.details["nodeClass"] == "web"


def test_extend_a_block_whose_work_will_not_finish():
    started = NOW - datetime.timedelta(hours=30)
    block = odcr("cr-cb", reservation_type="capacity-block", total=2, used_now=2, price_per_hour=98.32, block_nodes=2,
                 drain_at=NOW + datetime.timedelta(minutes=40), unfinished_work=(("ml/train-0", started),),
                 extension_offerings=(ExtensionOffering("cbe-1", 24, 2400.0), ExtensionOffering("cbe-2", 48, 4700.0)))
    [rec] = [r for r in recommend([block], NOW) if r.kind == "extend"]
    lost = round(2 * 30 * 98.32, 2)
    # One-off money, never a monthly saving: the fee against the loss, each as itself.
    assert rec.details["lostWork"] == lost and rec.savings_per_month == 0.0
    assert (rec.details["money"], rec.details["oneOffCost"]) == ("one-off", 2400.0)
    assert "2 nodes x 30.0 h x $98.3200/h" in rec.details["moneyBasis"] and "$2,400.00 for 24 h" in rec.details["moneyBasis"]
    assert "the cheapest 24 h for $2,400.00" in rec.reason and "ml/train-0" in rec.reason and "one-off loss" in rec.reason


def test_every_figure_says_which_money_it_is_and_where_it_comes_from():
    found = kinds(recommend([odcr("cr-s"), odcr("cr-c", selected_by=(), hours=hours(14, 1, peak=1), used_now=1,
                                                  matching_paid_nodes=("n-1",)),
                             odcr("cr-e", end=NOW + datetime.timedelta(days=5), hours=hours(14, 8, peak=9), used_now=8)], NOW))
    assert {key: r.details["money"] for key, r in found.items()} == {
        ("shrink", "cr-s"): "monthly", ("cancel", "cr-c"): "monthly", ("select", "cr-c"): "monthly",
        ("end-date", "cr-e"): "warning"}
    assert found[("shrink", "cr-s")].details["moneyBasis"] == "5 idle m5.large x $1.0000/h on-demand list price x 730 h a month"
    assert found[("end-date", "cr-e")].details["moneyBasis"].startswith("a warning, nothing saved; at stake: 8 running")


def test_history_days_counts_whole_days_in_the_window():
    from scheduling.engine.recommendations import history_days, needed_days

    assert history_days(hours(2, 1), NOW, 14) == (2, False) and history_days(hours(20, 1), NOW, 14) == (14, True)
    assert history_days(hours(1, 1)[:23], NOW, 14) == (0, False)
    assert history_days(hours(13, 1), NOW, 14) == (13, True)  # 90 % of the window's hours is enough, as for shrink
    assert needed_days("default") == 14 and needed_days("capacity-block") is None


def test_end_date_warning_for_a_reservation_still_in_use():
    ending = odcr(end=NOW + datetime.timedelta(days=5), hours=hours(14, 8, peak=9), used_now=8)
    found = kinds(recommend([ending], NOW))
    assert found[("end-date", "cr-0a1")].savings_per_month == 0.0 and "in 5 days" in found[("end-date", "cr-0a1")].reason
    assert ("end-date", "cr-0a1") not in kinds(recommend([odcr(end=NOW + datetime.timedelta(days=30))], NOW))


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.floats(0, 50), min_size=14 * 24, max_size=14 * 24), st.integers(1, 60), st.integers(0, 60))
def test_a_shrink_never_goes_below_the_windows_peak(used, total, now_used):
    facts = odcr(total=total, used_now=min(now_used, total), hours=tuple(
        Hour(NOW - datetime.timedelta(hours=i + 1), min(u, total), total) for i, u in enumerate(used)))
    for rec in recommend([facts], NOW):
        if rec.kind == "shrink":
            assert rec.target_count >= max(min(u, total) for u in used) and rec.target_count >= facts.used_now
            assert rec.target_count < total


def test_an_hour_without_a_peak_counts_its_mean():
    assert Hour(NOW, used=2.5, total=4).high == 2.5 and Hour(NOW, used=2.5, total=4, peak=4).high == 4


# --- across the fleet (the fleet ledger, reservations/ledger.py) --------------------------------

def test_never_shrink_below_what_the_whole_fleet_uses():
    # Our clusters use 3 now; with other accounts' units the fleet uses 8 (the ledger's last attribution).
    assert [r.target_count for r in recommend([odcr(fleet_used=8)], NOW)] == [8]
    assert recommend([odcr(fleet_used=10)], NOW) == []


def test_cancel_and_shrink_only_where_one_of_our_accounts_owns_it():
    quiet = dict(hours=hours(14, 1, peak=1), used_now=1, selected_by=())
    assert {r.kind for r in recommend([odcr(**quiet)], NOW)} == {"cancel"}
    assert recommend([odcr(owned_by_us=False, **quiet)], NOW) == []  # shared with us: not ours to cancel
    assert recommend([odcr(owned_by_us=False)], NOW) == []  # nor to modify


def test_never_cancel_what_another_account_shares_from_us_or_uses():
    quiet = dict(hours=hours(14, 1, peak=1), used_now=1, selected_by=())
    found = recommend([odcr(other_accounts=("333333333333",), **quiet)], NOW)
    assert "cancel" not in {r.kind for r in found}
    assert {r.kind for r in found} == {"shrink"}  # it may still shrink, down to the fleet's use


def test_select_names_the_cluster_whose_on_demand_nodes_could_use_an_idle_unit():
    [rec] = [r for r in recommend([odcr(selected_by=(), used_now=1, hours=hours(14, 5, peak=5),
                                        matching_paid_nodes=("od-1", "od-2", "od-3"), node_class_of_paid_nodes="web",
                                        paid_nodes_by_cluster=(("alpha", 1), ("beta", 2)))], NOW)
             if r.kind == "select"]
    assert rec.details["cluster"] == "beta" and "run beside it in cluster beta" in rec.reason
