"""A target's refusal of a pod, and the kinds of refusal the scheduler and the explanations treat
specially. Its own module because both the targets (nodeclaim.py) and the topology (topology.py)
refuse pods, and the topology must not depend on the targets it serves."""

from __future__ import annotations

from dataclasses import dataclass

# Rejection kinds the explanations (explain.py) treat specially.
NO_INSTANCE_TYPE = "no-instance-type"
RESERVED_HELD = "reserved-held"
LIMITS = "limits"
PAID_ONLY = "paid-only"  # a new claim would get no reserved unit (internal, never reported)
MIN_VALUES = "min-values"


@dataclass(frozen=True, slots=True)
class Rejection:
    reason: str
    permanent: bool = True
    kind: str = ""
    # Holds until the ledger gives a unit back (the refusal was for want of a free unit).
    until_release: bool = False

    @property
    def reserved_held(self) -> bool:
        return self.kind == RESERVED_HELD
