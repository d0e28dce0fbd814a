import json

import pytest
import time_machine
from django.urls import reverse

from scheduling.world import current_world

pytestmark = pytest.mark.django_db


@pytest.fixture
def demo_world(demo_world_for_module, db, first_cluster_shown):
    """Every database test here builds on the demo world: it is seeded once for the module
    (tests/conftest.py), and each test's own writes are rolled back after it. (A pasted world:
    tests/ui/test_whatif_pasted.py.)"""


WORLD = {
    "now": "2026-11-21T12:00:00Z",
    "instanceTypes": [{"name": "m5.large", "cpu": "2", "memory": "8Gi", "pods": 29,
                       "offerings": [{"capacityType": "on-demand", "zone": "us-east-1a", "price": 0.096}]}],
    "capacityReservations": [{"CapacityReservationId": "cr-0abc", "InstanceType": "m5.large", "AvailabilityZone": "us-east-1a",
                              "AvailableInstanceCount": 1, "TotalInstanceCount": 1, "State": "active",
                              "InstanceMatchCriteria": "targeted", "OwnerId": "123456789012"}],
    "ec2NodeClasses": [{"metadata": {"name": "default"}, "spec": {"capacityReservationSelectorTerms": [{"id": "cr-0abc"}]}}],
    "nodePools": [{"metadata": {"name": "default"}, "spec": {"template": {"spec": {
        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
        "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["reserved", "on-demand"]}]}}}}],
    "pods": [{"metadata": {"namespace": "ns", "name": f"p{i}"}, "spec": {"containers": [{"resources": {"requests": {"cpu": "1500m"}}}]}}
             for i in range(2)],
}


def test_whatif_starts_from_the_current_world(viewer_client, demo_world):
    page = viewer_client.get(reverse("scheduling:whatif"), {"from": "current"}).content.decode()
    assert "cr-0a1b2c3d4e5f60001" in page and "web-pending-0" in page
    response = viewer_client.post(reverse("scheduling:whatif"), {"world": json.dumps(current_world())})
    assert "reserved in us-east-1a" in response.content.decode()


def test_pending_pod_answers_why_not_reserved(viewer_client, demo_world):
    page = viewer_client.get(reverse("scheduling:pod", args=["default", "trainer-pending-0"])).content.decode()
    assert "Why not reserved?" in page
    assert "p5.48xlarge reserved node in us-east-1a (NodePool gpu-reserved), in reservation cr-0a1b2c3d4e5f60006" in page


def test_the_pod_page_runs_the_engine_at_most_every_30_seconds(viewer_client, demo_world, monkeypatch):
    from scheduling import whatif

    runs = []
    real = whatif.run_world
    monkeypatch.setattr(whatif, "run_world", lambda world: runs.append(1) or real(world))  # counts, runs it
    url = reverse("scheduling:pod", args=["default", "trainer-pending-0"])
    with time_machine.travel("2026-11-21 10:00:00Z", tick=False) as traveller:
        for _ in range(3):
            assert "in reservation cr-0a1b2c3d4e5f60006" in viewer_client.get(url).content.decode()
        assert len(runs) == 1
        assert "As of 10:00:00 UTC it would go to" in viewer_client.get(url).content.decode()
        traveller.shift(31)
        viewer_client.get(url)
        assert len(runs) == 2


def test_a_current_world_too_large_for_the_page_is_offered_as_a_file(viewer_client, demo_world, monkeypatch):
    from scheduling import views

    monkeypatch.setattr(views, "MAX_WORLD_BYTES", 1000)  # the demo world is larger than this
    page = viewer_client.get(reverse("scheduling:whatif"), {"from": "current"}).content.decode()
    assert 'id="too-large"' in page and "download WORLD.json" in page and "web-pending-0" not in page
    download = viewer_client.get(reverse("scheduling:whatif"), {"from": "current", "download": "1"})
    assert download["Content-Disposition"] == 'attachment; filename="WORLD.json"'
    assert "web-pending-0" in json.dumps(json.loads(download.content))


@pytest.mark.parametrize("value, shown", [
    (None, "—"), ("", "—"), (True, "—"), (0, "$0.00/h"), (0.0, "$0.00/h"), (9.6e-9, "< $0.0001/h"), (0.00009, "< $0.0001/h"),
    (0.0099, "$0.0099/h"), (0.0266, "$0.0266/h"), (0.096, "$0.0960/h"), (1.5, "$1.50/h"), (1234.567, "$1,234.57/h"),
    (-0.00004, "> -$0.0001/h"),
])
def test_dollars_per_hour_at_price_precision_or_less_than_it(value, shown):
    from scheduling.templatetags.karpweb import per_hour

    assert per_hour(value) == shown


def test_idle_dollars_count_the_free_units_the_plan_leaves():
    from scheduling.whatif_edits import idle_dollars_per_hour

    world = {**WORLD, "capacityReservations": [
        {**WORLD["capacityReservations"][0], "AvailableInstanceCount": 3, "TotalInstanceCount": 4},
        {**WORLD["capacityReservations"][0], "CapacityReservationId": "cr-0gone", "State": "expired"},
        {**WORLD["capacityReservations"][0], "CapacityReservationId": "cr-0ended", "EndDate": "2026-11-21T11:00:00Z"},
    ]}
    decisions = {"nodeClaims": [{"launch": {"reservationID": "cr-0abc"}}, {"launch": {"capacityType": "on-demand"}}]}
    assert idle_dollars_per_hour(world, decisions) == pytest.approx(2 * 0.096)  # 3 free, 1 planned; the others unusable
    assert idle_dollars_per_hour(world, {}) == pytest.approx(3 * 0.096)
