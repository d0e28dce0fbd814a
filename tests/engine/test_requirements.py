import pytest

from scheduling.engine.labels import CAPACITY_TYPE, INSTANCE_TYPE, ZONE
from scheduling.engine.requirements import Requirement, RequirementError, Requirements


def req(key, op, *values):
    return Requirement.of(key, op, values)


@pytest.mark.parametrize("requirement, value, has, absent_ok", [
    (req("k", "In", "a", "b"), "a", True, False),
    (req("k", "In", "a"), "c", False, False),
    (req("k", "NotIn", "a"), "a", False, True),
    (req("k", "NotIn", "a"), "b", True, True),
    (req("k", "Exists"), "x", True, False),
    (req("k", "DoesNotExist"), "x", False, True),
    (req("k", "Gt", "5"), "6", True, False),
    (req("k", "Gt", "5"), "5", False, False),
    (req("k", "Gt", "5"), "abc", False, False),
    (req("k", "Lt", "5"), "4", True, False),
    (req("k", "Lt", "5"), "-10", True, False),
])
def test_single_requirement(requirement, value, has, absent_ok):
    assert requirement.has(value) is has
    assert requirement.admits_absent is absent_ok


@pytest.mark.parametrize("op, values, message", [
    ("In", [], "needs at least one value"),
    ("Exists", ["a"], "takes no values"),
    ("Gt", ["a"], "exactly one integer"),
    ("Gt", ["1", "2"], "exactly one integer"),
    ("Near", ["a"], "unknown operator"),
])
def test_invalid_requirements(op, values, message):
    with pytest.raises(RequirementError, match=message):
        Requirement.of("k", op, values)


def test_operators_round_trip():
    for op, values in [("In", ["a"]), ("NotIn", ["a"]), ("Exists", []), ("DoesNotExist", []), ("Gt", ["1"]), ("Lt", ["1"])]:
        assert Requirement.of("k", op, values).operator == op


@pytest.mark.parametrize("a, b, expected", [
    (req("k", "In", "a", "b"), req("k", "In", "b", "c"), "k In [b]"),
    (req("k", "In", "a", "b"), req("k", "NotIn", "a"), "k In [b]"),
    (req("k", "NotIn", "a"), req("k", "NotIn", "b"), "k NotIn [a, b]"),
    (req("k", "Exists"), req("k", "In", "a"), "k In [a]"),
    (req("k", "DoesNotExist"), req("k", "In", "a"), "k In []"),  # nothing: upstream says DoesNotExist
    (req("k", "DoesNotExist"), req("k", "NotIn", "a"), "k DoesNotExist"),
    (req("k", "Exists"), req("k", "NotIn", "a"), "k Exists, NotIn [a]"),
    (req("k", "In", "a"), req("k", "In", "b"), "k In []"),
    (req("k", "Gt", "2"), req("k", "In", "1", "3", "x"), "k In [3]"),
    (req("k", "Gt", "2"), req("k", "Lt", "10"), "k Gt 2, Lt 10"),
    (req("k", "Gt", "2"), req("k", "Lt", "3"), "k In []"),  # no integer in between
    (req("k", "Gt", "2"), req("k", "Gt", "5"), "k Gt 5"),
])
def test_intersection(a, b, expected):
    assert str(a.intersection(b)) == expected
    assert str(b.intersection(a)) == expected


def test_any_value_satisfies():
    for requirement in [req("k", "In", "b", "a"), req("k", "NotIn", "0", "1"), req("k", "Gt", "7"),
                        req("k", "Exists"), req("k", "Gt", "2").intersection(req("k", "Lt", "9"))]:
        value = requirement.any_value()
        assert value is not None and requirement.has(value)
    assert req("k", "In", "b", "a").any_value() == "a"
    assert req("k", "DoesNotExist").any_value() is None


def test_requirements_intersect_returns_self_when_nothing_changes():
    base = Requirements([req("a", "In", "x"), req("b", "Exists")])
    assert base.intersect([req("a", "In", "x", "y")]) is base
    narrowed = base.intersect([req("b", "In", "q")])
    assert narrowed is not base and str(narrowed.get("b")) == "b In [q]"
    assert str(base.get("b")) == "b Exists"  # immutable


def test_compatible_custom_labels_follow_upstream():
    pool = Requirements([req("team", "In", "a", "b"), req(CAPACITY_TYPE, "In", "on-demand")])
    assert pool.compatible(Requirements([req("team", "In", "a")])) is None
    assert "conflicts" in pool.compatible(Requirements([req("team", "In", "c")]))
    # A custom label the NodePool does not define: only NotIn / DoesNotExist pass.
    assert pool.compatible(Requirements([req("other", "In", "x")])) == "label other is not defined"
    assert pool.compatible(Requirements([req("other", "NotIn", "x")])) is None
    assert pool.compatible(Requirements([req("other", "DoesNotExist")])) is None
    # Well-known labels may be undefined: instance types and offerings decide them.
    assert pool.compatible(Requirements([req(ZONE, "In", "us-east-1a"), req(INSTANCE_TYPE, "In", "m5.large")])) is None
    assert "conflicts" in pool.compatible(Requirements([req(CAPACITY_TYPE, "In", "spot")]))
    # NotIn against NotIn with an empty intersection is still fine (upstream rule).
    assert Requirements([req("k", "DoesNotExist")]).compatible(Requirements([req("k", "NotIn", "a")])) is None


def test_matches_labels_is_kubernetes_node_selection():
    reqs = Requirements([req("a", "In", "1"), req("b", "NotIn", "x"), req("c", "DoesNotExist"), req("d", "Gt", "3")])
    assert reqs.matches_labels({"a": "1", "d": "4"})
    assert reqs.matches_labels({"a": "1", "b": "y", "d": "10"})
    assert not reqs.matches_labels({"a": "1", "b": "x", "d": "4"})
    assert not reqs.matches_labels({"a": "1", "c": "", "d": "4"})
    assert not reqs.matches_labels({"a": "1"})  # Gt needs the label
    assert str(reqs.first_mismatch({"a": "2", "d": "4"})) == "a In [1]"


def test_key_identifies_requirements():
    one = Requirements([req("a", "In", "x", "y"), req("b", "Exists")])
    two = Requirements([req("b", "Exists"), req("a", "In", "y", "x")])
    assert one == two and hash(one) == hash(two)
    assert one.restricted_key(frozenset({"a"})) == (("a", False, ("x", "y"), None, None, False),)


def test_contradictions_match_nothing():
    contradiction = Requirements([req("team", "In", "a"), req("team", "DoesNotExist")])
    assert not contradiction.satisfiable()
    assert not contradiction.matches_labels({}) and not contradiction.matches_labels({"team": "a"})
    exists_not_a = Requirements([req("team", "Exists"), req("team", "NotIn", "a")])
    assert exists_not_a.satisfiable() and not exists_not_a.matches_labels({}) and exists_not_a.matches_labels({"team": "b"})
    assert Requirements([req("team", "In", "a")]).compatible(contradiction) == "team In [] conflicts with team In [a]"
