"""Which cluster the code is working on: the cluster scope.

karpweb's loop, sync and pages were written for one cluster. In a fleet they keep working unchanged
inside a *scope*: while `cluster_scope(cluster)` is open, every Kubernetes-side model's default
manager (fleet.managers.ClusterScopedManager) reads only that cluster's rows, every row created
without a cluster gets it, and CapacityReservation.objects reads only the reservations that
cluster's account can see in its region. Outside any scope the managers read the whole fleet, and a
row created without a cluster goes to `default_cluster()`: the only cluster, or the one flagged
default; with several and none flagged that is an error (NoClusterScope), never a guess.

    with cluster_scope(cluster):         # or cluster_scope("prod-eu"), by name
        run_the_single_cluster_code()

Every loop step and the watch run in their cluster's scope, whatever the number of clusters
(scheduling/loop/runs.scope_for), and what they talk to comes from the cluster's row: the settings
describe only the first cluster, which the migration (or an empty database) makes (fleet/defaults.py).
Inside loop code (`loop_code()`: a step under runs.run_step, the watch), touching a Kubernetes-side
row with no scope open raises NoClusterScope: work that is fleet-wide on purpose (the EC2 sync's
ledger, recommendations, pruning) says so with `unscoped()`; pages, the admin, the API and code
outside the loop read the whole fleet unscoped, as before.

Scopes nest (the inner one wins until it closes; `unscoped()` opens a fleet-wide one inside a
cluster's). The scope is a contextvars.ContextVar: asyncio tasks inherit it, but a thread starts
with none (contextvars are per thread): a thread started inside a scope sees the whole fleet and
writes to default_cluster() unless its target is wrapped in `carry(target)`, which runs it in the
scope of the code that wrapped it.

The fleet's clusters (and so the default) are kept per process for a minute (`fleet_clusters`, the
one list the scope, the pages' picker and the links read); saving or deleting a Cluster or an
AwsAccount forgets it (signals below), and `forget_default()` forgets it by hand (a test that flushed
the database)."""

import contextlib
import contextvars
import functools
import threading
import time
from collections.abc import Callable, Iterator

from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver

from fleet.defaults import account_fields, cluster_fields
from fleet.models import AwsAccount, Cluster

# The active cluster; UNSCOPED (None) is the whole fleet.
_active: contextvars.ContextVar[Cluster | None] = contextvars.ContextVar("karpweb_cluster", default=None)
# Whether the innermost scope is an explicit `unscoped()` (fleet-wide on purpose), not merely none.
_fleet_wide: contextvars.ContextVar[bool] = contextvars.ContextVar("karpweb_fleet_wide", default=False)
# Whether loop code runs here (a step under runs.run_step, the watch): it must name its scope.
_in_loop: contextvars.ContextVar[bool] = contextvars.ContextVar("karpweb_loop_code", default=False)
# The fleet's clusters as this process last read them: (when, clusters by name). The clusters are a
# few rows read on most requests and every unscoped save; another process's change shows within the TTL.
CLUSTERS_TTL_SECONDS = 60
_kept: tuple[float, list[Cluster], dict[int, str]] | None = None
_lock = threading.RLock()  # re-entered: making the first cluster saves one, whose signal forgets the list


class NoClusterScope(RuntimeError):
    """A cluster is required (a row is created, or code asks which cluster it works on), no scope is
    open, and the fleet has several clusters with none flagged default; or loop code touched a
    Kubernetes-side row with no scope open (`require_scope`)."""


@contextlib.contextmanager
def cluster_scope(cluster: Cluster | str) -> Iterator[Cluster]:
    """Work on `cluster` (a Cluster, or its name) until the block ends; the previous scope comes back
    afterwards, whatever the block raised."""
    if isinstance(cluster, str):
        name = cluster
        cluster = Cluster.objects.select_related("account").filter(name=name).first()
        if cluster is None:
            raise Cluster.DoesNotExist(f'cluster: no cluster is named "{name}"')
    elif not isinstance(cluster, Cluster) or cluster.pk is None:
        raise TypeError(f"cluster_scope takes a saved Cluster or a cluster's name, not {cluster!r}")
    token = _active.set(cluster)
    try:
        yield cluster
    finally:
        _active.reset(token)


