"""Each cluster's failing loop steps (scheduling/loop/health.py): beta's sync and lifecycle fail while
alpha's succeed, and every surface says so for beta alone, where the fleet's newest run of each step
(alpha's success) would hide it."""

import datetime
import io

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from fleet.models import Cluster
from fleet.scope import default_cluster, forget_default
from scheduling.loop.health import clusters_health
from scheduling.models import TaskRun
from tests.support.api_clients import token_client

pytestmark = pytest.mark.django_db
NOW = timezone.now().replace(microsecond=0)
ERROR = "ApiException: (401) Unauthorized\nTraceback: ..."


def run(cluster, task, status, minutes_ago, error=""):
    return TaskRun.objects.create(task=task, cluster=cluster, status=status, error=error,
                                  started_at=NOW - datetime.timedelta(minutes=minutes_ago),
                                  finished_at=NOW - datetime.timedelta(minutes=minutes_ago))


@pytest.fixture
def fleet(make_account, make_cluster):
    forget_default()
    alpha = default_cluster()
    beta = make_cluster("beta", make_account("222222222222", "ml-dev"))
    forget_default()
    for task in ("sync_kubernetes", "lifecycle"):
        run(beta, task, TaskRun.Status.SUCCEEDED, 30)
        run(beta, task, TaskRun.Status.FAILED, 40, "an older failure, before the success")
        for minutes in (20, 15, 10, 5):  # failed 4 times since
            run(beta, task, TaskRun.Status.FAILED, minutes, ERROR if minutes == 5 else "older error")
        run(beta, task, TaskRun.Status.SKIPPED, 1)  # another worker held the lease: not a run of it
        run(alpha, task, TaskRun.Status.SUCCEEDED, 0)  # the fleet's newest run of the step
    run(alpha, "provision", TaskRun.Status.FAILED, 10, "boom")
    run(alpha, "provision", TaskRun.Status.SUCCEEDED, 2)  # recovered
    yield alpha, beta
    forget_default()


def test_the_health_of_each_cluster_from_its_own_runs_in_one_query(fleet):
    alpha, beta = fleet
    with CaptureQueriesContext(connection) as queries:
        health = clusters_health(Cluster.objects.all())
    assert len(queries) == 1
    assert health[alpha.pk] == []
    assert {step.step: step.since for step in health[beta.pk]} == {
        "sync_kubernetes": NOW - datetime.timedelta(minutes=20), "lifecycle": NOW - datetime.timedelta(minutes=20)}
    assert {step.error for step in health[beta.pk]} == {"ApiException: (401) Unauthorized"}


def test_the_fleet_page_names_betas_failing_steps(fleet, admin_user_client):
    page = admin_user_client.get("/fleet/").content.decode()
    assert "No loop step is failing" not in page
    assert 'id="failing-beta-sync_kubernetes"' in page and 'id="failing-beta-lifecycle"' in page
    assert "cluster beta: sync_kubernetes failing since" in page and "ApiException: (401) Unauthorized" in page
    assert f"failing-{fleet[0].name}-" not in page


def test_the_clusters_list_and_betas_page(fleet, admin_user_client):
    listed = admin_user_client.get("/fleet/clusters/").content.decode()
    assert "sync_kubernetes since" in listed and "lifecycle since" in listed
    page = admin_user_client.get("/fleet/clusters/beta/").content.decode()
    assert 'id="failing-sync_kubernetes"' in page and 'id="failing-lifecycle"' in page
    assert "ApiException: (401) Unauthorized" in page
    healthy = admin_user_client.get(f"/fleet/clusters/{fleet[0].name}/").content.decode()
    assert f"No loop step of {fleet[0].name} is failing." in healthy


def test_the_overview_in_a_clusters_scope(fleet, admin_user_client):
    page = admin_user_client.get("/?cluster=beta").content.decode()
    assert 'id="cluster-health"' in page and 'id="failing-sync_kubernetes"' in page
    other = admin_user_client.get(f"/?cluster={fleet[0].name}").content.decode()
    assert f"No loop step of {fleet[0].name} is failing." in other


def test_the_api_says_failing_steps_to_those_who_see_the_cluster(fleet, as_viewer):
    rows = {row["name"]: row for row in as_viewer.get("/api/v1/clusters/").json()["results"]}
    assert rows[fleet[0].name]["failingSteps"] == []
    failing = {step["step"]: step for step in rows["beta"]["failingSteps"]}
    assert set(failing) == {"sync_kubernetes", "lifecycle"}
    assert failing["lifecycle"]["error"] == "ApiException: (401) Unauthorized"
    assert failing["lifecycle"]["since"].endswith("Z")
    assert as_viewer.get("/api/v1/clusters/beta/").json()["failingSteps"] == rows["beta"]["failingSteps"]
    # A user bound to alpha alone sees alpha's health and nothing of beta's.
    sam = get_user_model().objects.create_user("sam", "sam@example.com", "pw-for-tests-only")
    call_command("grant", "sam", "viewer", "--cluster", fleet[0].name, stdout=io.StringIO())
    seen = token_client(sam).get("/api/v1/clusters/").json()["results"]
    assert [row["name"] for row in seen] == [fleet[0].name] and seen[0]["failingSteps"] == []
    assert token_client(sam).get("/api/v1/clusters/beta/").status_code == 404


def test_the_metric_per_cluster_and_step(fleet, client):
    scrape = client.get("/metrics").content.decode()
    assert 'karpweb_cluster_step_failing{cluster="beta",step="sync_kubernetes"} 1.0' in scrape
    assert 'karpweb_cluster_step_failing{cluster="beta",step="provision"} 0.0' in scrape
    assert f'karpweb_cluster_step_failing{{cluster="{fleet[0].name}",step="provision"}} 0.0' in scrape
    assert 'karpweb_cluster_step_failing_seconds{cluster="beta",step="lifecycle"}' in scrape


def test_a_user_bound_to_alpha_sees_only_alphas_health_on_the_pages(fleet, client):
    alpha, _ = fleet
    sam = get_user_model().objects.create_user("sam", "sam@example.com", "pw-for-tests-only")
    call_command("grant", "sam", "viewer", "--cluster", alpha.name, stdout=io.StringIO())
    client.force_login(sam)
    page = client.get("/fleet/").content.decode()
    assert "failing-beta-" not in page and "ApiException" not in page
    assert "sync_kubernetes since" not in client.get("/fleet/clusters/").content.decode()
    assert client.get("/fleet/clusters/beta/").status_code == 404
