"""The reservation doctor: what stops a reservation from being used, with its evidence and its fix.

Pure: facts in (the reservations a cluster's account sees, its EC2NodeClasses and what each selector
term matched, its NodePools, recent launch errors, pending AWS RAM invitations, IAM policy
simulation results), findings out. The mirror gathers the facts (reservations/doctor.py), the EC2
step asks EC2, RAM and IAM for theirs, and the faces show the findings.

Codes (docs/reservation-doctor.md):

- ``selector-matches-nothing``: an EC2NodeClass's term selects no usable reservation.
- ``reservation-unselected``: a usable reservation with free units no EC2NodeClass selects.
- ``ram-share-not-accepted``: a reservation shared through AWS RAM whose invitation is pending.
- ``iam-permission-missing``: karpweb's or Karpenter's role lacks an action (simulation or errors seen).
- ``iam-not-simulated``: the policy simulation was refused; the errors seen are the only evidence.
- ``fleet-open-only``: a Capacity Reservation Fleet's reservation (open matching only) no class selects.
- ``unavailable-after-throttling``: a reservation marked full after a throttled launch, not a capacity error.
- ``no-nodepool-matches``: a selected reservation no NodePool can launch into (platform, tenancy,
  placement group, instance type, zone, capacity type).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from .labels import CAPACITY_TYPE, INSTANCE_TYPE, OS, RESERVATION_ID, RESERVED, ZONE
from .requirements import Requirement, RequirementError, Requirements
from .reservations import CapacityReservation
from .selectors import parse_terms

CRITICAL, WARNING, INFO = "critical", "warning", "info"
SEVERITIES = (CRITICAL, WARNING, INFO)

SELECTOR_MATCHES_NOTHING = "selector-matches-nothing"
RESERVATION_UNSELECTED = "reservation-unselected"
RAM_SHARE_NOT_ACCEPTED = "ram-share-not-accepted"
IAM_PERMISSION_MISSING = "iam-permission-missing"
IAM_NOT_SIMULATED = "iam-not-simulated"
FLEET_OPEN_ONLY = "fleet-open-only"
UNAVAILABLE_AFTER_THROTTLING = "unavailable-after-throttling"
NO_NODEPOOL_MATCHES = "no-nodepool-matches"
PLANNING_EXCLUDED = "planning-excluded"
CODES = (SELECTOR_MATCHES_NOTHING, RESERVATION_UNSELECTED, RAM_SHARE_NOT_ACCEPTED, IAM_PERMISSION_MISSING,
         IAM_NOT_SIMULATED, FLEET_OPEN_ONLY, UNAVAILABLE_AFTER_THROTTLING, NO_NODEPOOL_MATCHES, PLANNING_EXCLUDED)

# The actions each principal needs for reservations (aws/karpenter-provider-aws's controller policy
# and karpweb's deploy/iam/ policies). karpweb's control actions are checked in control mode only.
KARPWEB_OBSERVE_ACTIONS = ("ec2:DescribeCapacityReservations", "ec2:DescribeInstances",
                           "ec2:GetCapacityReservationUsage", "ram:GetResourceShareInvitations")
KARPWEB_CONTROL_ACTIONS = ("ec2:CreateFleet", "ec2:RunInstances", "ec2:CreateLaunchTemplate")
KARPENTER_ACTIONS = ("ec2:DescribeCapacityReservations", "ec2:CreateFleet", "ec2:RunInstances",
                     "ec2:CreateLaunchTemplate")
# The platforms a Karpenter launch runs: the EKS images are Linux/UNIX or Windows (License Included).
LINUX, WINDOWS = "Linux/UNIX", "Windows"


@dataclass(frozen=True)
class ReservationFact:
    reservation: CapacityReservation
    platform: str = LINUX
    tenancy: str = "default"
    placement_group_arn: str = ""
    fleet_id: str = ""
    shared: bool = False
    # The mirror counts no free unit although EC2's last sync counted some: a launch error marked it.
    marked_unavailable: bool = False
    last_synced_available: int | None = None
    # The instance type's labels (arch, family, ...) as the catalogue has them; requirements on keys
    # neither these nor the offering give are not judged (the doctor never guesses).
    type_labels: Mapping[str, str] = field(default_factory=dict)
    # Owned by this cluster's account but meant for others: the accounts it is shared with through AWS RAM,
    # or (split_off) the account a split made it for ("" while none is named). This account's clusters must
    # leave it to them: selecting it here would hand those units back (the doctor never advises it).
    meant_for: Sequence[str] = ()
    split_off: bool = False

    @property
    def id(self) -> str:
        return self.reservation.id

    def kept_for_others(self, account: str) -> bool:
        """Whether its units are meant for accounts other than `account` (a split or a share made them so)."""
        return (bool(self.meant_for) or self.split_off) and account not in self.meant_for

    def others_words(self) -> str:
        """"account 210987654321", or "the account it is to be shared with" for a split with none named yet."""
        named = [account for account in self.meant_for if account]
        if not named:
            return "the account it is to be shared with"
        return f"account{'s' if len(named) != 1 else ''} {', '.join(sorted(named))}"

    def leave_to_others(self) -> str:
        """The advice for a reservation kept for other accounts: theirs to select, never this account's."""
        how = "split off" if self.split_off else "shared"
        return (f"It was {how} for {self.others_words()}: select it in an EC2NodeClass of their clusters, not here "
                "(selecting it in this account's classes would hand its units back to this account's clusters).")


