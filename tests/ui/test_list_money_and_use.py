"""The Reservations and Nodes lists: idle prepaid cost, node cost, request bars and their totals rows."""

import datetime
import re

from pathlib import Path

import pytest
from django.contrib.staticfiles import finders
from django.urls import reverse
from django.utils import timezone

from reservations.models import CapacityReservation, UtilizationHour
from scheduling.models import CapacityType, InstanceType, Offering
from tests.factories.reservations import CapacityReservationFactory
from tests.factories.scheduling import NodeFactory, PodFactory

pytestmark = pytest.mark.django_db


def row_of(page: str, text: str) -> str:
    """The <tr> that holds `text`."""
    rows = [row for row in re.findall(r"<tr>.*?</tr>", page, re.S) if text in row]
    assert len(rows) == 1, f"{text}: {len(rows)} rows"
    return rows[0]


def footer(page: str) -> str:
    return re.search(r"<tfoot.*?</tfoot>", page, re.S).group(0)


def price(instance_type: str, zone: str, capacity_type: str, dollars: float):
    it, _ = InstanceType.objects.get_or_create(name=instance_type, defaults={"cpu_millicores": 2000,
                                                                            "memory_bytes": 8 * 2**30})
    Offering.objects.create(instance_type=it, zone=zone, capacity_type=capacity_type, price=dollars)


def test_reservations_show_idle_prepaid_cost_per_row_and_totals(viewer_client, demo_world):
    page = viewer_client.get(reverse("reservations:list")).content.decode()
    assert "Idle (prepaid, list $/h)" in page
    # 4 idle m5.xlarge at $0.192 list price; 1 idle p5.48xlarge at $55.04.
    assert "<td>$0.7680/h</td>" in row_of(page, "cr-0a1b2c3d4e5f60002")
    assert "<td>$55.04/h</td>" in row_of(page, "cr-0a1b2c3d4e5f60006")
    # The expired one bills nothing more: no idle cost, and it is left out of the totals.
    assert "ended" in row_of(page, "cr-0a1b2c3d4e5f60008") and "$" not in row_of(page, "cr-0a1b2c3d4e5f60008")
    usable = CapacityReservation.objects.usable()
    used, idle, total = (sum(getattr(r, f) for r in usable) for f in
                         ("used_instance_count", "available_instance_count", "total_instance_count"))
    totals = footer(page)
    assert f'id="reservation-totals">{used} / {idle} / {total}<' in totals
    assert f"in {usable.count()} usable reservations (1 ended, not counted)" in totals
    overview = viewer_client.get(reverse("scheduling:overview")).content.decode()
    idle_on_the_overview = re.search(r'<div class="value">(\$[0-9,.]+)/h</div><div class="label">idle prepaid', overview)
    # The overview's figure: one rule for idle cost (over the demo fleet's reservations, $146.40 and up).
    assert f'id="idle-cost-total">{idle_on_the_overview.group(1)}/h<' in totals


def test_reservation_totals_follow_the_filter_not_the_page(viewer_client, demo_world):
    page = viewer_client.get(reverse("reservations:list"), {"instance_type": "m5.xlarge", "per_page": 1}).content.decode()
    # Two m5.xlarge ODCRs (4 and 3 idle) though the page shows one: 7 x $0.192.
    assert 'id="reservation-totals">0 / 7 / 7<' in footer(page)
    assert 'id="idle-cost-total">$1.34/h<' in footer(page)


def test_ids_never_wrap(viewer_client, demo_world):
    page = viewer_client.get(reverse("reservations:list")).content.decode()
    assert '<a class="id" href="/reservations/cr-0a1b2c3d4e5f60001/">cr-0a1b2c3d4e5f60001</a>' in page
    nodes = viewer_client.get(reverse("scheduling:nodes")).content.decode()
    assert re.search(r'<a class="id" href="(/clusters/[^/"]+)?/nodes/[^"]+">ip-10-0-', nodes)
    text = Path(finders.find("css/karpweb.css")).read_text()
    assert re.search(r"\.id\b[^{]*\{[^}]*white-space:\s*nowrap", text)


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
