"""Template context every console page shares."""

from django.utils.functional import SimpleLazyObject


def cluster_freshness(request):
    """How current the mirrored cluster is, read only by pages that show it (one query)."""
    from scheduling.models import WatchState

    if not request.user.is_authenticated:
        return {}
    return {"cluster_state": SimpleLazyObject(WatchState.current)}
