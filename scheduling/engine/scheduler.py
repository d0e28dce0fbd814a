"""First-fit-decreasing scheduling of pending pods, reserved capacity first.

Algorithm (kubernetes-sigs/karpenter `pkg/controllers/provisioning/scheduling/`):
pods are taken largest first (CPU, then memory, then age); each goes to the first place that
takes it: an existing node (initialised first, then by name), then a node claim already planned
in this run (fewest pods first), then a new node claim from the first NodePool that can launch
it (weight descending, then name descending). A pod that fits nowhere goes to the back of the
queue and is retried until a whole pass makes no progress. NodePool limits count existing nodes
and every planned claim at the largest instance type it may still launch.

Topology (topology.py): spread constraints and pod (anti-)affinity restrict the domains a pod may
join, from counts that include running pods and every pod placed so far. When a pod fits nowhere,
its preferences are dropped one at a time and it is tried again at once (upstream
preferences.Relax; order in Pod.preferences), except when its only place is reserved capacity
held by this run's claims: then it is deferred as it is. After the run, claims whose pods are free
to move are packed again when that launches cheaper (repack.py).

Speed: pods that fit the same places share a memo of the targets known to refuse them (for the
rest of the run, or until the ledger frees a unit); instance types are catalog bitmasks
(catalog.py); claims are kept in their trying order (fewest pods first) incrementally, and per
topology domain, so a pod that its spread or affinity confines to some zones only walks the
claims in those zones. On Karpenter's benchmark shape this is linear in the number of pods (see
docs/benchmark.md).

Reserved capacity: one unit per claim, not one per compatible reservation
--------------------------------------------------------------------------
Upstream lets an in-flight claim hold a unit in EVERY reservation compatible with it, because it
does not know yet which instance type the launch will pick, and defers any pod that finds the
compatible reservations held. With a 1 x small and a 1 x medium reservation and three pods that
each need their own node, the first claim holds both units, the second and third pods are
deferred, and it takes three provisioning loops to place them.

karpweb lets a claim hold at most one unit, in the reservation it will actually launch into, and
pins the launch to it (FinalizeScheduling). So a held unit is a used unit, and nothing needs to be
deferred to protect it:
  * A claim takes the cheapest compatible reservation it can get (the smallest type that fits all
    its pods; ties: default ODCR before capacity block before interruptible, then the most units
    left, then id) and keeps it while it stays compatible.
  * When a new pod makes the held reservation incompatible (it no longer fits, or the pod wants
    another zone), the claim swaps to the cheapest compatible reservation still free. If there is
    none, in strict mode (provisioning) the pod is refused so the claim keeps its reserved option
    and the pod opens another claim; in fallback mode (consolidation simulations) the claim gives
    the unit back and continues as on-demand or spot.
  * A claim without a unit takes one as soon as a compatible one is free. When every compatible
    unit is held by other claims of this run, the pod is not deferred: those claims will use the
    units, so the pod goes on-demand or spot if its NodePool allows it. Only when reserved
    capacity held by this run is the pod's ONLY possible place is it deferred, so the next loop
    (which sees the new nodes and fresh counts) decides it.
  * Swaps can free a unit after some claim went on-demand; a final pass hands free units to
    claims without one (a claim may always launch into a reservation its instance types fit).
  * A pod never grows a paid claim into a pricier instance type while a new claim from the
    NodePool that would take it can get a free reserved unit (upstream always joins in-flight
    claims first): reserved units are prepaid, a bigger paid instance is not.
In the example above karpweb plans, in one run, the first pod on the small reservation, the second
on the medium one and the third on-demand. The rule "never fall back to a lower-weight NodePool
while a higher one has compatible reserved capacity" holds because a NodePool with a free
compatible unit always takes the pod itself; only capacity already planned for this run's claims
lets a lower NodePool take it.
"""

from __future__ import annotations

import hashlib
from bisect import bisect_left, insort
from collections import deque
from heapq import merge
from dataclasses import dataclass, field
from typing import Callable, Iterable

