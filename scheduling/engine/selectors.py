"""`capacityReservationSelectorTerms`: validation, resolution, and the EC2NodeClass status they give.

Terms are ORed and the fields within a term are ANDed (the code's semantics; upstream's task doc
says "ANDed" and is wrong). Validation is per term, where upstream's CEL rule only rejects `id`
combined with other fields when every term does so (aws/karpenter-provider-aws
`pkg/apis/v1/ec2nodeclass.go`).

Condition `CapacityReservationsReady` (upstream only ever sets True; karpweb says what is wrong):
  True  / CapacityReservationsReady   some reservations are selected
  True  / NoSelectorTerms             the class asks for no reservations
  False / InvalidSelectorTerms        a term is invalid; the message lists every problem. The class
                                      selects nothing, and its NodePools launch nothing until it is
                                      fixed (upstream's API server would have refused the spec).
  False / NoReservationsFound         valid terms select no active reservation. A warning only:
                                      the NodePools still launch on-demand and spot.
With the ReservedCapacity feature gate off the class has no condition and no reservations, as
upstream skips the reconciler.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Iterable, Mapping

from .reservations import MATCH_CRITERIA, CapacityReservation

MAX_TERMS = 30
MAX_TAGS = 20
ID_PATTERN = re.compile(r"^cr-[0-9a-z]+$")
OWNER_PATTERN = re.compile(r"^[0-9]{12}$")
GROUP_ARN_PATTERN = re.compile(r"^arn:aws[a-z-]*:resource-groups:[a-z0-9-]+:[0-9]{12}:group/[A-Za-z0-9._-]+$")
FIELDS = ("tags", "id", "ownerID", "instanceMatchCriteria", "resourceGroupARN")
SELECTING_FIELDS = ("tags", "id", "instanceMatchCriteria", "resourceGroupARN")
EXCLUSIVE_FIELDS = ("id", "resourceGroupARN")
ANY_VALUE = "*"

CONDITION_TYPE = "CapacityReservationsReady"
REASON_READY = "CapacityReservationsReady"
REASON_NO_TERMS = "NoSelectorTerms"
REASON_INVALID = "InvalidSelectorTerms"
REASON_NONE_FOUND = "NoReservationsFound"


@dataclass(frozen=True, slots=True)
class SelectorTerm:
    id: str | None = None
    tags: Mapping[str, str] | None = None
    owner_id: str | None = None
    instance_match_criteria: str | None = None
    resource_group_arn: str | None = None

    def matches(self, reservation: CapacityReservation, groups: Mapping[str, frozenset[str]]) -> bool:
        if self.id is not None:
            return reservation.id == self.id
        if self.resource_group_arn is not None:
            return reservation.id in groups.get(self.resource_group_arn, ())
        if self.owner_id is not None and reservation.owner_id != self.owner_id:
            return False
        if self.instance_match_criteria is not None and reservation.instance_match_criteria != self.instance_match_criteria:
            return False
        for key, value in (self.tags or {}).items():
            actual = reservation.tags.get(key)
            if actual is None or (value != ANY_VALUE and actual != value):
                return False
        return True


def parse_terms(raw: object, path: str = "capacityReservationSelectorTerms") -> tuple[list[SelectorTerm], list[str]]:
    """Validate the terms; returns the terms and every problem as `path: message`."""
    if raw is None:
        return [], []
    if not isinstance(raw, list):
        return [], [f"{path}: expected a list of terms"]
    problems: list[str] = []
    if len(raw) > MAX_TERMS:
        problems.append(f"{path}: {len(raw)} terms, at most {MAX_TERMS} are allowed")
    terms = []
    for index, item in enumerate(raw):
        term, term_problems = _parse_term(item, f"{path}[{index}]")
        problems.extend(term_problems)
        terms.append(term)
    return terms, problems


def _parse_term(item: object, path: str) -> tuple[SelectorTerm, list[str]]:
    if not isinstance(item, dict):
        return SelectorTerm(), [f"{path}: expected an object"]
    problems = [f"{path}.{key}: unknown field (expected one of {', '.join(FIELDS)})"
                for key in item if key not in FIELDS]
    tags = _parse_tags(item.get("tags"), f"{path}.tags", problems)
    term = SelectorTerm(
        id=_parse_string(item, "id", ID_PATTERN, path, problems),
        tags=tags or None,  # `tags: {}` is dropped, as upstream's omitempty does
        owner_id=_parse_string(item, "ownerID", OWNER_PATTERN, path, problems),
        instance_match_criteria=_parse_criteria(item, path, problems),
        resource_group_arn=_parse_string(item, "resourceGroupARN", GROUP_ARN_PATTERN, path, problems),
    )
    problems.extend(_combination_problems(item, tags, path))
    return term, problems


def _parse_string(item: dict, name: str, pattern: re.Pattern, path: str, problems: list[str]) -> str | None:
    value = item.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        problems.append(f"{path}.{name}: expected a string")
        return None
    if not pattern.match(value):
        problems.append(f'{path}.{name}: "{value}" does not match {pattern.pattern}')
    return value


def _parse_criteria(item: dict, path: str, problems: list[str]) -> str | None:
    value = item.get("instanceMatchCriteria")
    if value is not None and value not in MATCH_CRITERIA:
        problems.append(f'{path}.instanceMatchCriteria: "{value}" is not one of {", ".join(MATCH_CRITERIA)}')
    return value


def _parse_tags(value: object, path: str, problems: list[str]) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        problems.append(f"{path}: expected an object of tag keys to values")
        return {}
    if len(value) > MAX_TAGS:
        problems.append(f"{path}: {len(value)} tags, at most {MAX_TAGS} are allowed")
    tags = {}
    for key, tag_value in value.items():
        if key == "":
            problems.append(f"{path}: empty tag keys are not supported")
        elif not isinstance(tag_value, str):
            problems.append(f"{path}.{key}: expected a string")
        elif tag_value == "":
            problems.append(f"{path}.{key}: empty tag values are not supported")
        else:
            tags[key] = tag_value
    return tags


def _combination_problems(item: dict, tags: dict, path: str) -> list[str]:
    present = [name for name in FIELDS if item.get(name) is not None and (name != "tags" or item["tags"])]
    if not any(name in present for name in SELECTING_FIELDS):
        if "ownerID" in present:
            return [f"{path}.ownerID: cannot be used alone; add tags, id or instanceMatchCriteria"]
        return [f"{path}: expected at least one of tags, id, instanceMatchCriteria"]
    problems = []
    for name in EXCLUSIVE_FIELDS:
        others = [other for other in present if other != name]
        if name in present and others:
            problems.append(f"{path}.{name}: must be alone in its term, but the term also sets {', '.join(others)}")
    return problems


def select(terms: Iterable[SelectorTerm], reservations: Iterable[CapacityReservation], now: datetime,
           groups: Mapping[str, frozenset[str]] | None = None) -> list[CapacityReservation]:
    """Reservations matched by any term, active and not past their end, sorted by id."""
    terms = list(terms)
    groups = groups or {}
    chosen = {r.id: r for r in reservations
              if r.is_selectable(now) and any(t.matches(r, groups) for t in terms)}
    return [chosen[key] for key in sorted(chosen)]


def selects_once_active(raw_terms: object, reservation: CapacityReservation,
                        groups: Mapping[str, frozenset[str]] | None = None) -> bool:
    """Whether these selector terms will select the reservation once it is active: what a reservation
    that has not started (scheduled, assessing, ...) will be selected by; `select` leaves it out until then."""
    terms, problems = parse_terms(raw_terms)
    return not problems and any(t.matches(reservation, groups or {}) for t in terms)


@dataclass(slots=True)
class NodeClassReservations:
    """What one EC2NodeClass's selector terms give: its reservations and its status."""

    name: str
    reservations: list[CapacityReservation] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)
    condition: dict | None = None

    @property
    def valid(self) -> bool:
        return not self.problems

    def status(self, now: datetime) -> dict:
        return {
            "name": self.name,
            "capacityReservations": [r.status_entry(now) for r in self.reservations],
            "conditions": [self.condition] if self.condition else [],
        }


