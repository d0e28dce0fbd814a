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


def test_a_move_recommendation_applies_in_the_demo(demo_world, settings, operator):
    """The demo's move (3 of 0012's units to 0013, whose cluster pays for 3 on-demand beside it): applying
    recomputes its evidence from the mirror, and the simulated EC2 moves the units once."""
    settings.KARPWEB_MODE = "control"
    source, destination = "cr-0a1b2c3d4e5f60012", "cr-0a1b2c3d4e5f60013"
    rec = Recommendation.objects.get(kind="move", reservation__reservation_id=source)
    before = totals(source, destination)
    for _ in range(2):
        apply(rec.pk, seen_computed_at=rec.computed_at, user=operator, source=AuditEntry.Source.UI, cloud=SimulatedCloud())
    assert totals(source, destination) == [(before[0][0] - 3, before[0][1] - 3), (before[1][0] + 3, before[1][1] + 3)]
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