from .cluster import Pod
from .instancetypes import InstanceType
from .ledger import ReservationLedger, ReservedMode
from .nodeclaim import LIMITS, NO_INSTANCE_TYPE, PAID_ONLY, ExistingNode, NodeClaim, PoolTemplate, Proposal, Rejection
from .quantities import ResourceList, format_resource
from .repack import repack, repack_groups
from .topology import Attempt, Topology, single_value

_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # Kubernetes generateName's alphabet


@dataclass(slots=True)
class Failure:
    pod: Pod
    # Why each NodePool could not take the pod (in NodePool order), from the last attempt.
    rejections: list[tuple[PoolTemplate, Rejection]]

    @property
    def deferred(self) -> bool:
        return any(rejection.reserved_held for _, rejection in self.rejections)


@dataclass(slots=True)
class Results:
    claims: list[NodeClaim]
    bindings: dict[str, str]  # pod key -> existing node name
    failures: list[Failure]
    ledger: ReservationLedger
    limits: dict[str, "PoolLimits"] = field(default_factory=dict)
    topology: Topology | None = None


class PoolLimits:
    """A NodePool's `spec.limits` against existing nodes plus planned claims."""

    def __init__(self, limits: ResourceList, used: ResourceList):
        self.limits = limits
        self.used = ResourceList({name: used.get(name, 0) for name in limits})
        self._claims: dict[int, ResourceList] = {}

    def allows(self, it: InstanceType) -> bool:
        for name, limit in self.limits.items():
            amount = 1 if name == "nodes" else it.capacity.get(name, 0)
            if self.used[name] + amount > limit:
                return False
        return True

    def track(self, claim: NodeClaim) -> None:
        """Count the claim at its largest remaining instance type (updated as it narrows)."""
        new = claim.max_capacity(self.limits)
        old = self._claims.get(claim.seq)
        for name in self.limits:
            self.used[name] += new[name] - (old[name] if old else 0)
        self._claims[claim.seq] = new

    def message(self, instance_types: list[InstanceType]) -> str:
        blocked = []
        for name, limit in sorted(self.limits.items()):
            smallest = min((1 if name == "nodes" else it.capacity.get(name, 0) for it in instance_types), default=0)
            if self.used[name] + smallest > limit:
                blocked.append(f"{name} {format_resource(name, self.used[name])} of {format_resource(name, limit)} in use")
        return "NodePool limits reached (" + ("; ".join(blocked) or "no instance type fits the remaining limits") + ")"


class _Memo:
    """Per pod signature: targets known not to take such a pod, for the rest of the run, and
    claims that refused it for want of a free reservation unit (until the ledger frees one)."""

    __slots__ = ("nodes", "requests", "claims", "refused", "seen", "pools", "blocked", "blocked_at", "pools_blocked",
                 "unreservable")

    def __init__(self, nodes: list[ExistingNode], requests: tuple):
        self.nodes = nodes
        self.requests = requests  # the pods' requests, as sorted items
        self.claims: list[NodeClaim] = []  # claims not known to refuse (in creation order)
        self.refused: set[int] = set()  # seqs of the claims known to refuse
        self.seen = 0
        self.pools: dict[str, Rejection] = {}
        # Seqs of the claims that refused such a pod for want of a free unit, while the ledger's
        # `releases` stays at `blocked_at` (a unit given back may change their answer).
        self.blocked: set[int] = set()
        self.blocked_at = 0
        self.pools_blocked: dict[str, tuple[int, Rejection]] = {}  # the same for new claims
        # (ledger.releases, limit changes) when a new claim would have got no free unit (_reservable).
        self.unreservable: tuple[int, int] | None = None


def _order_key(claim: NodeClaim) -> tuple[int, int]:
    return (len(claim.pods), claim.seq)


class ClaimNamer:
    """Deterministic, unique node claim names `<nodepool>-<5 characters>`."""

    def __init__(self, taken: Iterable[str] = ()):
        self.taken = set(taken)
        self.counters: dict[str, int] = {}

    def next(self, pool: str) -> str:
        while True:
            count = self.counters.get(pool, 0)
            self.counters[pool] = count + 1
            digest = hashlib.sha256(f"{pool}/{count}".encode()).digest()
            name = f"{pool}-" + "".join(_NAME_ALPHABET[b % len(_NAME_ALPHABET)] for b in digest[:5])
            if name not in self.taken:
                self.taken.add(name)
                return name


