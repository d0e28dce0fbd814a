"""NodePools (and their mode), NodeClaims, nodes, pods, instance types and offerings, decisions
and task runs."""

import datetime

import pytest
from django.utils import timezone

from scheduling.models import AuditEntry, CapacityType, Decision, NodePool, TaskRun
from tests.factories.reservations import CapacityReservationFactory
from tests.factories.scheduling import (
    DecisionFactory,
    InstanceTypeFactory,
    NodeClaimFactory,
    NodeFactory,
    NodePoolFactory,
    OfferingFactory,
    PodFactory,
)

pytestmark = pytest.mark.django_db


def results(response):
    assert response.status_code == 200, response.content
    return response.json()["results"]


def names(response, key="name"):
    return [row[key] for row in results(response)]


# --- NodePools --------------------------------------------------------------------------------

def test_nodepools_list_and_detail(as_viewer, settings):
    settings.KARPWEB_MODE = "observe"
    pool = NodePoolFactory(name="gpu", weight=50, mode="control", labels={"team": "ml"})
    NodePoolFactory(name="general", weight=10)
    NodeFactory.create_batch(2, node_pool=pool)
    rows = results(as_viewer.get("/api/v1/nodepools/"))
    assert [row["name"] for row in rows] == ["gpu", "general"], "highest weight first, as the pages"
    gpu = rows[0]
    assert (gpu["mode"], gpu["effectiveMode"], gpu["nodeCount"], gpu["weight"]) == ("control", "control", 2, 50)
    assert gpu["nodeClass"] == pool.node_class.name and gpu["labels"] == {"team": "ml"}
    assert gpu["requirements"] == pool.requirements and gpu["limits"] == {"cpu": "100"}
    assert (rows[1]["mode"], rows[1]["effectiveMode"]) == (None, "observe")
    detail = as_viewer.get("/api/v1/nodepools/gpu/").json()
    assert detail == gpu
    assert names(as_viewer.get("/api/v1/nodepools/?mode=control")) == ["gpu"]
    assert names(as_viewer.get("/api/v1/nodepools/?q=gen")) == ["general"]
    assert names(as_viewer.get("/api/v1/nodepools/?ordering=node_count")) == ["general", "gpu"]


def test_operator_switches_the_mode_and_it_is_audited(as_operator, settings):
    settings.KARPWEB_MODE = "observe"
    NodePoolFactory(name="general")
    response = as_operator.patch("/api/v1/nodepools/general/", {"mode": "control"}, format="json")
    assert response.status_code == 200
    assert (response.json()["mode"], response.json()["effectiveMode"]) == ("control", "control")
    assert NodePool.objects.get(name="general").mode == "control"
    entry = AuditEntry.objects.get()
    assert (entry.source, entry.actor, entry.user, entry.changes) == ("api", "otto", as_operator.user,
                                                                      {"mode": ["", "control"]})
    # The same mode again changes and records nothing; null (or "") follows the global mode.
    as_operator.patch("/api/v1/nodepools/general/", {"mode": "control"}, format="json")
    assert AuditEntry.objects.count() == 1
    response = as_operator.patch("/api/v1/nodepools/general/", {"mode": None}, format="json")
    assert (response.json()["mode"], response.json()["effectiveMode"]) == (None, "observe")
    assert NodePool.objects.get(name="general").mode == ""
    assert AuditEntry.objects.order_by("-id").first().changes == {"mode": ["control", ""]}
    assert as_operator.patch("/api/v1/nodepools/general/", {"mode": ""}, format="json").status_code == 200


@pytest.mark.parametrize("body,errors", [
    ({"mode": "auto"}, {"mode": ['"auto" is not a valid choice.']}),
    ({}, {"mode": ["This field is required."]}),
    ({"mode": "control", "weight": 100}, {"weight": ["not a field this endpoint changes (it accepts mode)"]}),
])
def test_mode_validation(as_operator, body, errors):
    NodePoolFactory(name="general")
    response = as_operator.patch("/api/v1/nodepools/general/", body, format="json")
    assert response.status_code == 400 and response.json() == errors
    assert NodePool.objects.get(name="general").mode == "" and not AuditEntry.objects.exists()


def test_mode_needs_the_operator_role(as_viewer):
    NodePoolFactory(name="general")
    assert as_viewer.patch("/api/v1/nodepools/general/", {"mode": "control"}, format="json").status_code == 403
    assert NodePool.objects.get(name="general").mode == ""


# --- NodeClaims and nodes ---------------------------------------------------------------------

