from datetime import datetime, timedelta, timezone

import pytest

from scheduling.engine.reservations import CapacityReservation
from scheduling.engine.selectors import parse_terms, resolve_node_class, select

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=timezone.utc)
P = "capacityReservationSelectorTerms"


def cr(rid, *, tags=None, owner="123456789012", criteria="targeted", state="active", end=None, kind="default"):
    return CapacityReservation(rid, "m5.large", "us-east-1a", 1, 1, owner_id=owner, state=state,
                               instance_match_criteria=criteria, reservation_type=kind, end=end, tags=tags or {})


RESERVATIONS = [
    cr("cr-a", tags={"team": "ml", "env": "prod"}),
    cr("cr-b", tags={"team": "web"}, owner="210987654321"),
    cr("cr-c", tags={"team": "ml"}, criteria="open"),
    cr("cr-d", tags={"team": "ml"}, state="expired"),
    cr("cr-e", tags={"team": "ml"}, end=NOW),
    cr("cr-f"),
]


def ids(terms):
    parsed, problems = parse_terms(terms)
    assert problems == []
    return [r.id for r in select(parsed, RESERVATIONS, NOW)]


@pytest.mark.parametrize("terms, expected", [
    ([{"id": "cr-b"}], ["cr-b"]),
    ([{"tags": {"team": "ml"}}], ["cr-a", "cr-c"]),  # not expired, not past its end
    ([{"tags": {"team": "*"}}], ["cr-a", "cr-b", "cr-c"]),
    ([{"tags": {"team": "ml", "env": "*"}}], ["cr-a"]),  # fields ANDed
    ([{"tags": {"team": "ml"}}, {"id": "cr-b"}], ["cr-a", "cr-b", "cr-c"]),  # terms ORed
    ([{"tags": {"team": "*"}, "ownerID": "210987654321"}], ["cr-b"]),
    ([{"instanceMatchCriteria": "open"}], ["cr-c"]),
    ([{"instanceMatchCriteria": "targeted", "tags": {"team": "ml"}}], ["cr-a"]),
    ([{"id": "cr-zzz"}], []),
    ([{"id": "cr-d"}], []),  # id terms still only select active reservations
    ([], []),
])
def test_selection(terms, expected):
    assert ids(terms) == expected


def test_resource_group_terms():
    parsed, problems = parse_terms([{"resourceGroupARN": "arn:aws:resource-groups:us-east-1:123456789012:group/ml"}])
    assert problems == []
    groups = {"arn:aws:resource-groups:us-east-1:123456789012:group/ml": frozenset({"cr-b", "cr-d"})}
    assert [r.id for r in select(parsed, RESERVATIONS, NOW, groups)] == ["cr-b"]


@pytest.mark.parametrize("terms, message", [
    ([{"id": "xyz"}], f'{P}[0].id: "xyz" does not match ^cr-[0-9a-z]+$'),
    ([{"tags": {"a": "b"}}, {"id": "xyz"}], f'{P}[1].id: "xyz" does not match ^cr-[0-9a-z]+$'),
    ([{"id": "cr-1", "tags": {"a": "b"}}], f"{P}[0].id: must be alone in its term, but the term also sets tags"),
    ([{"tags": {"a": "b"}}, {"id": "cr-1", "ownerID": "123456789012"}],
     f"{P}[1].id: must be alone in its term, but the term also sets ownerID"),
    ([{"ownerID": "123456789012"}], f"{P}[0].ownerID: cannot be used alone; add tags, id or instanceMatchCriteria"),
    ([{}], f"{P}[0]: expected at least one of tags, id, instanceMatchCriteria"),
    ([{"tags": {}}], f"{P}[0]: expected at least one of tags, id, instanceMatchCriteria"),
    ([{"tags": {"a": "b"}, "ownerID": "12345"}], f'{P}[0].ownerID: "12345" does not match ^[0-9]{{12}}$'),
    ([{"tags": {"": "b"}}], f"{P}[0].tags: empty tag keys are not supported"),
    ([{"tags": {"a": ""}}], f"{P}[0].tags.a: empty tag values are not supported"),
    ([{"tags": {f"k{i}": "v" for i in range(21)}}], f"{P}[0].tags: 21 tags, at most 20 are allowed"),
    ([{"tags": {"a": "b"}}] * 31, f"{P}: 31 terms, at most 30 are allowed"),
    ([{"instanceMatchCriteria": "closed"}], f'{P}[0].instanceMatchCriteria: "closed" is not one of open, targeted'),
    ([{"tag": {"a": "b"}}], f"{P}[0].tag: unknown field (expected one of tags, id, ownerID, instanceMatchCriteria, resourceGroupARN)"),
    ([{"resourceGroupARN": "arn:nope"}], f'{P}[0].resourceGroupARN: "arn:nope" does not match'),
    ("cr-1", f"{P}: expected a list of terms"),
    (["cr-1"], f"{P}[0]: expected an object"),
])
def test_validation_names_term_and_field(terms, message):
    _, problems = parse_terms(terms)
    assert any(p.startswith(message) for p in problems), problems


def test_thirty_terms_and_twenty_tags_are_fine():
    _, problems = parse_terms([{"tags": {f"k{i}": "v" for i in range(20)}}] * 30)
    assert problems == []


def test_status_sorted_by_id_with_upstream_fields():
    end = NOW + timedelta(minutes=30)
    reservations = [cr("cr-z", tags={"t": "1"}), cr("cr-b", tags={"t": "1"}, kind="capacity-block", end=end)]
    status = resolve_node_class("default", [{"tags": {"t": "1"}}], reservations, NOW).status(NOW)
    assert [r["id"] for r in status["capacityReservations"]] == ["cr-b", "cr-z"]
    assert status["capacityReservations"][0] == {
        "availabilityZone": "us-east-1a", "endTime": "2026-11-21T12:30:00Z", "id": "cr-b",
        "instanceMatchCriteria": "targeted", "instanceType": "m5.large", "ownerID": "123456789012",
        "reservationType": "capacity-block", "interruptible": False, "state": "expiring",
    }
    assert "endTime" not in status["capacityReservations"][1]
    assert status["conditions"] == [{"type": "CapacityReservationsReady", "status": "True",
                                     "reason": "CapacityReservationsReady",
                                     "message": "2 reservation(s) selected, 1 expiring"}]


def test_conditions():
    def condition(terms, reservations=RESERVATIONS, enabled=True):
        result = resolve_node_class("nc", terms, reservations, NOW, enabled=enabled)
        return result.condition and (result.condition["status"], result.condition["reason"], result.condition["message"])

    assert condition(None)[:2] == ("True", "NoSelectorTerms")
    assert condition([{"id": "cr-nope"}]) == ("False", "NoReservationsFound", "1 selector term(s) select no active reservation")
    status, reason, message = condition([{"id": "bad"}, {"ownerID": "1"}])
    assert (status, reason) == ("False", "InvalidSelectorTerms")
    assert "[0].id" in message and "[1].ownerID" in message
    assert condition([{"id": "cr-a"}], enabled=False) is None
    odd = [cr("cr-x", tags={"t": "1"}, criteria="weird")]
    assert condition([{"tags": {"t": "1"}}], odd) == (
        "False", "NoReservationsFound",
        '1 selector term(s) select no active reservation; cr-x ignored: unknown InstanceMatchCriteria "weird"')