@contextlib.contextmanager
def unscoped() -> Iterator[None]:
    """The whole fleet, even inside a cluster's scope (fleet pages, cross-cluster totals); in loop
    code, the one way to touch Kubernetes-side rows fleet-wide (`require_scope`)."""
    token, fleet_wide = _active.set(None), _fleet_wide.set(True)
    try:
        yield
    finally:
        _fleet_wide.reset(fleet_wide)
        _active.reset(token)


@contextlib.contextmanager
def loop_code() -> Iterator[None]:
    """Mark the block as loop code (runs.run_step's step, the watch): in it, a Kubernetes-side query
    or save needs a cluster scope or an explicit `unscoped()` (`require_scope`). A fleet-wide scope
    opened around it does not carry in: the step says itself where it works fleet-wide."""
    token, fleet_wide = _in_loop.set(True), _fleet_wide.set(False)
    try:
        yield
    finally:
        _fleet_wide.reset(fleet_wide)
        _in_loop.reset(token)


def require_scope(model) -> None:
    """Called by the Kubernetes-side managers (fleet.managers) before a query or a save: in loop code,
    no cluster scope and no explicit `unscoped()` is a bug (the rows of whichever cluster would be
    read or written), raised as NoClusterScope naming the model; elsewhere nothing."""
    if _in_loop.get() and _active.get() is None and not _fleet_wide.get():
        name = getattr(getattr(model, "_meta", None), "object_name", None) or getattr(model, "__name__", str(model))
        raise NoClusterScope(
            f"{name}: loop code touched Kubernetes-side rows with no cluster scope open; run it in "
            "fleet.scope.cluster_scope(cluster), or in fleet.scope.unscoped() where it works on the whole fleet")


def scope_of(row) -> contextlib.AbstractContextManager:
    """The scope of a Kubernetes-side row's own cluster (what its cluster sees: the reservations of its
    account and region), whatever scope is open (none to open when it is the scope's cluster)."""
    if row.cluster_id == current_cluster_id():
        return contextlib.nullcontext()
    return cluster_scope(row.cluster)


def current_cluster() -> Cluster | None:
    """The cluster of the innermost open scope; None when the code works on the whole fleet."""
    return _active.get()


def current_cluster_id() -> int | None:
    cluster = _active.get()
    return None if cluster is None else cluster.pk


def carry(target: Callable) -> Callable:
    """`target`, to run in the scope open now, from any thread (threading.Thread(target=carry(f)))."""
    context = contextvars.copy_context()

    @functools.wraps(target)
    def run(*args, **kwargs):
        return context.copy().run(target, *args, **kwargs)

    return run


def working_cluster() -> Cluster:
    """The cluster code that needs one works on: the scope's, else default_cluster()."""
    return _active.get() or default_cluster()


def working_cluster_id() -> int:
    """The cluster a Kubernetes-side row written without one gets (fleet.managers: on save and
    bulk_create): the scope's, else default_cluster(). No query inside a scope or once the default
    is cached."""
    cluster = _active.get()
    return cluster.pk if cluster is not None else default_cluster().pk


def working_cluster_id_or_none() -> int | None:
    """working_cluster_id(), or None where several clusters and no scope leave it open (the default
    of rows that may be fleet-wide, such as the audit log's sign-ins)."""
    try:
        return working_cluster_id()
    except NoClusterScope:
        return None


def default_cluster() -> Cluster:
    """The only cluster, or the one flagged `is_default`; NoClusterScope when there are several and
    none is flagged. An empty fleet (a database migrated and then emptied) gets its cluster from the
    settings, as the migration to the fleet made it (fleet.defaults)."""
    clusters = fleet_clusters()
    if not clusters:
        with _lock:
            _make_first()
            clusters = fleet_clusters(fresh=True)
    default = next((cluster for cluster in clusters if cluster.is_default), None)
    if default is None and len(clusters) == 1:
        default = clusters[0]
    if default is None:
        _refuse()
    return default


def several_clusters() -> bool:
    """Whether the fleet has more than one cluster (from the kept list: no query most of the time)."""
    return len(fleet_clusters()) > 1


