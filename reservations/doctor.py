"""The reservation doctor's facts and findings for one cluster (the engine decides:
scheduling.engine.doctor; docs/reservation-doctor.md).

`examine` runs in the loop's EC2 step, in the cluster's scope: it gathers the mirror's facts (the
reservations the cluster's account sees, its EC2NodeClasses and NodePools, recent failed launches),
asks AWS through the cloud for what only AWS knows (pending RAM invitations, IAM policy simulation
of karpweb's and Karpenter's roles), lets the engine diagnose, and stores the findings
(`DoctorFinding`: first_seen / last_seen, cleared_at once a run no longer finds them). Pages and the
API read the stored findings: nothing here runs on a page load."""

from __future__ import annotations

import datetime
import logging

from django.db import transaction
from django.db.models import Case, Value, When
from django.utils import timezone

from fleet.scope import cluster_scope, working_cluster
from reservations.models import (
    CapacityReservation,
    DoctorFinding,
    EC2NodeClass,
    ReservationVisibility,
    UtilizationSample,
)
from scheduling.adapters.ec2.client import THROTTLING_CODES, UNAUTHORIZED_CODES
from scheduling.adapters.ec2.interface import CloudAPIError
from scheduling.adapters.ec2.status import REASON_UNAUTHORIZED
from scheduling.engine import doctor as engine
from scheduling.engine.selectors import CONDITION_TYPE
from scheduling.engine.timeutil import format_time
from scheduling.engine.world import parse_world
from scheduling.models import Decision, InstanceType, Mode, NodePool
from scheduling.modes import configured_mode

log = logging.getLogger(__name__)

# The codes only AWS's answers decide (a run from the mirror alone keeps them as they were).
AWS_ONLY_CODES = frozenset({engine.RAM_SHARE_NOT_ACCEPTED, engine.IAM_PERMISSION_MISSING, engine.IAM_NOT_SIMULATED})

# Failed launches this recent are evidence (older ones were retried or forgotten).
LAUNCH_ERROR_WINDOW = datetime.timedelta(hours=1)


def examine(cloud, now=None) -> dict:
    """Diagnose the working cluster and store its findings; returns counts for the step's TaskRun."""
    now = now or timezone.now()
    cluster = working_cluster()
    unchecked: set[str] = set()
    facts = gather(cluster, now, cloud, unchecked)
    findings = engine.diagnose(facts)
    return store(cluster, findings, now, keep=unchecked)


def gather(cluster, now, cloud=None, unchecked: set[str] | None = None) -> engine.DoctorFacts:
    """The facts of one cluster; `unchecked` collects the codes AWS could not be asked about this time
    (a transient error): their findings are kept as they were, neither renewed nor cleared."""
    from scheduling.world import reservation_item, world_groups

    rows = list(CapacityReservation.objects.order_by("reservation_id"))
    world = parse_world({"now": format_time(now), "capacityReservations": [reservation_item(r) for r in rows],
                         "capacityReservationGroups": world_groups()})
    parsed = {r.id: r for r in world.reservations}
    shared = set(ReservationVisibility.objects.filter(account=cluster.account, shared=True)
                 .values_list("reservation__reservation_id", flat=True))
    synced = last_synced_available([r.pk for r in rows if r.available_instance_count == 0])
    others, split = meant_for_others(cluster, rows)
    labels = dict(InstanceType.objects.filter(name__in={r.instance_type for r in rows}).values_list("name", "labels"))
    reservations = [
        engine.ReservationFact(
            parsed[r.reservation_id], platform=r.instance_platform, tenancy=r.tenancy,
            placement_group_arn=r.placement_group_arn, fleet_id=r.capacity_reservation_fleet_id,
            shared=r.reservation_id in shared,
            marked_unavailable=r.available_instance_count == 0 and (synced.get(r.pk) or 0) > 0,
            last_synced_available=synced.get(r.pk), type_labels=labels.get(r.instance_type) or {},
            meant_for=others.get(r.reservation_id, ()), split_off=r.reservation_id in split)
        for r in rows if r.reservation_id in parsed
    ]
    facts = engine.DoctorFacts(
        cluster=cluster.name, account=cluster.account.account_id, now=now, reservations=reservations,
        node_classes=node_class_facts(), node_pools=node_pool_facts(), launch_errors=launch_errors(now),
        groups=world.reservation_groups, selected_in_fleet=selected_in_fleet(),
        reports_unselected=first_to_see(cluster, [r.reservation_id for r in rows]),
    )
    if cloud is not None:
        aws_facts(cloud, cluster, facts, unchecked if unchecked is not None else set())
    return facts


