"""The CEL rules (x-kubernetes-validations) of the CRDs in deploy/crds, evaluated with cel-python.

The kube-apiserver these tests can run (v1.20) predates CRD validation rules and ignores them, so
the rules are checked here: every rule compiles, says what it should on valid and invalid objects,
and the selector-term rules agree with the engine's own validation (what the editor, the API and
the admin use), so an edit karpweb accepts is one the cluster accepts and the other way round."""

import functools
from pathlib import Path

import celpy
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st


from reservations.selector_terms import validation_problems
from tests.support.properties import examples

CRDS = Path(__file__).resolve().parents[2] / "deploy" / "crds"


def rules_by_path() -> dict[tuple[str, str], list[dict]]:
    """(kind, schema path) -> the rules on that schema node, for every CRD."""
    found: dict[tuple[str, str], list[dict]] = {}

    def walk(kind, node, path):
        if not isinstance(node, dict):
            return
        if node.get("x-kubernetes-validations"):
            found[(kind, path)] = node["x-kubernetes-validations"]
        for name, child in (node.get("properties") or {}).items():
            walk(kind, child, f"{path}.{name}")
        if isinstance(node.get("items"), dict):
            walk(kind, node["items"], f"{path}[]")
        if isinstance(node.get("additionalProperties"), dict):
            walk(kind, node["additionalProperties"], f"{path}{{}}")

    for crd_file in sorted(CRDS.glob("*.yaml")):
        crd = yaml.safe_load(crd_file.read_text())
        for version in crd["spec"]["versions"]:
            walk(crd["spec"]["names"]["kind"], version["schema"]["openAPIV3Schema"], "")
    return found


RULES = rules_by_path()
ENV = celpy.Environment()


@functools.cache
def program_of(rule: str):
    """One rule compiled once (parsing CEL was most of the property test below); each evaluation
    gets its own activation, so nothing carries from one to the next."""
    return ENV.program(ENV.compile(rule))


def verdicts(kind: str, path: str, value, old=None) -> dict[str, bool]:
    """Each rule's message -> whether the value passes it."""
    results = {}
    for rule in RULES[(kind, path)]:
        program = program_of(rule["rule"])
        activation = {"self": celpy.json_to_cel(value)}
        if old is not None:
            activation["oldSelf"] = celpy.json_to_cel(old)
        results[rule["message"]] = bool(program.evaluate(activation))
    return results


def passes(kind, path, value, old=None) -> bool:
    return all(verdicts(kind, path, value, old).values())


TERMS = ("EC2NodeClass", ".spec.capacityReservationSelectorTerms")
TAGS = ("EC2NodeClass", ".spec.capacityReservationSelectorTerms[].tags")
BUDGETS = ("NodePool", ".spec.disruption.budgets")
CLAIM_SPEC = ("NodeClaim", ".spec")
OVERLAY_SPEC = ("NodeOverlay", ".spec")


def test_every_rule_is_found_and_compiles():
    assert set(RULES) == {TERMS, TAGS, BUDGETS, CLAIM_SPEC, OVERLAY_SPEC}
    for rules in RULES.values():
        for rule in rules:
            ENV.compile(rule["rule"])  # a syntax error raises
            assert rule["message"]


EXPECTED_PREFIXES = ("expected at least one", "'id' is mutually exclusive", "'resourceGroupARN' is mutually exclusive")


@pytest.mark.parametrize("terms, failing", [
    ([{"id": "cr-0abc"}], set()),
    ([{"tags": {"team": "ml"}, "ownerID": "123456789012"}], set()),
    ([{"instanceMatchCriteria": "open"}], set()),
    ([{"resourceGroupARN": "arn:aws:resource-groups:us-east-1:123456789012:group/gpu"}], set()),
    ([{"ownerID": "123456789012"}], {"expected at least one"}),
    ([{}], {"expected at least one"}),
    ([{"id": "cr-0abc", "tags": {"a": "b"}}], {"'id' is mutually exclusive"}),
    ([{"id": "cr-0abc", "ownerID": "123456789012"}], {"'id' is mutually exclusive"}),
    ([{"resourceGroupARN": "arn:aws:resource-groups:us-east-1:123456789012:group/g", "instanceMatchCriteria": "open"}],
     {"'resourceGroupARN' is mutually exclusive"}),
    ([{"id": "cr-0abc", "resourceGroupARN": "arn:aws:resource-groups:us-east-1:123456789012:group/g"}],
     {"'id' is mutually exclusive"}),
])
def test_selector_term_rules(terms, failing):
    failed = {message for message, ok in verdicts(*TERMS, terms).items() if not ok}
    assert {prefix for prefix in EXPECTED_PREFIXES if any(message.startswith(prefix) for message in failed)} == failing
    assert len(failed) == len(failing)


def test_tag_rule():
    assert passes(*TAGS, {"team": "ml", "karpenter.sh/discovery": "*"})
    assert not passes(*TAGS, {"team": ""})
    assert not passes(*TAGS, {"": "ml"})


def test_budget_rule_needs_schedule_and_duration_together():
    assert passes(*BUDGETS, [{"nodes": "10%"}, {"nodes": "0", "schedule": "@daily", "duration": "10m"}])
    assert not passes(*BUDGETS, [{"nodes": "0", "schedule": "@daily"}])
    assert not passes(*BUDGETS, [{"nodes": "0", "duration": "10m"}])


def test_an_overlay_sets_a_price_or_adjusts_it_never_both():
    assert passes(*OVERLAY_SPEC, {"requirements": [], "price": "0.42"})
    assert passes(*OVERLAY_SPEC, {"requirements": [], "priceAdjustment": "-10%"})
    assert not passes(*OVERLAY_SPEC, {"requirements": [], "price": "0.42", "priceAdjustment": "-10%"})


def test_nodeclaim_spec_is_immutable():
    spec = {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["reserved"]}]}
    assert passes(*CLAIM_SPEC, spec, old=spec)
    changed = {**spec, "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}]}
    assert not passes(*CLAIM_SPEC, changed, old=spec)


# Terms whose field values are each valid on their own: only their combination can be wrong.
FIELD_VALUES = {
    "id": st.sampled_from(["cr-0abc", "cr-1234567890abcdef0"]),
    "tags": st.dictionaries(st.sampled_from(["team", "env", "karpenter.sh/discovery"]), st.sampled_from(["ml", "*", "prod"]),
                            min_size=1, max_size=3),
    "ownerID": st.just("123456789012"),
    "instanceMatchCriteria": st.sampled_from(["open", "targeted"]),
    "resourceGroupARN": st.just("arn:aws:resource-groups:us-east-1:123456789012:group/gpu-pool"),
}
term = st.fixed_dictionaries({}, optional=FIELD_VALUES)


@settings(max_examples=examples(600), deadline=None)
@given(st.lists(term, min_size=1, max_size=4))
def test_the_engine_and_the_crd_agree_on_term_shapes(terms):
    crd_accepts = passes(*TERMS, terms) and all(passes(*TAGS, t["tags"]) for t in terms if "tags" in t)
    engine_accepts = not validation_problems(terms)
    assert crd_accepts == engine_accepts, (terms, validation_problems(terms))