@dataclass(frozen=True)
class NodeClassFact:
    name: str
    terms: Sequence[Mapping[str, Any]] = ()
    selected: Sequence[str] = ()  # status.capacityReservations' ids
    # The CapacityReservationsReady condition when its reason is Unauthorized (an EC2 error seen).
    unauthorized_message: str = ""
    ami_family: str = ""
    spec: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class NodePoolFact:
    name: str
    node_class: str
    requirements: Sequence[Mapping[str, Any]] = ()


@dataclass(frozen=True)
class LaunchErrorFact:
    reservation_id: str
    code: str
    message: str
    at: datetime
    throttled: bool = False
    unauthorized: bool = False
    subject: str = ""


@dataclass(frozen=True)
class InvitationFact:
    arn: str
    share_name: str
    sender: str
    reservation_ids: Sequence[str] = ()


@dataclass(frozen=True)
class PermissionFact:
    """One action as iam:SimulatePrincipalPolicy answered it for one principal."""

    principal: str  # "karpweb" or "karpenter"
    principal_arn: str
    action: str
    decision: str  # allowed | implicitDeny | explicitDeny


@dataclass(frozen=True)
class SimulationRefusal:
    principal: str
    principal_arn: str
    code: str
    message: str


@dataclass
class DoctorFacts:
    cluster: str
    account: str
    now: datetime
    reservations: Sequence[ReservationFact] = ()
    node_classes: Sequence[NodeClassFact] = ()
    node_pools: Sequence[NodePoolFact] = ()
    launch_errors: Sequence[LaunchErrorFact] = ()
    invitations: Sequence[InvitationFact] = ()
    permissions: Sequence[PermissionFact] = ()
    refusals: Sequence[SimulationRefusal] = ()
    groups: Mapping[str, frozenset[str]] = field(default_factory=dict)
    # Reservations an EC2NodeClass of any cluster of the fleet selects (None: only this cluster's).
    selected_in_fleet: frozenset[str] | None = None
    # Reservations this cluster reports as unselected even when none of its NodePools could use them
    # (the first cluster that sees them): each is reported once, not by every cluster of the account.
    reports_unselected: frozenset[str] | None = None


