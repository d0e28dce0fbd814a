"""Polish an operator meets at once: a favicon, an API root that lists the API instead of a 404, and a link
from every page to the API docs."""

import pytest
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db


def test_favicon_is_served(client):
    response = client.get("/favicon.ico")
    assert response.status_code == 301 and response["Location"].endswith("favicon.svg")


def test_the_api_root_lists_the_api(viewer):
    api = APIClient()
    assert api.get("/api/v1/").status_code in (401, 403)  # not a 404, and no directory for strangers
    api.force_authenticate(viewer)
    body = api.get("/api/v1/").json()
    assert body["endpoints"]["recommendations"].endswith("/api/v1/recommendations/")
    assert body["endpoints"]["pods"].endswith("/api/v1/pods/") and body["schema"].endswith("/api/schema/")
    assert api.get("/api/v1/nothing-here/").status_code == 404


def test_every_page_links_to_the_api_docs(viewer_client):
    from django.urls import NoReverseMatch, reverse

    page = viewer_client.get(reverse("scheduling:overview")).content.decode()
    assert 'rel="icon"' in page
    try:
        docs = reverse("api-docs")
    except NoReverseMatch:
        pytest.fail("drf-spectacular-sidecar is a dependency: the API docs page exists")
    assert f'<a href="{docs}" id="api-docs-link">API docs</a>' in page


def test_the_api_index_lists_every_routed_collection(viewer):
    """The index is read from the URLconf: every router's registered collection is in it, and so are the
    collections routed by hand (alarms, open reservation traps), each at the URL its route resolves to."""
    from django.urls import resolve

    from fleet.api.urls import router as fleet_router
    from reservations.api.urls import router as reservations_router
    from scheduling.api.urls import router as scheduling_router

    api = APIClient()
    api.force_authenticate(viewer)
    endpoints = api.get("/api/v1/").json()["endpoints"]
    registered = {prefix for router in (fleet_router, reservations_router, scheduling_router)
                  for prefix, _viewset, _basename in router.registry}
    assert registered <= set(endpoints), registered - set(endpoints)
    assert {"alarms", "open-reservation-traps", "pods", "simulate", "world", "controller"} <= set(endpoints)
    for name, url in endpoints.items():
        path = url.split("testserver", 1)[-1]
        assert path == f"/api/v1/{name}/" and resolve(path).url_name != "not-found", (name, url)