def meant_for_others(cluster, rows) -> tuple[dict[str, tuple[str, ...]], set[str]]:
    """Of the reservations the cluster's account owns, those meant for other accounts: ({reservation id: the
    other accounts of the fleet it is shared with, and the account a split made it for}, {the ids a split
    made}). The doctor leaves them to those accounts (scheduling.engine.doctor.ReservationFact.meant_for)."""
    from reservations.models import Recommendation

    own = {r.reservation_id for r in rows if r.owner_id == cluster.account.account_id}
    others: dict[str, set[str]] = {}
    for rid, account in (ReservationVisibility.objects.filter(reservation__reservation_id__in=own, shared=True)
                         .exclude(account=cluster.account).values_list("reservation__reservation_id", "account__account_id")):
        others.setdefault(rid, set()).add(account)
    split = set()
    for details in Recommendation.objects.filter(kind=Recommendation.Kind.SPLIT, state=Recommendation.State.APPLIED,
                                                 details__newReservationId__in=own).values_list("details", flat=True):
        split.add(details["newReservationId"])
        others.setdefault(details["newReservationId"], set()).add(details.get("shareWith") or "")
    return {rid: tuple(sorted(accounts)) for rid, accounts in others.items()}, split


def selected_in_fleet() -> frozenset[str]:
    """The reservations an EC2NodeClass of any cluster selects (status.capacityReservations)."""
    return frozenset(e.get("id") for entries in EC2NodeClass.objects.fleet().values_list(
        "status_capacity_reservations", flat=True) for e in entries or [] if e.get("id"))


def first_to_see(cluster, reservation_ids) -> frozenset[str]:
    """Of these reservations, those this cluster is the first (by name) of the fleet's clusters to see:
    it reports them as unselected even when none of its NodePools could use them."""
    from fleet.models import Cluster

    clusters = list(Cluster.objects.order_by("name").values_list("name", "account_id", "region"))
    first: dict[str, str] = {}
    for rid, account, region in (ReservationVisibility.objects.filter(reservation__reservation_id__in=reservation_ids)
                                 .values_list("reservation__reservation_id", "account_id", "reservation__region")):
        for name, cluster_account, cluster_region in clusters:
            if cluster_account == account and (not region or not cluster_region or region == cluster_region):
                if rid not in first or name < first[rid]:
                    first[rid] = name
                break
    return frozenset(rid for rid, name in first.items() if name == cluster.name)


def last_synced_available(pks) -> dict[int, int]:
    """Per reservation, the free units EC2's latest sync counted (its newest utilization sample)."""
    found: dict[int, int] = {}
    for pk, available in (UtilizationSample.objects.filter(reservation_id__in=pks)
                          .order_by("reservation_id", "-sampled_at").values_list("reservation_id", "available")):
        found.setdefault(pk, available)
    return found


def node_class_facts() -> list[engine.NodeClassFact]:
    facts = []
    for nc in EC2NodeClass.objects.order_by("name"):
        condition = nc.condition(CONDITION_TYPE) or {}
        facts.append(engine.NodeClassFact(
            name=nc.name, terms=list(nc.capacity_reservation_selector_terms or []),
            selected=[e.get("id") for e in nc.status_capacity_reservations or [] if e.get("id")],
            unauthorized_message=condition.get("message", "") if condition.get("reason") == REASON_UNAUTHORIZED else "",
            spec=nc.spec or {},
        ))
    return facts


def node_pool_facts() -> list[engine.NodePoolFact]:
    return [engine.NodePoolFact(pool.name, pool.node_class.name if pool.node_class else
                                (pool.node_class_ref or {}).get("name", ""), list(pool.requirements or []))
            for pool in NodePool.objects.select_related("node_class").order_by("name")]


def launch_errors(now) -> list[engine.LaunchErrorFact]:
    """The cluster's failed launches of the last hour, their EC2 code first in `error` ("CODE: message")."""
    found = []
    for rid, error, at, subject in (Decision.objects.filter(kind=Decision.Kind.LAUNCH, outcome=Decision.Outcome.FAILED,
                                                            created_at__gte=now - LAUNCH_ERROR_WINDOW)
                                    .exclude(error="").order_by("created_at")
                                    .values_list("reservation__reservation_id", "error", "created_at", "subject")):
        code, _, message = error.partition(":")
        code = code.strip()
        found.append(engine.LaunchErrorFact(rid or "", code, message.strip(), at, throttled=code in THROTTLING_CODES,
                                            unauthorized=code in UNAUTHORIZED_CODES, subject=subject))
    return found


