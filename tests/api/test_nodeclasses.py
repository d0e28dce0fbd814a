"""/api/v1/ec2nodeclasses/: reads, and conflict-safe edits of capacityReservationSelectorTerms
through the same service (and so the same per-term messages) as the UI's editor."""

import pytest

import reservations.api.views as api_views
from reservations.models import EC2NodeClass
from reservations.selector_terms import save_selector_terms, validation_problems
from scheduling.models import AuditEntry

pytestmark = pytest.mark.django_db


@pytest.fixture
def demo_world(demo_world_for_module, db):
    """Every test here builds on the demo world: it is seeded once for the module (tests/conftest.py),
    and each test's own writes are rolled back after it."""


URL = "/api/v1/ec2nodeclasses/default/"
ML = [{"tags": {"team": "ml"}}]


def node_class():
    return EC2NodeClass.objects.get(name="default")


def patch(client, body, **headers):
    return client.patch(URL, body, format="json", headers=headers)


def test_list_and_detail(as_viewer, demo_world):
    rows = as_viewer.get("/api/v1/ec2nodeclasses/").json()["results"]
    assert [row["name"] for row in rows] == sorted(nc.name for nc in EC2NodeClass.objects.all())
    response = as_viewer.get(URL)
    body = response.json()
    current = node_class()
    assert response["ETag"] == f'"{current.resource_version}"'
    assert body["resourceVersion"] == current.resource_version
    assert body["capacityReservationSelectorTerms"] == current.capacity_reservation_selector_terms
    assert body["status"]["capacityReservations"] == current.status_capacity_reservations
    assert body["status"]["conditions"][0]["type"] == "CapacityReservationsReady"
    assert body["selectedReservations"] == sorted(r.reservation_id for r in current.selected_reservations.all())
    assert body["nodePools"] == [p.name for p in current.node_pools.order_by("-weight", "name")]
    assert as_viewer.get("/api/v1/ec2nodeclasses/?q=defa").json()["count"] == 1
    assert as_viewer.get("/api/v1/ec2nodeclasses/nope/").status_code == 404


def test_patch_with_if_match_saves_records_and_moves_the_version(as_operator, demo_world):
    version = as_operator.get(URL)["ETag"]
    response = patch(as_operator, {"capacityReservationSelectorTerms": ML}, **{"If-Match": version})
    assert response.status_code == 200, response.content
    saved = node_class()
    assert saved.capacity_reservation_selector_terms == ML
    assert response["ETag"] == f'"{saved.resource_version}"' != version
    assert response.json()["resourceVersion"] == saved.resource_version
    # The status follows the new terms at once (as the UI's save does).
    selected = set(response.json()["selectedReservations"])
    assert selected and all(r.tags.get("team") == "ml" for r in saved.selected_reservations.all())
    entry = AuditEntry.objects.get()
    assert (entry.source, entry.action, entry.actor, entry.user) == ("api", "change", "otto", as_operator.user)
    assert entry.object_repr == "default"
    assert entry.changes["capacity_reservation_selector_terms"][1] == ML


def test_put_with_the_resource_version_field(as_operator, demo_world):
    version = node_class().resource_version
    response = as_operator.put(URL, {"capacityReservationSelectorTerms": ML, "resourceVersion": version}, format="json")
    assert response.status_code == 200, response.content
    assert node_class().capacity_reservation_selector_terms == ML


def test_if_match_star_and_lenient_forms(as_operator, demo_world):
    assert patch(as_operator, {"capacityReservationSelectorTerms": ML}, **{"If-Match": "*"}).status_code == 200
    version = node_class().resource_version
    assert patch(as_operator, {"capacityReservationSelectorTerms": []}, **{"If-Match": version}).status_code == 200
    version = node_class().resource_version
    assert patch(as_operator, {"capacityReservationSelectorTerms": ML},
                 **{"If-Match": f'"stale", W/"{version}"'}).status_code == 200


