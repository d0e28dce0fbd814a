"""One time format on every page: karpweb writes a time as "2026-11-25 19:40 UTC" (utc_minute and kube_time in
scheduling/templatetags/karpweb.py), never as an ISO timestamp ("2026-11-28T01:55:37.082379Z"). Every
console page of the URLconf is rendered over the seeded demo: the pages without arguments, and each page
with arguments for every object of the demo that has a page (and the pages under it: edit, mode)."""

import pytest
from django.urls import URLPattern, URLResolver, get_resolver, resolve, reverse
from django.utils import timezone

from reservations.models import CapacityReservation
from tests.support.page_text import RAW_TIME, visible_text

pytestmark = pytest.mark.django_db

# Not pages of the console: the admin has its own tests, the API answers JSON, the rest are not pages.
NOT_PAGES = ("admin", "api", "metrics", "healthz", "favicon.ico", "oidc", "logout")
# Pages with arguments no demo object gives, each for a reason.
NOT_FROM_OBJECTS = {
    "reservations:open_trap_yaml",  # a YAML file to apply, not a page
    "reservations:recommendation_apply",  # answers a POST from the recommendation's page
    "reservations:buy_approve",  # answer POSTs from a waiting pod's page
    "reservations:buy_purchase",
}


def url_patterns(resolver=None, prefix="", namespace=""):
    """(route, full name, pattern) for every URL of the URLconf, included ones too."""
    for entry in (resolver or get_resolver()).url_patterns:
        route = prefix + str(entry.pattern)
        if isinstance(entry, URLResolver):
            inner = f"{namespace}{entry.namespace}:" if entry.namespace else namespace
            yield from url_patterns(entry, route, inner)
        elif isinstance(entry, URLPattern) and entry.name:
            yield route, namespace + entry.name, entry


def console_patterns():
    return [(route, name, entry) for route, name, entry in url_patterns()
            if not route.startswith(NOT_PAGES)]


def object_pages() -> list[tuple[str, dict]]:
    """(route, URL arguments) of the pages of the demo's objects (ten of each kind), each also by name only
    (a fleet of one's links)."""
    from django.apps import apps

    found = []
    for model in apps.get_models():
        if hasattr(model, "get_absolute_url") and model._meta.app_label in ("fleet", "reservations", "scheduling"):
            for instance in model.objects.all()[:10]:
                match = resolve(instance.get_absolute_url())
                by_name = {key: value for key, value in match.kwargs.items() if key != "cluster"}
                route = match.route.removeprefix("clusters/<str:cluster>/")
                found += [one for one in ((match.route, match.kwargs), (route, by_name)) if one not in found]
    return found


def console_urls() -> tuple[list[str], list[str]]:
    """Every console page's URL (an object's page and the pages under it: edit, mode), and the names of
    the pages with arguments that no object reached."""
    objects, urls, uncovered = object_pages(), [], []
    for route, name, entry in console_patterns():
        if not entry.pattern.converters:
            urls.append(reverse(name))
            continue
        mine = [reverse(name, kwargs=kwargs) for object_route, kwargs in objects
                if route.startswith(object_route) and set(kwargs) == set(entry.pattern.converters)]
        urls += [url for url in mine if url not in urls]
        if not mine and name not in NOT_FROM_OBJECTS:
            uncovered.append(route)
    return urls, uncovered


def excluded_from_planning(reservation: CapacityReservation) -> None:
    """An operator's override as the admin sets it, at a time with microseconds."""
    reservation.planning_excluded = True
    reservation.planning_excluded_by = "olga"
    reservation.planning_excluded_reason = "kept for the failover drill"
    reservation.planning_excluded_at = timezone.now().replace(microsecond=82379)
    reservation.save()


def test_no_page_shows_a_raw_iso_time(admin_user_client, demo_world):
    excluded_from_planning(CapacityReservation.objects.first())  # among the ten reservations walked
    urls, uncovered = console_urls()
    assert uncovered == [], "pages with arguments the walk did not reach"
    offenders = {}
    for url in urls:
        response = admin_user_client.get(url)
        if response.status_code != 200 or not response["Content-Type"].startswith("text/html"):
            continue
        found = sorted({match.group(0) for match in RAW_TIME.finditer(visible_text(response.content.decode()))})
        if found:
            offenders[url] = found
    assert len(urls) > 40
    assert offenders == {}


def test_the_walk_reaches_the_override_and_the_checks_find_a_raw_time():
    """So that an empty answer above means something."""
    assert visible_text('<p title="2026-11-28T01:55:37Z">since <b>2026-11-28T01:55:37.082379Z</b></p>'
                        "<script>x='2026-11-28T01:55:37Z'</script>") == "since  2026-11-28T01:55:37.082379Z"
    text = "at 2026-11-28 01:55 UTC, 2026-11-28T01:55Z, 2026-11-28 01:55:37.082379+00:00"
    assert [m.group(0) for m in RAW_TIME.finditer(text)] == ["2026-11-28T01:55", "2026-11-28 01:55:37.082379"]
