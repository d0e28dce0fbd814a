"""An operator's own changes are decisions too: a selector-term save, a NodePool mode switch and an applied
recommendation each appear on the decisions page under "manual override", in words, with who and where."""

import pytest
from django.urls import reverse

from reservations.models import EC2NodeClass
from reservations.selector_terms import save_selector_terms
from scheduling.models import Decision, NodePool
from scheduling.override_decisions import changes_in_words

pytestmark = pytest.mark.django_db


@pytest.fixture
def demo_world(demo_world_for_module, db):
    """Every database test here builds on the demo world (the others touch no table): the demo world is seeded once for the module (tests/conftest.py), and
    each test's own writes are rolled back after it."""


def overrides():
    return list(Decision.objects.filter(kind="override").order_by("id"))


def test_a_selector_term_save_and_a_mode_switch_are_manual_overrides(demo_world, operator, operator_client, settings):
    settings.KARPWEB_MODE = "control"
    node_class = EC2NodeClass.objects.get(name="default")
    terms = [*node_class.capacity_reservation_selector_terms, {"id": "cr-0a1b2c3d4e5f60009"}]
    save_selector_terms(node_class, terms, node_class.resource_version, user=operator, source="ui")
    operator_client.post(reverse("scheduling:nodepool_mode", args=["web"]), {"mode": "observe"})
    term_save, mode_switch = overrides()
    assert term_save.subject == "EC2NodeClass default" and term_save.outcome == "acted"
    assert term_save.reason == ('otto changed EC2NodeClass default in the console: capacityReservationSelectorTerms: '
                                'added {"id": "cr-0a1b2c3d4e5f60009"}')
    assert mode_switch.node_pool == NodePool.objects.get(name="web")
    assert mode_switch.reason == "otto changed NodePool web in the console: mode set to observe"
    page = operator_client.get(reverse("scheduling:decisions"), {"kind": "override"}).content.decode()
    assert "capacityReservationSelectorTerms: added" in page and "mode set to observe" in page


def test_an_applied_recommendation_is_a_manual_override_on_its_reservation(demo_world, operator_client, settings):
    from reservations.models import Recommendation

    settings.KARPWEB_MODE = "control"
    rec = Recommendation.objects.get(kind="shrink", reservation__reservation_id="cr-0a1b2c3d4e5f60001")
    operator_client.post(reverse("reservations:recommendation_apply", args=[rec.pk]), {"computed_at": rec.computed_at.isoformat()})
    [override] = overrides()
    assert override.reservation == rec.reservation and "instance count 10 → 8" in override.reason
    assert "applied the recommendation: cr-0a1b2c3d4e5f60001 (10 x m5.large" in override.reason


def test_changes_in_words():
    assert changes_in_words({"weight": [10, 20]}) == "weight 10 → 20"
    assert changes_in_words({"limits": [{"cpu": "100"}, {"cpu": "200"}]}) == 'limits {"cpu": "100"} → {"cpu": "200"}'
    assert changes_in_words({"requirements": [[{"key": "a"}], []]}) == 'requirements: removed {"key": "a"}'
    assert changes_in_words({}) == "no field changed"