def test_stale_if_match_is_412_and_changes_nothing(as_operator, demo_world):
    old = as_operator.get(URL)["ETag"]
    assert patch(as_operator, {"capacityReservationSelectorTerms": ML}, **{"If-Match": old}).status_code == 200
    response = patch(as_operator, {"capacityReservationSelectorTerms": []}, **{"If-Match": old})
    assert response.status_code == 412
    current = node_class().resource_version
    assert response.json() == {"detail": (
        f'EC2NodeClass default is at resourceVersion "{current}", not "{old.strip(chr(34))}" (If-Match): '
        "someone else changed it; GET it again and reapply your edit"
    )}
    assert node_class().capacity_reservation_selector_terms == ML
    assert AuditEntry.objects.count() == 1


def test_stale_resource_version_field_is_409(as_operator, demo_world):
    old = node_class().resource_version
    as_operator.put(URL, {"capacityReservationSelectorTerms": ML, "resourceVersion": old}, format="json")
    response = as_operator.put(URL, {"capacityReservationSelectorTerms": [], "resourceVersion": old}, format="json")
    assert response.status_code == 409
    assert "someone else changed it" in response.json()["detail"] and "(resourceVersion)" in response.json()["detail"]
    assert node_class().capacity_reservation_selector_terms == ML


def test_an_empty_if_match_is_no_version(as_operator, demo_world):
    assert node_class().resource_version == "", "the demo world's classes start without a version"
    response = patch(as_operator, {"capacityReservationSelectorTerms": ML}, **{"If-Match": " "})
    assert response.status_code == 412
    assert response.json() == {"detail": 'If-Match names no version: send the ETag of a GET, e.g. If-Match: ""'}
    assert patch(as_operator, {"capacityReservationSelectorTerms": ML}, **{"If-Match": '""'}).status_code == 200


def test_a_stale_if_match_fails_before_the_body_is_validated(as_operator, demo_world):
    response = patch(as_operator, {"capacityReservationSelectorTerms": "nonsense"}, **{"If-Match": '"999"'})
    assert response.status_code == 412


def test_without_a_version_the_write_is_refused_428(as_operator, demo_world):
    response = patch(as_operator, {"capacityReservationSelectorTerms": ML})
    assert response.status_code == 428
    assert response.json()["detail"].startswith("Changing EC2NodeClass default needs the version you read: send If-Match:")
    assert AuditEntry.objects.count() == 0


def test_a_concurrent_save_between_check_and_write_is_caught(as_operator, demo_world, monkeypatch):
    """Someone else saves after the API checked the version but before it wrote: the service's
    compare-and-swap refuses, and the API answers as for any stale version."""

    def someone_else_first(node_class, terms, read_version, **kwargs):
        save_selector_terms(EC2NodeClass.objects.get(pk=node_class.pk), [{"id": "cr-0other"}], read_version,
                            user=None, source="ui")
        return save_selector_terms(node_class, terms, read_version, **kwargs)

    monkeypatch.setattr(api_views, "save_selector_terms", someone_else_first)
    version = node_class().resource_version
    response = patch(as_operator, {"capacityReservationSelectorTerms": ML}, **{"If-Match": f'"{version}"'})
    assert response.status_code == 412
    assert "changed after version" in response.json()["detail"]
    response = patch(as_operator, {"capacityReservationSelectorTerms": ML, "resourceVersion": node_class().resource_version})
    assert response.status_code == 409
    assert node_class().capacity_reservation_selector_terms == [{"id": "cr-0other"}]


def test_invalid_terms_get_the_engines_per_term_messages(as_operator, demo_world):
    terms = [{"tags": {"team": "ml"}}, {"id": "x"}]
    response = patch(as_operator, {"capacityReservationSelectorTerms": terms, "resourceVersion": node_class().resource_version})
    assert response.status_code == 400
    assert response.json() == {
        "capacityReservationSelectorTerms": ['capacityReservationSelectorTerms[1].id: "x" does not match ^cr-[0-9a-z]+$']
    }
    assert AuditEntry.objects.count() == 0


def test_every_problem_is_listed_as_the_ui_lists_it(as_operator, demo_world):
    terms = [{"id": "cr-0abc", "ownerID": "123"}, {"ownerID": "123456789012"}, {"tags": {"a": ""}, "colour": "red"}, "x"]
    response = patch(as_operator, {"capacityReservationSelectorTerms": terms, "resourceVersion": node_class().resource_version})
    assert response.status_code == 400
    assert response.json()["capacityReservationSelectorTerms"] == validation_problems(terms)
    assert len(validation_problems(terms)) >= 5


