"""Every recommendation kind can be tried in the demo: the seeded 15 days of use and the simulated EC2's
Capacity Block extension offerings make shrink, cancel, select, extend and end date appear, and the committed
reservation beside a full one of its shape move and split; each applies
once from its page (the page is the confirmation), is audited, and changes what it says; observe mode
applies nothing and shows the command."""

import datetime

import pytest
from django.contrib.contenttypes.models import ContentType
from django.urls import reverse
from django.utils import timezone

from reservations.models import CapacityReservation, EC2NodeClass, Recommendation
from scheduling.models import AuditEntry
from tests.support.clusters import use_cluster

pytestmark = pytest.mark.django_db
CB_0005, ODCR_0001, ODCR_0003, ODCR_0009 = (f"cr-0a1b2c3d4e5f6000{n}" for n in (5, 1, 3, 9))
COMMITTED, DESTINATION = "cr-0a1b2c3d4e5f60012", "cr-0a1b2c3d4e5f60013"


@pytest.fixture
def demo_world(demo_world_for_module, db):
    """Every test here builds on the demo world: it is seeded once for the module (tests/conftest.py),
    and each test's own writes are rolled back after it."""


@pytest.fixture
def control(settings):
    settings.KARPWEB_MODE = "control"
    settings.KARPWEB_PROVIDER = "simulated"
    use_cluster(connection="simulated")


def rec_of(kind, reservation_id):
    return Recommendation.objects.get(kind=kind, reservation__reservation_id=reservation_id)


def test_the_demo_has_every_kind(demo_world):
    kinds = set(Recommendation.objects.values_list("kind", flat=True))
    assert kinds == set(Recommendation.Kind.values) - {"reclaim"}  # the loop reclaims (tests/ec2/test_lending.py)
    assert [o["hours"] for o in rec_of("extend", CB_0005).details["offerings"]] == [24, 48]
    assert rec_of("shrink", ODCR_0001).target_count == 8  # a peak of 7 by day, plus one
    # 12 units, 8 committed, 4 needed (a peak of 3 by day, plus one): the 4 above the commitment: 3 go where
    # staging-use1 pays on-demand, 1 to research (or the shrink to 8 stops paying for all 4: one choice).
    move, split = rec_of("move", COMMITTED), rec_of("split", COMMITTED)
    assert (move.details["count"], move.details["destination"], move.details["cluster"]) == (3, DESTINATION, "staging-use1")
    assert (split.details["count"], split.details["shareWith"]) == (1, "210987654321")
    assert (move.savings_per_month, split.savings_per_month) == (275.94, 91.98)  # 3 and 1 x $0.126/h x 730 h


def apply(client, rec, **extra):
    return client.post(reverse("reservations:recommendation_apply", args=[rec.pk]),
                       {"computed_at": rec.computed_at.isoformat(), **extra})


def audit_entries(model_object):
    return AuditEntry.objects.filter(content_type=ContentType.objects.get_for_model(model_object),
                                     object_id=str(model_object.pk))


@pytest.mark.parametrize("kind,reservation_id", [("shrink", ODCR_0001), ("cancel", ODCR_0009), ("select", ODCR_0009),
                                                 ("extend", CB_0005), ("end-date", ODCR_0003), ("move", COMMITTED),
                                                 ("split", COMMITTED)])
def test_each_kind_applies_once_from_its_page_and_is_audited(demo_world, control, operator_client, kind, reservation_id):
    rec = rec_of(kind, reservation_id)
    page = operator_client.get(reverse("reservations:recommendation", args=[rec.pk])).content.decode()
    assert 'id="apply-button"' in page, f"{kind}: the page offers Apply"
    before = CapacityReservation.objects.get(reservation_id=reservation_id)
    later = (timezone.now() + datetime.timedelta(days=60)).replace(second=0, microsecond=0)
    extra = {"offering": rec.details["offerings"][0]["offering_id"], "confirm_not_advised": "on"} if kind == "extend" else {}
    extra.update({"end_date": later.strftime("%Y-%m-%dT%H:%M")} if kind == "end-date" else {})
    for _ in range(2):  # a double click acts once
        assert apply(operator_client, rec, **extra).status_code == 302
    rec.refresh_from_db()
    assert rec.state == "applied" and rec.applied_by == "otto"
    after = CapacityReservation.objects.get(reservation_id=reservation_id)
    assert audit_entries(after).count() == 1
    if kind == "shrink":
        assert (after.total_instance_count, after.available_instance_count) == (8, 2)
    elif kind == "cancel":
        assert after.state == "cancelled"
    elif kind == "select":
        terms = EC2NodeClass.objects.get(name="default").capacity_reservation_selector_terms
        assert terms.count({"id": ODCR_0009}) == 1
        assert audit_entries(EC2NodeClass.objects.get(name="default")).count() == 1
    elif kind == "extend":
        assert after.end_date == before.end_date + datetime.timedelta(hours=24)
    elif kind == "move":  # 3 idle units from the committed one into the full one, audited on both
        destination = CapacityReservation.objects.get(reservation_id=DESTINATION)
        assert (after.total_instance_count, after.available_instance_count) == (9, 7)
        assert (destination.total_instance_count, destination.available_instance_count) == (5, 3)
        assert audit_entries(destination).count() == 1
    elif kind == "split":  # 1 idle unit into a new reservation of the same shape, named on the recommendation
        new = CapacityReservation.objects.get(reservation_id=rec.details["newReservationId"])
        assert (after.total_instance_count, after.available_instance_count) == (11, 9)
        assert (new.instance_type, new.availability_zone, new.total_instance_count, new.committed_instance_count) == (
            "r6i.large", "us-east-1a", 1, None)
    else:
        assert after.end_date == later


