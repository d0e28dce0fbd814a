"""The demo with --one-cluster (its own module: tests/foundation/test_demo_consistency.py shares the whole
fleet's demo among its tests)."""

import pytest
from django.core.management import call_command

from reservations.models import CapacityReservation, Recommendation
from scheduling import demo

pytestmark = pytest.mark.django_db


def test_a_single_cluster_demo_has_the_committed_reservation_and_no_destination_it_cannot_run():
    """--one-cluster: no staging-use1 to run the destination's nodes, so no destination; the idle units the
    commitment keeps are a split that saves nothing yet (no other account of the fleet), said as a warning."""
    call_command("seed_demo", "--one-cluster")
    ids = set(CapacityReservation.objects.fleet().values_list("reservation_id", flat=True))
    assert demo.reservation_id(demo.COMMITTED_SOURCE) in ids and demo.reservation_id(demo.MOVE_DESTINATION) not in ids
    recs = {r.kind: r for r in Recommendation.objects.filter(reservation__reservation_id=demo.reservation_id(demo.COMMITTED_SOURCE))}
    # 0012 holds 12 with 8 committed: a shrink to the commitment, or the 4 idle units above it split off.
    assert set(recs) == {"shrink", "split"} and recs["split"].money == "warning" and recs["split"].details["count"] == 4
