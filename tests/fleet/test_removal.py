"""A cluster leaves the fleet (scheduling/loop/removal.py): through manage.py remove_cluster, the admin's
delete and DELETE /api/v1/clusters/<name>/. History stays, holds go, running steps refuse it."""

import datetime
import io

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from fleet.models import Cluster, RoleBinding
from scheduling.loop.removal import RemovalError, StepRunning, UnknownCluster, remove_cluster
from fleet.scope import cluster_scope, default_cluster, forget_default
from reservations.models import CapacityReservation, ReservationHold
from scheduling.loop import leases
from scheduling.models import AuditEntry, Decision, Lease, NodePool, TaskRun


@pytest.fixture
def fleet(make_account, make_cluster):
    """alpha (the default) and beta, beta with a NodePool, a decision, a hold and a running watch lease."""
    forget_default()
    account = make_account("111111111111", "ml-prod")
    alpha = default_cluster()  # the migration's cluster, the default
    Cluster.objects.filter(pk=alpha.pk).update(is_default=True)
    alpha.refresh_from_db()
    beta = make_cluster("beta", account)
    forget_default()
    with cluster_scope(beta):
        NodePool.objects.create(name="default")
        Decision.objects.create(kind=Decision.Kind.LAUNCH, mode="observe", subject="pod default/web",
                                reason="it fits")
    reservation = CapacityReservation.objects.create(
        reservation_id="cr-1", owner_id="111111111111", instance_type="m5.large", availability_zone="us-east-1a",
        total_instance_count=4, available_instance_count=2, region="us-east-1", last_seen=timezone.now())
    ReservationHold.objects.create(reservation=reservation, cluster=beta, units=2,
                                   expires_at=timezone.now() + datetime.timedelta(minutes=5))
    leases.acquire(f"kubernetes-watch:cluster-{beta.pk}", "watcher-1", datetime.timedelta(seconds=30))
    yield alpha, beta
    forget_default()


def assert_removed(beta):
    assert not Cluster.objects.filter(name="beta").exists()
    assert not NodePool.objects.fleet().filter(cluster_id=beta.pk).exists()
    assert not ReservationHold.objects.filter(cluster_id=beta.pk).exists()
    kept = Decision.objects.fleet().get(subject="pod default/web")
    assert (kept.cluster_id, kept.cluster_name) == (None, "beta")
    entry = AuditEntry.objects.fleet().filter(action=AuditEntry.Action.DELETE, object_repr="beta").get()
    assert entry.changes["removed"][1] == {"cluster": "beta", "holdsReleased": 1}
    # The watch loses its lease at its next renewal and stops.
    assert not leases.acquire(f"kubernetes-watch:cluster-{beta.pk}", "watcher-1", datetime.timedelta(seconds=30))
    return entry


def test_the_command_removes_a_cluster_and_keeps_its_history(fleet):
    _, beta = fleet
    out = io.StringIO()
    call_command("remove_cluster", "beta", stdout=out)
    assert "removed cluster beta: 1 reservation hold(s) released, 1 decision(s)" in out.getvalue()
    assert "not touched" in out.getvalue()
    assert assert_removed(beta).source == AuditEntry.Source.CLI


def test_the_command_names_an_unknown_cluster(fleet):
    with pytest.raises(CommandError, match="cluster: no cluster is named 'gamma'"):
        call_command("remove_cluster", "gamma")


def test_a_second_removal_finds_nothing_to_do(fleet):
    remove_cluster("beta", user=None, source="cli")
    with pytest.raises(UnknownCluster):
        remove_cluster("beta", user=None, source="cli")
    assert AuditEntry.objects.fleet().filter(action=AuditEntry.Action.DELETE, object_repr="beta").count() == 1


def test_refused_while_one_of_its_steps_runs(fleet):
    _, beta = fleet
    assert leases.acquire(f"step:lifecycle:cluster-{beta.pk}", "host:1:ab")
    with pytest.raises(StepRunning, match=r"lifecycle \(worker host:1:ab\)"):
        remove_cluster("beta", user=None, source="cli")
    assert Cluster.objects.filter(name="beta").exists()
    leases.release(f"step:lifecycle:cluster-{beta.pk}", "host:1:ab")
    # An EC2 step's lease is its account's: its running TaskRun names the cluster.
    TaskRun.objects.create(task="sync_ec2", worker="host:2:cd", cluster=beta)
    with pytest.raises(CommandError, match=r"a loop step is running on it \(sync_ec2 \(worker host:2:cd\)\)"):
        call_command("remove_cluster", "beta")
    # A run whose worker died long ago reads "running" for ever: it no longer refuses.
    TaskRun.objects.filter(cluster=beta).update(started_at=timezone.now() - datetime.timedelta(hours=1))
    remove_cluster("beta", user=None, source="cli")


def test_the_only_cluster_and_a_needed_default_stay(fleet, make_cluster):
    alpha, beta = fleet
    make_cluster("gamma", alpha.account)
    with pytest.raises(RemovalError, match=f"{alpha.name}: it is the default cluster"):
        remove_cluster(alpha.name, user=None, source="cli")
    remove_cluster("gamma", user=None, source="cli")
    remove_cluster("beta", user=None, source="cli")
    with pytest.raises(RemovalError, match=f"{alpha.name}: it is the fleet's only cluster"):
        remove_cluster(alpha.name, user=None, source="cli")


