"""The roles: viewer (read), operator (edit selector terms and modes), fleet-admin (the fleet's
configuration: accounts, their roles and external IDs, clusters and how karpweb reaches them), and
Django's staff flag for the admin.

Viewer, operator and fleet-admin are groups; a fleet-admin can do what an operator can, an operator
what a viewer can; a superuser can do everything. docs/security.md says what each may do."""

from django.contrib.auth.mixins import AccessMixin
from django.core.exceptions import PermissionDenied

VIEWER = "viewer"
OPERATOR = "operator"
FLEET_ADMIN = "fleet-admin"


def _groups(user) -> set[str]:
    if not hasattr(user, "_karpweb_groups"):
        user._karpweb_groups = set(user.groups.values_list("name", flat=True))
    return user._karpweb_groups


def can_view(user) -> bool:
    return user.is_authenticated and (user.is_superuser or user.is_staff
                                      or bool(_groups(user) & {VIEWER, OPERATOR, FLEET_ADMIN}))


def can_operate(user) -> bool:
    return user.is_authenticated and (user.is_superuser or bool(_groups(user) & {OPERATOR, FLEET_ADMIN}))


def can_administer_fleet(user) -> bool:
    """Who may write the fleet's configuration: what karpweb assumes, connects to and trusts."""
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
