"""Running the engine on a world for the what-if page, the pod page and the API: one entry point
that turns bad input into path-named problems and never raises anything else."""

import datetime
import json
from dataclasses import dataclass, field

from django.core.cache import cache
from django.utils import timezone

from fleet.scope import current_cluster_id
from karpweb.jsonsafe import json_problems
from scheduling.engine.simulate import simulate
from scheduling.engine.timeutil import parse_time
from scheduling.engine.world import WorldError, load_json
from scheduling.world import current_world

MAX_WORLD_BYTES = 5 * 2**20
# No count, size or price in a world comes near this (2**53 is where JSON numbers stop being exact):
# larger ones are typing accidents or attacks, which the engine's arithmetic turns into overflow.
MAX_WORLD_NUMBER = 1e15
# The engine adds hours and days to `now` (expiry notices, TTLs): years near 1 or 9999 overflow.
EARLIEST_NOW = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
LATEST_NOW = datetime.datetime(9000, 1, 1, tzinfo=datetime.timezone.utc)


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
        data = load_json(text)
        if problems := world_input_problems(data):
            return SimulationOutcome(problems=problems)
        return run_world(data)
    except WorldError as exc:
        return SimulationOutcome(problems=exc.lines())
    except RecursionError:
        return SimulationOutcome(problems=["WORLD.json: invalid JSON: nested too deeply"])
    except ValueError as exc:  # e.g. an integer longer than Python reads (4300 digits)
        return SimulationOutcome(problems=[f"WORLD.json: invalid JSON: {exc}"])


def world_input_problems(data) -> list[str]:
    """What the web refuses before the engine runs: non-finite or absurdly large numbers and a `now`
    the engine cannot add a day to, each named by its JSON path."""
    problems = json_problems(data)
    stack = [(data, "")]
    while stack:
        item, where = stack.pop()
        if isinstance(item, bool):
            continue
        if isinstance(item, int | float) and abs(item) > MAX_WORLD_NUMBER:
            problems.append(f"{where or 'value'}: {_shown(item)} is out of range (at most {MAX_WORLD_NUMBER:.0e})")
        elif isinstance(item, dict):
            stack.extend((child, f"{where}.{key}" if where else str(key)) for key, child in item.items())
        elif isinstance(item, list):
            stack.extend((child, f"{where}[{index}]") for index, child in enumerate(item))
    now = data.get("now") if isinstance(data, dict) else None
    if now is not None:
        try:
            moment = parse_time(now)
        except (ValueError, TypeError, OverflowError):
            moment = None  # the engine names a malformed `now` itself
        if moment is not None and not EARLIEST_NOW <= moment < LATEST_NOW:
            problems.append(f"now: {now} is out of range (from {EARLIEST_NOW:%Y-%m-%d} to before {LATEST_NOW:%Y-%m-%d})")
    return sorted(set(problems))


def _shown(number: int | float) -> str:
    # An integer of thousands of digits neither converts to float nor prints (Python's 4300-digit limit).
    if isinstance(number, int) and number.bit_length() > 64:
        return "an integer of more than 19 digits"
    return f"{number:.3g}"


def run_world(world) -> SimulationOutcome:
    try:
        return SimulationOutcome(decisions=simulate(world))
    except WorldError as exc:
        return SimulationOutcome(problems=exc.lines())
    except OverflowError as exc:  # a date elsewhere in the world that the engine's arithmetic overflows
        return SimulationOutcome(problems=[f"WORLD.json: a date or number is out of range ({exc})"])


# The engine on the current world for the pod page, at most this often per cache: at thousands of
# pods one run takes seconds, and every pending pod's page asks the same question.
CURRENT_OUTCOME_SECONDS = 30
CURRENT_OUTCOME_KEY = "karpweb:current-world-outcome"
# What answers for pending pods: proportional to the pods waiting, not to the cluster.
PENDING_PARTS = ("nodeClaims", "bindings", "unschedulable", "deferred")


def current_outcome() -> tuple[SimulationOutcome, datetime.datetime]:
    """The engine's answer for the current world and when it was computed (at most 30 s ago)."""
    key = f"{CURRENT_OUTCOME_KEY}:{current_cluster_id() or ''}"  # a world is one cluster's
    cached = cache.get(key)
    if cached is None:
        now = timezone.now()
        outcome = run_world(current_world(now))
        if outcome.ok:
            outcome = SimulationOutcome(decisions={part: outcome.decisions.get(part, []) for part in PENDING_PARTS})
        cached = (outcome, now)
        cache.set(key, cached, CURRENT_OUTCOME_SECONDS)
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
