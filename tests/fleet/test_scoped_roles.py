"""Roles per cluster and per account (fleet/access.py, `manage.py grant`): a scoped user reads only
its scope everywhere (lists, details, pages, the fleet's own lists, reservations by the accounts it
sees), another cluster's object is 404, a write needs the operator role on the object's own cluster,
a revoked binding stops at the next request, identity-provider groups bind through the setting, and
request code that reads rows before the requester is known fails instead of reading the fleet."""

import io

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management import CommandError, call_command
from django.urls import reverse

from fleet import access, scope
from fleet.models import RoleBinding
from scheduling.models import AuditEntry, NodePool
from tests.factories.reservations import CapacityReservationFactory
from tests.factories.scheduling import NodePoolFactory
from tests.support.api_clients import token_client

pytestmark = pytest.mark.django_db


@pytest.fixture
def fleet_world(two_clusters):
    """Pools and reservations in east (account 111111111111) and west (222222222222)."""
    home, east, west = two_clusters
    for cluster in (east, west):
        with scope.cluster_scope(cluster):
            NodePoolFactory(name=f"{cluster.name}-pool")
            CapacityReservationFactory(reservation_id=f"cr-0{cluster.name}", owner_id=cluster.account.account_id,
                                       region=cluster.region)
    return home, east, west


@pytest.fixture
def sam(db):
    return get_user_model().objects.create_user("sam", "sam@example.com", "pw-for-tests-only")


def grant(*argv):
    out = io.StringIO()
    call_command("grant", *argv, stdout=out)
    return out.getvalue()


def names(client, url, key="name"):
    return sorted(row[key] for row in client.get(url).json()["results"])


def test_a_cluster_viewer_reads_its_cluster_alone(fleet_world, sam):
    assert "Granted: sam is viewer on cluster east." in grant("sam", "viewer", "--cluster", "east")
    api = token_client(sam)
    assert names(api, "/api/v1/clusters/") == ["east"]
    assert names(api, "/api/v1/accounts/") == ["ml-prod"]
    assert names(api, "/api/v1/nodepools/") == ["east-pool"]
    assert names(api, "/api/v1/capacity-reservations/", "reservationID") == ["cr-0east"]
    assert api.get("/api/v1/nodepools/west-pool/").status_code == 404
    assert api.get("/api/v1/clusters/west/").status_code == 404
    assert api.get("/api/v1/nodepools/east-pool/").status_code == 200
    assert api.patch("/api/v1/nodepools/east-pool/", {"mode": "observe"}, format="json").status_code == 403


def test_the_pages_show_the_scope_alone(client, fleet_world, sam):
    grant("sam", "viewer", "--cluster", "east")
    client.force_login(sam)
    pools = client.get(reverse("scheduling:nodepools")).content.decode()
    assert "east-pool" in pools and "west-pool" not in pools
    clusters = client.get(reverse("fleet:clusters")).content.decode()
    assert ">east<" in clusters and ">west<" not in clusters
    assert client.get(reverse("fleet:cluster", args=["west"])).status_code == 404
    chosen = client.get(reverse("scheduling:nodepools"), {"cluster": "west"}, follow=True).content.decode()
    assert "no cluster is named" in chosen and "west-pool" not in chosen


def test_an_account_binding_covers_its_clusters_and_their_reservations(fleet_world, sam):
    grant("sam", "operator", "--account", "222222222222")
    api = token_client(sam)
    assert names(api, "/api/v1/clusters/") == ["west"]
    assert names(api, "/api/v1/capacity-reservations/", "reservationID") == ["cr-0west"]
    changed = api.patch("/api/v1/nodepools/west-pool/", {"mode": "observe"}, format="json")
    assert changed.status_code == 200, changed.json()
    assert NodePool.objects.fleet().get(name="west-pool").mode == "observe"


def test_a_write_needs_the_operator_role_on_the_objects_own_cluster(fleet_world, sam, client):
    sam.groups.add(Group.objects.get_or_create(name="viewer")[0])  # a viewer of the whole fleet ...
    grant("sam", "operator", "--cluster", "east")  # ... and an operator of east
    api = token_client(sam)
    assert names(api, "/api/v1/nodepools/") == ["east-pool", "west-pool"]
    refused = api.patch("/api/v1/nodepools/west-pool/", {"mode": "observe"}, format="json")
    assert refused.status_code == 403 and "cluster west" in refused.json()["detail"]
    assert api.patch("/api/v1/nodepools/east-pool/", {"mode": "observe"}, format="json").status_code == 200
    client.force_login(sam)  # the page's form, through the same check on the row's save
    west_pool = NodePool.objects.fleet().get(name="west-pool")
    with scope.cluster_scope("west"):
        answer = client.post(reverse("scheduling:nodepool_mode", args=["west-pool"]) + "?cluster=west",
                             {"mode": "observe"})
    assert answer.status_code == 403
    west_pool.refresh_from_db()
    assert west_pool.mode == ""


def test_a_revoked_binding_stops_at_the_next_request(fleet_world, sam):
    grant("sam", "viewer", "--cluster", "east")
    api = token_client(sam)
    assert names(api, "/api/v1/nodepools/") == ["east-pool"]
    assert "Revoked" in grant("sam", "viewer", "--cluster", "east", "--revoke")
    assert api.get("/api/v1/nodepools/").status_code == 403
    entries = AuditEntry.objects.fleet().filter(content_type__model="rolebinding").order_by("id")
    assert [(e.action, e.source) for e in entries] == [("create", "cli"), ("delete", "cli")]