def test_nodeclaims_and_nodes(as_viewer):
    reservation = CapacityReservationFactory(reservation_id="cr-0aaa")
    pool = NodePoolFactory(name="reserved")
    claim = NodeClaimFactory(name="reserved-abc", node_pool=pool, capacity_type=CapacityType.RESERVED,
                             reservation=reservation, reservation_label="cr-0aaa", instance_type="m5.large")
    NodeClaimFactory(name="general-xyz", capacity_type=CapacityType.SPOT, zone="us-east-1b")
    node = NodeFactory(name="ip-10-0-0-1.ec2.internal", node_pool=pool, node_claim=claim, capacity_type=CapacityType.RESERVED,
                       reservation=reservation, reservation_label="cr-0aaa", provider_id="aws:///us-east-1a/i-0abc")
    NodeFactory(name="ip-10-0-0-2.ec2.internal", capacity_type=CapacityType.ON_DEMAND)
    PodFactory.create_batch(3, node=node, node_name=node.name)

    claims = {row["name"]: row for row in results(as_viewer.get("/api/v1/nodeclaims/"))}
    assert claims["reserved-abc"]["reservationID"] == "cr-0aaa"
    assert claims["reserved-abc"]["capacityReservation"] == "http://testserver/api/v1/capacity-reservations/cr-0aaa/"
    assert claims["general-xyz"]["capacityReservation"] is None
    assert names(as_viewer.get("/api/v1/nodeclaims/?capacity_type=spot")) == ["general-xyz"]
    assert names(as_viewer.get("/api/v1/nodeclaims/?reservation=cr-0aaa")) == ["reserved-abc"]
    assert names(as_viewer.get("/api/v1/nodeclaims/?node_pool=reserved")) == ["reserved-abc"]
    assert as_viewer.get("/api/v1/nodeclaims/reserved-abc/").json()["nodePool"] == "reserved"

    nodes = {row["name"]: row for row in results(as_viewer.get("/api/v1/nodes/"))}
    reserved = nodes["ip-10-0-0-1.ec2.internal"]
    assert (reserved["podCount"], reserved["instanceID"], reserved["nodeClaim"]) == (3, "i-0abc", "reserved-abc")
    assert reserved["allocatable"] == {"cpuMillicores": 1920, "memoryBytes": 7 * 2**30, "pods": 110}
    assert names(as_viewer.get("/api/v1/nodes/?capacity_type=reserved")) == ["ip-10-0-0-1.ec2.internal"]
    assert names(as_viewer.get("/api/v1/nodes/?q=i-0abc")) == ["ip-10-0-0-1.ec2.internal"]
    assert names(as_viewer.get("/api/v1/nodes/?ordering=-pod_count")) == ["ip-10-0-0-1.ec2.internal", "ip-10-0-0-2.ec2.internal"]
    detail = as_viewer.get("/api/v1/nodes/ip-10-0-0-1.ec2.internal/")
    assert detail.status_code == 200 and detail.json() == reserved
    assert as_viewer.get("/api/v1/nodes/nope/").status_code == 404


# --- pods -------------------------------------------------------------------------------------

def test_pods_by_namespace_and_name_and_the_pending_filter(as_viewer):
    node = NodeFactory(name="node-a")
    PodFactory(namespace="default", name="web-1", node=node, node_name="node-a", phase="Running")
    PodFactory(namespace="default", name="web-2")
    PodFactory(namespace="batch", name="job-1")
    rows = results(as_viewer.get("/api/v1/pods/"))
    assert [(row["namespace"], row["name"]) for row in rows] == [("batch", "job-1"), ("default", "web-1"), ("default", "web-2")]
    assert names(as_viewer.get("/api/v1/pods/?pending=true")) == ["job-1", "web-2"]
    assert names(as_viewer.get("/api/v1/pods/?pending=false")) == ["web-1"]
    assert names(as_viewer.get("/api/v1/pods/?namespace=batch")) == ["job-1"]
    assert names(as_viewer.get("/api/v1/pods/?node=node-a")) == ["web-1"]
    pod = as_viewer.get("/api/v1/pods/default/web-1/").json()
    assert (pod["nodeName"], pod["pending"], pod["cpuRequestMillicores"]) == ("node-a", False, 500)
    assert pod["url"] == "http://testserver/api/v1/pods/default/web-1/"
    assert as_viewer.get("/api/v1/pods/batch/web-1/").status_code == 404


# --- instance types and offerings -------------------------------------------------------------

def test_instance_types_with_offerings(as_viewer):
    m5 = InstanceTypeFactory(name="m5.large", cpu_millicores=2000, memory_bytes=8 * 2**30, family="m5")
    g5 = InstanceTypeFactory(name="g5.xlarge", gpu_count=1, gpu_name="A10G", family="g5")
    OfferingFactory(instance_type=m5, capacity_type=CapacityType.ON_DEMAND, zone="us-east-1a", price=0.096)
    OfferingFactory(instance_type=m5, capacity_type=CapacityType.SPOT, zone="us-east-1a", price=0.035)
    OfferingFactory(instance_type=g5, capacity_type=CapacityType.ON_DEMAND, zone="us-east-1b", price=1.006)
    detail = as_viewer.get("/api/v1/instance-types/m5.large/").json()
    assert (detail["vcpus"], detail["memoryGiB"], detail["family"]) == (2.0, 8.0, "m5")
    assert [(o["capacityType"], o["zone"], o["price"]) for o in detail["offerings"]] == [
        ("on-demand", "us-east-1a", 0.096), ("spot", "us-east-1a", 0.035)]
    assert names(as_viewer.get("/api/v1/instance-types/?gpu=true")) == ["g5.xlarge"]
    assert names(as_viewer.get("/api/v1/instance-types/?zone=us-east-1a")) == ["m5.large"]
    assert names(as_viewer.get("/api/v1/instance-types/?family=G5")) == ["g5.xlarge"]
    assert names(as_viewer.get("/api/v1/instance-types/?ordering=-cpu_millicores")) == ["g5.xlarge", "m5.large"]
    offerings = results(as_viewer.get("/api/v1/offerings/?capacity_type=spot"))
    assert [(o["instanceType"], o["price"]) for o in offerings] == [("m5.large", 0.035)]
    assert as_viewer.get(f"/api/v1/offerings/{offerings[0]['id']}/").json() == offerings[0]
    assert [o["price"] for o in results(as_viewer.get("/api/v1/offerings/?ordering=-price"))] == [1.006, 0.096, 0.035]


