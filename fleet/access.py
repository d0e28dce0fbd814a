"""Who sees and changes which part of the fleet: role bindings (fleet.RoleBinding) give a user or a
group a role, viewer or operator, on the fleet, on an account (its clusters and the reservations it
sees) or on one cluster. The global groups viewer and operator are fleet-wide bindings; superusers
and fleet administrators hold the fleet as operators.

Enforced in one place: while a request runs, `current()` is the requester's Access, and every
Kubernetes-side model's default manager (fleet.managers), CapacityReservation.objects, Cluster.objects
and AwsAccount.objects read only what it allows; a cluster-scoped row saved by a requester who is no
operator of its cluster is refused (PermissionDenied, a 403). Request code that reads those rows
before the requester is known fails (AccessNotResolved): it never falls back to the whole fleet.
Outside requests (the loop, management commands) there is no requester and no restriction.

The middleware (fleet.middleware.RequesterAccess) opens the requester's Access for pages; the API's
authentication classes (accounts.tokens) open it once DRF has authenticated the request. A user's
Access is made from its groups and bindings in karpweb.roles.access_of."""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterable, Iterator

from django.core.exceptions import PermissionDenied
from django.db import models
from django.db.models import Q

VIEWER = "viewer"
OPERATOR = "operator"
_RANK = {None: 0, VIEWER: 1, OPERATOR: 2}


class AccessNotResolved(RuntimeError):
    """Request code read scoped rows before the requester's access was known (fail closed)."""


class Access:
    """A requester's roles: on the whole fleet, per account (primary key) and per cluster (primary key).
    The per-account and per-cluster roles are read when first needed (`bindings`: a function giving
    them): a fleet-wide viewer or operator reads the whole fleet without them, so most requests cost
    no query for them."""

    def __init__(self, fleet_role: str | None = None, account_roles: dict[int, str] | None = None,
                 cluster_roles: dict[int, str] | None = None, username: str = "", bindings=None):
        self.fleet_role, self.username = fleet_role, username
        self.narrowed_token = False  # an API token narrowed below its user (read-only or one cluster)
        self.read_only = False
        self._bindings = bindings
        self._roles = None if bindings is not None else (account_roles or {}, cluster_roles or {})

    @property
    def account_roles(self) -> dict[int, str]:
        return self._loaded()[0]

    @property
    def cluster_roles(self) -> dict[int, str]:
        return self._loaded()[1]

    def _loaded(self) -> tuple[dict[int, str], dict[int, str]]:
        if self._roles is None:
            self._roles = self._bindings()
        return self._roles

    @property
    def whole_fleet(self) -> bool:
        return self.fleet_role is not None

    def role_on(self, cluster_id: int | None, account_id: int | None) -> str | None:
        if self.fleet_role == OPERATOR:
            return OPERATOR
        roles = (self.fleet_role, self.account_roles.get(account_id), self.cluster_roles.get(cluster_id))
        return max(roles, key=_RANK.__getitem__)

    def cluster_ids(self, clusters: Iterable) -> set[int]:
        """Of `clusters` (rows with pk and account_id), those this requester may see."""
        return {c.pk for c in clusters if self.role_on(c.pk, c.account_id)}

    def may_operate(self, cluster_id: int | None, account_id: int | None) -> bool:
        return self.role_on(cluster_id, account_id) == OPERATOR

    def operates_anywhere(self) -> bool:
        return OPERATOR in (self.fleet_role, *self.account_roles.values(), *self.cluster_roles.values())

    def views_anywhere(self) -> bool:
        return bool(self.fleet_role or self.account_roles or self.cluster_roles)

    def narrowed(self, *, read_only: bool, cluster_id: int | None, account_id: int | None) -> "Access":
        """This Access as a narrowed API token has it: one cluster alone, and/or viewer at most."""
        cap = VIEWER if read_only else OPERATOR
        if cluster_id is None:
            fleet_role = min(self.fleet_role, cap, key=_RANK.__getitem__) if self.fleet_role else None
            narrowed = Access(fleet_role, {a: min(r, cap, key=_RANK.__getitem__) for a, r in self.account_roles.items()},
                              {c: min(r, cap, key=_RANK.__getitem__) for c, r in self.cluster_roles.items()},
                              username=self.username)
        else:
            role = self.role_on(cluster_id, account_id)
            narrowed = Access(None, {}, {cluster_id: min(role, cap, key=_RANK.__getitem__)} if role else {},
                              username=self.username)
        narrowed.narrowed_token, narrowed.read_only = True, read_only
        return narrowed


NOTHING = Access()


def higher_role(role: str | None, other: str) -> str | None:
    return other if _RANK[other] > _RANK[role] else role


UNRESOLVED = object()  # a request whose requester is not known yet

# None: no requester (the loop, a command): nothing is restricted.
_current: contextvars.ContextVar[Access | object | None] = contextvars.ContextVar("karpweb_access", default=None)


def current() -> Access | None:
    """The requester's Access; None outside requests. AccessNotResolved inside one whose requester is not
    known yet."""
    access = _current.get()
    if access is UNRESOLVED:
        raise AccessNotResolved("request code read the fleet's rows before the requester was known")
    return access


