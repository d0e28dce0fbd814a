"""Recommendations on their own: shrink, cancel, select, extend and end-date from hourly use, with
the money at list price; nothing said without enough history; a shrink never goes below the
window's peak (a property)."""

import datetime

from hypothesis import given, settings, strategies as st


from scheduling.engine.recommendations import (
    ExtensionOffering, Hour, Policy, ReservationFacts, headroom,
)
from scheduling.engine.recommendations import recommend as engine_recommend
from tests.support.properties import examples

# These tests are about the kinds that change a reservation; lending idle units (#50) is an alternative to
# them, tested in tests/engine/test_lending.py: here an idle window longer than any history leaves it out.
WITHOUT_LENDING = Policy(lend_idle_hours=100 * 24)


def recommend(facts, now, policy=WITHOUT_LENDING):
    return engine_recommend(facts, now, policy)


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


# --- commitments and ownership: no cancel or shrink they rule out; move and split instead --------

COMMIT_END = NOW + datetime.timedelta(days=60)


def committed_odcr(rid="cr-com", **changes):
    # 10 units, 3 committed until COMMIT_END; the use needs 4 (peak 3 plus one of headroom): 6 above both.
    facts = dict(total=10, used_now=2, hours=hours(14, 2, peak=3), committed_count=3, commitment_end=COMMIT_END,
                 owner="111111111111")
    facts.update(changes)
    return odcr(rid, **facts)


def destination(rid="cr-dst", **changes):
    # Same shape, 4 units all used, selected by cluster beta, which runs 5 on-demand m5.large there.
    facts = dict(total=4, used_now=4, hours=hours(14, 4, peak=4), owner="111111111111",
                 cluster_demand=(("beta", 5),))
    facts.update(changes)
    return odcr(rid, **facts)


def test_a_committed_reservation_gets_no_cancel_and_no_shrink_below_its_commitment():
    quiet = dict(selected_by=(), hours=hours(14, 1, peak=1), used_now=1)
    # Committed to all 10: no cancel, no shrink, and no split or move either (none may go below the commitment).
    assert recommend([committed_odcr(committed_count=10, **quiet)], NOW) == []
    # Committed to 6 of 10: shrinking to 6 is allowed (not to the 4 the use needs); the 4 above it may be split off
    # instead (an alternative to that shrink), never the 2 between the use and the commitment.
    found = kinds(recommend([committed_odcr(committed_count=6)], NOW))
    assert found[("shrink", "cr-com")].target_count == 6 and "the commitment (committed until" in found[("shrink", "cr-com")].reason
    assert found[("split", "cr-com")].details["count"] == 4
    # After the commitment's end, the usual shrink to the use.
    ended = committed_odcr(commitment_end=NOW - datetime.timedelta(hours=1))
    assert [(r.kind, r.target_count) for r in recommend([ended], NOW)] == [("shrink", 4)]


def test_move_to_a_same_shape_reservation_a_cluster_pays_on_demand_beside_with_money_that_adds_up():
    found = kinds(recommend([committed_odcr(), destination()], NOW))
    move = found[("move", "cr-com")]
    # 6 idle, the destination's cluster runs 5 on-demand beside 0 free units: move 5, split the sixth.
    assert (move.details["count"], move.details["destination"], move.details["cluster"]) == (5, "cr-dst", "beta")
    assert move.savings_per_month == 5 * 730.0 and move.details["money"] == "monthly"
    assert move.details["idleCostPerMonth"] == move.savings_per_month + move.details["stillIdleCostPerMonth"]
    assert "committed until 2027-01-24 12:00 UTC for 3 instances" in move.reason and "Move 5 to cr-dst" in move.reason
    split = found[("split", "cr-com")]
    assert split.details["count"] == 1 and split.savings_per_month == 0.0 and split.details["money"] == "warning"
    assert split.details["idleCostPerMonth"] == 730.0 == split.details["stillIdleCostPerMonth"]
    assert found[("shrink", "cr-com")].target_count == 4 and ("cancel", "cr-com") not in found  # the alternative


