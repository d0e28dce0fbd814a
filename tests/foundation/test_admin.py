import pytest
from django.contrib import admin
from django.urls import reverse

from reservations.models import CapacityReservation
from scheduling.models import AuditEntry, NodePool
from tests.factories.reservations import CapacityReservationFactory, EC2NodeClassFactory, UtilizationSampleFactory
from tests.factories.scheduling import (
    DecisionFactory,
    NodeClaimFactory,
    NodeFactory,
    NodePoolFactory,
    OfferingFactory,
    PodFactory,
)

pytestmark = pytest.mark.django_db

REGISTERED = sorted(admin.site._registry, key=lambda model: model._meta.label)
OURS = [model for model in REGISTERED if model._meta.app_label in {"fleet", "reservations", "scheduling"}]


def admin_url(model, view, *args):
    return reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_{view}", args=args)


@pytest.fixture
def world():
    reservation = CapacityReservationFactory()
    UtilizationSampleFactory(reservation=reservation)
    node = NodeFactory(reservation=reservation)
    NodeClaimFactory(node_pool=node.node_pool)
    PodFactory(node=node, node_name=node.name)
    PodFactory()
    OfferingFactory()
    DecisionFactory(reservation=reservation)
    return reservation


@pytest.mark.parametrize("model", OURS, ids=lambda m: m._meta.label)
def test_changelist_and_change_pages_render(admin_user_client, world, model):
    response = admin_user_client.get(admin_url(model, "changelist"))
    assert response.status_code == 200
    obj = model.objects.first()
    if obj is not None:
        assert admin_user_client.get(admin_url(model, "change", obj.pk)).status_code == 200
    model_admin = admin.site._registry[model]
    if model_admin.has_add_permission(type("R", (), {"user": admin_user_client.user})()):
        assert admin_user_client.get(admin_url(model, "add")).status_code == 200


def test_every_model_is_in_the_admin():
    from django.apps import apps

    for app in ("accounts", "fleet", "reservations", "scheduling"):
        for model in apps.get_app_config(app).get_models():
            assert model in admin.site._registry, f"{model.__name__} has no admin"


def test_changelist_filters_render(admin_user_client, world):
    url = admin_url(CapacityReservation, "changelist")
    for query in ("?idle=any", "?idle=all", "?idle=full", "?ends=1h", "?ends=never", "?reservation_type=capacity-block"):
        assert admin_user_client.get(url + query).status_code == 200
    assert admin_user_client.get(admin_url(AuditEntry, "changelist") + "?source=admin").status_code == 200


def test_admin_change_is_recorded_with_old_and_new_values(admin_user_client):
    pool = NodePoolFactory(name="web", weight=10, node_class=EC2NodeClassFactory(name="default"))
    url = admin_url(NodePool, "change", pool.pk)
    form = admin_user_client.get(url).context["adminform"].form
    data = {name: form[name].value() for name in form.fields}
    data = {key: ("" if value is None else value) for key, value in data.items()}
    # node_class_ref is read-only (written from node_class), so no form field.
    for json_field in ("requirements", "taints", "startup_taints", "labels", "limits", "budgets"):
        data[json_field] = form[json_field].value()
    data.update(weight=50, mode="control")
    response = admin_user_client.post(url, data)
    assert response.status_code == 302, response.context["adminform"].form.errors
    entry = AuditEntry.objects.get()
    assert entry.actor == "root" and entry.source == "admin" and entry.action == "change"
    assert entry.changes == {"mode": ["", "control"], "weight": [10, 50]}
    assert entry.object_repr == "web"
    page = admin_user_client.get(admin_url(AuditEntry, "changelist"))
    assert b"root" in page.content and b"weight" in page.content


def test_admin_action_and_delete_are_recorded(admin_user_client):
    pools = [NodePoolFactory(name="a"), NodePoolFactory(name="b", mode="control")]
    admin_user_client.post(admin_url(NodePool, "changelist"), {
        "action": "set_mode_observe", "_selected_action": [str(p.pk) for p in pools],
    })
    assert set(NodePool.objects.values_list("mode", flat=True)) == {"observe"}
    assert AuditEntry.objects.filter(action="change").count() == 2
    pool = NodePoolFactory(name="dead")  # the simulated world's rows are its cluster: deleted here
    response = admin_user_client.post(admin_url(NodePool, "delete", pool.pk), {"post": "yes"})
    assert response.status_code == 302
    deleted = AuditEntry.objects.get(action="delete")
    assert deleted.object_repr.startswith("dead") and deleted.object_id == str(pool.pk)


def test_audit_log_is_read_only(admin_user_client):
    entry_admin = admin.site._registry[AuditEntry]
    request = type("R", (), {"user": admin_user_client.user})()
    assert not entry_admin.has_add_permission(request)
    assert not entry_admin.has_change_permission(request)
    assert not entry_admin.has_delete_permission(request)


def test_reservation_rows_show_used_available_total(admin_user_client):
    CapacityReservationFactory(reservation_id="cr-0abc", total_instance_count=4, available_instance_count=1)
    page = admin_user_client.get(admin_url(CapacityReservation, "changelist"))
    assert b"3 / 1 / 4" in page.content
    assert b"75%" in page.content