def aws_facts(cloud, cluster, facts: engine.DoctorFacts, unchecked: set[str]) -> None:
    """What only AWS knows, asked through the cluster's cloud (its account's credentials). The
    simulated world answers none of it: its cloud lacks these calls."""
    invitations = getattr(cloud, "pending_share_invitations", None)
    simulate = getattr(cloud, "simulate_permissions", None)
    if invitations is not None:
        try:
            facts.invitations = [engine.InvitationFact(i["arn"], i["share"], i["sender"], i["reservationIds"])
                                 for i in invitations()]
        except CloudAPIError as exc:
            if exc.code not in UNAUTHORIZED_CODES:
                log.warning("the doctor could not read RAM invitations (%s): kept as they were", exc.code)
                unchecked.add(engine.RAM_SHARE_NOT_ACCEPTED)
            else:
                facts.permissions = [engine.PermissionFact("karpweb", cluster.account.role_arn or "karpweb's role",
                                                       "ram:GetResourceShareInvitations", f"refused ({exc.code})")]
    if simulate is None:
        return
    principals = []
    karpweb_role = cluster.account.role_arn or own_role(cloud)
    if karpweb_role:
        wanted = engine.KARPWEB_OBSERVE_ACTIONS + (
            engine.KARPWEB_CONTROL_ACTIONS if configured_mode() == Mode.CONTROL else ())
        principals.append(("karpweb", karpweb_role, wanted))
    if cluster.karpenter_role_arn:
        principals.append(("karpenter", cluster.karpenter_role_arn, engine.KARPENTER_ACTIONS))
    permissions, refusals = list(facts.permissions), []
    for principal, arn, actions in principals:
        try:
            decisions = simulate(arn, actions)
        except CloudAPIError as exc:
            if exc.code not in UNAUTHORIZED_CODES and exc.code != "NoSuchEntity":
                log.warning("the doctor could not simulate %s (%s): its findings kept as they were", arn, exc.code)
                unchecked.update({engine.IAM_PERMISSION_MISSING, engine.IAM_NOT_SIMULATED})
                continue
            refusals.append(engine.SimulationRefusal(principal, arn, exc.code, exc.message))
            continue
        permissions += [engine.PermissionFact(principal, arn, action, decisions.get(action, "implicitDeny"))
                        for action in actions]
    facts.permissions, facts.refusals = permissions, refusals


def own_role(cloud) -> str:
    ask = getattr(cloud, "own_role_arn", None)
    try:
        return ask() if ask else ""
    except CloudAPIError as exc:
        log.info("sts:GetCallerIdentity failed (%s): karpweb's own role is not simulated", exc.code)
        return ""


def recheck_node_class(node_class: EC2NodeClass, now=None) -> dict:
    """The doctor again for one EC2NodeClass, just after its terms changed (the editor's save): its findings
    renewed or cleared now rather than at the next EC2 step, so the page saved shows what is still true.
    From the mirror alone: what only AWS answers (RAM invitations, IAM) is kept as it was."""
    now = now or timezone.now()
    with cluster_scope(node_class.cluster):
        findings = [f for f in engine.diagnose(gather(node_class.cluster, now)) if f.node_class == node_class.name]
        return store(node_class.cluster, findings, now, keep=AWS_ONLY_CODES, node_class=node_class.name)


@transaction.atomic
def store(cluster, findings: list[engine.Finding], now, keep=frozenset(), node_class: str | None = None) -> dict:
    """Write this run's findings: seen again moves last_seen, new ones start, missing ones clear
    (except those of the codes in `keep`: this run could not check them). `node_class`: a run over that
    EC2NodeClass's findings only, the others left as they are."""
    rows = DoctorFinding.objects.fleet().filter(cluster=cluster)
    rows = rows if node_class is None else rows.filter(node_class_name=node_class)
    existing = {f.key: f for f in rows.select_for_update()}
    seen, new = set(), 0
    for f in findings:
        if f.key in seen:
            continue
        seen.add(f.key)
        row = existing.get(f.key)
        values = dict(code=f.code, severity=f.severity, account_id=f.account, reservation_id=f.reservation_id,
                      node_class_name=f.node_class, evidence=f.evidence, evidence_data=dict(f.data), fix=f.fix,
                      fix_command=f.fix_command, last_seen=now)
        if row is None:
            DoctorFinding.objects.fleet().create(cluster=cluster, key=f.key, first_seen=now, **values)
            new += 1
            continue
        if row.cleared_at is not None:  # it came back: a new episode
            values.update(first_seen=now, cleared_at=None)
            new += 1
        for name, value in values.items():
            setattr(row, name, value)
        row.save()
    cleared = (rows.filter(cleared_at__isnull=True)
               .exclude(key__in=seen).exclude(code__in=list(keep)).update(cleared_at=now))
    return {"doctor_findings": len(seen), "doctor_new": new, "doctor_cleared": cleared}


def active_findings():
    """The findings a run still finds (in the scope: the cluster's; unscoped: the fleet's), critical first."""
    rank = Case(*[When(severity=s, then=Value(i)) for i, s in enumerate(engine.SEVERITIES)], default=Value(9))
    return (DoctorFinding.objects.filter(cleared_at__isnull=True).annotate(rank=rank)
            .order_by("rank", "code", "reservation_id", "node_class_name", "id"))
