import pytest
from django.urls import reverse

from reservations.forms import EditorInputError, apply_action, terms_from_post
from reservations.models import EC2NodeClass
from reservations.selector_terms import SelectorTermConflict, save_selector_terms
from scheduling.models import AuditEntry

pytestmark = pytest.mark.django_db


@pytest.fixture
def demo_world(demo_world_for_module, db):
    """Every database test here builds on the demo world (the others touch no table): the demo world is seeded once for the module (tests/conftest.py), and
    each test's own writes are rolled back after it."""


def edit_url(name="default"):
    return reverse("reservations:nodeclass_edit", args=[name])


def test_terms_from_post_rebuilds_rows():
    post = {
        "term-0-id": "cr-0abc", "term-0-ownerID": "", "term-1-tag-0-key": "team", "term-1-tag-0-value": "ml",
        "term-1-tag-1-key": "", "term-1-tag-1-value": "", "term-1-ownerID": "123456789012", "term-2-ownerID": "",
        "csrfmiddlewaretoken": "x",
    }
    assert terms_from_post(post) == [{"id": "cr-0abc"}, {"tags": {"team": "ml"}, "ownerID": "123456789012"}, {}]


def test_terms_from_post_refuses_oversized_input():
    with pytest.raises(EditorInputError, match="term-0-id: longer than"):
        terms_from_post({"term-0-id": "x" * 1000})
    with pytest.raises(EditorInputError, match="at most 30 terms"):
        terms_from_post({f"term-{i}-id": "cr-0" for i in range(40)})


def test_row_actions():
    terms = [{"tags": {"a": "1", "b": "2"}}]
    assert apply_action(terms, "add-term") == [{"tags": {"a": "1", "b": "2"}}, {}]
    assert apply_action(terms, "remove-tag-0-0") == [{"tags": {"b": "2"}}]
    assert apply_action(terms, "remove-term-0") == []
    assert apply_action(terms, "add-tag-0") == [{"tags": {"a": "1", "b": "2", "": ""}}]
    assert terms == [{"tags": {"a": "1", "b": "2"}}], "actions must not change their input"


def test_viewer_cannot_edit(viewer_client, demo_world):
    assert viewer_client.get(edit_url()).status_code == 403
    assert viewer_client.post(edit_url(), {"term-0-id": "cr-0abc", "action": "save"}).status_code == 403


def test_invalid_value_is_named_and_not_saved(operator_client, demo_world):
    before = EC2NodeClass.objects.get(name="default").capacity_reservation_selector_terms
    response = operator_client.post(edit_url(), {"term-0-id": "xyz", "term-0-ownerID": "123", "action": "save"})
    page = response.content.decode()
    assert response.status_code == 200
    assert "capacityReservationSelectorTerms[0].id: &quot;xyz&quot; does not match ^cr-[0-9a-z]+$" in page
    assert "must be alone in its term" in page
    assert EC2NodeClass.objects.get(name="default").capacity_reservation_selector_terms == before
    assert not AuditEntry.objects.exists()


def test_preview_shows_selection_and_diff(operator_client, demo_world):
    response = operator_client.post(edit_url(), {
        "resource_version": "", "term-0-tag-0-key": "team", "term-0-tag-0-value": "ml", "action": "preview",
    })
    page = response.content.decode()
    assert "these terms select 3 reservations" in page
    assert "cr-0a1b2c3d4e5f60005" in page and "added" in page
    assert "No longer selected" in page and "cr-0a1b2c3d4e5f60001" in page
    assert '+      &quot;team&quot;: &quot;ml&quot;' in page


def test_save_writes_terms_status_and_audit(operator_client, demo_world):
    response = operator_client.post(edit_url(), {
        "resource_version": "", "term-0-tag-0-key": "team", "term-0-tag-0-value": "*", "term-1-id": "cr-0a1b2c3d4e5f60006",
        "action": "save",
    })
    assert response.status_code == 302
    node_class = EC2NodeClass.objects.get(name="default")
    assert node_class.capacity_reservation_selector_terms == [{"tags": {"team": "*"}}, {"id": "cr-0a1b2c3d4e5f60006"}]
    assert node_class.resource_version == "1"
    selected = [entry["id"] for entry in node_class.status_capacity_reservations]
    assert "cr-0a1b2c3d4e5f60005" in selected and "cr-0a1b2c3d4e5f60008" not in selected  # expired stays out
    entry = AuditEntry.objects.get()
    assert entry.source == "ui" and entry.actor == "otto"
    assert entry.changes["capacity_reservation_selector_terms"][1][1] == {"id": "cr-0a1b2c3d4e5f60006"}