@dataclass(frozen=True)
class Finding:
    code: str
    severity: str
    cluster: str
    account: str
    evidence: str
    fix: str
    reservation_id: str = ""
    node_class: str = ""
    data: Mapping[str, Any] = field(default_factory=dict)
    fix_command: str = ""  # a shell command or YAML to apply, when one exists

    @property
    def key(self) -> str:
        """What makes two runs' findings the same finding (first seen / last seen)."""
        detail = self.data.get("term", self.data.get("action", self.data.get("invitation", "")))
        principal = self.data.get("principal", "")
        return "|".join(str(part) for part in (self.code, self.cluster, self.reservation_id, self.node_class,
                                               principal, detail))

    def as_dict(self) -> dict[str, Any]:
        return {"code": self.code, "severity": self.severity, "cluster": self.cluster, "account": self.account,
                "reservationID": self.reservation_id, "nodeClass": self.node_class, "evidence": self.evidence,
                "evidenceData": dict(self.data), "fix": self.fix, "fixCommand": self.fix_command, "key": self.key}


def diagnose(facts: DoctorFacts) -> list[Finding]:
    """Every finding for one cluster, sorted by severity, then code, reservation and class."""
    findings = [
        *selector_findings(facts),
        *unselected_findings(facts),
        *invitation_findings(facts),
        *permission_findings(facts),
        *throttling_findings(facts),
        *nodepool_findings(facts),
        *planning_override_findings(facts),
    ]
    rank = {s: i for i, s in enumerate(SEVERITIES)}
    return sorted(findings, key=lambda f: (rank[f.severity], f.code, f.reservation_id, f.node_class, f.key))


def _finding(facts: DoctorFacts, code: str, severity: str, evidence: str, fix: str, **extra: Any) -> Finding:
    return Finding(code=code, severity=severity, cluster=facts.cluster, account=facts.account, evidence=evidence,
                   fix=fix, **extra)


def _yaml_terms(node_class: str, terms: Sequence[Mapping[str, Any]]) -> str:
    """The EC2NodeClass fragment to apply (JSON is YAML: no YAML library in the engine)."""
    lines = ["apiVersion: karpenter.k8s.aws/v1", "kind: EC2NodeClass", f"metadata:\n  name: {node_class}", "spec:",
             "  capacityReservationSelectorTerms:"]
    lines += [f"    - {json.dumps(dict(term), sort_keys=True)}" for term in terms]
    return "\n".join(lines)


# --- selector terms --------------------------------------------------------------------------------

def selector_findings(facts: DoctorFacts) -> list[Finding]:
    reservations = [r.reservation for r in facts.reservations]
    by_id = {r.id: r for r in reservations}
    found = []
    for nc in facts.node_classes:
        terms, problems = parse_terms(list(nc.terms) if nc.terms else None)
        if problems or not terms:
            continue  # invalid or absent terms: CapacityReservationsReady already says so
        selectable = [r for r in reservations if r.is_selectable(facts.now)]
        matched = [[r.id for r in selectable if term.matches(r, facts.groups)] for term in terms]
        selects_nothing = not any(matched)
        for index, (term, raw, ids) in enumerate(zip(terms, nc.terms, matched)):
            if ids:
                continue
            why = "no reservation the account sees matches it"
            if term.id is not None and term.id in by_id:
                r = by_id[term.id]
                why = f"{term.id} is {r.state}" + (f", ended {r.end.isoformat()}" if r.end and r.end <= facts.now else "")
            elif term.id is not None:
                why = f"the account sees no reservation {term.id} (wrong id, another account's, or a RAM share not accepted)"
            kept = [t for t, ids_ in zip(nc.terms, matched) if ids_]
            found.append(_finding(
                facts, SELECTOR_MATCHES_NOTHING, CRITICAL if selects_nothing else WARNING,
                f"EC2NodeClass {nc.name}'s capacityReservationSelectorTerms[{index}] {json.dumps(dict(raw), sort_keys=True)} "
                f"selects nothing: {why}." + (" The class selects no reservation at all." if selects_nothing else ""),
                "Correct the term (id, tags, ownerID, instanceMatchCriteria) to name a reservation the account "
                "sees, or remove it." + ("" if kept else " With no term left the class launches no reserved capacity."),
                node_class=nc.name, data={"term": index, "selector": dict(raw), "reason": why,
                                          "reservationsSeen": len(selectable)},
                fix_command=_yaml_terms(nc.name, kept) if kept else "",
            ))
    return found


