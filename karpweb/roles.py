"""The roles: viewer (read), operator (edit selector terms and modes), fleet-admin (the fleet's
configuration: accounts, their roles and external IDs, clusters and how karpweb reaches them), and
Django's staff flag for the admin.

Viewer, operator and fleet-admin are groups; a fleet-admin can do what an operator can, an operator
what a viewer can; a superuser can do everything. docs/security.md says what each may do."""

from django.contrib.auth.mixins import AccessMixin
from django.core.exceptions import PermissionDenied

from fleet.access import NOTHING, Access, higher_role, open_for_request

VIEWER = "viewer"
OPERATOR = "operator"
FLEET_ADMIN = "fleet-admin"


def _groups(user) -> set[str]:
    if not hasattr(user, "_karpweb_groups"):
        user._karpweb_groups = set(user.groups.values_list("name", flat=True))
    return user._karpweb_groups


def can_view(user) -> bool:
    """A viewer somewhere: of the fleet (a global group, staff), or through a binding (fleet/access.py)."""
    if not user.is_authenticated:
        return False
    return (user.is_superuser or user.is_staff or bool(_groups(user) & {VIEWER, OPERATOR, FLEET_ADMIN})
            or requester_access(user).views_anywhere())


def can_operate(user) -> bool:
    """An operator somewhere; which clusters it may change, fleet/access.py decides per object."""
    if not user.is_authenticated:
        return False
    return user.is_superuser or bool(_groups(user) & {OPERATOR, FLEET_ADMIN}) or requester_access(user).operates_anywhere()


def requester_access(user):
    """`user`'s Access, made once a request (kept on the user object the request carries): the
    middleware, the API's authentication and the role checks share it and its bindings' one read."""
    if not hasattr(user, "_karpweb_access"):
        user._karpweb_access = access_of(user)
    return user._karpweb_access


def can_administer_fleet(user) -> bool:
    """Who may write the fleet's configuration: what karpweb assumes, connects to and trusts (never
    through an API token narrowed to read-only or one cluster)."""
    if getattr(getattr(user, "_karpweb_access", None), "narrowed_token", False):
        return False
    return user.is_authenticated and (user.is_superuser or FLEET_ADMIN in _groups(user))


class ViewerRequiredMixin(AccessMixin):
    """Every page: log in first, then be at least a viewer."""

    def dispatch(self, request, *args, **kwargs):
        if not request.user.is_authenticated:
            return self.handle_no_permission()
        if not can_view(request.user):
            raise PermissionDenied("You need the viewer or operator role to see karpweb's pages.")
        return super().dispatch(request, *args, **kwargs)


class OperatorRequiredMixin(ViewerRequiredMixin):
    def dispatch(self, request, *args, **kwargs):
        if request.user.is_authenticated and not can_operate(request.user):
            raise PermissionDenied("Only operators may change this.")
        return super().dispatch(request, *args, **kwargs)


class FleetAdminRequiredMixin(ViewerRequiredMixin):
    def dispatch(self, request, *args, **kwargs):
        if request.user.is_authenticated and not can_administer_fleet(request.user):
            raise PermissionDenied("Only fleet administrators may see this.")
        return super().dispatch(request, *args, **kwargs)


def roles_context(request):
    """Template context: what the current user may do."""
    user = request.user
    return {"can_operate": can_operate(user) if user.is_authenticated else False,
            "can_administer_fleet": can_administer_fleet(user) if user.is_authenticated else False}


ADMIN = "admin"


def roles_from_groups(groups, viewer_groups, operator_groups, admin_groups) -> set[str]:
    """karpweb's roles for a person's identity-provider groups: each role whose configured groups
    the person is in (an admin is also an operator, as a superuser can do everything)."""
    held = set(groups)
    roles = {role for role, wanted in ((VIEWER, viewer_groups), (OPERATOR, operator_groups), (ADMIN, admin_groups))
             if held & set(wanted)}
    return roles | ({OPERATOR} if ADMIN in roles else set())