class Scheduler:
    def __init__(self, templates: list[PoolTemplate], existing: list[ExistingNode], ledger: ReservationLedger,
                 mode: ReservedMode = ReservedMode.STRICT, limits: dict[str, PoolLimits] | None = None,
                 taken_names: Iterable[str] = (), node_order: Callable[[Pod], list[ExistingNode]] | None = None,
                 topology: Topology | None = None, namespaces: dict[str, dict[str, str]] | None = None):
        self.templates = sorted(templates, key=lambda t: t.pool.order_key())
        self.existing = sorted(existing, key=lambda n: (not n.node.ready, n.name))
        self.ledger = ledger
        self.mode = mode
        self.limits = limits or {}
        self.claims: list[NodeClaim] = []
        self.bindings: dict[str, str] = {}
        self.namer = ClaimNamer([n.name for n in existing] + list(taken_names))
        self._memos: dict[tuple, _Memo] = {}
        self._seq = 0
        self._limit_changes = 0  # commits that moved a NodePool's limits (see _reservable)
        # Optional: the existing nodes (in self.existing order) that may take a pod of this pod's
        # signature, leaving out nodes known to refuse it (consolidation caches that across runs).
        self._node_order = node_order
        # Pod topology (spread, pod affinity): built by `solve` from its pods unless given.
        self.topology = topology
        self.namespaces = namespaces or {}
        # Every claim as (pod count, seq, claim), ascending: the order claims are tried in.
        self._order: list[tuple[int, int, NodeClaim]] = []
        # The same entries per topology key and domain (None: claims not pinned to one domain),
        # so that a pod that only some domains allow is tried on claims in those domains only.
        self._by_domain: dict[str, dict[str | None, list[tuple[int, int, NodeClaim]]]] = {}
        self._by_name: dict[str, NodeClaim] = {}
        # Per pod requests: seqs of the strict claims a pod with those requests would outgrow
        # (refuses_outgrowing), for every pod kind with them, while the ledger's `releases`
        # stays at `_outgrown_at`: their room only shrinks and their units only get scarcer meanwhile.
        self._outgrown: dict[tuple, set[int]] = {}
        self._outgrown_at = 0

    def solve(self, pods: Iterable[Pod]) -> Results:
        pods = list(pods)
        if self.topology is None:
            self.topology = Topology(self.templates, self.existing, pods, self.namespaces)
        self._by_domain = {key: {} for key in self.topology.indexed_keys()}
        queue = deque(sorted(pods, key=Pod.sort_key))
        last_length: dict[str, int] = {}
        rejections: dict[str, list[tuple[PoolTemplate, Rejection]]] = {}
        while queue and last_length.get(queue[0].key) != len(queue):
            pod = queue.popleft()
            outcome = self._place(pod)
            # Preferences give way one at a time, as upstream's preferences.Relax, but never to
            # reserved capacity that this run's claims hold (the pod is deferred instead).
            while outcome is not None and pod.can_relax() and not any(r.reserved_held for _, r in outcome):
                pod = pod.relax()
                outcome = self._place(pod)
            if outcome is not None:
                rejections[pod.key] = outcome
                queue.append(pod)
                last_length[pod.key] = len(queue)
        self._repack()
        self._hand_out_free_units()
        failures = [Failure(pod, rejections[pod.key]) for pod in sorted(queue, key=Pod.sort_key)]
        return Results(self.claims, self.bindings, failures, self.ledger, self.limits, self.topology)

    # placing one pod ----------------------------------------------------------------------------

    def _place(self, pod: Pod) -> list[tuple[PoolTemplate, Rejection]] | None:
        # Pods that fit the same places share a memo: equal requests, node requirements,
        # tolerations and topology terms (labels matter only through the groups that count them).
        info = self.topology.info(pod)
        memo = self._memos.get(info.fit_key)
        if memo is None:
            memo = self._memos[info.fit_key] = _Memo(self.existing if self._node_order is None else self._node_order(pod),
                                                     info.fit_key[0])
        attempt = self.topology.attempt(pod, info)
        if self._place_on_existing(pod, memo, attempt):
            return None
        placed = self._place_on_claim(pod, memo, attempt)
        if placed is True:
            return None
        if placed is not None:
            # Only a paid claim that must grow would take the pod: a free reserved unit is better.
            if not self._open_reserved_claim(pod, memo, attempt):
                claim, proposal = placed
                self._commit(claim, pod, proposal)
            return None
        rejections = []
        for template in self.templates:
            rejection = self._open_claim(template, pod, memo, attempt)
            if rejection is None:
                return None
            rejections.append((template, rejection))
        return rejections

    def _place_on_existing(self, pod: Pod, memo: _Memo, attempt: Attempt | None) -> bool:
        refused = set()
        placed = False
        for node in memo.nodes:
            rejection = node.fit(pod, attempt)
            if rejection is None:
                node.commit(pod)
                self.bindings[pod.key] = node.name
                self.topology.record_node(pod, node, self.topology.info(pod))
                placed = True
                break
            if rejection.permanent:
                refused.add(node.seq)
        if refused:
            memo.nodes = [n for n in memo.nodes if n.seq not in refused]
        return placed

    def _place_on_claim(self, pod: Pod, memo: _Memo, attempt: Attempt | None) -> bool | tuple[NodeClaim, Proposal] | None:
        """True when placed; else the first paid claim that would take the pod by growing into a
        pricier instance (the caller prefers a free reserved unit to that), or None.

        Claims are tried fewest pods first (upstream). A memo that many claims refuse sorts its few
        remaining candidates; otherwise the scheduler's standing order is walked, skipping refusals."""
        if memo.seen < len(self.claims):
            memo.claims.extend(self.claims[memo.seen:])
            memo.seen = len(self.claims)
        if not memo.claims:
            return None
        releases = self.ledger.releases
        if memo.blocked_at != releases:  # a unit was given back: ask them again
            memo.blocked, memo.blocked_at = set(), releases
        if self._outgrown_at != releases:
            self._outgrown, self._outgrown_at = {}, releases
        outgrown = self._outgrown.get(memo.requests)
        if outgrown is None:
            outgrown = self._outgrown[memo.requests] = set()
        candidates = self._candidates(memo, attempt, outgrown)
        avoid_growth = self.ledger.any_free()
        reservable: bool | None = None  # could a new claim give this pod a free unit? (asked once)
        blocked = memo.blocked  # the candidates leave these out
        refused = set()
        placed: bool | tuple[NodeClaim, Proposal] | None = None
        for claim in candidates:
            if avoid_growth and claim.hold is None and not claim.could_stay_put(pod):
                # It could only refuse the pod or grow: when a new claim would get a free unit,
                # that is where the pod goes (as below), so this claim need not be asked.
                if reservable is None:
                    reservable = self._reservable(pod, memo, attempt)
                if reservable:
                    continue
            if claim.hold is not None and claim.refuses_outgrowing(pod, self.ledger, self.mode):
                outgrown.add(claim.seq)
                continue
            outcome = claim.fit(pod, self.ledger, self.mode, attempt)
            if isinstance(outcome, Proposal):
                if avoid_growth and claim.grows_paid_launch(outcome):
                    if reservable is None:
                        reservable = self._reservable(pod, memo, attempt)
                    if reservable:
                        placed = placed or (claim, outcome)
                        continue
                self._commit(claim, pod, outcome)  # changes self._order: stop walking it
                placed = True
                break
            if outcome.permanent:
                refused.add(claim.seq)
            elif outcome.until_release:
                blocked.add(claim.seq)
        if refused:
            memo.refused |= refused
            memo.claims = [c for c in memo.claims if c.seq not in refused]
        return placed

    def _candidates(self, memo: _Memo, attempt: Attempt | None, outgrown: set[int]):
        """The claims to try, fewest pods first, leaving out those known to refuse: a memo that
        many claims refuse sorts its few remaining ones; a pod that its topology confines to some
        domains (or, for hostname pod affinity, to some nodes) walks the claims of those only;
        otherwise the standing order is walked."""
        refused, blocked = memo.refused, memo.blocked
        # Claims that refused such a pod until a unit is given back (`blocked`, `outgrown`) are left
        # out where the claims are listed, not skipped by the caller (held strict claims: dozens
        # per memo once units run out, at the front of the order since they hold few pods).
        if len(memo.claims) * 4 <= len(self._order):
            return sorted((c for c in memo.claims if c.seq not in blocked and c.seq not in outgrown), key=_order_key)
        if attempt is not None:
            hosts = attempt.host_hint() if attempt.host else None
            if hosts is not None:
                found = (self._by_name.get(h) for h in hosts)
                return sorted((c for c in found if c is not None and c.seq not in refused and c.seq not in blocked
                               and c.seq not in outgrown), key=_order_key)
            hint = attempt.scan_hint() if attempt.keys else None
            if hint is not None and hint[0] in self._by_domain:
                lists = self._by_domain[hint[0]]
                parts = [lists[d] for d in hint[1] if d in lists]
                if None in lists:
                    parts.append(lists[None])
                return (c for _, seq, c in merge(*parts)
                        if seq not in refused and seq not in blocked and seq not in outgrown)
        return (c for _, seq, c in self._order if seq not in refused and seq not in blocked and seq not in outgrown)

    def _commit(self, claim: NodeClaim, pod: Pod, proposal: Proposal, name: str | None = None) -> None:
        """Add the pod to the claim (a new one when `name` is given) and keep the claim order
        (and its per-domain copies), the topology counts and the NodePool limits up to date."""
        order = self._order
        old = (len(claim.pods), claim.seq)
        domains = [(key, single_value(claim.requirements.get(key))) for key in self._by_domain] if name is None else ()
        if name is None:
            del order[bisect_left(order, old)]
            for key, domain in domains:
                entries = self._by_domain[key][domain]
                del entries[bisect_left(entries, old)]
        claim.commit(pod, proposal, self.ledger, name=name)
        if name is not None:
            self.claims.append(claim)
            self._by_name[claim.name] = claim
        entry = (len(claim.pods), claim.seq, claim)
        insort(order, entry)
        for key, lists in self._by_domain.items():
            insort(lists.setdefault(single_value(claim.requirements.get(key)), []), entry)
        self.topology.record_claim(pod, claim)
        self._track_limits(claim)

    def _reservable(self, pod: Pod, memo: _Memo, attempt: Attempt | None) -> bool:
        """Whether the first NodePool that takes the pod would give a new claim a free unit (as
        `_open_reserved_claim` would find). When not, growing a paid claim is the best there is,
        and the pod takes the first claim that fits, as when no unit is free at all.

        For pods without topology constraints (whose answer changes as counts do), a "no" stands
        until a unit is given back or a NodePool's limits change which pool comes first: units are
        only taken meanwhile, and the memo's known refusals only grow."""
        state = (self.ledger.releases, self._limit_changes) if attempt is None else None
        if state is not None and memo.unreservable == state:
            return False
        if self._first_pool_reserves(pod, memo, attempt):
            return True
        memo.unreservable = state
        return False

    def _first_pool_reserves(self, pod: Pod, memo: _Memo, attempt: Attempt | None) -> bool:
        if not self._free_unit_fits(pod):
            return False
        for template in self.templates:
            if template.name in memo.pools or template.problem is not None:
                continue
            blocked = memo.pools_blocked.get(template.name)
            if blocked is not None and blocked[0] == self.ledger.releases:
                continue
            mask, _ = self._within_limits(template)
            outcome = NodeClaim(template, mask, self._seq).fit(pod, self.ledger, self.mode, attempt)
            if isinstance(outcome, Proposal):
                return outcome.hold is not None
        return False

    def _free_unit_fits(self, pod: Pod) -> bool:
        """Whether some NodePool has a free unit of a type with room for the pod: what any new
        claim holding a unit needs, from bitmasks."""
        for template in self.templates:
            if template.problem is not None:  # a pool that cannot launch (its class missing): no catalog to read
                continue
            free = self.ledger.free_type_mask(template.catalog.view(template.requirements))
            if free and template.catalog.fits_mask(template.daemon_overhead.add(pod.requests)) & free:
                return True
        return False

    def _open_reserved_claim(self, pod: Pod, memo: _Memo, attempt: Attempt | None) -> bool:
        """Open a new claim for the pod only if the first NodePool that takes it gives it a unit."""
        for template in self.templates:
            rejection = self._open_claim(template, pod, memo, attempt, reserved_only=True)
            if rejection is None:
                return True
            if rejection.kind == PAID_ONLY:
                return False
        return False

    def _open_claim(self, template: PoolTemplate, pod: Pod, memo: _Memo, attempt: Attempt | None,
                    reserved_only: bool = False) -> Rejection | None:
        known = memo.pools.get(template.name)
        if known is not None:
            return known
        blocked = memo.pools_blocked.get(template.name)
        if blocked is not None and blocked[0] == self.ledger.releases:
            return blocked[1]
        if template.problem is not None:
            memo.pools[template.name] = rejection = Rejection(template.problem)
            return rejection
        instance_types, limited = self._within_limits(template)
        claim = NodeClaim(template, instance_types, self._seq)
        outcome = claim.fit(pod, self.ledger, self.mode, attempt)
        if isinstance(outcome, Rejection):
            if limited and outcome.kind == NO_INSTANCE_TYPE:
                outcome = self._limits_or(template, pod, outcome, attempt)
            if outcome.permanent:
                memo.pools[template.name] = outcome
            elif outcome.until_release and not limited:  # limits may loosen as claims narrow
                memo.pools_blocked[template.name] = (self.ledger.releases, outcome)
            return outcome
        if reserved_only and outcome.hold is None:
            return Rejection("the new claim would launch on-demand or spot", permanent=False, kind=PAID_ONLY)
        self._seq += 1
        self._commit(claim, pod, outcome, name=self.namer.next(template.name))
        return None

    def _limits_or(self, template: PoolTemplate, pod: Pod, rejection: Rejection, attempt: Attempt | None) -> Rejection:
        """Blame the NodePool limits only if the pod would fit without them."""
        unlimited = NodeClaim(template, template.mask, self._seq).fit(pod, self.ledger, self.mode, attempt)
        if isinstance(unlimited, Rejection) and unlimited.permanent:
            return unlimited
        return Rejection(self.limits[template.name].message(template.instance_types), permanent=False, kind=LIMITS)

    def _within_limits(self, template: PoolTemplate) -> tuple[int, bool]:
        """The template's instance types (as a mask) that fit within the NodePool's limits."""
        limits = self.limits.get(template.name)
        if limits is None:
            return template.mask, False
        allowed = [it for it in template.instance_types if limits.allows(it)]
        return template.catalog.mask_of(allowed), len(allowed) != len(template.instance_types)

    def _track_limits(self, claim: NodeClaim) -> None:
        limits = self.limits.get(claim.template.name)
        if limits is not None:
            limits.track(claim)
            self._limit_changes += 1

    def _repack(self) -> None:
        """Claims whose pods are free to move are packed again when that launches cheaper
        (repack.py: first-fit decreasing leaves CPU-heavy and memory-heavy claims behind)."""
        limited = set(self.limits)
        for group in repack_groups(self.claims, self.topology, limited):
            new = repack(group, self.ledger, self.mode, self.topology, self.namer.next, self.next_seq)
            if new is None:
                continue
            old = {claim.seq for claim in group}
            self.claims = [c for c in self.claims if c.seq not in old] + new
        self._order = sorted((len(c.pods), c.seq, c) for c in self.claims)
        self._by_name = {c.name: c for c in self.claims}
        for key in self._by_domain:
            lists: dict[str | None, list] = {}
            for entry in self._order:
                lists.setdefault(single_value(entry[2].requirements.get(key)), []).append(entry)
            self._by_domain[key] = lists

    def next_seq(self) -> int:
        self._seq += 1
        return self._seq - 1

    def _hand_out_free_units(self) -> None:
        """Units freed by swaps go to claims that hold none (oldest claim first)."""
        for claim in self.claims:
            if claim.hold is None and claim.template.allows_reserved():
                best = claim.free_reservation(self.ledger)
                if best is not None:
                    claim.take(best, self.ledger)
