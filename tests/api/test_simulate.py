"""POST /api/v1/simulate/: the simulate contract over HTTP (same engine, same path-named
messages as `manage.py simulate` and the what-if page), and GET /api/v1/world/."""

import copy
import json
from pathlib import Path

import pytest

from fleet.scope import default_cluster
from scheduling.api.views import WorldParser
from scheduling.models import AuditEntry, Decision, NodeClaim
from scheduling.whatif import MAX_WORLD_BYTES, run_world, run_world_text
from tests.ui.test_whatif import WORLD

pytestmark = pytest.mark.django_db

URL = "/api/v1/simulate/"


def post_text(client, text, content_type="application/json"):
    return client.generic("POST", URL, text, content_type=content_type)


def test_a_world_gets_its_decisions(as_viewer):
    response = as_viewer.post(URL, WORLD, format="json")
    assert response.status_code == 200, response.content
    decisions = response.json()
    expected = run_world(copy.deepcopy(WORLD)).decisions
    assert set(decisions) == set(expected)
    launches = sorted((c["launch"]["capacityType"], c["launch"].get("reservationID")) for c in decisions["nodeClaims"])
    assert launches == [("on-demand", None), ("reserved", "cr-0abc")]
    assert sorted(p for c in decisions["nodeClaims"] for p in c["pods"]) == ["ns/p0", "ns/p1"]


def test_the_current_world_round_trips_and_nothing_changes(as_viewer, demo_world):
    counts = (Decision.objects.count(), NodeClaim.objects.count(), AuditEntry.objects.count())
    world = as_viewer.get(f"/api/v1/world/?cluster={default_cluster().name}").json()
    assert {"now", "instanceTypes", "capacityReservations", "ec2NodeClasses", "nodePools", "nodes", "pods"} <= set(world)
    response = as_viewer.post(URL, world, format="json")
    assert response.status_code == 200
    pending = {p["metadata"]["namespace"] + "/" + p["metadata"]["name"] for p in world["pods"]
               if not p["spec"].get("nodeName")}
    decisions = response.json()
    placed = [p for c in decisions["nodeClaims"] for p in c["pods"]] + [b["pod"] for b in decisions["bindings"]]
    placed += [u["pod"] for u in decisions["unschedulable"]] + [d["pod"] for d in decisions["deferred"]]
    assert sorted(placed) == sorted(pending), "every pending pod appears exactly once"
    assert (Decision.objects.count(), NodeClaim.objects.count(), AuditEntry.objects.count()) == counts


def test_bad_input_is_a_400_naming_the_paths(as_viewer):
    bad = copy.deepcopy(WORLD)
    bad["pods"][1]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "abc"
    response = as_viewer.post(URL, bad, format="json")
    assert response.status_code == 400
    problem = 'pods[1].spec.containers[0].resources.requests.cpu: "abc" is not a quantity'
    assert response.json() == {"detail": problem, "problems": [problem]}


def test_several_problems_are_all_listed(as_viewer):
    bad = copy.deepcopy(WORLD)
    bad["pods"][0]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "abc"
    bad["capacityReservations"][0]["TotalInstanceCount"] = "four"
    body = as_viewer.post(URL, bad, format="json").json()
    assert len(body["problems"]) >= 2 and body["detail"] == f"WORLD.json has {len(body['problems'])} problem(s)"
    assert any(p.startswith("pods[0].spec.containers[0].resources.requests.cpu") for p in body["problems"])
    assert any(p.startswith("capacityReservations[0].TotalInstanceCount") for p in body["problems"])


@pytest.mark.parametrize("text", ['{"pods": [', "[1, 2]", '{"pods": "none"}', '{"now": "yesterday"}'])
def test_not_a_world_gets_the_messages_the_command_gives(as_viewer, text):
    response = post_text(as_viewer, text)
    assert response.status_code == 400
    assert response.json()["problems"] == run_world_text(text).problems != []


def test_empty_body_and_invalid_utf8(as_viewer):
    for blank in ("", "  \n"):
        response = post_text(as_viewer, blank)
        assert response.status_code == 400
        assert response.json()["problems"] == ["WORLD.json: the request body is empty; send a WORLD.json document"]
    response = post_text(as_viewer, b'{"now": "\xff"}')
    assert response.status_code == 400 and response.json()["problems"][0].startswith("WORLD.json: not UTF-8")