@pytest.mark.parametrize("kind,reservation_id,command", [
    ("shrink", ODCR_0001, "aws ec2 modify-capacity-reservation --capacity-reservation-id cr-0a1b2c3d4e5f60001 --instance-count 8"),
    ("cancel", ODCR_0009, "aws ec2 cancel-capacity-reservation --capacity-reservation-id cr-0a1b2c3d4e5f60009"),
    ("select", ODCR_0009, "kubectl patch ec2nodeclass default --type json -p"),
    ("extend", CB_0005, "aws ec2 purchase-capacity-block-extension --capacity-reservation-id cr-0a1b2c3d4e5f60005"),
    ("end-date", ODCR_0003, "aws ec2 modify-capacity-reservation --capacity-reservation-id cr-0a1b2c3d4e5f60003 --end-date-type limited"),
    ("move", COMMITTED, "aws ec2 move-capacity-reservation-instances --source-capacity-reservation-id cr-0a1b2c3d4e5f60012 "
                        "--destination-capacity-reservation-id cr-0a1b2c3d4e5f60013 --instance-count 3"),
    ("split", COMMITTED, "aws ec2 create-capacity-reservation-by-splitting --source-capacity-reservation-id "
                         "cr-0a1b2c3d4e5f60012 --instance-count 1"),
])
def test_observe_mode_shows_the_command_and_applies_nothing(demo_world, settings, operator_client, kind, reservation_id, command):
    settings.KARPWEB_MODE = "observe"
    rec = rec_of(kind, reservation_id)
    page = operator_client.get(reverse("reservations:recommendation", args=[rec.pk])).content.decode()
    assert command in page and 'id="apply-button"' not in page
    refused = apply(operator_client, rec)
    assert refused.status_code in (400, 409) and "observe mode" in refused.content.decode()
    rec.refresh_from_db()
    assert rec.state == "open"


def test_a_capacity_block_offering_not_sold_is_refused(demo_world, control, operator_client):
    rec = rec_of("extend", CB_0005)
    refused = apply(operator_client, rec, offering="cbeo-nope")
    assert refused.status_code == 400 and "is not one of this recommendation" in refused.content.decode()


def test_every_place_that_lists_the_kinds_knows_move_and_split(demo_world, viewer_client, admin_user_client):
    """The list page's kind filter, the API's filter and schema, the metric's kind label and the admin's filter:
    each offers move and split, and filtering by them finds the demo's two."""
    import json

    listing = viewer_client.get(reverse("reservations:recommendations"), {"kind": "move"}).content.decode()
    assert 'value="move"' in listing and 'value="split"' in listing
    assert listing.count("move units</a>") == 1 and "split off and share</a>" not in listing
    assert 'id="total-per-month">$275.94</strong>' in listing

    found = viewer_client.get("/api/v1/recommendations/", {"kind": ["move", "split"]}).json()
    assert sorted((r["kind"], r["reservationID"]) for r in found["results"]) == [("move", COMMITTED), ("split", COMMITTED)]
    refused = viewer_client.get("/api/v1/recommendations/", {"kind": "merge"})
    assert refused.status_code == 400 and "kind" in refused.json()
    schema = json.loads(viewer_client.get("/api/schema/", {"format": "json"}).content)
    kinds = schema["components"]["schemas"]["RecommendationKindEnum"]["enum"]
    assert {"move", "split"} <= set(kinds) and set(kinds) == set(Recommendation.Kind.values)

    scrape = viewer_client.get("/metrics").content.decode()
    assert 'karpweb_recommendation_savings_dollars_per_month{kind="move"} 275.94' in scrape
    assert 'karpweb_recommendation_savings_dollars_per_month{kind="split"} 91.98' in scrape

    admin = admin_user_client.get("/admin/reservations/recommendation/", {"kind__exact": "split"}).content.decode()
    assert "?kind__exact=move" in admin and "1 recommendation" in admin
