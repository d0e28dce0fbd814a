from django.apps import AppConfig


class FleetConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "fleet"
    verbose_name = "fleet: clusters and AWS accounts"

    def ready(self):
        from fleet import scope  # noqa: F401 - forgets the cached default cluster when a cluster changes
