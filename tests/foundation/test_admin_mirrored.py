"""The admin is no override tool for what EC2 and Kubernetes own: mirrored fields are shown, never
in a form, each fieldset saying the next sync overwrites them; karpweb's own settings stay editable;
the one override a reservation has (keep karpweb from planning into it) is karpweb's data, needs a
reason, is audited, shown on the reservation's page and in the API, and the engine honours it."""

import pytest
from django.contrib import admin
from django.urls import reverse

from reservations.models import CapacityReservation, EC2NodeClass
from scheduling.engine import simulate
from scheduling.loop import steps
from scheduling.models import AuditEntry, CapacityType, Decision, Node, NodeClaim, NodePool, Pod
from scheduling.world import current_world
from tests.factories.reservations import CapacityReservationFactory, EC2NodeClassFactory
from tests.factories.scheduling import (
    InstanceTypeFactory,
    NodeClaimFactory,
    NodeFactory,
    NodePoolFactory,
    OfferingFactory,
    PodFactory,
)
from tests.support.clusters import cluster_row

pytestmark = pytest.mark.django_db

RESERVATION_ID = "cr-0keepout0000000"
OVERRIDE = {"planning_excluded", "planning_excluded_reason"}


def change_url(obj):
    return reverse(f"admin:{obj._meta.app_label}_{obj._meta.model_name}_change", args=[obj.pk])


def form_of(client, url):
    return client.get(url).context["adminform"].form


def posted(form, **changes) -> dict:
    data = {}
    for name in form.fields:
        value = form[name].value()
        if isinstance(value, bool):
            if value:
                data[name] = "on"
        else:
            data[name] = "" if value is None else value
    for name, value in changes.items():
        if value is False:
            data.pop(name, None)
        else:
            data[name] = "on" if value is True else value
    return data


