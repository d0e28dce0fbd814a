"""The fleet's faces: /api/v1/accounts/ and /api/v1/clusters/, the pages under /fleet/, and the
cluster and account filters of the Kubernetes-side lists."""

import pytest
from django.urls import reverse

from fleet import scope
from fleet.models import AwsAccount, Cluster
from scheduling.models import AuditEntry
from tests.factories.reservations import CapacityReservationFactory
from tests.factories.scheduling import NodeFactory, NodePoolFactory

pytestmark = pytest.mark.django_db


def test_the_api_lists_and_shows_accounts_and_clusters(as_viewer, two_clusters):
    _home, east, west = two_clusters
    accounts = as_viewer.get("/api/v1/accounts/", {"q": "ml-"}).json()
    assert [(a["accountID"], a["name"], a["clusters"]) for a in accounts["results"]] == [
        ("222222222222", "ml-dev", ["west"]), ("111111111111", "ml-prod", ["east"])]
    cluster = as_viewer.get("/api/v1/clusters/west/").json()
    assert (cluster["account"], cluster["region"], cluster["queue"], cluster["isDefault"]) == (
        "222222222222", "us-west-2", "celery", False)
    listed = as_viewer.get("/api/v1/clusters/", {"account": "111111111111"}).json()["results"]
    assert [c["name"] for c in listed] == ["east"]
    assert as_viewer.get("/api/v1/accounts/111111111111/").json()["name"] == "ml-prod"
    endpoints = as_viewer.get("/api/v1/").json()["endpoints"]
    assert endpoints["accounts"].endswith("/api/v1/accounts/") and endpoints["clusters"].endswith("/api/v1/clusters/")


def test_fleet_admins_add_and_change_clusters_audited_and_viewers_may_not(as_fleet_admin, as_viewer, two_clusters):
    body = {"name": "prod-eu", "account": "111111111111", "region": "eu-west-1", "connection": "kubeconfig",
            "kubeconfig": "secret:karpweb/prod-eu", "shard": "eu"}
    assert as_viewer.post("/api/v1/clusters/", body, format="json").status_code == 403
    created = as_fleet_admin.post("/api/v1/clusters/", body, format="json")
    assert created.status_code == 201, created.json()
    assert created.json()["queue"] == "karpweb-shard-eu"
    changed = as_fleet_admin.patch("/api/v1/clusters/prod-eu/", {"mode": "observe"}, format="json")
    assert changed.status_code == 200 and Cluster.objects.get(name="prod-eu").mode == "observe"
    entries = AuditEntry.objects.filter(object_repr="prod-eu").order_by("id")
    assert [(e.action, e.source) for e in entries] == [("create", "api"), ("change", "api")]
    assert entries[1].changes == {"mode": ["", "observe"]}


@pytest.mark.parametrize("url, body, field", [
    ("/api/v1/accounts/", {"accountID": "12", "name": "x"}, "accountID"),
    ("/api/v1/accounts/", {"accountID": "333333333333", "name": "x", "regions": ["nowhere"]}, "regions"),
    ("/api/v1/accounts/", {"accountID": "333333333333", "name": "x", "roleARN": "role"}, "roleARN"),
    ("/api/v1/accounts/", {"accountID": "333333333333", "name": "x", "colour": "red"}, "colour"),
    ("/api/v1/clusters/", {"name": "Bad_Name", "account": "111111111111"}, "name"),
    ("/api/v1/clusters/", {"name": "ok", "account": "999999999999"}, "account"),
    ("/api/v1/clusters/", {"name": "ok", "account": "111111111111", "connection": "kubeconfig"}, "kubeconfig"),
    ("/api/v1/clusters/", {"name": "ok", "account": "111111111111", "isDefault": True}, "isDefault"),
    ("/api/v1/clusters/", {"name": "ok", "account": "111111111111", "shard": "A B"}, "shard"),
])
def test_the_api_names_the_field_it_refuses(as_fleet_admin, two_clusters, url, body, field):
    response = as_fleet_admin.post(url, body, format="json")
    assert response.status_code == 400
    assert list(response.json()) == [field], response.json()


