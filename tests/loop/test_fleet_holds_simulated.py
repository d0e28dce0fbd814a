"""The fleet ledger's holds in the simulated world (a fleet of one): its launches take the unit from
the reservation's row themselves, so a launched hold is settled at once and never counted twice
(tests/fleet/test_holds.py checks the counting); every reserved claim of the run held its unit."""

from collections import Counter

import pytest

from reservations.models import ReservationHold
from scheduling.loop import steps
from scheduling.models import Decision, NodeClaim

pytestmark = pytest.mark.django_db(transaction=True)


def test_every_reserved_claim_of_a_run_is_held_and_launched(demo, settings):
    settings.KARPWEB_MODE = "control"
    seeded = set(NodeClaim.objects.values_list("pk", flat=True))
    assert steps.provision()["launched"] > 0
    reserved = Counter(NodeClaim.objects.exclude(pk__in=seeded).exclude(reservation_label="")
                       .values_list("reservation_label", flat=True))
    holds = list(ReservationHold.objects.select_related("reservation"))
    assert reserved and len(holds) == sum(reserved.values())  # one hold per reserved launch
    assert Counter(h.reservation.reservation_id for h in holds) == reserved
    assert {h.state for h in holds} == {ReservationHold.State.RELEASED}  # counted in the row by the launch
    assert not Decision.objects.filter(reason__contains="another cluster of the fleet holds").exists()
