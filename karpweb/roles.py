"""The three roles: viewer (read), operator (edit selector terms and modes), admin (Django admin).

Viewer and operator are groups; admin is Django's staff flag. An operator can do what a viewer
can; a superuser can do everything."""

from django.contrib.auth.mixins import AccessMixin
from django.core.exceptions import PermissionDenied

VIEWER = "viewer"
OPERATOR = "operator"


def _groups(user) -> set[str]:
    if not hasattr(user, "_karpweb_groups"):
        user._karpweb_groups = set(user.groups.values_list("name", flat=True))
    return user._karpweb_groups


def can_view(user) -> bool:
    return user.is_authenticated and (user.is_superuser or user.is_staff or bool(_groups(user) & {VIEWER, OPERATOR}))


def can_operate(user) -> bool:
    return user.is_authenticated and (user.is_superuser or OPERATOR in _groups(user))


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


def roles_context(request):
    """Template context: what the current user may do."""
    user = request.user
    return {"can_operate": can_operate(user) if user.is_authenticated else False}


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
    return (_groups(user) & {VIEWER, OPERATOR}) | ({ADMIN} if user.is_superuser else set())
