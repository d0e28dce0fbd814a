"""Repacking: a cheaper assignment for node claims whose pods are free to move.

First-fit decreasing orders pods by CPU, so on large instance types the first claims fill with
CPU-heavy pods and the last with memory-heavy ones: each claim pays for the resource it is short
of, and the plan can cost 20-30% more than its lower bound although the pods as a whole are
balanced. Once the run is over, the claims of one NodePool whose pods carry no topology terms
(owned, or counting them), that hold no reservation unit and share their requirements are packed
again: one claim at a time, each time adding the pod that keeps the claim's CPU and memory
shares of the largest instance type closest to the pool's own proportion (the biggest such pod
first). Every pod goes through the same `fit` as in the run, so every constraint still holds.
The new claims replace the old only when they launch strictly cheaper. NodePools with limits are
left alone (the repacked claims could count differently against them).
"""

from __future__ import annotations

from typing import Callable

from .cluster import Pod
from .labels import HOSTNAME
from .launch import launch_price
from .ledger import ReservationLedger, ReservedMode
from .nodeclaim import NodeClaim, PoolTemplate, Proposal
from .quantities import CPU, MEMORY
from .topology import Topology

MIN_CLAIMS = 2  # one claim has nothing to trade with


def movable(claim: NodeClaim, topology: Topology) -> bool:
    if claim.hold is not None or not claim.pods:
        return False
    for pod in claim.pods:
        info = topology.info(pod)
        if info.constrained or info.selected_by:
            return False
    return True


def repack_groups(claims: list[NodeClaim], topology: Topology, limited: set[str]) -> list[list[NodeClaim]]:
    """Claims that may trade pods: same NodePool (without limits), same requirements."""
    groups: dict[tuple, list[NodeClaim]] = {}
    for claim in claims:
        if claim.template.name in limited or not movable(claim, topology):
            continue
        key = (claim.template.name, tuple(sorted(r.sig for r in claim.requirements if r.key != HOSTNAME)))
        groups.setdefault(key, []).append(claim)
    return [group for group in groups.values() if len(group) >= MIN_CLAIMS]


def repack(group: list[NodeClaim], ledger: ReservationLedger, mode: ReservedMode, topology: Topology,
           next_name: Callable[[str], str], next_seq: Callable[[], int]) -> list[NodeClaim] | None:
    """New claims for the group's pods, or None when they would not launch cheaper."""
    template: PoolTemplate = group[0].template
    if template.allows_reserved() and ledger.any_free():
        return None  # new claims would take units; the old ones get them at the end of the run anyway
    catalog = template.catalog
    largest = catalog.types(template.mask)
    if not largest:
        return None
    cap_cpu = max(it.allocatable.get(CPU, 0) for it in largest) or 1
    cap_mem = max(it.allocatable.get(MEMORY, 0) for it in largest) or 1
    pods = sorted((p for claim in group for p in claim.pods), key=Pod.sort_key)
    total_cpu = sum(p.requests.get(CPU, 0) for p in pods) / cap_cpu
    total_mem = sum(p.requests.get(MEMORY, 0) for p in pods) / cap_mem
    ratio = total_mem / total_cpu if total_cpu else 1.0
    # Pods that fit the same places, largest first; each class is a stack (smallest on top is
    # irrelevant: a class's pods are alike).
    classes: dict[tuple, list[Pod]] = {}
    for pod in pods:
        classes.setdefault(topology.info(pod).fit_key, []).append(pod)
    shapes = {key: (members[0].requests.get(CPU, 0) / cap_cpu, members[0].requests.get(MEMORY, 0) / cap_mem)
              for key, members in classes.items()}
    rank = {key: i for i, key in enumerate(classes)}  # ties: the class of the larger pods first
    for members in classes.values():
        members.reverse()
    names = [claim.name for claim in group]
    new: list[NodeClaim] = []
    left = len(pods)
    while left:
        claim = NodeClaim(template, template.mask, next_seq())
        used_cpu = used_mem = 0.0
        full: set[tuple] = set()
        while True:
            best, best_score = None, None
            for key, members in classes.items():
                if not members or key in full:
                    continue
                cpu, mem = shapes[key]
                score = (abs(ratio * (used_cpu + cpu) - (used_mem + mem)), -max(cpu, mem), rank[key])
                if best_score is None or score < best_score:
                    best, best_score = key, score
            if best is None:
                break
            pod = classes[best][-1]
            outcome = claim.fit(pod, ledger, mode)
            if not isinstance(outcome, Proposal):
                full.add(best)
                continue
            name = None
            if not claim.pods:
                name = names[len(new)] if len(new) < len(names) else next_name(template.name)
            claim.commit(pod, outcome, ledger, name=name)
            classes[best].pop()
            used_cpu += shapes[best][0]
            used_mem += shapes[best][1]
            left -= 1
        if not claim.pods:
            return None  # a pod that fits no fresh claim: leave the plan as it was
        new.append(claim)
    if sum(launch_price(c) for c in new) < sum(launch_price(c) for c in group) - 1e-9:
        return new
    return None
