"""Which cluster the console shows: one, or the whole fleet (fleet/scope.py).

`?cluster=<name>` on any console page chooses a cluster and remembers it in the session,
`?cluster=all` forgets it (the whole fleet again); an unknown name keeps what was shown and says so.
While the request runs, the chosen cluster's scope is open: every page, written for one cluster,
shows that cluster's rows and the reservations its account sees. The parameter is consumed here
(taken out of request.GET), so a list's own filters never read "all" as a cluster's name; a link
with ?cluster= still shows the same cluster to whoever opens it.

The API, /metrics, the admin and the health check are not scoped by the session: the API reads the
whole fleet and filters with its own ?cluster=, the admin edits any cluster's rows.

The fleet's clusters are read once per request, lazily (`request.fleet`): the scope and the header's
picker share that one query. Whether the fleet has several clusters (the picker shows, the headings
name the cluster) is cached per process for a minute and forgotten when a cluster is saved or
deleted here, so a fleet of one pays no query on any page."""

import threading
import time

from django.contrib import messages
from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver
from django.utils.functional import cached_property

from fleet.models import Cluster
from karpweb.jsonsafe import printable
from fleet.scope import cluster_scope

SESSION_KEY = "karpweb_cluster"
PARAMETER = "cluster"
ALL = "all"
# Paths the session's choice does not scope: they read the whole fleet or filter for themselves.
UNSCOPED_PREFIXES = ("/api/", "/metrics", "/admin/", "/healthz", "/static/", "/favicon.ico")
# How long a process believes its count of clusters (another process's new cluster shows within it).
COUNT_TTL_SECONDS = 60
_count: tuple[float, int] | None = None
_count_lock = threading.Lock()


def cluster_count() -> int:
    """How many clusters the fleet has: one query a minute per process at most."""
    global _count
    cached = _count
    if cached is not None and time.monotonic() - cached[0] < COUNT_TTL_SECONDS:
        return cached[1]
    count = Cluster.objects.count()
    with _count_lock:
        _count = (time.monotonic(), count)
    return count


@receiver(post_save, sender=Cluster)
@receiver(post_delete, sender=Cluster)
def _cluster_changed(sender, **kwargs):
    forget_count()


def forget_count() -> None:
    """Forget the cached count (a cluster changed; a test rolled back the clusters it made)."""
    global _count
    with _count_lock:
        _count = None


class Fleet:
    """The fleet's clusters as this request sees them, and the one it shows (None: all)."""

    def __init__(self):
        self.shown: Cluster | None = None

    @cached_property
    def clusters(self) -> list[Cluster]:
        return list(Cluster.objects.select_related("account").order_by("name"))

    @cached_property
    def several(self) -> bool:
        if "clusters" in self.__dict__:  # read already: no need to ask
            return len(self.clusters) > 1
        return cluster_count() > 1

    def named(self, name: str) -> Cluster | None:
        return next((cluster for cluster in self.clusters if cluster.name == name), None)


class ClusterChoice:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        request.fleet = fleet = Fleet()
        if request.path.startswith(UNSCOPED_PREFIXES) or not hasattr(request, "session"):
            return self.get_response(request)
        asked = request.GET.get(PARAMETER)
        if asked is not None:
            query = request.GET.copy()
            del query[PARAMETER]
            request.GET = query
            self.choose(request, fleet, asked.strip())
        name = request.session.get(SESSION_KEY)
        if name:
            fleet.shown = fleet.named(name)
            if fleet.shown is None:
                # Renamed or deleted since it was chosen: the whole fleet, said once.
                del request.session[SESSION_KEY]
                messages.warning(request, f'cluster: "{name}" no longer exists; showing all clusters.')
        if fleet.shown is None:
            return self.get_response(request)
        with cluster_scope(fleet.shown):
            return self.get_response(request)

    def choose(self, request, fleet: Fleet, asked: str) -> None:
        if asked == ALL or asked == "":
            request.session.pop(SESSION_KEY, None)
            return
        if fleet.named(asked) is None:
            current = request.session.get(SESSION_KEY) or "all clusters"
            names = ", ".join(cluster.name for cluster in fleet.clusters[:10])
            messages.error(request, f'cluster: no cluster is named "{printable(asked, 63)}" (the fleet has: {names}); '
                                    f"still showing {current}.")
            return
        request.session[SESSION_KEY] = asked
