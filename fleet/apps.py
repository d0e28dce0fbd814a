from django.apps import AppConfig


class FleetConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "fleet"
    verbose_name = "fleet: clusters and AWS accounts"

    def ready(self):
        from django.apps import apps
        from django.db.models.signals import pre_save

        from fleet import scope  # noqa: F401 - forgets the cached default cluster when a cluster changes
        from fleet.managers import ClusterScopedManager, fill_cluster_on_save

        # A Kubernetes-side row saved without a cluster gets the working one (fleet.managers).
        for model in apps.get_models():
            if isinstance(model._default_manager, ClusterScopedManager):
                pre_save.connect(fill_cluster_on_save, sender=model, dispatch_uid=f"fleet-cluster-{model._meta.label}")
        # ... and is changed during a request only by an operator of that cluster (fleet/access.py).
        from fleet.access import guard_writes

        guard_writes()