def user_roles(user) -> set[str]:
    """The roles an account holds now, in the same words."""
    return (_groups(user) & {VIEWER, OPERATOR, FLEET_ADMIN}) | ({ADMIN} if user.is_superuser else set())


# --- roles per cluster and per account (fleet/access.py enforces them) ----------------------------

def access_of(user) -> Access:
    """`user`'s Access: its groups (read once a request), and, when first needed, its bindings and
    its identity provider's groups. Superusers and fleet administrators operate the whole fleet."""
    if user is None or not user.is_authenticated or not user.is_active:
        return NOTHING
    groups = _groups(user)
    name = user.get_username()
    if user.is_superuser or FLEET_ADMIN in groups:
        return Access(fleet_role=OPERATOR, username=name)
    fleet_role = OPERATOR if OPERATOR in groups else VIEWER if (VIEWER in groups or user.is_staff) else None
    if fleet_role is None:  # the fleet role may come from a binding: read them now
        account_roles, cluster_roles, fleet_role = bound_roles(user, groups)
        return Access(fleet_role, account_roles, cluster_roles, username=name)
    return Access(fleet_role, username=name, bindings=lambda: bound_roles(user, groups)[:2])


def open_access(user, narrowing=None) -> Access:
    """`user`'s Access (narrowed as its API token is: accounts.models.TokenNarrowing), current until
    the request ends (the API's authentication classes call it)."""
    access = requester_access(user)
    if narrowing is not None:
        cluster = narrowing.cluster
        access = access.narrowed(read_only=narrowing.read_only, cluster_id=cluster.pk if cluster else None,
                                 account_id=cluster.account_id if cluster else None)
        user._karpweb_access = access  # can_view / can_operate answer for the token, not the user
    open_for_request(access)
    return access


def bound_roles(user, groups: set[str]) -> tuple[dict[int, str], dict[int, str], str | None]:
    """(account roles, cluster roles, fleet role) from `user`'s bindings and its groups' (karpweb's and,
    for a single sign-on account, the identity provider's, with KARPWEB_OIDC_GROUP_BINDINGS)."""
    from django.conf import settings
    from django.db.models import Q

    from accounts.models import SignInIdentity
    from fleet.models import RoleBinding

    identity: set[str] = set()
    if not user.has_usable_password():  # only single sign-on accounts have an identity provider's groups
        identity = {str(g) for g in SignInIdentity.objects.filter(user_id=user.pk).values_list("groups", flat=True).first()
                    or []}
    rows = list(RoleBinding.objects.filter(Q(user=user) | Q(group__in=groups | identity)).values_list(
        "role", "account_id", "cluster_id"))
    rows += setting_bindings(settings.KARPWEB_OIDC_GROUP_BINDINGS, identity)
    accounts: dict[int, str] = {}
    clusters: dict[int, str] = {}
    fleet_role = None
    for role, account_id, cluster_id in rows:
        if cluster_id is not None:
            clusters[cluster_id] = higher_role(clusters.get(cluster_id), role)
        elif account_id is not None:
            accounts[account_id] = higher_role(accounts.get(account_id), role)
        else:
            fleet_role = higher_role(fleet_role, role)
    return accounts, clusters, fleet_role


def setting_bindings(mapping, groups: set[str]) -> list[tuple[str, int | None, int | None]]:
    """KARPWEB_OIDC_GROUP_BINDINGS (group, role, "cluster" | "account" | "fleet", name or ID) for the
    identity provider's `groups`, as (role, account pk, cluster pk); a name that matches no row binds nothing."""
    from fleet.models import AwsAccount, Cluster

    rows = []
    for group, role, kind, target in mapping:
        if group not in groups:
            continue
        if kind == "cluster":
            pk = Cluster._base_manager.filter(name=target).values_list("pk", flat=True).first()
            if pk is not None:
                rows.append((role, None, pk))
        elif kind == "account":
            pk = AwsAccount._base_manager.filter(account_id=target).values_list("pk", flat=True).first()
            if pk is not None:
                rows.append((role, pk, None))
        else:
            rows.append((role, None, None))
    return rows
