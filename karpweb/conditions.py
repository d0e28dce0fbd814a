"""Kubernetes-style status conditions kept as a JSON list on a model."""

from django.utils import timezone


class ConditionsMixin:
    """For models with a `conditions` JSONField holding [{type, status, reason, message, ...}]."""

    def condition(self, condition_type: str) -> dict | None:
        for condition in self.conditions or []:
            if condition.get("type") == condition_type:
                return condition
        return None

    def condition_status(self, condition_type: str) -> str:
        condition = self.condition(condition_type)
        return condition.get("status", "Unknown") if condition else "Unknown"

    def set_condition(self, condition_type: str, status: str, reason: str = "", message: str = "", now=None) -> bool:
        """Set one condition; keep lastTransitionTime unless the status changes. True if anything changed."""
        now = now or timezone.now()
        existing = self.condition(condition_type)
        if existing and (existing.get("status"), existing.get("reason", ""), existing.get("message", "")) == (
            status, reason, message,
        ):
            return False
        transition = existing.get("lastTransitionTime") if existing and existing.get("status") == status else None
        updated = {
            "type": condition_type,
            "status": status,
            "reason": reason,
            "message": message,
            "lastTransitionTime": transition or now.strftime("%Y-%m-%dT%H:%M:%SZ"),
        }
        others = [c for c in (self.conditions or []) if c.get("type") != condition_type]
        self.conditions = sorted(others + [updated], key=lambda c: c["type"])
        return True
