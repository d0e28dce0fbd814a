"""capacityReservationSelectorTerms -> DescribeCapacityReservations queries.

Validation lives in the engine (``scheduling.engine.selectors.parse_terms``, per term); this
module only turns valid terms into EC2 queries, as upstream does
(aws/karpenter-provider-aws `pkg/providers/capacityreservation/types.go`):
an ``id`` term queries by id with ``state=active`` and no ``MaxResults``; a term with tags,
``ownerID`` and/or ``instanceMatchCriteria`` queries with the filters ``state=active``,
``owner-id``, ``tag:KEY=VALUE`` (``tag-key=KEY`` for ``*``) and ``instance-match-criteria`` and
``MaxResults=1000``; a ``resourceGroupARN`` term (an engine extension) lists the group's
reservations with resource-groups ``ListGroupResources`` and then queries by id.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from scheduling.engine.selectors import ANY_VALUE, SelectorTerm, parse_terms

from .interface import SelectorTermsError


def parse(raw_terms: Sequence[Mapping[str, Any]] | None) -> list[SelectorTerm]:
    """The engine's terms, or SelectorTermsError listing every problem."""
    terms, problems = parse_terms(list(raw_terms) if raw_terms is not None else None)
    if problems:
        raise SelectorTermsError(problems)
    return terms


@dataclass(frozen=True)
class ReservationQuery:
    """One DescribeCapacityReservations query; hashable, so it is also the cache key."""

    reservation_id: str | None = None
    owner_id: str | None = None
    tags: tuple[tuple[str, str], ...] = ()
    instance_match_criteria: str | None = None
    resource_group_arn: str | None = None

    @property
    def by_id(self) -> bool:
        return self.reservation_id is not None

    def request(self, ids: Sequence[str] | None = None) -> dict[str, Any]:
        """Parameters for DescribeCapacityReservations, without paging. ``ids`` replaces the
        query's own id (for a resource group's members)."""
        filters = [{"Name": "state", "Values": ["active"]}]
        if self.by_id or ids is not None:
            # EC2 refuses MaxResults together with ids, so none is sent.
            return {"CapacityReservationIds": list(ids) if ids is not None else [self.reservation_id], "Filters": filters}
        if self.owner_id:
            filters.append({"Name": "owner-id", "Values": [self.owner_id]})
        for key, value in self.tags:
            if value == ANY_VALUE:
                filters.append({"Name": "tag-key", "Values": [key]})
            else:
                filters.append({"Name": f"tag:{key}", "Values": [value]})
        if self.instance_match_criteria:
            filters.append({"Name": "instance-match-criteria", "Values": [self.instance_match_criteria]})
        return {"Filters": filters, "MaxResults": 1000}


def queries_from_terms(terms: Sequence[SelectorTerm]) -> list[ReservationQuery]:
    """One query per term, duplicates removed, order kept."""
    queries: list[ReservationQuery] = []
    for term in terms:
        if term.id:
            query = ReservationQuery(reservation_id=term.id)
        elif term.resource_group_arn:
            query = ReservationQuery(resource_group_arn=term.resource_group_arn)
        else:
            query = ReservationQuery(
                owner_id=term.owner_id or None,
                tags=tuple(sorted((term.tags or {}).items())),
                instance_match_criteria=term.instance_match_criteria or None,
            )
        if query not in queries:
            queries.append(query)
    return queries
