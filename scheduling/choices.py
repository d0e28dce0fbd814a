"""Choices shared by the mirror's models of more than one app (imported by them, importing nothing of
theirs): observe or control, for the global mode, a cluster's and a NodePool's."""

from django.db import models


class Mode(models.TextChoices):
    OBSERVE = "observe", "observe (recommend only)"
    CONTROL = "control", "control (act)"
