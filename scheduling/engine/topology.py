"""Pod topology: topology spread constraints, pod affinity and pod anti-affinity, required and
preferred, on any topology key (zone and hostname above all), counting pods already running.

The model is upstream Karpenter's (`topology.go`, `topologygroup.go`):

  * A group counts, per domain (one value of its topology key: a zone, a hostname, ...), the pods
    its label selector selects in its namespaces. Pods with equal terms share one group, so a
    Deployment of 1,000 replicas is one group with 1,000 owners, not 1,000 groups.
  * Spread (`maxSkew`): a pod may go to domain d when `count(d) + self - min <= maxSkew`, where
    `self` is 1 when the pod is selected by its own constraint and `min` is the smallest count over
    the domains the pod could use. For hostname, min is always 0 (a new node can always be made).
    While fewer than `minDomains` domains exist, min is 0. An unpinned node claim takes the allowed
    domain with the fewest pods.
  * Affinity: only domains whose count is above 0. When no domain has a matching pod and the pod
    selects itself, it may seed any domain (the first pod of a self-affine group).
  * Anti-affinity: only domains whose count is 0. Symmetrically (Kubernetes' rule for required
    terms), a pod that a running or placed pod's REQUIRED anti-affinity term selects may not join a
    domain holding such a pod ("inverse" groups count the owners of the term).
  * Domains: for a spread constraint, the values of its key that the NodePools the pod is
    compatible with (and, with `nodeTaintsPolicy: Honor`, tolerates) can launch (zones from their instance types' offerings, custom labels
    from their requirements), plus those of existing nodes that pass the constraint's node
    filter (`nodeAffinityPolicy: Honor`, the default: nodes matching the pod's nodeSelector and
    required node affinity; `nodeTaintsPolicy: Honor`: and whose taints it tolerates). Hostnames:
    every node and every node claim.
  * Counted: pods bound to existing nodes (except those being rescheduled) and pods this run
    places. Namespaces: the term's `namespaces`, plus those its `namespaceSelector` selects (labels
    from WORLD.json's optional `namespaces`; every namespace has `kubernetes.io/metadata.name`),
    else the pod's own namespace.

Where karpweb is exact and upstream is not: upstream records a placed pod in a group only when
its node claim is already pinned to one domain (an anti-affinity pod: in every domain it might
end up in), so pods on claims that later launch in some zone are never counted there. Here a pod
that any group counts pins its node claim to one domain when it joins (the domain the claim would
launch in: the reservation it holds, else the zone with spot capacity, else by name; for spread
owners the allowed domain with the fewest pods), so every count is the count the cluster will have.

Rejections caused by counts that can still change (spread skew, affinity waiting for its pods)
are transient; those that only get worse as pods are added (anti-affinity, hostname spread) stay
true for the rest of the run, which the scheduler's memoisation relies on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, Mapping

from .labels import HOSTNAME, OFFERING_LABELS
from .podaffinity import NAMESPACE_NAME_LABEL, HONOR, AffinityTerm, LabelSelector, SpreadConstraint
from .rejection import Rejection
from .requirements import Requirement, Requirements
from .taints import Toleration, untolerated

if TYPE_CHECKING:  # pragma: no cover
    from .catalog import Catalog
    from .cluster import Pod
    from .instancetypes import Offering
    from .nodeclaim import ExistingNode, NodeClaim, PoolTemplate

SPREAD, AFFINITY, ANTI_AFFINITY = "topology spread", "pod affinity", "pod anti-affinity"
INVERSE = "inverse"  # another pod's required anti-affinity selects this one


class Group:
    """Pods selected by one term, counted per domain of its key (see the module docstring)."""

    __slots__ = ("index", "kind", "key", "selector", "namespaces", "namespace_selector", "max_skew", "min_domains",
                 "node_filter", "tolerations", "counts", "owner_counts", "required_owners")

    def __init__(self, index: int, kind: str, key: str, selector: LabelSelector | None,
                 namespaces: frozenset[str] | None, namespace_selector: LabelSelector | None = None,
                 max_skew: int = 0, min_domains: int | None = None,
                 node_filter: tuple[Requirements, ...] | None = None,
                 tolerations: tuple[Toleration, ...] | None = None):
        self.index = index
        self.kind = kind
        self.key = key
        self.selector = selector
        self.namespaces = namespaces
        self.namespace_selector = namespace_selector
        self.max_skew = max_skew
        self.min_domains = min_domains
        self.node_filter = node_filter  # spread: only nodes matching one of these count
        self.tolerations = tolerations  # spread with nodeTaintsPolicy Honor
        self.counts: dict[str, int] = {}  # domain -> selected pods
        self.owner_counts: dict[str, int] = {}  # anti-affinity: domain -> pods owning the term (required)
        self.required_owners = False

    def selects(self, namespace: str, labels: Mapping[str, str], namespace_labels) -> bool:
        if self.selector is None:
            return False
        if self.namespaces is not None and namespace not in self.namespaces:
            if self.namespace_selector is None or not self.namespace_selector.matches(namespace_labels(namespace)):
                return False
        return self.selector.matches(labels)

    def node_counts(self, node: "ExistingNode") -> bool:
        """Whether pods on this node count (spread: the node filter and, with Honor, taints)."""
        if self.node_filter is not None and not any(alt.matches_labels(node.labels) for alt in self.node_filter):
            return False
        return self.tolerations is None or untolerated(node.taints, self.tolerations) is None

    def claim_counts(self, claim: "NodeClaim") -> bool:
        if self.node_filter is not None:
            well_known = claim.template.catalog.well_known
            if not any(claim.requirements.compatible(alt, well_known) is None for alt in self.node_filter):
                return False
        return self.tolerations is None or untolerated(claim.template.taints, self.tolerations) is None

    def describe(self) -> str:
        if self.kind == SPREAD:
            return f"topology spread on {self.key} (maxSkew {self.max_skew})"
        return f"{self.kind} on {self.key}"


class PodInfo:
    """What the topology asks of pods with one signature: the groups it owns (its active terms),
    the groups that count it, and the key under which the scheduler memoises its fits."""

    __slots__ = ("owned", "inverse", "selected_by", "owner_of", "pin_keys", "fit_key", "constrained")

    def __init__(self, owned, inverse, selected_by, owner_of, pin_keys, fit_key):
        self.owned: tuple[tuple[Group, bool], ...] = owned
        self.inverse: tuple[Group, ...] = inverse
        self.selected_by: tuple[Group, ...] = selected_by
        self.owner_of: tuple[Group, ...] = owner_of
        self.pin_keys: frozenset[str] = pin_keys
        self.fit_key = fit_key
        self.constrained = bool(owned or inverse or pin_keys)


class Rule:
    """The domains one topology key allows for a pod right now."""

    __slots__ = ("allowed", "forbidden", "weights", "pin", "counted", "transient", "why")

    def __init__(self) -> None:
        self.allowed: set[str] | None = None  # None: any
        self.forbidden: set[str] = set()
        self.weights: dict[str, int] | None = None  # spread counts, for choosing a domain
        self.pin = False  # the claim must end up in one domain (spread, affinity seed)
        self.counted = False  # a group counts the pod: pin the claim so that the count is exact
        self.transient = False  # the answer may change as pods are placed
        self.why: list[str] = []

    def restrict(self, domains: set[str]) -> None:
        self.allowed = set(domains) if self.allowed is None else self.allowed & domains

    def message(self, key: str, candidates: set[str] | None) -> str:
        text = "; ".join(self.why) if self.why else f"{key}: no domain allowed"
        if candidates is None or not candidates:
            return text + f" (the node has no {key} label)"
        if self.allowed is not None and candidates & self.allowed:
            return text  # allowed, but ruled out by another term
        if self.allowed is None or self.allowed:
            where = "is in" if len(candidates) == 1 else "could be in"
            return text + f" (the node {where} {_show(candidates)})"
        return text


class Attempt:
    """The topology's answer for one pod at one moment: hostname checks per target, and allowed
    domains per other key. Built once per placement attempt (counts change only on commits)."""

    __slots__ = ("topology", "pod", "host", "keys", "seed_hosts")

    def __init__(self, topology: "Topology", pod: "Pod"):
        self.topology = topology
        self.pod = pod
        self.host: list[tuple[str, Group, bool]] = []
        self.keys: dict[str, Rule] = {}
        self.seed_hosts: dict[int, bool] = {}

    def scan_hint(self) -> tuple[str, set[str]] | None:
        """The key whose allowed domains are fewest, and those domains: node claims pinned to
        another domain of that key cannot take the pod, so the scheduler need not try them."""
        best = None
        for key, rule in self.keys.items():
            if rule.allowed is not None and (best is None or len(rule.allowed) < len(best[1])):
                best = (key, rule.allowed - rule.forbidden)
        return best

    def host_hint(self) -> set[str] | None:
        """Hostname pod affinity (not seeding): only nodes running a pod it selects can take it."""
        hosts = None
        for kind, group, _ in self.host:
            if kind == AFFINITY and not self.seed_hosts[group.index]:
                present = {h for h, count in group.counts.items() if count}
                hosts = present if hosts is None else hosts & present
        return hosts

    # targets -------------------------------------------------------------------------------------

    def check_host(self, host: str | None):
        """Hostname constraints on a node or claim named `host` (None: a new claim). Returns a
        Rejection or None."""
        for kind, group, selfish in self.host:
            count = group.counts.get(host, 0) if host is not None else 0
            if kind == SPREAD:
                if count + selfish > group.max_skew:
                    return Rejection(f"{group.describe()}: the node already has {count} matching pod(s)")
            elif kind == ANTI_AFFINITY:
                if count:
                    return Rejection(f"pod anti-affinity on {HOSTNAME}: the node runs a pod it selects")
            elif kind == INVERSE:
                if host is not None and group.owner_counts.get(host, 0):
                    return Rejection("pod anti-affinity: a pod on the node does not allow it there")
            elif kind == AFFINITY and not count and not self.seed_hosts[group.index]:
                where = "no node runs a pod it selects" if host is None else "the node runs no pod it selects"
                return Rejection(f"pod affinity on {HOSTNAME}: {where}", permanent=False)
        return None

    def check_node(self, node: "ExistingNode"):
        rejection = self.check_host(node.hostname) if self.host else None
        if rejection is not None:
            return rejection
        for key, rule in self.keys.items():
            value = node.labels.get(key)
            if value is None:
                if rule.allowed is not None:
                    return Rejection(f"the node has no {key} label")
                continue
            if value in rule.forbidden:
                return Rejection(rule.message(key, {value}))
            if rule.allowed is not None and value not in rule.allowed:
                return Rejection(rule.message(key, {value}), permanent=False)
        return None

    def apply(self, requirements: Requirements, catalog: "Catalog", mask: int, hold: "Offering | None",
              min_value_keys: frozenset[str] = frozenset()):
        """The claim's requirements narrowed to the domains allowed (one domain where the pod
        must be pinned), or a Rejection. Returns (requirements, transient). A pod that is only
        counted does not pin a key the NodePool wants minValues of (it stays uncounted there,
        as upstream counts it)."""
        transient = False
        for key, rule in self.keys.items():
            req = requirements.get(key)
            candidates = self.topology.candidates(key, req, catalog)
            if not candidates:  # the node claim cannot carry this label at all
                if rule.allowed is not None:
                    return Rejection(rule.message(key, set()), permanent=not rule.transient), False
                continue  # no domain: nothing to count or to keep away from
            ok = candidates if rule.allowed is None else candidates & rule.allowed
            if rule.forbidden:
                ok = ok - rule.forbidden
            if not ok:
                return Rejection(rule.message(key, candidates), permanent=not rule.transient), False
            if rule.pin or len(ok) == 1 or (rule.counted and key not in min_value_keys):
                if single_value(req) is not None:
                    continue  # already pinned
                domain = self._choose(key, ok, rule, requirements, catalog, mask, hold)
                narrowed = Requirement.single(key, domain)
            elif len(ok) < len(candidates):
                narrowed = Requirement(key, False, ok)
            else:
                continue
            requirements = requirements.intersect([narrowed])
            transient = transient or rule.transient
        return requirements, transient

    def _choose(self, key: str, domains: set[str], rule: Rule, requirements: Requirements, catalog: "Catalog",
                mask: int, hold: "Offering | None") -> str:
        """Spread: the fewest pods first. Then where the claim launches best: the reservation it
        holds, else a domain with spot capacity, else on-demand; then by name."""
        weights = rule.weights or {}
        launch_key = key in catalog.relevant_keys

        def rank(domain: str) -> tuple:
            launch = 0
            if launch_key:
                if hold is not None and hold.labels.get(key) == domain:
                    launch = -1
                else:
                    launch = catalog.launch_rank_in(requirements, key, domain, mask)
            return (launch >= 3, weights.get(domain, 0), launch, domain)

        return min(domains, key=rank)


def _show(domains: Iterable[str], counts: Mapping[str, int] | None = None) -> str:
    items = sorted(domains)
    if counts is not None:
        return ", ".join(f"{d}={counts.get(d, 0)}" for d in items) or "none"
    return ", ".join(items) or "none"


def single_value(req: Requirement | None) -> str | None:
    if req is not None and not req.complement and len(req.values) == 1:
        return next(iter(req.values))
    return None


class Topology:
    """Every group of one scheduling run, their counts, and the domains each key can take."""

    def __init__(self, templates: list["PoolTemplate"], existing: list["ExistingNode"], pending: Iterable["Pod"],
                 namespace_labels: Mapping[str, Mapping[str, str]] | None = None):
        self.templates = [t for t in templates if t.catalog is not None and t.problem is None]
        self.existing = existing
        self._namespace_labels = dict(namespace_labels or {})
        self.groups: dict[tuple, Group] = {}
        self._infos: dict[tuple, PodInfo] = {}
        self._by_pod: dict[int, tuple["Pod", PodInfo]] = {}
        self._selecting: dict[tuple, tuple[Group, ...]] = {}
        self._eligible: dict[tuple, frozenset[str]] = {}
        self.universe: dict[str, set[str]] = {}
        self._template_domains: dict[str, dict[str, set[str]]] = {}
        pending = list(pending)
        for pod in pending:
            self._register(pod)
        self._registered = {id(pod) for pod in pending}  # while `pending` lives, ids are unique
        self._pending = pending
        moving = {pod.key for pod in pending}
        for node in existing:
            for pod in node.pods:
                if pod.key not in moving:
                    for term in pod.anti_affinity:
                        self._group(ANTI_AFFINITY, term, pod).required_owners = True
        if not self.groups:
            return  # no term anywhere: nothing to count (consolidation simulates many such runs)
        for node in existing:
            for pod in node.pods:
                if pod.key not in moving:
                    self.record_node(pod, node)

    @property
    def empty(self) -> bool:
        return not self.groups

    def indexed_keys(self) -> list[str]:
        """Keys (other than hostname) that spread and affinity terms restrict: the scheduler
        indexes node claims by their domain of each."""
        return sorted({g.key for g in self.groups.values() if g.key != HOSTNAME and g.kind in (SPREAD, AFFINITY)})

    def namespace_labels(self, namespace: str) -> Mapping[str, str]:
        return self._namespace_labels.get(namespace) or {NAMESPACE_NAME_LABEL: namespace}

    # groups --------------------------------------------------------------------------------------

    def _register(self, pod: "Pod") -> None:
        for constraint in pod.spread:
            self._spread_group(constraint, pod)
        for term in pod.affinity:
            self._group(AFFINITY, term, pod)
        for weighted in pod.preferred_affinity:
            self._group(AFFINITY, weighted.term, pod)
        for term in pod.anti_affinity:
            self._group(ANTI_AFFINITY, term, pod).required_owners = True
        for weighted in pod.preferred_anti_affinity:
            self._group(ANTI_AFFINITY, weighted.term, pod)

    def _add(self, identity: tuple, make) -> Group:
        group = self.groups.get(identity)
        if group is None:
            group = self.groups[identity] = make(len(self.groups))
            self._selecting.clear()  # a new group may select pods already looked at
            self._infos.clear()
            self._by_pod.clear()
            if group.key != HOSTNAME and group.key not in self.universe:
                self._domains_of(group.key)
        return group

    def _group(self, kind: str, term: AffinityTerm, pod: "Pod") -> Group:
        selector_key = term.selector.requirements.key if term.selector is not None else None
        ns_selector_key = term.namespace_selector.requirements.key if term.namespace_selector is not None else None
        identity = (kind, term.topology_key, selector_key, term.namespaces, ns_selector_key)
        return self._add(identity, lambda i: Group(i, kind, term.topology_key, term.selector, term.namespaces,
                                                     term.namespace_selector))

    def _spread_group(self, constraint: SpreadConstraint, pod: "Pod") -> Group:
        node_filter = None
        if constraint.node_affinity_policy == HONOR and any(len(alt) for alt in pod.strict_alternatives):
            node_filter = pod.strict_alternatives
        tolerations = pod.tolerations if constraint.node_taints_policy == HONOR else None
        selector = constraint.selector
        identity = (SPREAD, constraint.topology_key, selector.requirements.key if selector is not None else None,
                    pod.namespace, constraint.max_skew, constraint.min_domains,
                    tuple(alt.key for alt in node_filter) if node_filter is not None else None, tolerations)
        return self._add(identity, lambda i: Group(i, SPREAD, constraint.topology_key, selector,
                                                     frozenset([pod.namespace]), None, constraint.max_skew,
                                                     constraint.min_domains, node_filter, tolerations))

    def selecting(self, pod: "Pod") -> tuple[Group, ...]:
        """Every group whose selector selects the pod (they count it)."""
        key = (pod.namespace, tuple(sorted(pod.labels.items())))
        found = self._selecting.get(key)
        if found is None:
            found = self._selecting[key] = tuple(g for g in self.groups.values()
                                                 if g.selects(pod.namespace, pod.labels, self.namespace_labels))
        return found

    def info(self, pod: "Pod") -> PodInfo:
        # By identity first (pods live through the run; hashing a signature is not free), then
        # by signature, which pods that fit alike share.
        seen = self._by_pod.get(id(pod))
        if seen is not None and seen[0] is pod:
            return seen[1]
        found = self._infos.get(pod.signature)
        if found is None:
            found = self._new_info(pod)
        self._by_pod[id(pod)] = (pod, found)
        return found

    def _new_info(self, pod: "Pod") -> PodInfo:
        if id(pod) not in self._registered:
            self._register(pod)  # a pod the run did not start with (a relaxed copy) may bring new groups
        owned = []
        for constraint in pod.active_spread:
            owned.append(self._spread_group(constraint, pod))
        owned += [self._group(AFFINITY, term, pod) for term in pod.active_affinity]
        owned += [self._group(ANTI_AFFINITY, term, pod) for term in pod.active_anti_affinity]
        selected_by = self.selecting(pod)
        selected = set(selected_by)
        owned_entries = tuple((g, g in selected) for g in dict.fromkeys(owned))
        inverse = tuple(g for g in selected_by if g.kind == ANTI_AFFINITY and g.required_owners)
        owner_of = tuple(dict.fromkeys(self._group(ANTI_AFFINITY, term, pod) for term in pod.anti_affinity))
        pin_keys = frozenset(g.key for g in selected_by + owner_of if g.key != HOSTNAME)
        fit_key = (tuple(sorted(pod.requests.items())), pod.alternatives, pod.tolerations,
                   tuple((g.index, selfish) for g, selfish in owned_entries), tuple(g.index for g in inverse),
                   tuple(sorted(pin_keys)),
                   # hostname affinity seeds and spread domains depend on the pod's own node requirements
                   pod.strict_alternatives if owned_entries else (),
                   pod.host_ports)  # a refusal for a host port holds only for pods asking for it
        found = self._infos[pod.signature] = PodInfo(owned_entries, inverse, selected_by, owner_of, pin_keys, fit_key)
        return found

    # domains -------------------------------------------------------------------------------------

    def _domains_of(self, key: str) -> None:
        """The universe of `key`'s domains, and the part each NodePool can launch."""
        universe = self.universe.setdefault(key, set())
        per_template = self._template_domains.setdefault(key, {})
        for template in self.templates:
            domains = per_template[template.name] = self._template_values(template, key)
            universe |= domains
        for node in self.existing:
            value = node.labels.get(key)
            if value is not None:
                universe.add(value)

    @staticmethod
    def _template_values(template: "PoolTemplate", key: str) -> set[str]:
        catalog = template.catalog
        req = template.requirements.get(key)
        values: set[str] = set()
        if key in OFFERING_LABELS:
            view = catalog.view(template.requirements)
            values = {value for value, mask in view.offering_masks.get(key, {}).items() if mask & template.mask}
        elif key in catalog.instance_keys:
            values = {it.labels[key] for it in template.instance_types if key in it.labels}
        elif req is not None and not req.complement:
            values = set(req.values)
        return {v for v in values if req is None or req.has(v)}

    def candidates(self, key: str, req: Requirement | None, catalog: "Catalog") -> set[str] | None:
        """The domains of `key` a node claim with requirement `req` on it may still be in; None
        when the claim cannot carry the label (its NodePool does not define it)."""
        if req is None:
            if key not in catalog.well_known:
                return None
            return set(self.universe.get(key, ()))
        if not req.complement:
            return set(req.values)
        return {d for d in self.universe.get(key, ()) if req.has(d)}

    def _pod_allows(self, pod: "Pod", key: str, domain: str) -> bool:
        for alt in pod.strict_alternatives:
            req = alt.get(key)
            if req is None or req.has(domain):
                return True
        return False

    def eligible(self, group: Group, pod: "Pod") -> frozenset[str]:
        """The domains a spread constraint counts for this pod: reachable through a NodePool it
        tolerates and is compatible with, or an existing node that passes the node filter; and
        allowed by its own node requirements."""
        cache_key = (group.index, pod.tolerations, tuple(alt.key for alt in pod.strict_alternatives))
        found = self._eligible.get(cache_key)
        if found is not None:
            return found
        key = group.key
        domains: set[str] = set()
        per_template = self._template_domains.get(key, {})
        for template in self.templates:
            # nodeTaintsPolicy Ignore (the default) counts a NodePool's domains whatever its taints,
            # as it counts existing nodes' (upstream TopologyDomainGroup.ForEachDomain).
            if group.tolerations is not None and template.untolerated(pod) is not None:
                continue
            well_known = template.catalog.well_known
            if any(template.requirements.compatible(alt, well_known) is None for alt in pod.strict_alternatives):
                domains |= per_template.get(template.name, set())
        for node in self.existing:
            value = node.labels.get(key)
            if value is not None and group.node_counts(node):
                domains.add(value)
        found = self._eligible[cache_key] = frozenset(d for d in domains if self._pod_allows(pod, key, d))
        return found

    # one attempt ---------------------------------------------------------------------------------

    def attempt(self, pod: "Pod", info: PodInfo | None = None) -> Attempt | None:
        """The pod's topology constraints as they stand now; None when it has none."""
        info = info or self.info(pod)
        if not info.constrained:
            return None
        attempt = Attempt(self, pod)
        for group, selfish in info.owned:
            if group.key == HOSTNAME:
                attempt.host.append((group.kind, group, selfish))
                if group.kind == AFFINITY:
                    attempt.seed_hosts[group.index] = selfish and not any(group.counts.values())
                continue
            rule = attempt.keys.get(group.key)
            if rule is None:
                rule = attempt.keys[group.key] = Rule()
            if group.kind == SPREAD:
                self._spread_rule(group, selfish, pod, rule)
            elif group.kind == AFFINITY:
                self._affinity_rule(group, selfish, pod, rule)
            else:
                taken = {d for d, count in group.counts.items() if count}
                rule.forbidden |= taken
                if taken:
                    rule.why.append(f"pod anti-affinity on {group.key}: {_show(taken)} already run(s) a pod it selects")
        for group in info.inverse:
            if group.key == HOSTNAME:
                attempt.host.append((INVERSE, group, False))
                continue
            taken = {d for d, count in group.owner_counts.items() if count}
            rule = attempt.keys.get(group.key)
            if rule is None:
                rule = attempt.keys[group.key] = Rule()
            new = taken - rule.forbidden
            rule.forbidden |= taken
            if new:
                rule.why.append(f"pod anti-affinity on {group.key}: pods in {_show(new)} do not allow it there")
        for key in info.pin_keys:
            rule = attempt.keys.get(key)
            if rule is None:
                rule = attempt.keys[key] = Rule()
            rule.counted = True
        return attempt

    def _spread_rule(self, group: Group, selfish: bool, pod: "Pod", rule: Rule) -> None:
        domains = self.eligible(group, pod)
        counts = group.counts
        lowest = min((counts.get(d, 0) for d in domains), default=0)
        if group.min_domains is not None and len(domains) < group.min_domains:
            lowest = 0
        allowed = {d for d in domains if counts.get(d, 0) + selfish - lowest <= group.max_skew}
        rule.restrict(allowed)
        rule.pin = True
        rule.transient = True
        if rule.weights is None:
            rule.weights = {}
        for d in domains:
            rule.weights[d] = rule.weights.get(d, 0) + counts.get(d, 0)
        if not domains:
            rule.why.append(f"{group.describe()}: no NodePool or node offers a {group.key} it can use")
        elif not allowed:
            rule.why.append(f"{group.describe()}: no domain allowed now (pods per domain: {_show(domains, counts)})")
        else:
            rule.why.append(f"{group.describe()} allows {_show(allowed)} now (pods per domain: {_show(domains, counts)})")

    def _affinity_rule(self, group: Group, selfish: bool, pod: "Pod", rule: Rule) -> None:
        key = group.key
        present = {d for d, count in group.counts.items() if count and self._pod_allows(pod, key, d)}
        rule.transient = True
        if present:
            rule.restrict(present)
            rule.why.append(f"pod affinity on {key}: the pods it selects run in {_show(present)}")
        elif selfish:  # the first pod of a self-affine group seeds a domain
            rule.pin = True
            rule.why.append(f"pod affinity on {key}: no pod it selects runs yet, so it may start in any domain")
        else:
            rule.restrict(set())
            rule.why.append(f"pod affinity on {key}: no pod it selects runs in any domain")

    # counting ------------------------------------------------------------------------------------

    def record_node(self, pod: "Pod", node: "ExistingNode", info: PodInfo | None = None) -> None:
        selected_by = info.selected_by if info is not None else self.selecting(pod)
        for group in selected_by:
            domain = node.hostname if group.key == HOSTNAME else node.labels.get(group.key)
            if domain is not None and (group.kind != SPREAD or group.node_counts(node)):
                group.counts[domain] = group.counts.get(domain, 0) + 1
        owner_of = info.owner_of if info is not None else tuple(
            self._group(ANTI_AFFINITY, term, pod) for term in pod.anti_affinity)
        for group in owner_of:
            domain = node.hostname if group.key == HOSTNAME else node.labels.get(group.key)
            if domain is not None:
                group.owner_counts[domain] = group.owner_counts.get(domain, 0) + 1

    def record_claim(self, pod: "Pod", claim: "NodeClaim") -> None:
        info = self.info(pod)
        requirements = claim.requirements
        for group in info.selected_by:
            domain = claim.name if group.key == HOSTNAME else single_value(requirements.get(group.key))
            if domain is not None and (group.kind != SPREAD or group.claim_counts(claim)):
                group.counts[domain] = group.counts.get(domain, 0) + 1
        for group in info.owner_of:
            domain = claim.name if group.key == HOSTNAME else single_value(requirements.get(group.key))
            if domain is not None:
                group.owner_counts[domain] = group.owner_counts.get(domain, 0) + 1
