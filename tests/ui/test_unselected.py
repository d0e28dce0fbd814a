import pytest
from django.urls import reverse

from reservations.models import EC2NodeClass
from tests.factories.reservations import CapacityReservationFactory
from tests.factories.scheduling import NodeFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def demo_world(demo_world_for_module, db):
    """Every test here builds on the demo world: it is seeded once for the module (tests/conftest.py),
    and each test's own writes are rolled back after it."""


def test_open_reservation_trap_report(viewer_client, demo_world):
    CapacityReservationFactory(reservation_id="cr-0open", instance_type="r6i.large", availability_zone="us-east-1b",
                               instance_match_criteria="open", total_instance_count=3, available_instance_count=2, tags={})
    NodeFactory(name="od-r6i", instance_type="r6i.large", zone="us-east-1b", capacity_type="on-demand")
    NodeFactory(name="od-elsewhere", instance_type="r6i.large", zone="us-east-1a", capacity_type="on-demand")
    page = viewer_client.get(reverse("reservations:unselected")).content.decode()
    row = page.split('data-reservation="cr-0open"')[1].split("</tr>")[0]
    assert "$0.2520/h" in row and "2 / 3" in row and "od-r6i" in row and "od-elsewhere" not in row
    for selected in EC2NodeClass.objects.get(name="default").selected_reservations.all():
        assert f'data-reservation="{selected.reservation_id}"' not in page


def test_open_mode_instances_are_shown_in_the_reservation_not_as_could_use(viewer_client, demo_world):
    """Open mode: EC2 put od-in-it into cr-0open. The report lists it as in the reservation (the
    unit it uses is counted in `Idle / total`), not among the nodes that could have used it."""
    from django.utils import timezone

    from reservations.models import OpenReservationInstance

    now = timezone.now()
    trap = CapacityReservationFactory(reservation_id="cr-0open", instance_type="r6i.large", availability_zone="us-east-1b",
                                      instance_match_criteria="open", total_instance_count=3, available_instance_count=1, tags={})
    NodeFactory(name="od-in-it", instance_type="r6i.large", zone="us-east-1b", capacity_type="on-demand",
                provider_id="aws:///us-east-1b/i-0000000000000open")
    NodeFactory(name="od-outside", instance_type="r6i.large", zone="us-east-1b", capacity_type="on-demand")
    OpenReservationInstance.objects.create(instance_id="i-0000000000000open", reservation=trap, instance_type="r6i.large",
                                           availability_zone="us-east-1b", node_name="od-in-it", first_seen=now, last_seen=now)
    page = viewer_client.get(reverse("reservations:unselected")).content.decode()
    row = page.split('data-reservation="cr-0open"')[1].split("</tr>")[0]
    could_use, in_it = row.split('class="open-in-it"')
    assert "1 / 3" in row and "od-outside" in could_use and "od-in-it" not in could_use and "od-in-it" in in_it
