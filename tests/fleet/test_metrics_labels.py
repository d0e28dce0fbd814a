"""/metrics in a fleet (scheduling/metrics.py): every series about a cluster's objects names the
cluster, every series per reservation names its owner's account, and the series names stay."""

import re

import pytest
from django.core.management import call_command

from fleet.models import Cluster
from fleet.scope import cluster_scope
from scheduling import demo
from scheduling.models import ControllerGuard, Decision, WatchState
from tests.factories.scheduling import DecisionFactory

pytestmark = pytest.mark.django_db


def samples(body: str, name: str) -> list[dict[str, str]]:
    rows = []
    for line in body.splitlines():
        if line.startswith(name + "{"):
            rows.append(dict(re.findall(r'(\w+)="([^"]*)"', line.split("}", 1)[0])))
    return rows


@pytest.fixture
def scrape(client, settings):
    settings.KARPWEB_METRICS_PUBLIC = True
    return lambda: client.get("/metrics").content.decode()


def test_cluster_series_name_their_cluster(scrape):
    call_command("seed_demo")
    names = set(Cluster.objects.values_list("name", flat=True))
    assert len(names) == 3
    for cluster in Cluster.objects.all():
        with cluster_scope(cluster):
            DecisionFactory(kind=Decision.Kind.LAUNCH, outcome=Decision.Outcome.FAILED,
                            error="InsufficientInstanceCapacity: none left")
            WatchState.record(events=5)
            ControllerGuard.objects.create(karpenter_live=cluster.name == "staging-use1", checked_at="2026-11-26T10:00:00Z")
    body = scrape()
    for series in ("karpweb_watch_connected", "karpweb_watch_events_total", "karpweb_watch_lag_seconds",
                   "karpweb_karpenter_live"):
        assert {row["cluster"] for row in samples(body, series)} == names, series
    assert 'karpweb_watch_events_total{cluster="research-use1"} 5.0' in body
    assert 'karpweb_karpenter_live{cluster="staging-use1"} 1.0' in body and 'karpweb_karpenter_live{cluster="research-use1"} 0.0' in body
    failures = samples(body, "karpweb_launch_failures_total")
    assert {(row["cluster"], row["code"]) for row in failures} == {(name, "InsufficientInstanceCapacity") for name in names}
    assert {row["cluster"] for row in samples(body, "karpweb_decisions_total")} == names


def test_reservation_series_name_their_owner_account(scrape):
    call_command("seed_demo")
    body = scrape()
    used = samples(body, "karpweb_reservation_used_instances")
    assert used and {row["account"] for row in used} == {demo.ACCOUNT}
    shared = next(row for row in used if row["reservation_id"] == demo.reservation_id(demo.SHARED_RESERVATION))
    assert shared["account"] == demo.ACCOUNT  # its owner, though the second account sees it too
    assert f'reservation_id="{shared["reservation_id"]}",reservation_type="default"}} 4.0' in body
    for series in ("karpweb_reservation_total_instances", "karpweb_reservation_idle_cost_dollars_per_hour",
                   "karpweb_capacity_block_seconds_to_drain", "karpweb_reservation_low_utilization"):
        rows = samples(body, series)
        assert rows and all(row["account"] == demo.ACCOUNT for row in rows), series
