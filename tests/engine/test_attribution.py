"""The fleet ledger's attribution of a reservation's units (scheduling/engine/attribution.py)."""

from scheduling.engine.attribution import attribute

A, B, C = "111111111111", "222222222222", "333333333333"


def test_units_go_to_clusters_then_our_accounts_then_other_accounts_then_unknown():
    a = attribute(total=8, available=2, reservation_instances=["i-1", "i-2", "i-3", "i-4", "i-x"],
                  cluster_instances={"alpha": ["i-1", "i-2", "i-9"], "beta": ["i-3"]},
                  cluster_accounts={"alpha": A, "beta": B},
                  account_instances={A: ["i-1", "i-2", "i-4", "i-9"], B: ["i-3"]},
                  usage={A: 3, B: 1, C: 1})
    assert a.used == 6
    assert a.clusters == {"alpha": 2, "beta": 1}
    assert a.instances == {"alpha": ["i-1", "i-2"], "beta": ["i-3"]}
    assert a.our_accounts == {A: 1}  # i-4: account A's, no cluster knows it
    assert a.other_accounts == {C: 1}
    assert a.unknown == 1  # i-x: listed by nobody of ours, and usage counts no more
    assert (a.ours, a.others) == (4, 1)


def test_usage_beyond_the_instances_we_listed_stays_with_the_account():
    a = attribute(total=4, available=1, reservation_instances=["i-1"], cluster_instances={"alpha": ["i-1"]},
                  cluster_accounts={"alpha": A}, account_instances={A: ["i-1"]}, usage={A: 3})
    assert (a.clusters, a.our_accounts, a.other_accounts, a.unknown) == ({"alpha": 1}, {A: 2}, {}, 0)


def test_never_more_units_than_ec2_says_are_used():
    a = attribute(total=2, available=1, reservation_instances=["i-1", "i-2"],
                  cluster_instances={"alpha": ["i-1"], "beta": ["i-2"]}, cluster_accounts={"alpha": A, "beta": A},
                  account_instances={A: ["i-1", "i-2"]}, usage={C: 2})
    assert sum(a.clusters.values()) + sum(a.other_accounts.values()) + a.unknown == 1
    assert a.clusters == {"alpha": 1} and a.other_accounts == {} and a.unknown == 0


def test_a_shared_reservation_without_usage_leaves_the_rest_unknown():
    a = attribute(total=5, available=1, reservation_instances=["i-1"], cluster_instances={"alpha": ["i-1"]},
                  cluster_accounts={"alpha": B}, account_instances={B: ["i-1"]}, usage=None)
    assert (a.clusters, a.unknown) == ({"alpha": 1}, 3)
