"""The admin reads as English and offers no dead button: plurals are not a word with "s" stuck on
("Reservation visibilitys"), and what EC2 and Kubernetes own (mirrored, the next sync brings a row back)
has no Delete, while every Delete the admin does offer over the demo leads to a deletion, never to
"Cannot delete"."""

import re

import pytest
from django.contrib import admin
from django.urls import reverse

from reservations.models import CapacityReservation, ReservationVisibility
from scheduling.models import InstanceType, KarpenterLaunch, Node, NodeClaim, NodePool, Offering, Pod

pytestmark = pytest.mark.django_db

REGISTERED = sorted(admin.site._registry, key=lambda model: model._meta.label)
MIRRORED = [CapacityReservation, ReservationVisibility, InstanceType, Offering, NodeClaim, Node, Pod]
# A plural English makes otherwise: "visibility" -> "visibilities", "launch" -> "launches", "class" -> "classes".
NOT_PLUS_S = re.compile(r"([^aeiou]y|s|x|z|ch|sh)$", re.I)


def admin_url(obj, view):
    return reverse(f"admin:{obj._meta.app_label}_{obj._meta.model_name}_{view}", args=[obj.pk])


def naive_plural(model) -> bool:
    singular, plural = str(model._meta.verbose_name), str(model._meta.verbose_name_plural)
    return bool(NOT_PLUS_S.search(singular)) and plural == singular + "s"


def test_no_plural_is_a_word_with_s_stuck_on():
    assert [model._meta.label for model in REGISTERED if naive_plural(model)] == []
    assert ReservationVisibility._meta.verbose_name_plural == "reservation visibilities"
    assert (KarpenterLaunch._meta.verbose_name, KarpenterLaunch._meta.verbose_name_plural) == \
        ("Karpenter launch", "Karpenter launches")


def test_the_index_says_the_plurals(admin_user_client):
    page = admin_user_client.get(reverse("admin:index")).content.decode()
    assert "Reservation visibilities" in page and "Karpenter launches" in page and "visibilitys" not in page


def test_mirrored_rows_offer_no_delete(admin_user_client, demo_world):
    for model in MIRRORED:
        row = model.objects.first()
        assert row is not None, model
        page = admin_user_client.get(admin_url(row, "change")).content.decode()
        assert admin_url(row, "delete") not in page, model
        assert admin_user_client.post(admin_url(row, "delete"), {"post": "yes"}).status_code == 403, model
        assert model.objects.filter(pk=row.pk).exists()


def test_every_delete_offered_leads_to_a_deletion(admin_user_client, demo_world):
    """Over the demo, each model's first row whose admin offers a Delete: the confirmation asks, it does not
    answer "Cannot delete" (a row that goes with it the admin may not delete, or a protected one)."""
    offered, dead = [], []
    for model, model_admin in admin.site._registry.items():
        row = model._default_manager.first()
        if row is None or not model_admin.has_delete_permission(type("R", (), {"user": admin_user_client.user})(), row):
            continue
        offered.append(model._meta.label)
        page = admin_user_client.get(admin_url(row, "delete"))
        if page.status_code != 200 or "Cannot delete" in page.content.decode():
            dead.append(model._meta.label)
    assert "scheduling.NodePool" in offered  # the simulated world's rows are its cluster: deleted here
    assert dead == []


def test_an_account_without_clusters_is_deleted_with_what_it_sees(admin_user_client, demo_world):
    """Its reservation visibilities go with it (they have no Delete of their own); one with clusters offers none."""
    from fleet.models import AwsAccount

    with_clusters = AwsAccount.objects.filter(clusters__isnull=False).first()
    assert admin_url(with_clusters, "delete") not in admin_user_client.get(admin_url(with_clusters, "change")).content.decode()
    alone = AwsAccount.objects.create(account_id="999988887777", name="spare")
    ReservationVisibility.objects.create(reservation=CapacityReservation.objects.first(), account=alone, shared=True)
    assert "Cannot delete" not in admin_user_client.get(admin_url(alone, "delete")).content.decode()
    assert admin_user_client.post(admin_url(alone, "delete"), {"post": "yes"}).status_code == 302
    assert not AwsAccount.objects.filter(pk=alone.pk).exists()
    assert not ReservationVisibility.objects.filter(account_id=alone.pk).exists()
