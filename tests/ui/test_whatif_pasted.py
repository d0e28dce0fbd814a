"""What-if on a pasted or uploaded world: no rows of the database needed (tests/ui/test_whatif.py seeds the
demo world once for its module; these must not see it)."""

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from tests.ui.test_whatif import WORLD

pytestmark = pytest.mark.django_db


def test_whatif_runs_a_pasted_world(viewer_client):
    page = viewer_client.post(reverse("scheduling:whatif"), {"world": json.dumps(WORLD)}).content.decode()
    assert "New nodes (2)" in page
    assert "cr-0abc" in page and "on-demand in us-east-1a" in page


def test_whatif_accepts_an_uploaded_file(viewer_client):
    upload = SimpleUploadedFile("world.json", json.dumps(WORLD).encode(), content_type="application/json")
    page = viewer_client.post(reverse("scheduling:whatif"), {"world_file": upload}).content.decode()
    assert "New nodes (2)" in page


def test_whatif_names_bad_paths(viewer_client):
    bad = dict(WORLD, pods=[{"metadata": {"namespace": "ns", "name": "x"},
                             "spec": {"containers": [{"resources": {"requests": {"cpu": "abc"}}}]}}])
    page = viewer_client.post(reverse("scheduling:whatif"), {"world": json.dumps(bad)}).content.decode()
    assert "pods[0].spec.containers[0].resources.requests.cpu" in page and "not a quantity" in page
    page = viewer_client.post(reverse("scheduling:whatif"), {"world": "{not json"}).content.decode()
    assert "The world has problems" in page and "Traceback" not in page


def test_the_paste_tab_shows_a_reserved_price_as_under_the_price_precision(viewer_client):
    page = viewer_client.post(reverse("scheduling:whatif"), {"world": json.dumps(WORLD)}).content.decode()
    decisions = page[page.index('id="decisions"'):page.index("DECISIONS.json</h2>")]  # DECISIONS.json itself stays raw
    assert "&lt; $0.0001/h" in decisions and "$0.0960/h" in decisions  # the reserved unit and the on-demand m5.large
    assert "0.0000000096" not in decisions and "9.6e-09" not in decisions
