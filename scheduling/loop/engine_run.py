"""The engine on the current world, for the loop. The engine refuses a whole world for one object
it cannot read; the loop must not stop for every NodePool because of one odd pod. So an object the
engine cannot read (a pod, node, NodeClaim, NodePool, EC2NodeClass, reservation, instance type) is
left out of that run, and a SKIPPED decision says which and why (de-duplicated like any other)."""

import re

from scheduling.engine.cluster import World
from scheduling.engine.simulate import simulate
from scheduling.engine.world import WorldError, parse_world
from scheduling.loop.recording import PendingDecision, record
from scheduling.models import Decision
from scheduling.modes import global_mode

ITEM = re.compile(r"^(?P<key>[A-Za-z]+)\[(?P<index>\d+)\]")
# Leaving an object out can make another unreadable (a pod on a node that was left out): a few rounds.
MAX_ROUNDS = 3


def simulate_readable(world: dict | World, now=None, *, disruptions: bool = True) -> dict:
    """simulate(world), leaving out the objects it cannot read; other problems still raise WorldError.
    A World already parsed (the watch process's kept world) left them out when it read them.
    `disruptions`: as simulate's (False: the plan only)."""
    if isinstance(world, World):
        return simulate(world, disruptions=disruptions)
    parsed, skipped = parse_readable(world)
    decisions = simulate(parsed, disruptions=disruptions)
    record(skipped, now)
    return decisions


def parse_readable(world: dict) -> tuple[World, list[PendingDecision]]:
    """parse_world(world) without the objects it cannot read, and a SKIPPED decision for each."""
    skipped: list[PendingDecision] = []
    for _ in range(MAX_ROUNDS):
        try:
            return parse_world(world), skipped
        except WorldError as error:
            world = _without_unreadable(world, error, skipped)
    return parse_world(world), skipped


def skipped_decision(subject: str, messages: list[str]) -> PendingDecision:
    return PendingDecision(
        kind=Decision.Kind.STATUS, outcome=Decision.Outcome.SKIPPED, mode=global_mode(), subject=subject,
        reason=f"{subject} left out of planning: the engine cannot read it ({'; '.join(messages[:5])})",
        error="\n".join(messages),
    )


def _without_unreadable(world: dict, error: WorldError, skipped: list[PendingDecision]) -> dict:
    problems: dict[str, dict[int, list[str]]] = {}
    for path, message in error.problems:
        match = ITEM.match(path)
        if not match or not isinstance(world.get(match["key"]), list):
            raise error  # not one object's fault (the world itself): nothing to leave out
        problems.setdefault(match["key"], {}).setdefault(int(match["index"]), []).append(
            f"{path[match.end():].lstrip('.') or '(the object)'}: {message}")
    cleaned = dict(world)
    for key, by_index in problems.items():
        for index, messages in sorted(by_index.items()):
            skipped.append(skipped_decision(describe(key, world[key][index]), messages))
        cleaned[key] = [item for index, item in enumerate(world[key]) if index not in by_index]
    return cleaned


def describe(key: str, item) -> str:
    """`pod team-a/web-1`, `nodePool default`, `capacityReservation cr-0abc`."""
    kind = key[:-1] if key.endswith("s") else key
    if not isinstance(item, dict):
        return kind
    metadata = item.get("metadata") if isinstance(item.get("metadata"), dict) else {}
    name = metadata.get("name") or item.get("name") or item.get("CapacityReservationId") or "?"
    namespace = metadata.get("namespace")
    return f"{kind} {namespace}/{name}" if namespace else f"{kind} {name}"