@pytest.mark.parametrize("terms,message", [
    ("all of them", "capacityReservationSelectorTerms: expected a list of terms"),
    ([{"id": "cr-0a"}] * 31, "capacityReservationSelectorTerms: 31 terms, at most 30 are allowed"),
    (None, "This field may not be null."),
])
def test_terms_that_are_not_a_list_of_terms(as_operator, demo_world, terms, message):
    response = patch(as_operator, {"capacityReservationSelectorTerms": terms, "resourceVersion": node_class().resource_version})
    assert response.status_code == 400
    assert message in response.json()["capacityReservationSelectorTerms"]


def test_unknown_or_read_only_fields_are_refused(as_operator, demo_world):
    response = patch(as_operator, {"capacityReservationSelectorTerm": ML, "spec": {}, "resourceVersion": node_class().resource_version})
    assert response.status_code == 400
    assert sorted(response.json()) == ["capacityReservationSelectorTerm", "spec"]
    assert response.json()["spec"] == [
        "not a field this endpoint changes (it accepts capacityReservationSelectorTerms, openReservations, resourceVersion)"
    ]


def test_put_needs_the_terms_patch_without_them_changes_nothing(as_operator, demo_world):
    version = node_class().resource_version
    response = as_operator.put(URL, {"resourceVersion": version}, format="json")
    assert response.status_code == 400
    assert response.json() == {"capacityReservationSelectorTerms": ["This field is required."]}
    response = patch(as_operator, {"resourceVersion": version})
    assert response.status_code == 200 and node_class().resource_version == version
    assert AuditEntry.objects.count() == 0


def test_a_body_that_is_not_json_is_a_400(as_operator, demo_world):
    response = as_operator.generic("PATCH", URL, "{not json", content_type="application/json")
    assert response.status_code == 400 and "JSON parse error" in response.json()["detail"]


def test_writes_need_the_operator_role(as_viewer, anon, demo_world):
    body = {"capacityReservationSelectorTerms": ML, "resourceVersion": node_class().resource_version}
    assert patch(as_viewer, body).status_code == 403
    assert patch(anon, body).status_code == 401
    assert node_class().capacity_reservation_selector_terms != ML


def test_unknown_node_class_is_404(as_operator, demo_world):
    response = as_operator.patch("/api/v1/ec2nodeclasses/nope/", {"capacityReservationSelectorTerms": ML}, format="json")
    assert response.status_code == 404


# --- preview ----------------------------------------------------------------------------------

def test_preview_shows_the_selection_and_saves_nothing(as_operator, demo_world):
    before = node_class()
    response = as_operator.post(f"{URL}preview/", {"capacityReservationSelectorTerms": ML}, format="json")
    assert response.status_code == 200, response.content
    body = response.json()
    selected = {entry["id"] for entry in body["capacityReservations"]}
    current = {entry["id"] for entry in before.status_capacity_reservations}
    assert body["added"] == sorted(selected - current) and body["removed"] == sorted(current - selected)
    assert body["conditions"][0]["type"] == "CapacityReservationsReady"
    assert '+      "team": "ml"' in body["diff"]
    after = node_class()
    assert (after.resource_version, after.capacity_reservation_selector_terms) == (
        before.resource_version, before.capacity_reservation_selector_terms)
    assert AuditEntry.objects.count() == 0


def test_preview_validates_like_a_save(as_operator, as_viewer, demo_world):
    response = as_operator.post(f"{URL}preview/", {"capacityReservationSelectorTerms": [{"id": "x"}]}, format="json")
    assert response.status_code == 400
    assert response.json() == {
        "capacityReservationSelectorTerms": ['capacityReservationSelectorTerms[0].id: "x" does not match ^cr-[0-9a-z]+$']
    }
    assert as_viewer.post(f"{URL}preview/", {"capacityReservationSelectorTerms": ML}, format="json").status_code == 403
