"""#47 (9, 14): what-if plans one cluster's world. In the all-clusters view of the demo fleet (three clusters
whose simulated workloads have pods of the same names, as `./karpweb.sh run` has them once each loop ran) the
page asks for a cluster instead of merging the clusters into one world; chosen, it plans that cluster's world;
and "at the start of" a reservation compares the same clock before and after."""

import pytest
from django.urls import reverse
from django.utils import timezone

from fleet.models import Cluster
from fleet.scope import cluster_scope, default_cluster
from reservations.models import CapacityReservation
from scheduling.engine.timeutil import format_time
from scheduling.loop import steps
from scheduling.models import Pod
from scheduling.templatetags.karpweb import kube_time
from tests.support.page_text import RAW_TIME, visible_text
from tests.support.module_rows import rolled_back_at_the_end

pytestmark = pytest.mark.django_db
URL = reverse("scheduling:whatif")
FUTURE = "cr-0a1b2c3d4e5f60011"  # 3 m6i.xlarge ($0.192/h each) starting in four days


def seed_and_run_each_loop():
    from django.core.management import call_command

    call_command("seed_demo")
    now = timezone.now()
    for cluster in Cluster.objects.order_by("name"):
        with cluster_scope(cluster):
            steps.sync_kubernetes(now)


@pytest.fixture(scope="module")
def running_demo_for_module(django_db_setup, django_db_blocker):
    with rolled_back_at_the_end(django_db_blocker, seed_and_run_each_loop):
        yield


@pytest.fixture
def running_demo(running_demo_for_module, db):
    sim = Pod.objects.fleet().filter(namespace="sim")
    assert sim.values("name").distinct().count() < sim.count(), "the clusters' workloads share pod names"


def test_all_clusters_asks_for_a_cluster_and_merges_nothing(running_demo, viewer_client):
    page = viewer_client.get(URL + "?cluster=all")
    text = page.content.decode()
    assert page.status_code == 200 and 'id="choose-cluster"' in text and "duplicate" not in text
    for name in (default_cluster().name, "staging-use1", "research-use1"):
        assert f'href="/what-if/?cluster={name}">{name}</a>' in text
    assert 'id="edits"' not in text  # no form over a merged world
    assert 'id="tab-paste">Paste a WORLD.json</a>' in text and text.index("</nav>") < text.index('id="choose-cluster"')
    posted = viewer_client.post(URL, {"scale_like": "default/web-pending-1", "scale_times": 2})
    assert posted.status_code == 400 and 'id="choose-cluster"' in posted.content.decode()
    assert "duplicate" not in posted.content.decode()
    current = viewer_client.get(URL, {"tab": "paste", "from": "current"}).content.decode()
    assert 'id="choose-cluster"' in current and "web-pending-0" not in current


@pytest.mark.parametrize("cluster,pod", [("", "default/web-pending-1"), ("staging-use1", "default/staging-api-pending-0")])
def test_a_chosen_cluster_plans_its_own_world(running_demo, viewer_client, cluster, pod):
    viewer_client.get(URL, {"cluster": cluster or default_cluster().name})  # "": the fleet's first
    page = viewer_client.post(URL, {"scale_like": pod, "scale_times": 2})
    text = page.content.decode()
    assert page.status_code == 200, page.context["form"].errors
    assert page.context["result"]["problems"] == [] and "duplicate" not in text and 'id="side-by-side"' in text
    pods = {row["pod"] for row in page.context["result"]["placements"]["rows"]}
    assert {f"{pod}-whatif-0-0", f"{pod}-whatif-0-1"} <= pods


def test_at_the_start_of_a_reservation_compares_the_same_clock(running_demo, viewer_client):
    """Before and after are both at its start (the capacity blocks ended by then in both): the difference in
    idle prepaid capacity is at most what the reservation's units are worth, not four days of endings."""
    start = CapacityReservation.objects.get(reservation_id=FUTURE).start_date
    viewer_client.get(URL, {"cluster": default_cluster().name})
    page = viewer_client.post(URL, {"start_id": FUTURE})
    assert page.status_code == 200, page.context["form"].errors
    result = page.context["result"]
    assert result["problems"] == [] and result["at"] == format_time(start)
    before, after = result["before"]["idleDollarsPerHour"], result["after"]["idleDollarsPerHour"]
    worth = 3 * 0.192
    assert -1e-9 <= after - before <= worth + 1e-9, (before, after)
    blocks = CapacityReservation.objects.filter(reservation_type="capacity-block", end_date__lte=start)
    assert blocks.exists()  # they end before it starts: neither column counts them
    text = page.content.decode()
    assert f"Both plans at {kube_time(start)}:" in text  # as every page writes a time
    assert not RAW_TIME.search(visible_text(text))


def test_a_pending_pods_page_asks_the_engine_about_its_own_clusters_world(running_demo, viewer_client):
    """In the all-clusters view too: the pod's page plans its own cluster's world (no merged world's duplicates)."""
    viewer_client.get(URL, {"cluster": "all"})
    for cluster in ("staging-use1", default_cluster().name):
        pod = Pod.objects.fleet().filter(cluster__name=cluster, node_name="").order_by("namespace", "name").first()
        page = viewer_client.get(pod.get_absolute_url())
        assert page.status_code == 200
        assert page.context["engine_problems"] == [] and page.context["engine_answer"] is not None, pod