@pytest.fixture
def reserved_world():
    """One free m5.large unit selected by a reserved-only NodePool's EC2NodeClass, and a pod that fits it."""
    it = InstanceTypeFactory(name="m5.large", cpu_millicores=2000, memory_bytes=8 * 2**30, max_pods=29, family="m5",
                             size="large")
    OfferingFactory(instance_type=it, capacity_type=CapacityType.ON_DEMAND, zone="us-east-1a", price=0.096)
    reservation = CapacityReservationFactory(reservation_id=RESERVATION_ID, instance_type="m5.large",
                                             availability_zone="us-east-1a", total_instance_count=2,
                                             available_instance_count=2, tags={"team": "web"})
    node_class = EC2NodeClassFactory(name="web", capacity_reservation_selector_terms=[{"id": RESERVATION_ID}])
    NodePoolFactory(name="reserved", node_class=node_class,
                    requirements=[{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["reserved"]}])
    spec = {"containers": [{"name": "app", "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}}}]}
    PodFactory(name="waiting", namespace="default", spec=spec, cpu_request_millicores=500)
    return reservation


def plan_for(pod_key: str) -> dict:
    decisions = simulate(current_world())
    for claim in decisions["nodeClaims"]:
        if pod_key in claim["pods"]:
            return {"launch": claim["launch"]}
    for entry in decisions["unschedulable"] + decisions["deferred"]:
        if entry["pod"] == pod_key:
            return {"reason": entry["reason"]}
    raise AssertionError(f"{pod_key} is nowhere in the plan")


def test_reservation_form_holds_only_the_override_and_the_page_says_why(admin_user_client, reserved_world):
    url = change_url(reserved_world)
    form = form_of(admin_user_client, url)
    assert set(form.fields) == OVERRIDE
    page = admin_user_client.get(url).content.decode()
    assert "the next sync overwrites any change made here" in page and "Mirrored from EC2" in page
    assert RESERVATION_ID in page and "us-east-1a" in page  # the mirrored values are shown, read-only

    # A tampered post for mirrored fields changes nothing but what the form holds.
    data = posted(form, total_instance_count="99", available_instance_count="99", state="cancelled",
                  tags='{"team": "ml"}', end_date="2030-01-01 00:00:00")
    assert admin_user_client.post(url, data).status_code == 302
    stored = CapacityReservation.objects.get(pk=reserved_world.pk)
    assert (stored.total_instance_count, stored.available_instance_count, stored.state, stored.tags, stored.end_date) == (
        2, 2, "active", {"team": "web"}, None)
    assert not admin.site._registry[CapacityReservation].has_add_permission(None)


def test_kubernetes_mirrors_are_read_only(admin_user_client, reserved_world):
    pool = NodePool.objects.get(name="reserved")
    node = NodeFactory(name="node-a", node_pool=pool)
    claim = NodeClaimFactory(name="reserved-aaaaa", node_pool=pool)
    pod = Pod.objects.get(name="waiting")
    for obj in (node, claim, pod):
        url = change_url(obj)
        page = admin_user_client.get(url)
        assert page.status_code == 200 and "Mirrored from Kubernetes" in page.content.decode()
        assert "adminform" in page.context and not page.context["has_change_permission"]
        assert admin_user_client.post(url, {"name": "renamed"}).status_code == 403
    assert Node.objects.get(pk=node.pk).name == "node-a" and NodeClaim.objects.get(pk=claim.pk).name == "reserved-aaaaa"

    status = {"conditions", "status_resources", "registration_health", "uid", "resource_version", "node_class_ref"}
    fields = set(form_of(admin_user_client, change_url(pool)).fields)
    assert not fields & status and {"mode", "keep_idle_reserved_nodes", "weight", "requirements"} <= fields
    node_class = EC2NodeClass.objects.get(name="web")
    class_fields = set(form_of(admin_user_client, change_url(node_class)).fields)
    assert not class_fields & {"status_launch", "status_capacity_reservations", "conditions", "selected_reservations"}
    assert {"capacity_reservation_selector_terms", "open_reservations", "read_version"} <= class_fields
    with cluster_row(connection="in-cluster"):
        # On a real cluster the spec is the cluster's too: only karpweb's settings are left.
        assert set(form_of(admin_user_client, change_url(pool)).fields) == {"mode", "keep_idle_reserved_nodes"}
        assert "the next sync overwrites any change made here" in admin_user_client.get(change_url(pool)).content.decode()


def test_excluding_needs_a_reason_named_on_its_field(admin_user_client, reserved_world, unchanged_audit):
    url = change_url(reserved_world)
    response = admin_user_client.post(url, posted(form_of(admin_user_client, url), planning_excluded=True,
                                                  planning_excluded_reason="   "))
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert list(errors) == ["planning_excluded_reason"] and "required" in errors["planning_excluded_reason"][0]
    assert not CapacityReservation.objects.get(pk=reserved_world.pk).planning_excluded
    unchanged_audit()


@pytest.fixture
def unchanged_audit():
    before = AuditEntry.objects.count()

    def check():
        assert AuditEntry.objects.count() == before

    return check


def test_the_override_keeps_the_engine_out_is_audited_and_shown(admin_user_client, reserved_world, settings):
    assert plan_for("default/waiting")["launch"]["reservationID"] == RESERVATION_ID  # without it: into the reservation

    url = change_url(reserved_world)
    reason = "finance holds this one for the quarter-end batch"
    data = posted(form_of(admin_user_client, url), planning_excluded=True, planning_excluded_reason=reason)
    assert admin_user_client.post(url, data).status_code == 302
    stored = CapacityReservation.objects.get(pk=reserved_world.pk)
    assert stored.planning_excluded and stored.planning_excluded_by == "root" and stored.planning_excluded_at
    entry = AuditEntry.objects.get(content_type__model="capacityreservation")
    assert (entry.actor, entry.source, entry.action) == ("root", "admin", "change")
    assert entry.changes == {"planning_excluded": [False, True], "planning_excluded_reason": ["", reason]}

    # The engine, on the world the loop builds, plans nothing into it and says why, naming who and why.
    outcome = plan_for("default/waiting")
    assert "launch" not in outcome
    assert f"reservation {RESERVATION_ID} is excluded from planning (by root since" in outcome["reason"]
    assert reason in outcome["reason"]
    # The provisioning step (the simulated world's loop, in control) launches nothing and records the decision in words.
    settings.KARPWEB_MODE = "control"
    steps.provision()
    assert not NodeClaim.objects.filter(reservation_label=RESERVATION_ID).exists()
    decision = Decision.objects.get(subject="pod default/waiting", kind=Decision.Kind.UNSCHEDULABLE)
    assert f"reservation {RESERVATION_ID} is excluded from planning (by root since" in decision.reason and reason in decision.reason

    page = admin_user_client.get(reverse("reservations:detail", args=[RESERVATION_ID])).content.decode()
    assert "excluded" in page and reason in page and "by root" in page
    api = admin_user_client.get(f"/api/v1/capacity-reservations/{RESERVATION_ID}/").json()
    assert (api["excludedFromPlanning"], api["excludedFromPlanningReason"], api["excludedFromPlanningBy"]) == (
        True, reason, "root")

    # Lifting it: audited, the reason cleared, and the engine plans into it again.
    data = posted(form_of(admin_user_client, url), planning_excluded=False)
    assert admin_user_client.post(url, data).status_code == 302
    stored.refresh_from_db()
    assert (stored.planning_excluded, stored.planning_excluded_by, stored.planning_excluded_at,
            stored.planning_excluded_reason) == (False, "", None, "")
    assert AuditEntry.objects.filter(content_type__model="capacityreservation").count() == 2
    assert plan_for("default/waiting")["launch"]["reservationID"] == RESERVATION_ID


ADMIN_LISTS = [CapacityReservation, EC2NodeClass, NodePool, NodeClaim, Node, Pod]


@pytest.mark.parametrize("model", ADMIN_LISTS, ids=lambda m: m.__name__)
def test_admin_lists_render_under_a_query_budget(admin_user_client, reserved_world, model, django_assert_max_num_queries):
    pool = NodePool.objects.get(name="reserved")
    for index in range(30):
        claim = NodeClaimFactory(name=f"reserved-{index:05d}", node_pool=pool, reservation=reserved_world)
        node = NodeFactory(name=f"node-{index}", node_pool=pool, node_claim=claim, reservation=reserved_world)
        PodFactory(name=f"pod-{index}", node=node, node_name=node.name)
        CapacityReservationFactory(reservation_id=f"cr-0list{index:012d}")
    url = reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")
    with django_assert_max_num_queries(12):  # a constant: no query per row
        response = admin_user_client.get(url)
    assert response.status_code == 200
    assert "css/admin.css" in response.content.decode()
