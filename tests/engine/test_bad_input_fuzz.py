"""Whatever JSON arrives, `simulate` answers with decisions or a WorldError, never a crash."""

import copy
import json
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st


from scheduling.engine import WorldError, simulate
from tests.engine.newer_kinds import kitchen_sink
from tests.support.properties import examples

EXAMPLES = [json.loads(p.read_text()) for p in sorted((Path(__file__).resolve().parents[2] / "examples").glob("*.json"))]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 10**6) | st.floats(allow_nan=True) | st.text(max_size=6)
    | st.sampled_from(["500m", "1Gi", "In", "NotIn", "Gt", "reserved", "cr-1", "2026-11-21T12:00:00Z", "*", ""]),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3),
    max_leaves=6,
)


def paths(value, prefix=()):
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from paths(item, prefix + (key,))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from paths(item, prefix + (index,))


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(range(len(EXAMPLES))), st.data(), json_values)
def test_mutated_worlds_never_crash(index, data, replacement):
    answers_or_names_the_problem(mutated(copy.deepcopy(EXAMPLES[index]), data, replacement))


def mutated(world, data, replacement):
    """`world` with the value at one path hypothesis draws replaced."""
    path = data.draw(st.sampled_from([p for p in paths(world) if p]))
    target = world
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = replacement
    return world


def answers_or_names_the_problem(world):
    try:
        decisions = simulate(world)
    except WorldError as error:
        assert error.problems and all(isinstance(p, str) and isinstance(m, str) for p, m in error.problems)
    else:
        assert isinstance(decisions["nodeClaims"], list)
        json.dumps(decisions)


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), json_values)
def test_the_newer_kinds_mutated_never_crash(data, replacement):
    """Volumes, PodDisruptionBudgets, NodeOverlays and default spread (issue #49): any value anywhere in
    them is an answer or a WorldError naming paths, never a traceback."""
    answers_or_names_the_problem(mutated(kitchen_sink(), data, replacement))


def test_the_newer_kinds_world_plans():
    decisions = simulate(kitchen_sink())
    assert [c["launch"]["zone"] for c in decisions["nodeClaims"]] == ["us-east-1b"]


@given(json_values)
@settings(max_examples=examples(200), deadline=None)
def test_any_json_value_as_a_world(value):
    try:
        simulate(value)
    except WorldError:
        pass
