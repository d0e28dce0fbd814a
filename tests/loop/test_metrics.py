import datetime

import pytest
from django.utils import timezone

from scheduling.models import Decision, TaskRun
from tests.factories.reservations import CapacityReservationFactory
from tests.factories.scheduling import DecisionFactory, InstanceTypeFactory, OfferingFactory

pytestmark = pytest.mark.django_db


def scrape(client, **headers):
    response = client.get("/metrics", **headers)
    return response.status_code, response.content.decode()


def test_metrics_per_reservation_decisions_and_tasks(client):
    now = timezone.now()
    OfferingFactory(instance_type=InstanceTypeFactory(name="m5.large"), zone="us-east-1a", price=0.096)
    CapacityReservationFactory(reservation_id="cr-0abc", total_instance_count=4, available_instance_count=3)
    CapacityReservationFactory(reservation_id="cr-0blk", capacity_block=True, ultraserver_type="trn2u.48xlarge",
                               end_date=now + datetime.timedelta(minutes=100))
    DecisionFactory(kind=Decision.Kind.LAUNCH, outcome=Decision.Outcome.FAILED, error="ReservationCapacityExceeded: full")
    TaskRun.objects.create(task="sync_ec2", status="succeeded", started_at=now - datetime.timedelta(seconds=50),
                           finished_at=now - datetime.timedelta(seconds=48))
    status, body = scrape(client)
    assert status == 200
    assert 'karpweb_reservation_used_instances{account="123456789012",availability_zone="us-east-1a",instance_type="m5.large",reservation_id="cr-0abc",reservation_type="default"} 1.0' in body
    assert 'karpweb_reservation_idle_cost_dollars_per_hour{account="123456789012",availability_zone="us-east-1a",instance_type="m5.large",reservation_id="cr-0abc",reservation_type="default"} 0.288' in body
    drain_line = next(line for line in body.splitlines() if line.startswith("karpweb_capacity_block_seconds_to_drain{") and "cr-0blk" in line)
    assert 1700 < float(drain_line.rsplit(" ", 1)[1]) <= 1800  # 100 minutes - 70 for an UltraServer block
    assert 'karpweb_launch_failures_total{cluster="karpweb-test",code="ReservationCapacityExceeded"} 1.0' in body
    assert 'karpweb_task_last_duration_seconds{task="sync_ec2"} 2.0' in body
    lag = next(line for line in body.splitlines() if line.startswith('karpweb_sync_lag_seconds{task="sync_ec2"}'))
    assert 47 <= float(lag.rsplit(" ", 1)[1]) < 60


def test_the_drain_warning_is_exported_as_configured(client, settings):
    """KarpwebCapacityBlockDrainingSoon reads how early to fire from this gauge (deploy/prometheus)."""
    assert "karpweb_capacity_block_drain_warning_seconds 21600.0" in scrape(client)[1]  # 6 hours unless set
    settings.KARPWEB_CAPACITY_BLOCK_DRAIN_WARNING_HOURS = 2
    assert "karpweb_capacity_block_drain_warning_seconds 7200.0" in scrape(client)[1]


def test_metrics_token(client, settings):
    settings.KARPWEB_METRICS_TOKEN = "s3cret"
    assert scrape(client)[0] == 401
    assert scrape(client, HTTP_AUTHORIZATION="Bearer wrong")[0] == 401
    assert scrape(client, HTTP_AUTHORIZATION="Bearer s3cret")[0] == 200


def test_block_alarm_metric(client):
    from tests.factories.scheduling import NodeFactory

    now = timezone.now()
    block = CapacityReservationFactory(reservation_id="cr-0late", capacity_block=True, end_date=now + datetime.timedelta(minutes=30))
    NodeFactory(reservation=block)
    body = scrape(client)[1]
    assert 'karpweb_capacity_block_running_near_end{account="123456789012",availability_zone="us-east-1a",instance_type="m5.large",reservation_id="cr-0late",reservation_type="capacity-block"} 1.0' in body
