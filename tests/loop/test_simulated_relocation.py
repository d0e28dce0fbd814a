"""The simulated EC2 (the demo's) splits and moves capacity on the reservation rows with EC2's rules,
so a split or move recommendation applies in the demo as against AWS: once, with the new reservation
recorded, and refused where EC2 would refuse."""

import pytest
from django.utils import timezone

from reservations.models import CapacityReservation, Recommendation
from reservations.recommendation_actions import apply
from scheduling.adapters.ec2.interface import CloudAPIError
from scheduling.loop.simulated import SimulatedCloud
from scheduling.models import AuditEntry
from tests.factories.reservations import CapacityReservationFactory

pytestmark = pytest.mark.django_db


def totals(*ids):
    rows = {r.reservation_id: r for r in CapacityReservation.objects.filter(reservation_id__in=ids)}
    return [(rows[i].total_instance_count, rows[i].available_instance_count) for i in ids]


def test_split_and_move_follow_ec2s_rules():
    cloud = SimulatedCloud()
    source = CapacityReservationFactory(reservation_id="cr-src", total_instance_count=10, available_instance_count=6)
    same = CapacityReservationFactory(reservation_id="cr-same", total_instance_count=4, available_instance_count=0)
    windows = CapacityReservationFactory(reservation_id="cr-win", instance_platform="Windows")
    block = CapacityReservationFactory(reservation_id="cr-block", capacity_block=True)
    new = cloud.split_reservation(source.reservation_id, 2, client_token="t-1")
    assert cloud.split_reservation(source.reservation_id, 2, client_token="t-1") == new  # a retry splits once
    assert totals("cr-src", new["CapacityReservationId"]) == [(8, 4), (2, 2)]
    assert new["CapacityReservationArn"].endswith("/" + new["CapacityReservationId"])
    cloud.move_reservation_instances("cr-src", "cr-same", 3, client_token="t-2")
    assert totals("cr-src", "cr-same") == [(5, 1), (7, 3)]
    for call, code in ((lambda: cloud.move_reservation_instances("cr-src", "cr-same", 2, client_token="t"), "InvalidParameterValue"),
                       (lambda: cloud.move_reservation_instances("cr-src", "cr-win", 1, client_token="t"), "InvalidParameterValue"),
                       (lambda: cloud.split_reservation("cr-block", 1, client_token="t"), "UnsupportedOperation"),
                       (lambda: cloud.split_reservation("cr-nope", 1, client_token="t"), "InvalidCapacityReservationId.NotFound")):
        with pytest.raises(CloudAPIError) as refused:
            call()
        assert refused.value.code == code
    assert windows.pk and block.pk


def test_a_move_recommendation_applies_in_the_demo(settings, operator):
    settings.KARPWEB_MODE = "control"
    CapacityReservationFactory(reservation_id="cr-src", total_instance_count=10, available_instance_count=6)
    CapacityReservationFactory(reservation_id="cr-dst", total_instance_count=4, available_instance_count=0)
    now = timezone.now()
    rec = Recommendation.objects.create(
        kind="move", reservation=CapacityReservation.objects.get(reservation_id="cr-src"), reason="r",
        savings_per_month=140.16, seen_total=10, computed_at=now,
        details={"count": 2, "destination": "cr-dst", "destinationSeenTotal": 4, "money": "monthly"})
    for _ in range(2):
        apply(rec.pk, seen_computed_at=now, user=operator, source=AuditEntry.Source.UI, cloud=SimulatedCloud())
    assert totals("cr-src", "cr-dst") == [(8, 4), (6, 2)]  # moved once, not twice nor mirrored twice
    assert Recommendation.objects.get(pk=rec.pk).state == "applied"
    assert AuditEntry.objects.filter(changes__moved_from__isnull=False).count() == 1


def test_a_split_of_a_reservation_an_account_of_the_fleet_owns_keeps_one_visibility_per_account():
    """The new reservation's save records its owner's account (as the EC2 sync would); copying the source's
    visibilities then adds the others without a second row for the owner (it raised an IntegrityError)."""
    from fleet.models import AwsAccount
    from reservations.models import ReservationVisibility

    owner = AwsAccount.objects.create(account_id="123456789012", name="owner", regions=["us-east-1"])
    source = CapacityReservationFactory(reservation_id="cr-owned", total_instance_count=8, available_instance_count=6)
    assert source.visibilities.filter(account=owner, shared=False).exists()
    new = SimulatedCloud().split_reservation("cr-owned", 1, client_token="t-owned")
    seen = ReservationVisibility.objects.filter(reservation__reservation_id=new["CapacityReservationId"])
    assert seen.filter(account=owner, shared=False).count() == 1
    assert totals("cr-owned", new["CapacityReservationId"]) == [(7, 5), (1, 1)]