def test_the_pages_list_and_show_accounts_and_clusters(viewer_client, two_clusters):
    _home, east, west = two_clusters
    with scope.cluster_scope(east):
        NodeFactory(name="east-node")
        CapacityReservationFactory(reservation_id="cr-fa1", owner_id="111111111111")
    page = viewer_client.get(reverse("fleet:clusters"))
    assert page.status_code == 200 and b"east" in page.content and b"west" in page.content
    assert viewer_client.get(reverse("fleet:clusters"), {"connection": "nope"}).status_code == 200  # a form error
    detail = viewer_client.get(reverse("fleet:cluster", args=["east"]))
    assert detail.status_code == 200 and b"karpweb-shard" not in detail.content and b"celery" in detail.content
    assert detail.context["reservations"] == 1
    assert dict(detail.context["counts"])["nodes"] == 1
    accounts = viewer_client.get(reverse("fleet:accounts"))
    assert accounts.status_code == 200 and b"ml-prod" in accounts.content
    account = viewer_client.get(reverse("fleet:account", args=["111111111111"]))
    assert account.status_code == 200 and (len(account.context["owned"]), len(account.context["shared"])) == (1, 0)
    assert viewer_client.get(reverse("fleet:account", args=["000000000001"])).status_code == 404


def test_the_lists_filter_by_cluster_and_account(as_viewer, two_clusters):
    _home, east, west = two_clusters
    for cluster in (east, west):
        with scope.cluster_scope(cluster):
            NodePoolFactory(name="fleet-pool")
            CapacityReservationFactory(reservation_id=f"cr-fb-{cluster.name}", owner_id=cluster.account.account_id,
                                       region=cluster.region)
    pools = as_viewer.get("/api/v1/nodepools/", {"cluster": "west", "q": "fleet-pool"}).json()["results"]
    assert len(pools) == 1
    by_account = as_viewer.get("/api/v1/nodepools/", {"account": "111111111111", "q": "fleet-pool"}).json()["results"]
    assert len(by_account) == 1
    reservations = as_viewer.get("/api/v1/capacity-reservations/", {"cluster": "east", "q": "cr-fb"}).json()["results"]
    assert [r["reservationID"] for r in reservations] == ["cr-fb-east"]
    reservations = as_viewer.get("/api/v1/capacity-reservations/", {"account": "222222222222", "q": "cr-fb"}).json()
    assert [r["reservationID"] for r in reservations["results"]] == ["cr-fb-west"]
    assert as_viewer.get("/api/v1/nodepools/", {"cluster": "nowhere"}).json()["results"] == []


def test_a_fleet_of_one_shows_no_cluster_filter_on_the_pages_but_filters_when_asked(viewer_client, as_viewer):
    assert not scope.several_clusters()
    NodePoolFactory(name="only-pool")
    page = viewer_client.get(reverse("scheduling:nodepools"))
    assert "cluster" not in page.context["filterset"].form.fields
    # On the pages `?cluster=` chooses the cluster shown (fleet/middleware.py); the API filters by it.
    name = scope.default_cluster().name
    asked = viewer_client.get(reverse("scheduling:nodepools"), {"cluster": name})
    assert "only-pool" in asked.content.decode()
    assert [p["name"] for p in as_viewer.get("/api/v1/nodepools/", {"cluster": name, "q": "only-pool"}).json()["results"]] == ["only-pool"]
    assert as_viewer.get("/api/v1/nodepools/", {"cluster": "nowhere", "q": "only-pool"}).json()["results"] == []


def test_a_fleet_of_several_shows_the_filters(viewer_client, two_clusters):
    assert scope.several_clusters()
    page = viewer_client.get(reverse("scheduling:nodepools"))
    assert {"cluster", "account"} <= set(page.context["filterset"].form.fields)
    assert AwsAccount.objects.filter(account_id__in=["111111111111", "222222222222"]).count() == 2


