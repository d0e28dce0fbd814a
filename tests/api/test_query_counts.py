"""Every list endpoint answers in a fixed number of queries, however many rows (and related rows)
the page holds."""

import datetime

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from reservations.models import UtilizationSample
from reservations.utilization import roll_up
from scheduling.models import CapacityType, Decision, KarpenterLaunch, TaskRun
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

# Authentication (token + user, and the token's narrowing: accounts.models.TokenNarrowing), the
# user's groups, the page's count and the rows, plus one query per prefetch: never more than this.
MOST_QUERIES = 9


def reservations(n):
    node_class = EC2NodeClassFactory()
    for _ in range(n):
        reservation = CapacityReservationFactory()
        UtilizationSampleFactory.create_batch(2, reservation=reservation)
        node_class.selected_reservations.add(reservation)
        OfferingFactory(instance_type=InstanceTypeFactory(), capacity_type=CapacityType.RESERVED, reservation=reservation)


def samples(n):
    reservation = CapacityReservationFactory(reservation_id="cr-0fixed")
    UtilizationSampleFactory.create_batch(n, reservation=reservation)


def hours(n):
    reservation = CapacityReservationFactory(reservation_id="cr-0fixed")
    start = timezone.now() - datetime.timedelta(hours=n)
    UtilizationSample.objects.bulk_create([
        UtilizationSample(reservation=reservation, sampled_at=start + datetime.timedelta(hours=i), used=1, available=1, total=2)
        for i in range(n)
    ])
    roll_up(since=start - datetime.timedelta(hours=1))


def node_classes(n):
    for _ in range(n):
        node_class = EC2NodeClassFactory()
        node_class.selected_reservations.add(*CapacityReservationFactory.create_batch(2))
        NodePoolFactory(node_class=node_class)


def node_pools(n):
    for _ in range(n):
        NodeFactory.create_batch(2, node_pool=NodePoolFactory())


def node_claims(n):
    for _ in range(n):
        NodeClaimFactory(node_class=EC2NodeClassFactory(), reservation=CapacityReservationFactory())


def nodes(n):
    for _ in range(n):
        node = NodeFactory(node_claim=NodeClaimFactory(), reservation=CapacityReservationFactory())
        PodFactory.create_batch(2, node=node, node_name=node.name)


def pods(n):
    PodFactory.create_batch(n)


def instance_types(n):
    for _ in range(n):
        instance_type = InstanceTypeFactory()
        OfferingFactory(instance_type=instance_type)
        OfferingFactory(instance_type=instance_type, capacity_type=CapacityType.RESERVED,
                        reservation=CapacityReservationFactory())


def offerings(n):
    for _ in range(n):
        OfferingFactory(capacity_type=CapacityType.RESERVED, reservation=CapacityReservationFactory())


def decisions(n):
    for _ in range(n):
        DecisionFactory(node_pool=NodePoolFactory(), reservation=CapacityReservationFactory(),
                        kind=Decision.Kind.DRAIN)


def task_runs(n):
    for _ in range(n):
        TaskRun.objects.create(task="provision", finished_at=timezone.now(), counts={"launched": 1})


def karpenter_launches(n):
    start = KarpenterLaunch.objects.count()
    for index in range(start, start + n):
        KarpenterLaunch.objects.create(
            claim_name=f"karpenter-{index}", node_claim=NodeClaimFactory(), node_pool=NodePoolFactory(),
            instance_type="m5.large", zone="us-east-1a", capacity_type="on-demand", launched_at=timezone.now(),
            outcome="missed-reservation", reason="...", reservation=CapacityReservationFactory(), missed_dollars=1.0)


LISTS = [
    ("/api/v1/capacity-reservations/", reservations),
    ("/api/v1/capacity-reservations/cr-0fixed/samples/", samples),
    ("/api/v1/capacity-reservations/cr-0fixed/hours/", hours),
    ("/api/v1/ec2nodeclasses/", node_classes),
    ("/api/v1/nodepools/", node_pools),
    ("/api/v1/nodeclaims/", node_claims),
    ("/api/v1/nodes/", nodes),
    ("/api/v1/pods/", pods),
    ("/api/v1/instance-types/", instance_types),
    ("/api/v1/offerings/", offerings),
    ("/api/v1/decisions/", decisions),
    ("/api/v1/task-runs/", task_runs),
    ("/api/v1/karpenter-launches/", karpenter_launches),
]


def count_queries(client, url):
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url)
    assert response.status_code == 200, response.content
    return len(queries), response.json()["count"]


@pytest.mark.parametrize("url,make", LISTS, ids=[url for url, _ in LISTS])
def test_list_query_count_does_not_grow_with_rows(as_viewer, url, make):
    make(2)
    few, rows_few = count_queries(as_viewer, url)
    make(6)
    many, rows_many = count_queries(as_viewer, url)
    assert rows_many > rows_few
    assert many == few, f"{url}: {few} queries for {rows_few} rows, {many} for {rows_many}"
    assert many <= MOST_QUERIES
