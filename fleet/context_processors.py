"""The header's cluster picker and every heading's "which cluster" (fleet/middleware.py)."""

from django.utils.functional import SimpleLazyObject

from fleet.middleware import ALL, PARAMETER


def cluster_choice(request):
    fleet = getattr(request, "fleet", None)
    if fleet is None:  # a path the middleware does not scope (the admin)
        return {}

    def choices():
        """(label, link, chosen) for "all clusters" and each cluster: this page, its filters kept, its page
        number dropped (another cluster may have fewer pages)."""
        query = request.GET.copy()
        query.pop("page", None)
        links = []
        for value, label in [(ALL, "all clusters")] + [(cluster.name, cluster.name) for cluster in fleet.clusters]:
            query[PARAMETER] = value
            chosen = (fleet.shown is None) if value == ALL else (fleet.shown is not None and fleet.shown.name == value)
            links.append((label, f"{request.path}?{query.urlencode()}", chosen))
        return links

    return {"fleet": fleet, "cluster_choices": SimpleLazyObject(choices)}
