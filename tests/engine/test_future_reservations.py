"""Future-dated reservations (issue #37): a reservation that has not started (scheduled, assessing,
pending, payment-pending, delayed) is planned with only from its start. EC2 makes a scheduled one active
at its StartDate; the engine does too when the world it is given is at or past that start (the sync may
not have seen the change yet, or what-if plans 'at the start of reservation X')."""

import pytest

from scheduling.engine import simulate
from scheduling.engine.explain import COULD_USE, NOT_STARTED, ReservedUnit, why_not_reserved
from scheduling.engine.quantities import ResourceList
from scheduling.engine.requirements import Requirements
from scheduling.engine.world import parse_world

from .builders import capacity_types, instance_type, node_class, node_pool, pod, reservation, world

SMALL = instance_type("m5.large", "2", "8Gi", od=0.096, zones=("us-east-1a",))
START = "2026-11-24T00:00:00Z"


def scheduled(state="scheduled", start=START, available=2):
    item = reservation("cr-0future", "m5.large", available=available, total=2, state=state, tags={"team": "ml"})
    if start:
        item["StartDate"] = start
    return item


def run(pods, *, now, reservations, capacity_types_=("reserved", "on-demand")):
    return simulate(world(instance_types=[SMALL], reservations=reservations, now=now,
                          node_pools=[node_pool(capacity_types=list(capacity_types_))], pods=pods))


def test_not_planned_into_before_its_start_then_planned_from_it():
    pods = [pod("p0", "1500m", "1Gi")]
    before = run(pods, now="2026-11-23T23:59:00Z", reservations=[scheduled()])
    assert capacity_types(before) == ["on-demand"]
    assert before["nodeClasses"][0]["capacityReservations"] == []  # upstream lists active ones only
    at_start = run(pods, now=START, reservations=[scheduled(available=0)])  # EC2's count may lag its start
    assert capacity_types(at_start) == ["reserved"]
    assert at_start["nodeClaims"][0]["launch"]["reservationID"] == "cr-0future"
    assert [e["id"] for e in at_start["nodeClasses"][0]["capacityReservations"]] == ["cr-0future"]


@pytest.mark.parametrize("state", ["assessing", "pending", "payment-pending", "delayed"])
def test_other_future_states_are_never_planned_into_even_past_the_asked_start(state):
    decisions = run([pod("p0", "1500m", "1Gi")], now="2026-11-25T00:00:00Z", reservations=[scheduled(state)])
    assert capacity_types(decisions) == ["on-demand"]


def test_a_reserved_only_pool_says_when_the_reservation_starts():
    decisions = run([pod("p0", "1500m", "1Gi")], now="2026-11-23T12:00:00Z", reservations=[scheduled()],
                    capacity_types_=("reserved",))
    assert decisions["nodeClaims"] == []
    [failure] = decisions["unschedulable"]
    assert failure["reason"] == "reservation cr-0future is scheduled: it starts at 2026-11-24T00:00:00Z"


def test_state_at_and_reason():
    [r] = parse_world(world(reservations=[scheduled()], now="2026-11-23T00:00:00Z")).reservations
    before, after = parse_world(world(now="2026-11-23T00:00:00Z")).now, parse_world(world(now=START)).now
    assert (r.state_at(before), r.is_upcoming(before), r.is_selectable(before)) == ("scheduled", True, False)
    assert (r.state_at(after), r.is_upcoming(after), r.is_selectable(after)) == ("active", False, True)
    assert r.unavailable_reason(before) == "reservation cr-0future is scheduled: it starts at 2026-11-24T00:00:00Z"
    assert r.unavailable_reason(after) is None
    [delayed] = parse_world(world(reservations=[scheduled("delayed")])).reservations
    assert delayed.unavailable_reason(after) == ("reservation cr-0future is delayed: it was asked to start at "
                                                 "2026-11-24T00:00:00Z")


LABELS = {"node.kubernetes.io/instance-type": "m5.large", "topology.kubernetes.io/zone": "us-east-1a",
          "karpenter.sh/capacity-type": "reserved"}
ROOM = ResourceList({"cpu": 1930, "memory": 7 * 2**30, "pods": 29})


def test_why_not_reserved_names_the_reservation_that_starts_later():
    upcoming = ReservedUnit("cr-0future", "m5.large", "us-east-1a", LABELS, ROOM, 2, 2, ("web",),
                            not_started="reservation cr-0future is scheduled: it starts at 2026-11-24T00:00:00Z")
    small = ResourceList({"cpu": 500, "memory": 2**30, "pods": 1})
    answer = why_not_reserved((Requirements(),), small, "web", Requirements(), "web", [upcoming])
    assert answer.blocker == NOT_STARTED and answer.reservations == ("cr-0future",)
    assert answer.text == ("EC2NodeClass web of NodePool web selects no usable reservation (its capacityReservationSelectorTerms); "
                           "cr-0future (m5.large in us-east-1a) could hold it once it starts "
                           "(reservation cr-0future is scheduled: it starts at 2026-11-24T00:00:00Z)")
    now = ReservedUnit("cr-0now", "m5.large", "us-east-1a", LABELS, ROOM, 1, 1, ("web",))
    assert why_not_reserved((Requirements(),), small, "web", Requirements(), "web", [now, upcoming]).blocker == COULD_USE
    too_big = ResourceList({"cpu": 8000, "pods": 1})
    assert why_not_reserved((Requirements(),), too_big, "web", Requirements(), "web", [upcoming]).blocker != NOT_STARTED


# --- what-if: the world at the start of reservation X --------------------------------------------

def test_what_if_at_the_start_of_a_reservation_plans_with_it_and_moves_the_clock():
    from scheduling.engine.worldedits import apply_edits, summarize

    doc = world(instance_types=[SMALL], reservations=[scheduled(available=0)], now="2026-11-22T00:00:00Z",
                node_pools=[node_pool(capacity_types=["reserved", "on-demand"])], pods=[pod("p0", "1500m", "1Gi")])
    assert summarize(simulate(doc))["byCapacityType"] == {"on-demand": 1}
    edited, problems = apply_edits(doc, [{"kind": "at-reservation-start", "id": "cr-0future"}])
    assert problems == [] and edited["now"] == START and doc["now"] == "2026-11-22T00:00:00Z"
    assert edited["capacityReservations"][0]["AvailableInstanceCount"] == 2  # every unit free from its start
    assert summarize(simulate(edited))["byCapacityType"] == {"reserved": 1}

    started = world(reservations=[reservation("cr-0now", "m5.large")])
    _, refused = apply_edits(started, [{"kind": "at-reservation-start", "id": "cr-0now"}])
    assert refused == ["edits[0].id: cr-0now has started (state active)"]
    _, unknown = apply_edits(doc, [{"kind": "at-reservation-start", "id": "cr-nope"}])
    assert unknown == ["edits[0].id: no reservation 'cr-nope' in this world"]
    _, undated = apply_edits(world(reservations=[scheduled(start=None)]), [{"kind": "at-reservation-start", "id": "cr-0future"}])
    assert undated == ["edits[0].id: cr-0future has no start date to plan at"]