def test_the_admin_filters_by_cluster_once_there_are_several(admin_user_client, two_clusters):
    _home, east, west = two_clusters
    for cluster in (east, west):
        with scope.cluster_scope(cluster):
            NodePoolFactory(name=f"admin-{cluster.name}")
    url = reverse("admin:scheduling_nodepool_changelist")
    page = admin_user_client.get(url, {"cluster": "east"})
    assert [p.name for p in page.context["cl"].result_list] == ["admin-east"]
    assert any(spec.title == "cluster" and spec.has_output() for spec in page.context["cl"].filter_specs)


def test_a_fleet_of_one_shows_no_cluster_filter_in_the_admin(admin_user_client):
    page = admin_user_client.get(reverse("admin:scheduling_nodepool_changelist"))
    assert not any(spec.title == "cluster" and spec.has_output() for spec in page.context["cl"].filter_specs)


def test_recommendations_follow_the_chosen_cluster_and_filter_by_cluster_and_account(viewer_client, as_viewer,
                                                                                      two_clusters):
    from django.utils import timezone

    from reservations.models import Recommendation, ReservationVisibility

    _home, east, west = two_clusters
    now = timezone.now()
    for cluster in (east, west):
        reservation = CapacityReservationFactory(reservation_id=f"cr-rec-{cluster.name}", region=cluster.region,
                                                 owner_id=cluster.account.account_id)
        ReservationVisibility.objects.get_or_create(reservation=reservation, account=cluster.account)
        Recommendation.objects.create(kind=Recommendation.Kind.CANCEL, reservation=reservation, reason="idle",
                                      savings_per_month=100.0, seen_total=1, computed_at=now)
    ours = Recommendation.objects.filter(reservation__reservation_id__startswith="cr-rec-")

    def shown(page):
        return sorted(r.reservation.reservation_id for r in page.context["table"].data if r in ours)

    page = viewer_client.get(reverse("reservations:recommendations"), {"cluster": "west"})
    assert shown(page) == ["cr-rec-west"]
    assert page.context["total_per_month"] == 100.0  # the page's money is the chosen cluster's too (west's one)
    assert shown(viewer_client.get(reverse("reservations:recommendations"), {"cluster": "all"})) == [
        "cr-rec-east", "cr-rec-west"]

    def listed(**query):
        rows = as_viewer.get("/api/v1/recommendations/", query).json()["results"]
        return sorted(r["reservationID"] for r in rows if r["reservationID"].startswith("cr-rec-"))

    assert listed(cluster="east") == ["cr-rec-east"]
    assert listed(account="222222222222") == ["cr-rec-west"]
    assert listed() == ["cr-rec-east", "cr-rec-west"]
    assert listed(cluster="nowhere") == []


def test_task_runs_and_decisions_say_their_cluster(as_viewer, two_clusters):
    from django.utils import timezone

    from scheduling.models import Decision, TaskRun

    _home, east, west = two_clusters
    TaskRun.objects.create(task="sync_kubernetes", status="failed", cluster=west, error="boom")
    TaskRun.objects.create(task="dispatch", status="succeeded")
    with scope.cluster_scope(east):
        Decision.objects.create(kind=Decision.Kind.STATUS, subject="east thing", reason="r", created_at=timezone.now())
    runs = as_viewer.get("/api/v1/task-runs/", {"cluster": "west"}).json()["results"]
    assert [(r["task"], r["cluster"]) for r in runs] == [("sync_kubernetes", "west")]
    assert {r["cluster"] for r in as_viewer.get("/api/v1/task-runs/").json()["results"]} >= {None, "west"}
    decisions = as_viewer.get("/api/v1/decisions/", {"cluster": "east", "q": "east thing"}).json()["results"]
    assert [d["cluster"] for d in decisions] == ["east"]