def fleet_clusters(fresh: bool = False) -> list[Cluster]:
    """Every cluster with its account, by name: the process's one list of the fleet (the default
    cluster, the pages' picker and the links' cluster names all read it). One query a minute per
    process at most (`fresh`: now); forgotten when a cluster or an account is saved or deleted here."""
    global _kept
    kept = _kept
    if not fresh and kept is not None and time.monotonic() - kept[0] < CLUSTERS_TTL_SECONDS:
        return kept[1]
    with _lock:
        # The base manager: the process's list is the whole fleet's, whoever's request fills it.
        clusters = list(Cluster._base_manager.select_related("account").order_by("name"))
        if not _changed_in_this_transaction():  # uncommitted, perhaps rolled back: never kept for others
            _kept = (time.monotonic(), clusters, {cluster.pk: cluster.name for cluster in clusters})
    return clusters


# The transaction (its outermost atomic block of the code's own) that changed a cluster or an account:
# until it ends, what this thread reads of the fleet is not kept (the change may yet be rolled back).
_changed_in = None


def _own_transaction():
    """The outermost atomic block of the code's own (not the one a test wraps every test in), or None."""
    from django.db import connection

    return next((block for block in connection.atomic_blocks if not block._from_testcase), None)


def _changed_in_this_transaction() -> bool:
    from django.db import connection

    return _changed_in is not None and any(block is _changed_in for block in connection.atomic_blocks)


def cluster_named(name: str) -> Cluster | None:
    """The cluster called `name` from the kept list; read afresh once when it is not there (another
    process may have just added it). None when there is none."""
    found = next((cluster for cluster in fleet_clusters() if cluster.name == name), None)
    if found is None:
        found = next((cluster for cluster in fleet_clusters(fresh=True) if cluster.name == name), None)
    return found


def cluster_name(cluster_id: int) -> str:
    """The name of the cluster with primary key `cluster_id` (kept list; one fresh read if missing)."""
    # Looked up by key, not by walking the list: a list page links a cluster's object on every row.
    clusters, kept = fleet_clusters(), _kept
    names = kept[2] if kept is not None and kept[1] is clusters else {cluster.pk: cluster.name for cluster in clusters}
    name = names.get(cluster_id)
    if name is None:
        name = next((cluster.name for cluster in fleet_clusters(fresh=True) if cluster.pk == cluster_id), None)
    if name is None:
        raise Cluster.DoesNotExist(f"cluster: no cluster has id {cluster_id}")
    return name


def kept_cluster(cluster_id: int) -> Cluster | None:
    """The Cluster (with its account) whose primary key is `cluster_id`, from the kept list (one fresh
    read if missing); None when there is none."""
    found = next((cluster for cluster in fleet_clusters() if cluster.pk == cluster_id), None)
    if found is None:
        found = next((cluster for cluster in fleet_clusters(fresh=True) if cluster.pk == cluster_id), None)
    return found


def forget_default() -> None:
    """Forget the kept list of clusters (and so the default): a cluster changed, or a test flushed them.
    A change inside a transaction is forgotten again when it commits, and nothing read before then is kept."""
    global _kept, _changed_in
    with _lock:
        _kept = None
        block = _own_transaction()
        if block is not None and block is not _changed_in:
            from django.db import transaction

            _changed_in = block
            transaction.on_commit(forget_default)


forget_clusters = forget_default


def _refuse():
    names = ", ".join(Cluster.objects.order_by("name").values_list("name", flat=True)[:10])
    raise NoClusterScope(
        f"cluster: karpweb has several clusters ({names}) and no cluster scope is open; open one with "
        "fleet.scope.cluster_scope(cluster), or flag one cluster as the default")


def _make_first() -> Cluster:
    from django.conf import settings
    from django.db import transaction

    with transaction.atomic():
        account_defaults = account_fields(settings)
        account, _ = AwsAccount.objects.get_or_create(account_id=account_defaults.pop("account_id"),
                                                      defaults=account_defaults)
        fields = cluster_fields(settings)
        cluster, _ = Cluster.objects.get_or_create(name=fields.pop("name"), defaults={**fields, "account": account})
    return cluster


@receiver(post_save, sender=Cluster)
@receiver(post_delete, sender=Cluster)
@receiver(post_save, sender=AwsAccount)
@receiver(post_delete, sender=AwsAccount)
def _cluster_changed(sender, **kwargs):
    forget_default()