# --- unselected and Fleet-created open-only reservations ----------------------------------------------

def _selected_ids(facts: DoctorFacts) -> set[str]:
    return {rid for nc in facts.node_classes for rid in nc.selected}


def unselected_findings(facts: DoctorFacts) -> list[Finding]:
    selected = _selected_ids(facts) | (facts.selected_in_fleet or frozenset())
    found = []
    for fact in facts.reservations:
        r = fact.reservation
        if r.id in selected or not r.is_selectable(facts.now) or r.excluded_from_planning:
            continue
        kept = fact.kept_for_others(facts.account)
        classes = [] if kept else _classes_for(facts, fact)  # never this account's classes for another's units
        if not classes and facts.reports_unselected is not None and r.id not in facts.reports_unselected:
            continue  # another cluster of the fleet reports it
        term = {"id": r.id}
        command = _yaml_terms(classes[0], [*_terms_of(facts, classes[0]), term]) if classes else ""
        target = f"EC2NodeClass {classes[0]}" if classes else "an EC2NodeClass whose NodePools allow it"
        where = "in the fleet" if facts.selected_in_fleet is not None else f"of {facts.cluster}"
        if kept:
            if r.available_count <= 0:
                continue
            found.append(_finding(
                facts, RESERVATION_UNSELECTED, WARNING,
                f"{r.id} ({r.instance_type} in {r.zone}, {r.instance_match_criteria}) has {r.available_count} free of "
                f"{r.total_count} units and no EC2NodeClass {where} selects it.",
                fact.leave_to_others(),
                reservation_id=r.id, data={"available": r.available_count, "total": r.total_count,
                                           "matchCriteria": r.instance_match_criteria, "nodeClasses": [],
                                           "meantFor": sorted(fact.meant_for), "splitOff": fact.split_off},
            ))
        elif fact.fleet_id:
            found.append(_finding(
                facts, FLEET_OPEN_ONLY, WARNING,
                f"{r.id} was created by Capacity Reservation Fleet {fact.fleet_id}: its instance matching is open "
                f"only (a Fleet's reservations cannot be made targeted) and no EC2NodeClass selects it. With reserved capacity on, Karpenter's on-demand launches opt out of open reservations, so its "
                f"{r.available_count} free of {r.total_count} units stay idle but billed.",
                f"Select it by id in {target} (Karpenter then targets it explicitly), or turn on open mode on the "
                "class (annotation karpweb.io/open-reservations: \"true\") so on-demand launches may fall into it.",
                reservation_id=r.id, data={"fleetID": fact.fleet_id, "matchCriteria": r.instance_match_criteria,
                                           "available": r.available_count, "nodeClasses": classes},
                fix_command=command,
            ))
        elif r.available_count > 0:
            found.append(_finding(
                facts, RESERVATION_UNSELECTED, WARNING,
                f"{r.id} ({r.instance_type} in {r.zone}, {r.instance_match_criteria}) has {r.available_count} free of "
                f"{r.total_count} units and no EC2NodeClass {where} selects it.",
                f"Add a selector term for it to {target}.",
                reservation_id=r.id, data={"available": r.available_count, "total": r.total_count,
                                           "matchCriteria": r.instance_match_criteria, "nodeClasses": classes},
                fix_command=command,
            ))
    return found


def _terms_of(facts: DoctorFacts, name: str) -> list[Mapping[str, Any]]:
    return next((list(nc.terms) for nc in facts.node_classes if nc.name == name), [])


def _classes_for(facts: DoctorFacts, fact: ReservationFact) -> list[str]:
    """The classes one of whose NodePools could launch into the reservation (the fix's target)."""
    return sorted({pool.node_class for pool in facts.node_pools if not _pool_mismatch(pool, fact)})


# --- RAM ----------------------------------------------------------------------------------------------

