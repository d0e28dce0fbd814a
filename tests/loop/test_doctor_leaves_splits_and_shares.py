"""The doctor never advises undoing a split or a share (#48): in the owner's cluster, a reservation it
shares with another account (the demo's 0010) or split off for one is gathered as meant for that account,
and no finding tells the owner's EC2NodeClass to select it."""

import pytest
from django.utils import timezone

from fleet.models import Cluster
from fleet.scope import cluster_scope
from reservations import doctor
from reservations.models import CapacityReservation, Recommendation
from scheduling.demo import ACCOUNT, SECOND_ACCOUNT, SHARED_RESERVATION, reservation_id
from scheduling.engine import doctor as engine

pytestmark = pytest.mark.django_db


def test_the_owner_leaves_its_shared_and_split_off_reservations_to_the_other_account(demo_world):
    owner_cluster = Cluster.objects.filter(account__account_id=ACCOUNT).order_by("name").first()
    shared = reservation_id(SHARED_RESERVATION)
    split = CapacityReservation.objects.filter(owner_id=ACCOUNT).exclude(reservation_id=shared) \
        .order_by("reservation_id").first()
    parent = CapacityReservation.objects.exclude(pk=split.pk).filter(owner_id=ACCOUNT).first()
    Recommendation.objects.create(kind=Recommendation.Kind.SPLIT, reservation=parent, reason="split", savings_per_month=1.0,
                                  details={"count": 1, "shareWith": SECOND_ACCOUNT, "newReservationId": split.reservation_id},
                                  seen_total=parent.total_instance_count, computed_at=timezone.now(),
                                  state=Recommendation.State.APPLIED)
    # Nothing selects them, and every class of the owner's cluster would admit them: the doctor's strongest case.
    with cluster_scope(owner_cluster):
        facts = doctor.gather(owner_cluster, timezone.now())
        by_id = {fact.id: fact for fact in facts.reservations}
        assert tuple(by_id[shared].meant_for) == (SECOND_ACCOUNT,) and not by_id[shared].split_off
        assert tuple(by_id[split.reservation_id].meant_for) == (SECOND_ACCOUNT,) and by_id[split.reservation_id].split_off
        facts.node_classes = [engine.NodeClassFact(nc.name, nc.terms, [rid for rid in nc.selected
                                                                       if rid not in (shared, split.reservation_id)])
                              for nc in facts.node_classes]
        facts.selected_in_fleet, facts.reports_unselected = None, None
        findings = [f for f in engine.diagnose(facts) if f.reservation_id in (shared, split.reservation_id)]
    assert findings  # still reported: free units nobody selects
    for finding in findings:
        assert finding.fix_command == "" and "not here" in finding.fix, (finding.code, finding.fix)
        assert SECOND_ACCOUNT in finding.fix
