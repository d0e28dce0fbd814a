"""The UI's roles for the API (karpweb/roles.py): viewers read, operators also write where the API
allows a write at all. Kept free of DRF views: REST_FRAMEWORK names these classes as defaults."""

from rest_framework import permissions

from fleet import access

from karpweb.roles import can_administer_fleet, can_operate, can_view, open_access


class IsViewer(permissions.BasePermission):
    """Any request from a viewer, operator, staff member or superuser (e.g. running a what-if)."""

    message = "You need the viewer or operator role to use karpweb's API."

    def has_permission(self, request, view):
        if access.current_or_unresolved() is access.UNRESOLVED:
            open_access(request.user)  # no authenticator took the request: an anonymous one sees nothing
        requester = access.current()
        if request.method not in permissions.SAFE_METHODS and requester is not None and requester.read_only:
            self.message = "This API token is read-only: it was made to read, not to change or run anything."
            return False
        return bool(request.user and request.user.is_authenticated and can_view(request.user))


class IsOperatorOrReadOnly(IsViewer):
    """Viewers read; writes need the operator role (or a superuser)."""

    write_message = "Only operators may change this."

    def has_permission(self, request, view):
        if not super().has_permission(request, view):
            return False
        if request.method in permissions.SAFE_METHODS:
            return True
        if not can_operate(request.user):
            self.message = self.write_message
            return False
        return True

    def has_object_permission(self, request, view, obj):
        """A write needs the operator role on the object's own cluster (fleet/access.py)."""
        if request.method not in permissions.SAFE_METHODS and getattr(obj, "cluster_id", None) is not None:
            requester = access.current()
            if requester is not None and not requester.may_operate(obj.cluster_id, obj.cluster.account_id):
                self.message = f"Only operators of cluster {obj.cluster.name} may change this."
                return False
        return True


class IsFleetAdminOrReadOnly(IsViewer):
    """Viewers read; the fleet's configuration is written by fleet administrators (or a superuser)."""

    def has_permission(self, request, view):
        if not super().has_permission(request, view):
            return False
        if request.method in permissions.SAFE_METHODS:
            return True
        if not can_administer_fleet(request.user):
            self.message = ("Only fleet administrators (the fleet-admin role or a superuser) may change accounts "
                            "and clusters.")
            return False
        return True


class IsFleetAdmin(IsViewer):
    """Fleet administrators (or a superuser) only: the audit log says who did what from where."""

    message = "Only fleet administrators (the fleet-admin role or a superuser) may read this."

    def has_permission(self, request, view):
        return super().has_permission(request, view) and can_administer_fleet(request.user)