def invitation_findings(facts: DoctorFacts) -> list[Finding]:
    return [
        _finding(
            facts, RAM_SHARE_NOT_ACCEPTED, CRITICAL,
            f"AWS RAM invitation to resource share {inv.share_name or inv.arn} from account {inv.sender} is pending in "
            f"account {facts.account}: until it is accepted the account does not see {rid or 'its reservations'} and "
            "no EC2NodeClass can select it.",
            f"Accept the invitation in account {facts.account} (or share through AWS Organizations, which needs none).",
            reservation_id=rid, data={"invitation": inv.arn, "share": inv.share_name, "sender": inv.sender},
            fix_command=f"aws ram accept-resource-share-invitation --resource-share-invitation-arn {inv.arn}",
        )
        for inv in facts.invitations for rid in (list(inv.reservation_ids) or [""])
    ]


# --- IAM ----------------------------------------------------------------------------------------------

def _policy_fix(principal_arn: str, actions: Sequence[str]) -> str:
    role = principal_arn.rsplit("/", 1)[-1] if ":role/" in principal_arn else "ROLE_NAME"
    document = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": sorted(actions), "Resource": "*"}]}
    return (f"aws iam put-role-policy --role-name {role} --policy-name karpweb-reservations "
            f"--policy-document '{json.dumps(document, separators=(',', ':'))}'")


def permission_findings(facts: DoctorFacts) -> list[Finding]:
    found = []
    for p in facts.permissions:
        if p.decision == "allowed":
            continue
        who = "karpweb" if p.principal == "karpweb" else "Karpenter's controller"
        found.append(_finding(
            facts, IAM_PERMISSION_MISSING, CRITICAL,
            f"iam:SimulatePrincipalPolicy for {who}'s role {p.principal_arn} answers {p.decision} for {p.action}.",
            f"Allow {p.action} to {p.principal_arn}"
            + (" (an explicit Deny wins: remove or narrow it)." if p.decision == "explicitDeny" else "."),
            data={"principal": p.principal, "principalARN": p.principal_arn, "action": p.action,
                  "decision": p.decision, "source": "simulation"},
            fix_command=_policy_fix(p.principal_arn, [p.action]),
        ))
    for nc in facts.node_classes:
        if nc.unauthorized_message:
            found.append(_finding(
                facts, IAM_PERMISSION_MISSING, CRITICAL,
                f"EC2NodeClass {nc.name}'s CapacityReservationsReady is Unauthorized: {nc.unauthorized_message}",
                "Allow ec2:DescribeCapacityReservations to the role karpweb works as in this account.",
                node_class=nc.name,
                data={"principal": "karpweb", "action": "ec2:DescribeCapacityReservations", "source": "condition",
                      "message": nc.unauthorized_message},
                fix_command=_policy_fix("", ["ec2:DescribeCapacityReservations"]),
            ))
    latest: dict[str, LaunchErrorFact] = {}
    for e in facts.launch_errors:
        if e.unauthorized and (e.reservation_id not in latest or e.at > latest[e.reservation_id].at):
            latest[e.reservation_id] = e
    for rid, e in sorted(latest.items()):
        found.append(_finding(
            facts, IAM_PERMISSION_MISSING, CRITICAL,
            f"A launch into {rid or 'a reservation'} ({e.subject or 'a NodeClaim'}) failed at {e.at.isoformat()} with "
            f"{e.code}: {e.message}",
            "Allow ec2:CreateFleet and ec2:RunInstances (on the capacity-reservation resource too) to the role "
            "karpweb launches as.",
            reservation_id=rid, data={"principal": "karpweb", "action": "ec2:CreateFleet", "source": "launch",
                                      "code": e.code},
            fix_command=_policy_fix("", ["ec2:CreateFleet", "ec2:RunInstances", "ec2:CreateTags"]),
        ))
    for refusal in facts.refusals:
        who = "karpweb" if refusal.principal == "karpweb" else "Karpenter's controller"
        found.append(_finding(
            facts, IAM_NOT_SIMULATED, INFO,
            f"iam:SimulatePrincipalPolicy for {who}'s role {refusal.principal_arn} was refused ({refusal.code}: "
            f"{refusal.message}); only the errors seen in syncs and launches say what it lacks.",
            "Allow iam:SimulatePrincipalPolicy on that role to karpweb's role (deploy/iam/karpweb-observe-policy.json).",
            data={"principal": refusal.principal, "principalARN": refusal.principal_arn, "code": refusal.code},
            fix_command=_policy_fix("", ["iam:SimulatePrincipalPolicy"]),
        ))
    return found