def test_over_the_size_limit_is_a_413(as_viewer):
    world = dict(WORLD, padding="x" * MAX_WORLD_BYTES)
    response = post_text(as_viewer, json.dumps(world))
    assert response.status_code == 413
    assert response.json() == {"detail": "WORLD.json: larger than 5 MiB", "problems": ["WORLD.json: larger than 5 MiB"]}


def test_the_parser_stops_reading_at_the_limit(monkeypatch):
    """Without a trustworthy Content-Length the parser still reads no more than the limit + 1 byte."""

    class Stream:
        read_sizes = []

        def read(self, size):
            self.read_sizes.append(size)
            return b"x" * size

    stream = Stream()
    with pytest.raises(Exception) as raised:
        WorldParser().parse(stream)
    assert raised.value.status_code == 413 and stream.read_sizes == [MAX_WORLD_BYTES + 1]


def test_only_json_is_accepted(as_viewer):
    response = post_text(as_viewer, json.dumps(WORLD), content_type="text/plain")
    assert response.status_code == 415
    assert response.json() == {"detail": 'Unsupported media type "text/plain" in request.'}


def test_who_may_simulate(anon, as_nobody, as_viewer, as_operator):
    assert anon.post(URL, WORLD, format="json").status_code == 401
    assert as_nobody.post(URL, WORLD, format="json").status_code == 403
    assert as_viewer.post(URL, WORLD, format="json").status_code == 200
    assert as_operator.post(URL, WORLD, format="json").status_code == 200


def test_a_world_given_as_describe_instance_types_output(as_viewer):
    """The examples' what-if world: instance types as `aws ec2 describe-instance-types` prints them."""
    world = json.loads((Path(__file__).resolve().parents[2] / "examples/nodepools/world.json").read_text())
    assert "describeInstanceTypes" in world and all(set(t) == {"name", "offerings"} for t in world["instanceTypes"])
    response = as_viewer.post(URL, world, format="json")
    assert response.status_code == 200, response.content
    decisions = response.json()
    assert decisions["unschedulable"] == []
    trainers = [c for c in decisions["nodeClaims"] if c["nodePool"] == "p5-capacity-block"]
    assert [c["launch"]["reservationType"] for c in trainers] == ["capacity-block", "capacity-block"]
    world["vmMemoryOverheadPercent"] = 1.5
    bad = as_viewer.post(URL, world, format="json")
    assert bad.status_code == 400 and bad.json()["problems"][0].startswith("vmMemoryOverheadPercent:")


def test_the_world_is_the_named_clusters(as_viewer, demo_world):
    """#47 (14): a world is one cluster's: `?cluster=` answers that cluster's; a fleet of several clusters
    without it is 400 under `cluster` naming them (a merged world has pods and nodes of the same names)."""
    def names(world, part):
        return {item["metadata"]["name"] for item in world[part]}

    staging = as_viewer.get("/api/v1/world/?cluster=staging-use1")
    assert staging.status_code == 200
    assert names(staging.json(), "nodePools") == {"staging-web", "staging-batch"}
    first = default_cluster().name
    prod = as_viewer.get(f"/api/v1/world/?cluster={first}").json()
    assert names(prod, "nodePools") == {"gpu-reserved", "web", "general"}
    assert not names(prod, "nodes") & names(staging.json(), "nodes")
    # Each sees the reservations its account sees: research's account sees the shared one, not the first's own.
    research = as_viewer.get("/api/v1/world/?cluster=research-use1").json()
    assert "cr-0a1b2c3d4e5f60010" in {r["CapacityReservationId"] for r in research["capacityReservations"]}
    assert "cr-0a1b2c3d4e5f60001" not in {r["CapacityReservationId"] for r in research["capacityReservations"]}
    merged = as_viewer.get("/api/v1/world/")
    assert merged.status_code == 400
    names_all = ", ".join(sorted([first, "research-use1", "staging-use1"]))
    assert merged.json() == {"cluster": [f"the fleet has 3 clusters ({names_all}) and a world is one cluster's: say "
                                         "which with ?cluster=<name>"]}
    unknown = as_viewer.get("/api/v1/world/?cluster=nope")
    assert unknown.status_code == 400 and unknown.json() == {"cluster": ["no cluster named 'nope' in the fleet"]}
