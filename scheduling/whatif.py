"""Running the engine on a world for the what-if page, the pod page and the API: one entry point
that turns bad input into path-named problems and never raises anything else."""

import datetime
import json
from dataclasses import dataclass, field

from django.core.cache import cache
from django.utils import timezone

from scheduling.engine.simulate import simulate
from scheduling.engine.world import WorldError, load_json
from scheduling.world import current_world

MAX_WORLD_BYTES = 5 * 2**20


@dataclass
class SimulationOutcome:
    decisions: dict | None = None
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.decisions is not None


def run_world_text(text: str) -> SimulationOutcome:
    if len(text.encode()) > MAX_WORLD_BYTES:
        return SimulationOutcome(problems=[f"WORLD.json: larger than {MAX_WORLD_BYTES // 2**20} MiB"])
    try:
        return run_world(load_json(text))
    except WorldError as exc:
        return SimulationOutcome(problems=exc.lines())
    except RecursionError:
        return SimulationOutcome(problems=["WORLD.json: invalid JSON: nested too deeply"])
    except ValueError as exc:  # e.g. an integer longer than Python reads (4300 digits)
        return SimulationOutcome(problems=[f"WORLD.json: invalid JSON: {exc}"])


def run_world(world) -> SimulationOutcome:
    try:
        return SimulationOutcome(decisions=simulate(world))
    except WorldError as exc:
        return SimulationOutcome(problems=exc.lines())


# The engine on the current world for the pod page, at most this often per cache: at thousands of
# pods one run takes seconds, and every pending pod's page asks the same question.
CURRENT_OUTCOME_SECONDS = 30
CURRENT_OUTCOME_KEY = "karpweb:current-world-outcome"
# What answers for pending pods: proportional to the pods waiting, not to the cluster.
PENDING_PARTS = ("nodeClaims", "bindings", "unschedulable", "deferred")


def current_outcome() -> tuple[SimulationOutcome, datetime.datetime]:
    """The engine's answer for the current world and when it was computed (at most 30 s ago)."""
    cached = cache.get(CURRENT_OUTCOME_KEY)
    if cached is None:
        now = timezone.now()
        outcome = run_world(current_world(now))
        if outcome.ok:
            outcome = SimulationOutcome(decisions={part: outcome.decisions.get(part, []) for part in PENDING_PARTS})
        cached = (outcome, now)
        cache.set(CURRENT_OUTCOME_KEY, cached, CURRENT_OUTCOME_SECONDS)
    return cached


def pod_outcome(decisions: dict, pod_key: str) -> dict | None:
    """Where the engine would put one pending pod, in words: {kind, text, claim?}."""
    for claim in decisions.get("nodeClaims", []):
        if pod_key in claim["pods"]:
            launch = claim["launch"]
            where = f"a new {launch['instanceType']} {launch['capacityType']} node in {launch['zone']} (NodePool {claim['nodePool']})"
            if launch.get("reservationID"):
                where += f", in reservation {launch['reservationID']}"
            return {"kind": "launch", "text": f"it would go to {where}", "claim": claim}
    for binding in decisions.get("bindings", []):
        if binding["pod"] == pod_key:
            return {"kind": "bind", "text": f"it would be bound to the existing node {binding['node']}", "node": binding["node"]}
    for kind in ("unschedulable", "deferred"):
        for entry in decisions.get(kind, []):
            if entry["pod"] == pod_key:
                return {"kind": kind, "text": f"{kind}: {entry['reason']}"}
    return None


def pretty(decisions: dict) -> str:
    return json.dumps(decisions, indent=2)
