from django.contrib import admin

from accounts.models import SignInIdentity
from scheduling.admin_mixins import ReadOnlyAdmin


@admin.register(SignInIdentity)
class SignInIdentityAdmin(ReadOnlyAdmin):
    """Made at a first single sign-on; disable the account (Users) to lock a person out at once."""

    list_display = ("user", "issuer", "subject", "groups", "last_sign_in_at")
    search_fields = ("user__username", "subject")
    list_select_related = ("user",)