def current_or_unresolved() -> Access | object | None:
    return _current.get()


def restricted() -> Access | None:
    """The requester's Access when it does not cover the whole fleet; None when nothing is restricted."""
    access = current()
    return None if access is None or access.whole_fleet else access


@contextlib.contextmanager
def opened(access: Access | object | None) -> Iterator[None]:
    token = _current.set(access)
    try:
        yield
    finally:
        _current.reset(token)


def open_for_request(access: Access) -> None:
    """Make `access` the current one until the request ends (the middleware resets it)."""
    _current.set(access)


# --- the querysets a requester reads (one rule for every manager) -------------------------------

class RequesterQuerySet(models.QuerySet):
    """A QuerySet narrowed to the requester's scope when it is evaluated (fetched, counted, tested,
    aggregated, updated or deleted), not when it is built: a class attribute built at import (a
    viewset's `queryset`, a validator's) serves every requester with its own scope. Each model says
    what its scope is in `requester_q`; outside requests nothing is narrowed."""

    _requester_applied = False

    def requester_q(self, access: Access) -> Q | None:
        """The rows `access` may see (a subclass says which); None: every row."""
        return None

    def _narrowed(self):
        if self._requester_applied:
            return self
        requester = restricted()
        q = None if requester is None else self.requester_q(requester)
        if q is None:
            return self
        clone = self._chain()
        clone.query.add_q(q)  # on the Query: a sliced QuerySet (first(), a page) is narrowed too
        clone._requester_applied = True
        return clone

    def _fetch_all(self):
        if self._result_cache is None and not self._requester_applied:
            narrowed = self._narrowed()
            if narrowed is not self:
                narrowed._fetch_all()
                self._result_cache, self._prefetch_done = narrowed._result_cache, narrowed._prefetch_done
                return
        super()._fetch_all()

    def count(self):
        return super(RequesterQuerySet, self._narrowed()).count()

    def exists(self):
        return super(RequesterQuerySet, self._narrowed()).exists()

    def aggregate(self, *args, **kwargs):
        return super(RequesterQuerySet, self._narrowed()).aggregate(*args, **kwargs)

    def update(self, **kwargs):
        return super(RequesterQuerySet, self._narrowed()).update(**kwargs)

    def delete(self):
        return super(RequesterQuerySet, self._narrowed()).delete()

    def iterator(self, chunk_size=None):
        return super(RequesterQuerySet, self._narrowed()).iterator(chunk_size=chunk_size)


def visible_clusters(clusters: list) -> list:
    """Of the process's kept list of clusters (fleet.scope.fleet_clusters), those the requester sees."""
    requester = restricted()
    return clusters if requester is None else [c for c in clusters if c.pk in requester.cluster_ids(clusters)]


def in_scope_clusters(access: Access) -> Q:
    """Rows of a model with a `cluster`: those of the clusters the requester sees."""
    return Q(cluster_id__in=list(access.cluster_roles)) | Q(cluster__account_id__in=list(access.account_roles))


def check_may_change(cluster_id: int | None, account_id: int | None, what: str) -> None:
    """PermissionDenied unless the requester (if any) operates the cluster (or account) `what` is in."""
    access = current()
    if access is None or access.fleet_role == OPERATOR:
        return
    if not access.may_operate(cluster_id, account_id):
        raise PermissionDenied(f"{access.username or 'you'} may not change {what}: it needs the operator role on "
                               "its cluster or account")


def check_may_change_reservation(reservation) -> None:
    """PermissionDenied unless the requester (if any) operates every account that sees `reservation`."""
    access = current()
    if access is None or access.fleet_role == OPERATOR:
        return
    # Every account that sees it, also those the requester does not (the base manager is not narrowed).
    visibilities = reservation.visibilities.model._base_manager.filter(reservation_id=reservation.pk)
    accounts = list(visibilities.values_list("account_id", flat=True))
    if not accounts or not all(access.may_operate(None, account) for account in accounts):
        raise PermissionDenied(f"{access.username or 'you'} may not change reservation {reservation.reservation_id}: "
                               "it needs the operator role on every account that sees it")


# The rows a person changes through karpweb (a NodePool's mode, an EC2NodeClass's terms, allowing
# control): saved or deleted during a request only by an operator of their cluster.
GUARDED_MODELS = ("scheduling.NodePool", "reservations.EC2NodeClass", "scheduling.ControllerGuard")


def guard_writes() -> None:
    from django.apps import apps
    from django.db.models.signals import pre_delete, pre_save

    def check(sender, instance, **kwargs):
        if _current.get() is not None:
            account_id = instance.cluster.account_id if instance.cluster_id else None
            check_may_change(instance.cluster_id, account_id, f"{sender._meta.verbose_name} {instance}")

    for label in GUARDED_MODELS:
        model = apps.get_model(label)
        pre_save.connect(check, sender=model, dispatch_uid=f"karpweb-access-save-{label}", weak=False)
        pre_delete.connect(check, sender=model, dispatch_uid=f"karpweb-access-delete-{label}", weak=False)
