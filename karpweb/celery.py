"""The Celery app. Periodic tasks are declared by the issues that need them, in the apps'
tasks modules; their schedules live in django-celery-beat's tables (editable in the admin)."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "karpweb.settings")

app = Celery("karpweb")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