def test_the_api_removes_for_a_fleet_admin_only(fleet, as_fleet_admin, as_operator, operator):
    _, beta = fleet
    RoleBinding.objects.create(user=operator, role=RoleBinding.Role.OPERATOR, cluster=beta)
    refused = as_operator.delete("/api/v1/clusters/beta/")
    assert refused.status_code == 403
    assert Cluster.objects.filter(name="beta").exists()
    answer = as_fleet_admin.delete("/api/v1/clusters/beta/")
    assert answer.status_code == 200, answer.content
    assert answer.json()["holdsReleased"] == 1 and answer.json()["decisionsKept"] == 1
    assert assert_removed(beta).source == AuditEntry.Source.API
    assert as_fleet_admin.delete("/api/v1/clusters/beta/").status_code == 404


def test_the_api_refuses_while_a_step_runs(fleet, as_fleet_admin):
    _, beta = fleet
    leases.acquire(f"step:provision:cluster-{beta.pk}", "host:1:ab")
    answer = as_fleet_admin.delete("/api/v1/clusters/beta/")
    assert answer.status_code == 409
    assert "provision (worker host:1:ab)" in answer.json()["detail"]


def test_the_admin_deletes_a_cluster_through_the_removal(fleet, admin_user_client):
    _, beta = fleet
    url = f"/admin/fleet/cluster/{beta.pk}/delete/"
    page = admin_user_client.get(url)
    assert page.status_code == 200
    assert b"would require deleting the following protected" not in page.content
    assert b"your account doesn't have permission" not in page.content.lower()
    assert b"stay as history" in page.content
    answer = admin_user_client.post(url, {"post": "yes"})
    assert answer.status_code == 302, answer.content[:500]
    assert assert_removed(beta).source == AuditEntry.Source.ADMIN


def test_the_admin_says_why_it_refuses(fleet, admin_user_client):
    _, beta = fleet
    leases.acquire(f"step:status:cluster-{beta.pk}", "host:1:ab")
    answer = admin_user_client.post(f"/admin/fleet/cluster/{beta.pk}/delete/", {"post": "yes"}, follow=True)
    assert b"a loop step is running on it (status (worker host:1:ab))" in answer.content
    assert Cluster.objects.filter(name="beta").exists()
    assert Lease.objects.filter(name=f"kubernetes-watch:cluster-{beta.pk}", holder="watcher-1").exists()


def test_a_fleet_admin_deletes_in_the_admin_and_an_operator_may_not(fleet, client, fleet_admin, operator):
    """Both staff with Django's view and delete permissions on clusters: the fleet-admin role decides."""
    from django.contrib.auth.models import Permission

    _, beta = fleet
    url = f"/admin/fleet/cluster/{beta.pk}/delete/"
    perms = Permission.objects.filter(content_type__app_label="fleet", codename__in=["view_cluster", "delete_cluster"])
    for user in (operator, fleet_admin):
        user.is_staff = True
        user.save()
        user.user_permissions.add(*perms)
    client.force_login(operator)
    assert client.post(url, {"post": "yes"}).status_code == 403
    assert Cluster.objects.filter(name="beta").exists()
    client.force_login(fleet_admin)
    assert client.get(url).status_code == 200
    assert client.post(url, {"post": "yes"}).status_code == 302
    assert assert_removed(beta).actor == fleet_admin.username


def test_drain_deletes_what_karpweb_launched_within_the_budgets_then_removes(fleet, settings):
    """remove_cluster --drain: control mode only; the NodeClaims karpweb launched are deleted (the simulated
    cluster's termination drains and terminates at once), one at a time under the default 10% budget of 3
    nodes, Karpenter's own left alone; each call audited; the cluster goes once none is left."""
    from scheduling.claim_hashes import PROVISIONER_LABEL
    from scheduling.models import NodeClaim
    from tests.factories.scheduling import NodeClaimFactory

    _, beta = fleet
    with cluster_scope(beta):
        pool = NodePool.objects.get(name="default")
        ours = [NodeClaimFactory(name=f"beta-{n}", node_pool=pool, labels={PROVISIONER_LABEL: "karpweb"})
                for n in range(3)]
        NodeClaimFactory(name="karpenters", node_pool=pool, labels={})
    settings.KARPWEB_MODE = "observe"
    with pytest.raises(CommandError, match="--drain acts only in control mode; NodePool.s. default are in observe"):
        call_command("remove_cluster", "beta", "--drain", stdout=io.StringIO())
    assert NodeClaim.objects.fleet().filter(cluster=beta).count() == 4

    settings.KARPWEB_MODE = "control"
    left = []
    for _ in range(3):
        out = io.StringIO()
        call_command("remove_cluster", "beta", "--drain", stdout=out)
        assert "1 NodeClaim(s) karpweb launched deleted now" in out.getvalue()
        left.append(sorted(NodeClaim.objects.fleet().filter(cluster=beta).values_list("name", flat=True)))
    assert left == [["beta-1", "beta-2", "karpenters"], ["beta-2", "karpenters"], ["karpenters"]]  # and beta stays
    terminated = Decision.objects.fleet().filter(kind=Decision.Kind.TERMINATE, cluster=beta, outcome="acted")
    assert sorted(terminated.values_list("subject", flat=True)) == [f"NodeClaim {c.name}" for c in ours]
    drains = AuditEntry.objects.fleet().filter(action=AuditEntry.Action.CHANGE, object_repr="beta")
    assert [entry.changes["drain"][1]["nodeClaimsDeleted"] for entry in drains] == [1, 1, 1]

    out = io.StringIO()
    call_command("remove_cluster", "beta", "--drain", stdout=out)  # nothing of karpweb's left: it goes
    assert "removed cluster beta" in out.getvalue()
    assert not Cluster.objects.filter(name="beta").exists()
