from django.contrib import admin
from knox.models import AuthToken

from accounts.models import SignInIdentity
from scheduling.admin_mixins import ReadOnlyAdmin


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
