"""A reservation's page agrees with itself (#48): the NodePools that will use it reach it through the
EC2NodeClasses the page says select it, both from one rule (scheduling.pod_placement.classes_selecting)."""

import re

import pytest

from reservations.models import CapacityReservation
from scheduling.demo import FUTURE_RESERVATION, reservation_id

pytestmark = pytest.mark.django_db


def test_the_future_reservation_names_the_classes_its_pools_use_it_through(demo_world, viewer_client):
    from scheduling.nodepool_health import node_class_name
    from scheduling.models import NodePool

    reservation = CapacityReservation.objects.get(reservation_id=reservation_id(FUTURE_RESERVATION))
    page = viewer_client.get(reservation.get_absolute_url()).content.decode()
    will_use = re.search(r"NodePools that will use it: (.*?)</p>", page, re.S).group(1)
    pools = re.findall(r">([^<]+)</a>", will_use)
    assert pools, will_use
    selecting = re.search(r'<h2 id="selecting">.*?</section>', page, re.S).group(0)
    assert "No EC2NodeClass" not in selecting, selecting
    classes = set(re.findall(r">([^<]+)</a>", selecting))
    for pool in NodePool.objects.filter(name__in=pools):
        assert node_class_name(pool) in classes, (pool.name, classes)


def test_a_started_reservation_is_selected_by_its_status_classes(demo_world, viewer_client):
    reservation = CapacityReservation.objects.filter(node_classes__isnull=False).distinct().first()
    page = viewer_client.get(reservation.get_absolute_url()).content.decode()
    selecting = re.search(r'<h2 id="selecting">.*?</section>', page, re.S).group(0)
    assert set(re.findall(r">([^<]+)</a>", selecting)) == {nc.name for nc in reservation.node_classes.all()}
