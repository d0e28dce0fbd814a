import datetime

import pytest
from django.utils import timezone

from reservations.models import CapacityReservation, EC2NodeClass, UtilizationSample
from scheduling.models import Decision, InstanceType, Node, NodeClaim, NodePool, Offering, Pod
from tests.factories.reservations import CapacityReservationFactory, EC2NodeClassFactory, UtilizationSampleFactory
from tests.factories.scheduling import (
    DecisionFactory,
    InstanceTypeFactory,
    NodeClaimFactory,
    NodeFactory,
    NodePoolFactory,
    OfferingFactory,
    PodFactory,
)

pytestmark = pytest.mark.django_db

FACTORIES = [
    CapacityReservationFactory, UtilizationSampleFactory, EC2NodeClassFactory, InstanceTypeFactory,
    OfferingFactory, NodePoolFactory, NodeClaimFactory, NodeFactory, PodFactory, DecisionFactory,
]


def field_values(obj):
    return {field.attname: getattr(obj, field.attname) for field in obj._meta.concrete_fields}


@pytest.mark.parametrize("factory", FACTORIES, ids=lambda f: f._meta.model.__name__)
def test_round_trip(factory):
    created = factory()
    reloaded = type(created).objects.get(pk=created.pk)
    assert field_values(reloaded) == field_values(created)
    assert str(reloaded)


def test_reservation_counts_and_str():
    reservation = CapacityReservationFactory(
        reservation_id="cr-0abc", instance_type="m5.large", total_instance_count=4, available_instance_count=1
    )
    assert reservation.used_instance_count == 3
    assert reservation.utilization == 0.75
    assert str(reservation) == "cr-0abc (ODCR m5.large in us-east-1a)"
    block = CapacityReservationFactory(reservation_id="cr-0def", capacity_block=True, instance_type="p5.48xlarge")
    assert str(block) == "cr-0def (capacity block p5.48xlarge in us-east-1a)"


def test_reservation_usable_only_while_active_and_before_end():
    now = timezone.now()
    reservation = CapacityReservationFactory(end_date=now + datetime.timedelta(minutes=5))
    assert reservation.is_usable(now)
    assert not reservation.is_usable(now + datetime.timedelta(minutes=5))
    reservation.state = CapacityReservation.State.CANCELLED
    assert not reservation.is_usable(now)


def test_json_fields_round_trip_structures():
    node_class = EC2NodeClassFactory(
        capacity_reservation_selector_terms=[{"tags": {"team": "ml", "env": "*"}}, {"id": "cr-0abc"}],
        status_capacity_reservations=[{"id": "cr-0abc", "state": "active"}],
    )
    node_class.refresh_from_db()
    assert node_class.capacity_reservation_selector_terms[0]["tags"] == {"team": "ml", "env": "*"}
    assert node_class.status_capacity_reservations == [{"id": "cr-0abc", "state": "active"}]


def test_conditions_keep_transition_time_until_status_changes():
    pool = NodePoolFactory()
    t0 = timezone.now()
    assert pool.set_condition("Ready", "True", "Ready", now=t0)
    first = pool.condition("Ready")["lastTransitionTime"]
    assert not pool.set_condition("Ready", "True", "Ready", now=t0 + datetime.timedelta(minutes=5))
    assert pool.set_condition("Ready", "True", "Ready", "reworded", now=t0 + datetime.timedelta(minutes=6))
    assert pool.condition("Ready")["lastTransitionTime"] == first
    assert pool.set_condition("Ready", "False", "NodeClassNotReady", now=t0 + datetime.timedelta(minutes=7))
    assert pool.condition("Ready")["lastTransitionTime"] != first
    assert pool.condition_status("Missing") == "Unknown"


def test_pod_pending_and_node_instance_id():
    node = NodeFactory(provider_id="aws:///us-east-1a/i-0123456789abcdef0")
    assert node.instance_id == "i-0123456789abcdef0"
    assert PodFactory(node_name="").is_pending
    assert not PodFactory(node=node, node_name=node.name).is_pending


def test_deleting_reservation_keeps_nodes_and_samples_go():
    reservation = CapacityReservationFactory()
    UtilizationSampleFactory(reservation=reservation)
    node = NodeFactory(reservation=reservation, reservation_label=reservation.reservation_id)
    reservation.delete()
    node.refresh_from_db()
    assert node.reservation is None
    assert node.reservation_label.startswith("cr-")
    assert UtilizationSample.objects.count() == 0


def test_every_model_has_a_factory():
    covered = {factory._meta.model for factory in FACTORIES}
    assert covered >= {CapacityReservation, UtilizationSample, EC2NodeClass, InstanceType, Offering,
                       NodePool, NodeClaim, Node, Pod, Decision}
