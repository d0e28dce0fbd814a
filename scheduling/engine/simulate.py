"""`simulate`: a world in, every decision the control loop would take out, nothing touched."""

from __future__ import annotations

from datetime import datetime

from .cluster import World
from .decisions import decisions
from .gcpause import cyclic_gc_paused
from .disruption import lifecycle_decisions
from .planning import plan
from .world import load_json, parse_world


def simulate(world: dict | World, now: datetime | None = None, *, disruptions: bool = True) -> dict:
    """DECISIONS.json for a WORLD.json document (or an already parsed World).

    `now` is used only when the world has no `now` of its own. Raises WorldError (with every
    problem and its JSON path) for bad input; never anything else for any JSON value. Without
    `disruptions`, the plan only (`disruptions` and `demotions` empty): a provisioning run acts on
    nothing else, and the consolidation simulations are half its engine time at 5,000 nodes."""
    parsed = world if isinstance(world, World) else parse_world(world, now)
    with cyclic_gc_paused():  # the plan and the consolidation simulations make no cycles
        provisioning = plan(parsed)
        result = decisions(provisioning)
        if disruptions:
            result.update(lifecycle_decisions(provisioning))  # disruptions and demotions
    return result


def simulate_json(text: str, source: str = "WORLD.json", now: datetime | None = None) -> dict:
    """The same from JSON text; a syntax error is a WorldError naming line and column."""
    return simulate(load_json(text, source), now)
