from django.apps import AppConfig


class AccountsConfig(AppConfig):
    """Who may sign in and how: single sign-on through an OpenID Connect provider, local accounts
    (break-glass, switchable off), and every sign-in and role change in the audit log."""

    name = "accounts"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from accounts import signals  # noqa: F401 - connects the sign-in audit receivers
