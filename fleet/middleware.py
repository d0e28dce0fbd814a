"""Which cluster the console shows: one, or the whole fleet (fleet/scope.py).

`?cluster=<name>` on any console page chooses a cluster and remembers it in the session,
`?cluster=all` forgets it (the whole fleet again); an unknown name keeps what was shown and says so.
While the request runs, the chosen cluster's scope is open: every page, written for one cluster,
shows that cluster's rows and the reservations its account sees. The parameter is consumed here
(taken out of request.GET), so a list's own filters never read "all" as a cluster's name; a link
with ?cluster= still shows the same cluster to whoever opens it.

The API, /metrics, the admin and the health check are not scoped by the session: the API reads the
whole fleet and filters with its own ?cluster=, the admin edits any cluster's rows.

The fleet's clusters are the process's one kept list (fleet.scope.fleet_clusters: a minute, forgotten
when a cluster or an account is saved or deleted in this process); a name not in the kept list is
looked up afresh once (a cluster another process just added). So the scope and the header's picker
cost no query on most pages, and at most one."""

from django.contrib import messages
from django.utils.functional import cached_property

from fleet import access
from karpweb.roles import requester_access
from fleet.models import Cluster
from fleet.scope import cluster_scope, fleet_clusters
from karpweb.jsonsafe import printable

SESSION_KEY = "karpweb_cluster"
PARAMETER = "cluster"
ALL = "all"
# Paths the session's choice does not scope: they read the whole fleet or filter for themselves.
UNSCOPED_PREFIXES = ("/api/", "/metrics", "/admin/", "/healthz", "/static/", "/favicon.ico")


class Fleet:
    """The fleet's clusters as this request sees them, and the one it shows (None: all)."""

    def __init__(self):
        self.shown: Cluster | None = None
        self._fresh = False

    @cached_property
    def clusters(self) -> list[Cluster]:
        return access.visible_clusters(fleet_clusters())  # a scoped user's picker names no other

    @property
    def several(self) -> bool:
        return len(self.clusters) > 1

    def named(self, name: str) -> Cluster | None:
        found = next((cluster for cluster in self.clusters if cluster.name == name), None)
        if found is None and not self._fresh:
            # Perhaps added by another process since this one read the list: read it again, once.
            self._fresh = True
            self.__dict__["clusters"] = access.visible_clusters(fleet_clusters(fresh=True))
            found = next((cluster for cluster in self.clusters if cluster.name == name), None)
        return found


# Paths that read no one's rows on a requester's behalf, or that are not a person's (the admin is the
# staff's: administrators see the whole fleet there).
NO_REQUESTER = ("/metrics", "/healthz", "/static/", "/favicon.ico", "/admin/", "/api/schema/", "/api/docs/")


class RequesterAccess:
    """Opens the requester's Access (fleet/access.py) for the request: a page's from its session user;
    the API's once DRF has authenticated it (accounts.tokens), until then unresolved (fail closed)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if request.path.startswith(NO_REQUESTER):
            opened = None
        elif request.path.startswith("/api/"):
            opened = access.UNRESOLVED
        else:
            opened = requester_access(request.user)
        with access.opened(opened):
            return self.get_response(request)


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
