"""The Reservations and Nodes lists' money and use on rows these tests make themselves
(tests/ui/test_list_money_and_use.py seeds the demo world once for its module; these must not see it)."""

import datetime

import pytest
from django.urls import reverse
from django.utils import timezone

from reservations.models import CapacityReservation, UtilizationHour
from scheduling.models import CapacityType
from tests.factories.reservations import CapacityReservationFactory
from tests.factories.scheduling import NodeFactory, PodFactory
from tests.ui.test_list_money_and_use import footer, price, row_of

pytestmark = pytest.mark.django_db


def test_low_use_only_for_usable_reservations(viewer_client, db):
    now = timezone.now()
    expired = CapacityReservationFactory(reservation_id="cr-0expired", available_instance_count=4, total_instance_count=4,
                                         state=CapacityReservation.State.EXPIRED, end_date=now - datetime.timedelta(hours=1))
    idle = CapacityReservationFactory(reservation_id="cr-0idle", available_instance_count=4, total_instance_count=4)
    for reservation in (expired, idle):
        for hours_ago in range(26):
            hour = (now - datetime.timedelta(hours=hours_ago)).replace(minute=0, second=0, microsecond=0)
            UtilizationHour.objects.create(reservation=reservation, hour=hour, samples=1, used=0, available=4, total=4,
                                           share_sum=0, share_samples=1, first_sampled_at=hour)
    page = viewer_client.get(reverse("reservations:list")).content.decode()
    assert "low use" in row_of(page, "cr-0idle")
    assert "low use" not in row_of(page, "cr-0expired")
    assert "under 20 % for 24 hours" not in viewer_client.get(expired.get_absolute_url()).content.decode()


def test_nodes_show_cost_prepaid_and_request_bars(viewer_client, db):
    price("m5.large", "us-east-1a", CapacityType.ON_DEMAND, 0.096)
    price("m5.large", "us-east-1a", CapacityType.SPOT, 0.0412)
    price("m5.large", "us-east-1a", CapacityType.RESERVED, 0.0000001)  # a reservation's offering: not a node's cost
    reservation = CapacityReservationFactory(reservation_id="cr-0nodes")
    on_demand = NodeFactory(name="od-1", capacity_type=CapacityType.ON_DEMAND, allocatable_cpu_millicores=2000,
                            allocatable_memory_bytes=8 * 2**30)
    NodeFactory(name="spot-1", capacity_type=CapacityType.SPOT, node_pool=on_demand.node_pool)
    NodeFactory(name="res-1", capacity_type=CapacityType.RESERVED, reservation=reservation, reservation_label="cr-0nodes",
                node_pool=on_demand.node_pool)
    NodeFactory(name="odd-1", instance_type="x9.huge", node_pool=on_demand.node_pool)
    PodFactory(node=on_demand, node_name="od-1", cpu_request_millicores=1500, memory_request_bytes=2 * 2**30)
    PodFactory(node=on_demand, node_name="od-1", cpu_request_millicores=500, memory_request_bytes=2**30)
    PodFactory(node=on_demand, node_name="od-1", phase="Succeeded", cpu_request_millicores=4000)  # holds nothing
    page = viewer_client.get(reverse("scheduling:nodes")).content.decode()
    assert "Cost (list $/h)" in page
    assert "$0.0960/h" in row_of(page, ">od-1<") and "$0.0412/h" in row_of(page, ">spot-1<")
    reserved = row_of(page, ">res-1<")
    assert "prepaid" in reserved and "$" not in reserved, "a reserved node is prepaid, never $0"
    assert "<td>—</td>" in row_of(page, ">odd-1<").split("ip-")[0]  # no known price
    od = row_of(page, ">od-1<")
    assert 'style="width:100%"' in od and "2 / 2 (100%)" in od  # 1500m + 500m of 2 CPU: the finished pod not counted
    assert "3Gi / 8Gi (38%)" in od
    totals = footer(page)
    assert 'id="node-totals">4 nodes<' in totals
    assert 'id="node-cost-total">$0.1372/h<' in totals and "+ 1 reserved (prepaid)" in totals
    assert "1 without a known price" in totals
    allocatable = 2000 + 3 * 1920
    assert f"2 / {allocatable / 1000:g} ({2000 / allocatable:.0%})" in totals


def test_node_totals_follow_the_filter(viewer_client, db):
    price("m5.large", "us-east-1a", CapacityType.SPOT, 0.05)
    first = NodeFactory(name="spot-a", capacity_type=CapacityType.SPOT)
    NodeFactory(name="spot-b", capacity_type=CapacityType.SPOT, node_pool=first.node_pool)
    NodeFactory(name="od-c", node_pool=first.node_pool)
    page = viewer_client.get(reverse("scheduling:nodes"), {"capacity_type": "spot", "per_page": 1}).content.decode()
    assert 'id="node-totals">2 nodes<' in footer(page) and 'id="node-cost-total">$0.1000/h<' in footer(page)
