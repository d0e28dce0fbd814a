"""observe (record decisions as recommendations) or control (act): global, overridable per NodePool."""

from django.conf import settings

from scheduling.models import Mode


def global_mode() -> str:
    return settings.KARPWEB_MODE


def effective_mode(node_pool) -> str:
    return (node_pool.mode if node_pool is not None and node_pool.mode else None) or global_mode()


MODES = [choice for choice, _label in Mode.choices]