def test_a_move_needs_the_same_shape_owner_and_a_need():
    for other in (destination(platform="Windows"), destination(tenancy="dedicated"), destination(placement_group="pg-1"),
                  destination(end=NOW + datetime.timedelta(days=9)), destination(zone="us-east-1b"),
                  destination(owner="222222222222"), destination(owned_by_us=False), destination(cluster_demand=()),
                  destination(used_now=0, cluster_demand=(("beta", 4),)), destination(reservation_type="capacity-block"), destination(state="expired")):
        assert "move" not in {r.kind for r in recommend([committed_odcr(), other], NOW)}, other
    # Two committed sources share one destination's need of 5: given out once.
    found = kinds(recommend([committed_odcr("cr-a"), committed_odcr("cr-b"), destination()], NOW))
    assert found[("move", "cr-a")].details["count"] == 5 and ("move", "cr-b") not in found
    assert found[("split", "cr-b")].details["count"] == 6


def test_a_split_to_share_with_an_account_that_runs_on_demand_saves_money():
    found = kinds(recommend([committed_odcr(share_candidates=(("333333333333", "gamma", 4),))], NOW))
    split = found[("split", "cr-com")]
    assert (split.details["shareWith"], split.details["coveredUnits"], split.savings_per_month) == ("333333333333", 4, 4 * 730.0)
    assert split.details["stillIdleCostPerMonth"] == 2 * 730.0 and split.details["money"] == "monthly"
    assert "share it with account 333333333333, whose cluster gamma runs 4 on-demand m5.large" in split.reason


def test_no_cancel_shrink_split_or_move_on_a_shared_to_us_reservation_or_an_interruptible_source():
    quiet = dict(selected_by=(), hours=hours(14, 1, peak=1), used_now=1)
    assert recommend([committed_odcr(owned_by_us=False, **quiet), destination()], NOW) == []
    assert recommend([odcr(owned_by_us=False, **quiet)], NOW) == []
    assert recommend([odcr(lends_interruptible=True, **quiet)], NOW) == []
    assert recommend([odcr(lends_interruptible=True)], NOW) == []  # no shrink either
    assert recommend([committed_odcr(lends_interruptible=True), destination()], NOW) == []


def test_no_cancel_while_the_fleet_uses_any_of_it():
    quiet = dict(selected_by=(), hours=hours(14, 1, peak=1), used_now=1)
    assert [(r.kind, r.target_count) for r in recommend([odcr(fleet_used=2, **quiet)], NOW)] == [("shrink", 2)]


@settings(max_examples=examples(300), deadline=None)
@given(total=st.integers(1, 40), used=st.integers(0, 40), peak=st.integers(0, 40), fleet=st.integers(0, 40),
       committed_count=st.integers(0, 40), committed_now=st.booleans(), owned=st.booleans(), lends=st.booleans(),
       selected=st.booleans(), demand=st.integers(0, 20), candidates=st.integers(0, 20))
def test_advice_never_goes_below_the_commitment_or_what_the_fleet_uses(total, used, peak, fleet, committed_count,
                                                                       committed_now, owned, lends, selected, demand,
                                                                       candidates):
    used, peak, fleet = min(used, total), min(max(peak, used), total), min(fleet, total)
    source = odcr("cr-src", total=total, used_now=used, fleet_used=fleet, hours=hours(14, used, total=total, peak=peak),
                  committed_count=committed_count, owned_by_us=owned, lends_interruptible=lends,
                  selected_by=("default",) if selected else (), pools_could_use=selected,
                  commitment_end=NOW + datetime.timedelta(days=1 if committed_now else -1),
                  share_candidates=(("333333333333", "gamma", candidates),) if candidates else ())
    found = recommend([source, destination(cluster_demand=(("beta", demand),))], NOW)
    mine = [r for r in found if r.reservation_id == "cr-src"]
    floor = max(used, fleet, committed_count if committed_now else 0)
    for rec in mine:
        assert owned and not lends, rec  # nothing on what is not ours to change
        assert rec.kind != "cancel" or (not committed_now and fleet == 0)
        if rec.kind == "shrink":
            assert floor <= rec.target_count < total
        if rec.kind in ("move", "split"):
            assert committed_now
            assert 1 <= rec.details["count"] and total - rec.details["count"] >= max(used, fleet, 1, committed_count)  # never below the commitment
            assert rec.details["idleCostPerMonth"] == round(rec.savings_per_month + rec.details["stillIdleCostPerMonth"], 2)
    relocated = sum(r.details["count"] for r in mine if r.kind in ("move", "split"))
    assert total - relocated >= max(used, fleet, 1, min(committed_count, total) if committed_now else 0)
