"""NodePool health as upstream reports it, the same on the pool's page, the list and the overview: a pool
whose nodeClassRef names a class that does not exist is NodeClassReady=False (NodeClassNotFound) and so
Ready=False (UnhealthyDependents), even with a stale link to another class, and reaches no reservation
through it; a pool over its limits is flagged; the admin's form keeps link and ref as one; the loop writes
the same conditions."""

import pytest
from django.urls import reverse
from django.utils import timezone

from reservations.models import EC2NodeClass
from scheduling.loop.steps import status
from scheduling.models import Node, NodePool
from scheduling.nodepool_health import computed_conditions, health, over_limits, root_ready
from tests.support.clusters import use_cluster

pytestmark = pytest.mark.django_db


@pytest.fixture
def demo_world(demo_world_for_module, db):
    """Every test here builds on the demo world: the demo world is seeded once for the module (tests/conftest.py), and
    each test's own writes are rolled back after it."""


@pytest.fixture
def broken(demo_world):
    """The web pool's ref names a class that does not exist; its link still points at "default"."""
    pool = NodePool.objects.get(name="web")
    pool.node_class_ref = {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "gone"}
    pool.save()
    return pool


def test_a_missing_class_makes_the_pool_not_ready_as_upstream(broken):
    node_class_ready, ready = computed_conditions(broken, None)
    assert (node_class_ready["status"], node_class_ready["reason"]) == ("False", "NodeClassNotFound")
    assert "'gone'" in node_class_ready["message"]
    assert (ready["status"], ready["reason"], ready["message"]) == ("False", "UnhealthyDependents", "NodeClassReady=False")
    pool_health = health(broken)
    assert pool_health.node_class is None, "the stale link to default is not the pool's class"
    assert pool_health.why_not_ready.startswith("NodeClassReady=False: NodeClassNotFound, NodeClass not found on cluster")


def test_a_class_not_ready_or_with_invalid_terms_makes_the_pool_not_ready(demo_world):
    pool = NodePool.objects.get(name="general")
    node_class = pool.node_class
    node_class.set_condition("Ready", "False", "UnhealthyDependents", "SubnetsReady=False")
    assert computed_conditions(pool, node_class)[0]["reason"] == "NodeClassNotReady"
    assert root_ready([{"type": "NodeClassReady", "status": "True"}])["status"] == "True"
    assert root_ready([{"type": "ValidationSucceeded", "status": "Unknown"}])["status"] == "Unknown"


def test_the_page_the_list_and_the_overview_agree(broken, viewer_client):
    page = viewer_client.get(reverse("scheduling:nodepool", args=["web"])).content.decode()
    assert 'id="pool-ready">not Ready' in page and "Not Ready: NodeClassReady=False: NodeClassNotFound" in page
    reachable = page.split("Reservations it can reach")[1].split("</section>")[0]
    assert "gone: not found" in page and "cr-0a1b2c3d4e5f60001" not in reachable
    assert "its EC2NodeClass gone does not exist, so it reaches no reservation" in page
    listed = viewer_client.get(reverse("scheduling:nodepools")).content.decode()
    row = listed.split(f'href="{NodePool.objects.get(name="web").get_absolute_url()}"')[1].split("</tr>")[0]
    assert "gone (not found)" in row and ">False</span> NodeClassReady=False" in row and "default" not in row
    overview = viewer_client.get(reverse("scheduling:overview")).content.decode()
    assert "Every NodePool is Ready" not in overview
    assert "web</a> is not Ready: NodeClassReady=False: NodeClassNotFound" in overview


def test_the_loop_writes_the_same_conditions(broken, settings):
    settings.KARPWEB_PROVIDER = "simulated"
    use_cluster(connection="simulated")
    status(timezone.now())
    broken.refresh_from_db()
    assert broken.condition("NodeClassReady")["reason"] == "NodeClassNotFound"
    assert (broken.condition("Ready")["status"], broken.condition("Ready")["reason"]) == ("False", "UnhealthyDependents")
    assert NodePool.objects.get(name="general").condition_status("Ready") == "True"


def test_a_pool_over_its_limits_is_flagged_everywhere(demo_world, viewer_client):
    pool = NodePool.objects.get(name="web")
    pool.limits = {"cpu": "2"}
    pool.save()
    cpu = sum(Node.objects.filter(node_pool=pool).values_list("allocatable_cpu_millicores", flat=True))
    expected = f"{cpu / 1000:g} of 2 CPU"
    page = viewer_client.get(reverse("scheduling:nodepool", args=["web"])).content.decode()
    assert 'id="pool-over-limits"' in page and f"Over its limits: {expected}" in page
    listed = viewer_client.get(reverse("scheduling:nodepools")).content.decode()
    assert f"over its limits: {expected}" in listed.split(f'href="{pool.get_absolute_url()}"')[1].split("</tr>")[0]
    overview = viewer_client.get(reverse("scheduling:overview")).content.decode()
    assert f"web</a> is over its limits: {expected}" in overview
    assert over_limits({"cpu": "100", "nodes": "3"}, {"cpu": 203030, "nodes": 3}) == ["203.03 of 100 CPU"]


def test_the_admin_form_keeps_the_class_link_and_the_ref_as_one(demo_world, admin_user_client):
    pool = NodePool.objects.get(name="web")
    url = reverse("admin:scheduling_nodepool_change", args=[pool.pk])
    page = admin_user_client.get(url).content.decode()
    assert 'name="node_class_ref"' not in page, "the ref is not editable apart from the class"
    form = admin_user_client.get(url).context["adminform"].form
    data = {name: form[name].value() for name in form.fields if form[name].value() is not None}
    for name in ("requirements", "taints", "startup_taints", "labels", "limits", "budgets"):
        data[name] = form[name].field.prepare_value(getattr(pool, name))
    data["node_class"] = EC2NodeClass.objects.get(name="batch").pk
    response = admin_user_client.post(url, data)
    assert response.status_code == 302, response.content.decode()[:3000]
    pool.refresh_from_db()
    assert (pool.node_class.name, pool.node_class_ref["name"]) == ("batch", "batch")