def resolve_node_class(name: str, raw_terms: object, reservations: list[CapacityReservation], now: datetime,
                       groups: Mapping[str, frozenset[str]] | None = None, *, enabled: bool = True,
                       path: str = "spec.capacityReservationSelectorTerms") -> NodeClassReservations:
    result = NodeClassReservations(name)
    if not enabled:
        return result
    terms, result.problems = parse_terms(raw_terms, path)
    if result.problems:
        result.condition = _condition("False", REASON_INVALID, "; ".join(result.problems))
        return result
    for reservation in select(terms, reservations, now, groups):
        reason = reservation.unsupported_reason()
        if reason:
            result.ignored.append(f"{reservation.id} ignored: {reason}")
        else:
            result.reservations.append(reservation)
    result.condition = _ready_condition(terms, result, now)
    return result


def _ready_condition(terms: list[SelectorTerm], result: NodeClassReservations, now: datetime) -> dict:
    ignored = "; ".join(result.ignored)
    if not terms:
        return _condition("True", REASON_NO_TERMS, "no capacityReservationSelectorTerms: this class uses no reservations")
    if not result.reservations:
        message = f"{len(terms)} selector term(s) select no active reservation"
        return _condition("False", REASON_NONE_FOUND, f"{message}; {ignored}" if ignored else message)
    expiring = sum(1 for r in result.reservations if r.status_state(now) == "expiring")
    message = f"{len(result.reservations)} reservation(s) selected"
    if expiring:
        message += f", {expiring} expiring"
    return _condition("True", REASON_READY, f"{message}; {ignored}" if ignored else message)


def _condition(status: str, reason: str, message: str) -> dict:
    return {"type": CONDITION_TYPE, "status": status, "reason": reason, "message": message}