def test_grant_names_what_it_cannot_find(fleet_world, sam):
    with pytest.raises(CommandError, match='--cluster: no cluster is named "nowhere"'):
        grant("sam", "viewer", "--cluster", "nowhere")
    with pytest.raises(CommandError, match='user: no user is named "ghost"'):
        grant("ghost", "viewer", "--cluster", "east")
    with pytest.raises(CommandError, match="one of them"):
        grant("sam", "viewer", "--group", "ml")
    assert "group ml-team is operator on cluster west" in grant("operator", "--group", "ml-team", "--cluster", "west")
    assert RoleBinding.objects.filter(group="ml-team", cluster__name="west").exists()


def test_identity_provider_groups_bind_through_the_setting(fleet_world, sam, settings):
    from accounts.models import SignInIdentity

    sam.set_unusable_password()
    sam.save()
    SignInIdentity.objects.create(user=sam, issuer="https://idp.example", subject="sam", groups=["ml-team"])
    settings.KARPWEB_OIDC_GROUP_BINDINGS = [("ml-team", "viewer", "cluster", "west"), ("other", "viewer", "fleet", "")]
    assert names(token_client(sam), "/api/v1/clusters/") == ["west"]


def test_reading_before_the_requester_is_known_fails_closed(fleet_world):
    with access.opened(access.UNRESOLVED), pytest.raises(access.AccessNotResolved):
        list(NodePool.objects.all())
    with access.opened(access.NOTHING):
        assert list(NodePool.objects.fleet()) == [] and list(NodePool.objects.all()) == []


def made_key(*argv) -> str:
    out = io.StringIO()
    call_command("api_token", *argv, stdout=out, stderr=io.StringIO())
    return out.getvalue().strip()


def token(key):
    from rest_framework.test import APIClient

    return APIClient(HTTP_AUTHORIZATION=f"Token {key}")


def test_a_token_can_be_narrowed_to_read_only_and_one_cluster(fleet_world, admin_user_client):
    root = admin_user_client.user
    read_only = token(made_key(root.username, "--read-only"))
    assert names(read_only, "/api/v1/nodepools/") == ["east-pool", "west-pool"]
    refused = read_only.patch("/api/v1/nodepools/east-pool/", {"mode": "observe"}, format="json")
    assert refused.status_code == 403 and "read-only" in refused.json()["detail"]
    assert read_only.patch("/api/v1/clusters/east/", {"shard": "b"}, format="json").status_code == 403

    east_only = token(made_key(root.username, "--cluster", "east"))
    assert names(east_only, "/api/v1/nodepools/") == ["east-pool"]
    assert names(east_only, "/api/v1/clusters/") == ["east"]
    assert east_only.get("/api/v1/nodepools/west-pool/").status_code == 404
    assert east_only.patch("/api/v1/nodepools/east-pool/", {"mode": "observe"}, format="json").status_code == 200
    assert east_only.patch("/api/v1/clusters/east/", {"shard": "b"}, format="json").status_code == 403  # not fleet admin
    created = AuditEntry.objects.fleet().filter(content_type__model="authtoken", action="create").order_by("id")
    assert [(e.changes.get("read_only"), e.changes.get("cluster")) for e in created] == [
        ([None, True], None), (None, [None, "east"])]


def test_the_page_makes_a_narrowed_token(client, fleet_world, sam):
    grant("sam", "operator", "--cluster", "east")
    client.force_login(sam)
    page = client.get(reverse("api_tokens")).content.decode()
    assert '<option value="east">east alone</option>' in page and "west" not in page
    made = client.post(reverse("api_tokens"), {"read_only": "on", "cluster": "east"})
    key = made.context["new_key"]
    assert names(token(key), "/api/v1/nodepools/") == ["east-pool"]
    assert token(key).patch("/api/v1/nodepools/east-pool/", {"mode": "observe"}, format="json").status_code == 403
    assert "read in east alone" in client.get(reverse("api_tokens")).content.decode()
    refused = client.post(reverse("api_tokens"), {"cluster": "west"}, follow=True).content.decode()
    assert "no cluster you can see has that name" in refused


def test_the_fleet_overview_shows_the_scope_alone(client, fleet_world, sam):
    grant("sam", "viewer", "--account", "111111111111")
    client.force_login(sam)
    page = client.get(reverse("fleet_overview"))
    assert page.status_code == 200
    assert [c.name for c in page.context["clusters"]] == ["east"]
    assert "cr-0west" not in page.content.decode()


def test_a_reservation_is_changed_only_by_an_operator_of_every_account_that_sees_it(fleet_world, sam):
    from django.core.exceptions import PermissionDenied

    from karpweb.roles import access_of
    from reservations.models import CapacityReservation, ReservationVisibility

    _home, east, west = fleet_world
    shared = CapacityReservation.objects.get(reservation_id="cr-0east")
    ReservationVisibility.objects.create(reservation=shared, account=west.account, shared=True)
    grant("sam", "operator", "--account", "111111111111")  # east's account, not west's
    sam = get_user_model().objects.get(pk=sam.pk)
    with access.opened(access_of(sam)), pytest.raises(PermissionDenied, match="every account that sees it"):
        access.check_may_change_reservation(shared)
    grant("sam", "operator", "--account", "222222222222")
    with access.opened(access_of(get_user_model().objects.get(pk=sam.pk))):
        access.check_may_change_reservation(shared)  # now it operates both