# --- throttled launches --------------------------------------------------------------------------------

def throttling_findings(facts: DoctorFacts) -> list[Finding]:
    last: dict[str, LaunchErrorFact] = {}
    for e in facts.launch_errors:
        if e.reservation_id and (e.reservation_id not in last or e.at > last[e.reservation_id].at):
            last[e.reservation_id] = e
    found = []
    for fact in facts.reservations:
        error = last.get(fact.id)
        if not fact.marked_unavailable or error is None or not error.throttled:
            continue
        found.append(_finding(
            facts, UNAVAILABLE_AFTER_THROTTLING, CRITICAL,
            f"{fact.id} counts no free unit although EC2's last sync counted {fact.last_synced_available}; its last "
            f"launch error was {error.code} at {error.at.isoformat()}: throttling, not a capacity error "
            "(aws/karpenter-provider-aws issue 8923).",
            "Nothing to change in EC2: the next EC2 sync restores its count. Throttling must never mark a reservation "
            "unavailable; if this persists, report the code path that marked it.",
            reservation_id=fact.id, data={"code": error.code, "at": error.at.isoformat(),
                                          "syncedAvailable": fact.last_synced_available},
        ))
    return found


def planning_override_findings(facts: DoctorFacts) -> list[Finding]:
    """A live reservation karpweb's own planning override keeps it from launching or consolidating into:
    nothing in AWS or Kubernetes stops it, an operator's choice in karpweb does."""
    found = []
    for fact in facts.reservations:
        r = fact.reservation
        if not r.excluded_from_planning or not (r.is_selectable(facts.now) or r.is_upcoming(facts.now)):
            continue
        found.append(_finding(
            facts, PLANNING_EXCLUDED, WARNING,
            f"{fact.id} is excluded from planning by karpweb's override ({r.excluded_from_planning}): karpweb launches "
            f"and consolidates nothing into it, whatever selects it; nodes already in it stay.",
            f"If it should be used again, clear \"keep karpweb from planning into it\" on {fact.id} in the admin "
            "(Capacity reservations); the next provisioning run plans with it.",
            reservation_id=fact.id, data={"override": r.excluded_from_planning},
        ))
    return found


# --- NodePools ----------------------------------------------------------------------------------------

def _reservation_labels(fact: ReservationFact) -> dict[str, str]:
    r = fact.reservation
    return {**fact.type_labels, INSTANCE_TYPE: r.instance_type, ZONE: r.zone, CAPACITY_TYPE: RESERVED,
            RESERVATION_ID: r.id, OS: "windows" if fact.platform.startswith(WINDOWS) else "linux"}


def _pool_mismatch(pool: NodePoolFact, fact: ReservationFact) -> str:
    """Why a pool cannot launch into the reservation ("" when it can), by the pool's requirements on
    the keys the reservation and its instance type answer (no capacity-type requirement allows
    reserved, as the engine's NodePool templates do)."""
    labels = _reservation_labels(fact)
    try:
        requirements = Requirements(Requirement.of(q["key"], q["operator"], q.get("values") or [])
                                    for q in pool.requirements if q.get("key") in labels)
    except (KeyError, TypeError, AttributeError, RequirementError):
        return "requirements unreadable"
    miss = requirements.first_mismatch(labels)
    if miss is None:
        return ""
    return {CAPACITY_TYPE: "capacity-type", INSTANCE_TYPE: "instance-type", ZONE: "zone", OS: "platform"}.get(
        miss.key, miss.key)


