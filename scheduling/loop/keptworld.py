"""The world the watch process plans from, kept in memory between provisioning runs.

Rebuilding the world from the database is most of a run's cost at scale (2.2 s at 5,000 nodes and
50,000 pods: reading every pod row, writing it as Kubernetes would, parsing it). The watch process
knows what changed: ClusterSync hands it the keys each batch of watch events touched and the kinds
it listed in full. So pods and registered nodes, the kinds that are many, are kept parsed, each
with the document it was parsed from, and a change re-reads and re-parses only its own rows. The
kinds that are few (instance types and their offerings, reservations, EC2NodeClasses, NodePools, the
NodeClaims whose nodes are still coming up) are read fresh for every run, so a catalogue or selector change is
always planned from (a full rebuild of the small part, every time).

`check` compares the kept documents with a fresh read: a difference is a change the kept world
missed; it is logged, counted (karpweb_kept_world_mismatches_total{kind}) and the kept world reloads.
"""

from __future__ import annotations

import logging

from scheduling.engine.cluster import Node as EngineNode
from scheduling.engine.cluster import Pod as EnginePod
from scheduling.engine.cluster import World
from scheduling.engine.world import WorldError, parse_node, parse_pod
from scheduling.loop.engine_run import describe, parse_readable, skipped_decision
from scheduling.loop.recording import PendingDecision, record
from scheduling.world import current_world, pods, registered_nodes

log = logging.getLogger(__name__)
MISMATCH = "kept_world_mismatch"  # EventCount name, label = the kind


class KeptWorld:
    def __init__(self) -> None:
        # (namespace, name) -> (document, parsed pod or None when finished or unreadable)
        self.pods: dict[tuple[str, str], tuple[dict, EnginePod | None]] = {}
        self.nodes: dict[str, tuple[dict, EngineNode | None]] = {}
        self.skipped: dict[tuple, PendingDecision] = {}  # objects the engine cannot read, by key
        self.loaded = False
        self.parses = 0  # objects parsed since start (a run that changed nothing parses none)

    def size(self) -> int:
        """Pods and nodes kept (0 until loaded)."""
        return len(self.pods) + len(self.nodes) if self.loaded else 0

    # keeping ------------------------------------------------------------------------------------

    def load(self) -> None:
        self.pods, self.nodes, self.skipped = {}, {}, {}
        self._read_pods(None)
        self._read_nodes(None)
        self.loaded = True

    def apply(self, stats) -> None:
        """Take in what one ClusterSync pump changed (its `touched` keys and `listed` kinds)."""
        if not self.loaded:
            return  # the first world() loads everything
        if "Pod" in stats.listed:
            self._read_pods(None)
        elif stats.touched.get("Pod"):
            self._read_pods(stats.touched["Pod"])
        if "Node" in stats.listed:
            self._read_nodes(None)
        elif stats.touched.get("Node"):
            self._read_nodes({key[-1] for key in stats.touched["Node"]})

    def _read_pods(self, keys) -> None:
        keys = None if keys is None else {tuple(key) for key in keys}
        self._read("pod", self.pods, keys, pods(keys), parse_pod,
                   lambda d: (d["metadata"]["namespace"], d["metadata"]["name"]))

    def _read_nodes(self, names) -> None:
        self._read("node", self.nodes, names, registered_nodes(names), parse_node, lambda d: d["metadata"]["name"])

    def _read(self, kind: str, kept: dict, keys, documents: list[dict], parse, key_of) -> None:
        """Replace the kept objects of `keys` (all of the kind when None) with `documents`."""
        if keys is None:
            kept.clear()
            self.skipped = {k: v for k, v in self.skipped.items() if k[0] != kind}
        else:
            for key in keys:
                kept.pop(key, None)
                self.skipped.pop((kind, key), None)
        for document in documents:
            key = key_of(document)
            kept[key] = (document, self._parse(parse, document, (kind, key), f"{kind}s"))

    def _parse(self, parse, document: dict, key: tuple, kind: str):
        self.parses += 1
        try:
            return parse(document, kind)
        except WorldError as error:
            self.skipped[key] = skipped_decision(describe(kind, document), [f"{path}: {message}" for path, message in
                                                                            error.problems])
            return None

    # planning ------------------------------------------------------------------------------------

    def world(self, now, instances: list[dict] | None = None) -> World:
        """The engine's World now: the small kinds read fresh, pods and nodes as kept. Objects the
        engine cannot read are left out, with a SKIPPED decision (de-duplicated like any other).
        `instances`: DescribeInstances items, for the lifecycle pass (which reservation each is in)."""
        if not self.loaded:
            self.load()
        world, skipped = parse_readable(current_world(now, include_pods=False, include_nodes=False,
                                                      instances=instances))
        # A Node still coming up is planned as its NodeClaim makes it (read fresh: they are few).
        coming_up = {node.name for node in world.nodes}
        registered = [node for name, (_, node) in sorted(self.nodes.items()) if node is not None and name not in coming_up]
        world.nodes = registered + world.nodes  # in-flight claims after the nodes, as current_world orders them
        world.pods = [pod for _, pod in (self.pods[key] for key in sorted(self.pods)) if pod is not None]
        record(skipped + list(self.skipped.values()), now)
        return world

    # checking ------------------------------------------------------------------------------------

    def check(self) -> dict[str, int]:
        """Compare the kept documents with a fresh read of the database; on any difference, log
        it, count it per kind and reload. Returns the differences per kind."""
        from scheduling.models import EventCount

        if not self.loaded:
            return {}
        fresh_pods = {(d["metadata"]["namespace"], d["metadata"]["name"]): d for d in pods()}
        fresh_nodes = {d["metadata"]["name"]: d for d in registered_nodes()}
        differences = {"Pod": _differences(self.pods, fresh_pods), "Node": _differences(self.nodes, fresh_nodes)}
        differences = {kind: count for kind, count in differences.items() if count}
        if differences:
            for kind, count in differences.items():
                EventCount.bump(MISMATCH, kind, count)
            log.warning("the kept world differed from the database (%s): reloading",
                        ", ".join(f"{count} {kind}(s)" for kind, count in differences.items()))
            self.load()
        return differences


def _differences(kept: dict, fresh: dict) -> int:
    keys = set(kept) | set(fresh)
    return sum(1 for key in keys if key not in kept or key not in fresh or kept[key][0] != fresh[key])