def test_stale_version_is_reported_not_overwritten(operator_client, operator, demo_world):
    node_class = EC2NodeClass.objects.get(name="default")
    save_selector_terms(node_class, [{"tags": {"team": "web"}}], "", user=operator, source="api")
    response = operator_client.post(edit_url(), {"resource_version": "", "term-0-id": "cr-0a1b2c3d4e5f60002", "action": "save"})
    page = response.content.decode()
    assert "Not saved: conflict." in page and "someone else edited it" in page
    assert EC2NodeClass.objects.get(name="default").capacity_reservation_selector_terms == [{"tags": {"team": "web"}}]


def test_two_saves_from_the_same_version_only_one_wins(operator, demo_world):
    first = EC2NodeClass.objects.get(name="default")
    second = EC2NodeClass.objects.get(name="default")
    save_selector_terms(first, [{"id": "cr-0a1b2c3d4e5f60001"}], "", user=operator, source="ui")
    with pytest.raises(SelectorTermConflict):
        save_selector_terms(second, [{"id": "cr-0a1b2c3d4e5f60002"}], "", user=operator, source="ui")
    assert EC2NodeClass.objects.get(name="default").capacity_reservation_selector_terms == [{"id": "cr-0a1b2c3d4e5f60001"}]


def test_the_saved_class_page_shows_no_finding_the_edit_fixed(operator_client, demo_world):
    """The doctor runs again for the class on save: its page, just saved, no longer says the term selects
    nothing; the other clusters' findings, and the class's other codes, stay as the last EC2 step left them."""
    from reservations.models import DoctorFinding

    research = EC2NodeClass.objects.get(name="research")
    others = set(DoctorFinding.objects.exclude(cluster=research.cluster).values_list("pk", "cleared_at"))
    before = operator_client.get(research.get_absolute_url()).content.decode().split('id="doctor"')[1]
    assert "selects nothing" in before
    response = operator_client.post(research.get_edit_url(), {
        "resource_version": research.resource_version, "term-0-id": "cr-0a1b2c3d4e5f60010", "action": "save"})
    assert response.status_code == 302 and response["Location"] == research.get_absolute_url()
    after = operator_client.get(response["Location"]).content.decode().split('id="doctor"')[1].split("</section>")[0]
    assert "selects nothing" not in after and "The doctor finds nothing stopping it." in after
    assert DoctorFinding.objects.get(cluster=research.cluster, code="selector-matches-nothing").cleared_at is not None
    assert set(DoctorFinding.objects.exclude(cluster=research.cluster).values_list("pk", "cleared_at")) == others


def test_the_preview_links_to_the_plan_its_terms_make(operator_client, demo_world):
    """The preview's link opens the what-if page, in the class's cluster, with the class's terms replaced by
    the previewed ones and both plans run."""
    import json
    from html import unescape

    node_class = EC2NodeClass.objects.get(name="default")
    terms = [{"tags": {"team": "web"}}, {"id": "cr-0a1b2c3d4e5f60009"}]
    page = operator_client.post(node_class.get_edit_url(), {
        "resource_version": node_class.resource_version, "term-0-tag-0-key": "team", "term-0-tag-0-value": "web",
        "term-1-id": "cr-0a1b2c3d4e5f60009", "action": "preview"}).content.decode()
    link = unescape(page.split('id="preview-plan" href="')[1].split('"')[0])
    assert link.startswith(reverse("scheduling:whatif") + "?") and f"cluster={node_class.cluster.name}" in link
    plan = operator_client.get(link)
    assert plan.status_code == 200
    form = plan.context["form"]
    assert form["node_class"].value() == "default" and json.loads(form["node_class_terms"].value()) == terms
    assert plan.context["result"]["after"] is not None and plan.context["result"]["problems"] == []
    assert EC2NodeClass.objects.get(pk=node_class.pk).capacity_reservation_selector_terms != terms  # nothing saved