def nodepool_findings(facts: DoctorFacts) -> list[Finding]:
    found = []
    classes_of: dict[str, list[str]] = {}
    for nc in facts.node_classes:
        for rid in nc.selected:
            classes_of.setdefault(rid, []).append(nc.name)
    for fact in facts.reservations:
        r = fact.reservation
        classes = sorted(classes_of.get(r.id, []))
        if not classes or not r.is_selectable(facts.now):
            continue
        reason, detail = "", {}
        if fact.platform not in (LINUX, WINDOWS) and not fact.platform.startswith(WINDOWS + " "):
            reason = "platform"
        elif fact.platform != WINDOWS and fact.platform.startswith(WINDOWS):
            reason = "platform"  # Windows with SQL Server: Karpenter's images are Windows License Included only
        elif fact.tenancy != "default":
            reason = "tenancy"
        elif fact.placement_group_arn:
            reason = "placement-group"
        else:
            pools = [p for p in facts.node_pools if p.node_class in classes]
            detail = {p.name: _pool_mismatch(p, fact) for p in pools}
            if any(v == "" for v in detail.values()):
                continue
            reason = "no-nodepool" if not pools else _common(detail.values())
        kept = fact.kept_for_others(facts.account)
        found.append(_finding(
            facts, NO_NODEPOOL_MATCHES, WARNING, _nodepool_evidence(fact, classes, reason, detail),
            # Admitting it here would hand another account's units back to this one: theirs to use.
            fact.leave_to_others() if kept else _nodepool_fix(fact, reason, classes),
            reservation_id=r.id, data={"reason": reason, "nodeClasses": classes, "nodePools": detail,
                                       "platform": fact.platform, "tenancy": fact.tenancy,
                                       "placementGroup": fact.placement_group_arn},
            fix_command=_nodepool_yaml(r) if reason in ("capacity-type", "instance-type", "zone") and not kept else "",
        ))
    return found


def _common(reasons) -> str:
    distinct = sorted(set(reasons))
    return distinct[0] if len(distinct) == 1 else "requirements"


def _nodepool_evidence(fact: ReservationFact, classes: list[str], reason: str, detail: Mapping[str, str]) -> str:
    r = fact.reservation
    head = f"{r.id} ({r.instance_type} in {r.zone}) is selected by {', '.join(classes)} but "
    if reason == "platform":
        return head + f"its platform is {fact.platform}; Karpenter launches {LINUX} or {WINDOWS} only."
    if reason == "tenancy":
        return head + f"its tenancy is {fact.tenancy}; Karpenter launches default tenancy only."
    if reason == "placement-group":
        return head + f"it is in placement group {fact.placement_group_arn}; only instances launched into that group can use it."
    if reason == "no-nodepool":
        return head + "no NodePool uses those classes."
    pools = "; ".join(f"{name}: {why}" for name, why in sorted(detail.items()))
    return head + f"no NodePool's requirements admit it ({pools})."


def _nodepool_fix(fact: ReservationFact, reason: str, classes: list[str]) -> str:
    if reason in ("platform", "tenancy", "placement-group"):
        return ("No NodePool can change this: use the reservation outside Karpenter, or replace it with one of "
                f"platform {LINUX}, tenancy default and no placement group (and stop selecting it in {', '.join(classes)}).")
    if reason == "no-nodepool":
        return f"Create a NodePool whose nodeClassRef names {classes[0]}."
    return ("Let a NodePool of those classes admit it: karpenter.sh/capacity-type must include reserved, and the "
            "instance type and zone must be allowed.")


def _nodepool_yaml(r: CapacityReservation) -> str:
    return "\n".join([
        "spec:", "  template:", "    spec:", "      requirements:",
        f'        - {{key: {CAPACITY_TYPE}, operator: In, values: ["reserved", "on-demand"]}}',
        f'        - {{key: {INSTANCE_TYPE}, operator: In, values: ["{r.instance_type}"]}}',
        f'        - {{key: {ZONE}, operator: In, values: ["{r.zone}"]}}',
    ])


def count_by_severity(findings: Sequence[Finding]) -> dict[str, int]:
    counts = {s: 0 for s in SEVERITIES}
    for f in findings:
        counts[f.severity] += 1
    return counts