# --- decisions and task runs ------------------------------------------------------------------

def test_decisions_newest_first_with_filters(as_viewer):
    now = timezone.now()
    pool = NodePoolFactory(name="general")
    reservation = CapacityReservationFactory(reservation_id="cr-0aaa")
    old = DecisionFactory(kind=Decision.Kind.LAUNCH, created_at=now - datetime.timedelta(days=2), node_pool=pool)
    drain = DecisionFactory(kind=Decision.Kind.DRAIN, created_at=now - datetime.timedelta(hours=1),
                            reservation=reservation, subject="node gpu-1", reason="capacity block ends soon",
                            details={"drainAt": "2026-11-21T12:20:00Z"})
    demote = DecisionFactory(kind=Decision.Kind.DEMOTE, outcome=Decision.Outcome.ACTED, created_at=now)
    rows = results(as_viewer.get("/api/v1/decisions/"))
    assert [row["id"] for row in rows] == [demote.pk, drain.pk, old.pk]
    assert rows[1]["reservationID"] == "cr-0aaa" and rows[1]["details"] == {"drainAt": "2026-11-21T12:20:00Z"}
    assert rows[2]["nodePool"] == "general"

    def ids(query):
        return [row["id"] for row in results(as_viewer.get(f"/api/v1/decisions/?{query}"))]

    assert ids("kind=drain&kind=demote") == [demote.pk, drain.pk]
    assert ids("outcome=acted") == [demote.pk]
    assert ids("reservation=cr-0aaa") == [drain.pk]
    assert ids("node_pool=general") == [old.pk]
    assert ids("q=capacity block") == [drain.pk]
    assert ids(f"since={(now - datetime.timedelta(hours=2)).isoformat().replace('+00:00', 'Z')}") == [demote.pk, drain.pk]
    assert ids("ordering=created_at") == [old.pk, drain.pk, demote.pk]
    assert as_viewer.get(f"/api/v1/decisions/{drain.pk}/").json()["subject"] == "node gpu-1"
    assert as_viewer.get("/api/v1/decisions/999999/").status_code == 404


def test_task_runs(as_viewer):
    now = timezone.now()
    ok = TaskRun.objects.create(task="sync_ec2", started_at=now - datetime.timedelta(minutes=5),
                                finished_at=now - datetime.timedelta(minutes=4), status=TaskRun.Status.SUCCEEDED,
                                counts={"reservations": 8}, mode="observe")
    failed = TaskRun.objects.create(task="provision", started_at=now - datetime.timedelta(minutes=1),
                                    status=TaskRun.Status.FAILED, error="EC2 said no")
    rows = results(as_viewer.get("/api/v1/task-runs/"))
    assert [row["id"] for row in rows] == [failed.pk, ok.pk]
    assert rows[1]["durationSeconds"] == 60.0 and rows[1]["counts"] == {"reservations": 8}
    assert rows[0]["durationSeconds"] is None and rows[0]["error"] == "EC2 said no"
    assert [row["id"] for row in results(as_viewer.get("/api/v1/task-runs/?status=failed"))] == [failed.pk]
    assert [row["id"] for row in results(as_viewer.get("/api/v1/task-runs/?task=sync_ec2"))] == [ok.pk]
    assert as_viewer.get(f"/api/v1/task-runs/{ok.pk}/").json()["task"] == "sync_ec2"


@pytest.mark.parametrize("url", ["/api/v1/decisions/", "/api/v1/task-runs/"])
def test_times_with_any_iso_offset_are_compared_in_utc(as_viewer, url):
    """ISO 8601 allows offsets PostgreSQL refuses (found by schemathesis): normalised to UTC."""
    DecisionFactory(created_at=timezone.now())
    TaskRun.objects.create(task="provision")
    assert results(as_viewer.get(url, {"since": "2000-01-01T00:00:00-17:15"}))
    assert results(as_viewer.get(url, {"since": "5653-12-11T11:53:55-17:15"})) == []
    response = as_viewer.get(url, {"since": "0001-01-01T00:00:00+19:42"})
    assert response.status_code == 400 and response.json() == {"since": ["Enter a valid date/time."]}
