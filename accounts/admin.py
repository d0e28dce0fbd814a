from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import GroupAdmin, UserAdmin
from django.contrib.auth.models import Group
from knox.models import AuthToken

from accounts.models import SignInIdentity, TokenNarrowing
from accounts.tokens import revoke_token
from karpweb.clientaddr import client_address
from scheduling.models import AuditEntry
from scheduling.admin_mixins import AuditedAuthorityAdmin, ReadOnlyAdmin


@admin.register(SignInIdentity)
class SignInIdentityAdmin(ReadOnlyAdmin):
    """Made at a first single sign-on; disable the account (Users) to lock a person out at once."""

    list_display = ("user", "issuer", "subject", "groups", "last_sign_in_at")
    search_fields = ("user__username", "subject")
    list_select_related = ("user",)


# API tokens: knox's own admin lists each digest and lets an administrator make a token for anyone
# and read its key (then act as that user). Here a token shows only what identifies it (its first
# characters, owner, dates), cannot be made or changed, and can be deleted (revoked).
admin.site.unregister(AuthToken)


@admin.register(AuthToken)
class APITokenAdmin(ReadOnlyAdmin):
    list_display = ("token_key", "user", "created", "expiry")
    fields = ("token_key", "user", "created", "expiry")
    search_fields = ("user__username", "token_key")
    list_select_related = ("user",)

    def has_delete_permission(self, request, obj=None):
        return request.user.is_superuser

    def delete_model(self, request, obj):
        revoke_token(obj, actor=request.user, source=AuditEntry.Source.ADMIN, address=client_address(request))

    def delete_queryset(self, request, queryset):
        for token in queryset.select_related("user"):
            self.delete_model(request, token)


@admin.register(TokenNarrowing)
class TokenNarrowingAdmin(ReadOnlyAdmin):
    """What an API token may do below its user (read-only, one cluster): made with the token, gone with it."""

    list_display = ("token_key", "read_only", "cluster")
    list_filter = ("read_only",)
    list_select_related = ("cluster",)


# Users and groups: who holds which role. Every grant, removal, new account and deletion is audited.
admin.site.unregister(get_user_model())
admin.site.unregister(Group)


@admin.register(get_user_model())
class AuditedUserAdmin(AuditedAuthorityAdmin, UserAdmin):
    pass


@admin.register(Group)
class AuditedGroupAdmin(AuditedAuthorityAdmin, GroupAdmin):
    pass
