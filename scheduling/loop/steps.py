"""The loop's steps, each a function returning counts for its TaskRun."""

import contextlib
import datetime
import logging

from django.conf import settings
from django.utils import timezone

from fleet.connection import is_kubernetes, is_aws
from fleet.models import Cluster
from fleet.scope import cluster_scope, current_cluster, working_cluster
from reservations.buying import recompute_buy_advice
from reservations.groups import sync_groups
from reservations import block_fees, commitments, doctor, ledger, utilization
from scheduling.loop import lending
from reservations.models import DoctorFinding, EC2NodeClass
from reservations.open_mode import sync_open_instances
from reservations.open_trap import sync_launch_templates
from reservations.recommendations import recompute_hourly
from reservations.status import refresh_node_class_status
from scheduling.adapters.kube.interface import Condition
from scheduling.loop.engine_run import simulate_readable
from scheduling.loop import backends, broker, disruption, nodes, provisioning, refresh, simulated
from scheduling.loop.claim_conditions import write_nodeclaim_conditions
from scheduling.loop.coexistence import check_karpenter
from scheduling.loop.karpenter_audit import audit_launches, record_standing_opportunities
from scheduling.loop.nodeclass_launch import refresh_launch_status
from scheduling.loop.watch import count_drift, full_sync_due, watching
from scheduling.loop.recording import PendingDecision, record
from scheduling.models import Decision, Mode, NodePool, TaskRun, WatchState
from scheduling.nodepool_health import classes_by_name, computed_conditions, resolved_node_class
from scheduling.modes import configured_mode, control_refusal, effective_mode, global_mode
from scheduling.world import current_world

log = logging.getLogger(__name__)


class ClusterUnreachable(RuntimeError):
    """The Kubernetes sync could read nothing from the cluster."""


def sync_ec2(now=None) -> dict:
    now = now or timezone.now()
    if is_aws():
        from scheduling.adapters.ec2.sync import sync_reservations

        stats = sync_reservations(backends.cloud(), now)
        counts = {key: value for key, value in vars(stats).items() if isinstance(value, int)}
        if stats.errors:
            counts["errors"] = len(stats.errors)
            record([PendingDecision(kind=Decision.Kind.STATUS, subject="EC2 sync", mode=global_mode(),
                                    reason="EC2 sync: " + "; ".join(stats.errors), outcome=Decision.Outcome.FAILED)], now)
    else:
        counts = simulated.tick_ec2(now)
        counts["reservations_reported"] = simulated.report_reservations(now)  # allocations, last seen
        counts["node_classes_resolved"] = simulated.resolve_node_classes(now)  # images, subnets, groups
        counts["samples"] = simulated.sample_utilization(now)
        counts["node_classes_changed"] = refresh_node_class_status(now)
    cloud = backends.cloud()
    if is_aws():
        for member in clusters_of_the_account_and_region():  # each in its scope (None: no scope, a fleet of one)
            with cluster_scope(member) if member is not None else contextlib.nullcontext():
                member_cloud, member_cluster = backends.cloud(), backends.cluster()
                # What launches resolve to (images, subnets, groups, profile); karpweb's instances no NodeClaim holds.
                add_counts(counts, refresh_launch_status(member_cloud, member_cluster, now))
                add_counts(counts, nodes.collect_instances(member_cloud, now, member_cluster))
    served = clusters_of_the_account_and_region()
    counts.update(sync_groups(cloud, now, served))  # the members of every group their selector terms name
    counts.update(sync_open_instances(cloud, now, served))  # on-demand instances EC2 placed in open reservations
    counts.update(sync_launch_templates(cloud, now))  # Karpenter's: do they opt out of open reservations?
    counts.update(ledger.record_use(ledger_clouds(cloud), now))  # who holds which units, fleet-wide
    estimate = getattr(cloud, "capacity_block_fee_estimate", None)  # EC2's: the simulated world sells no blocks
    if estimate is not None:
        counts.update(block_fees.refresh_estimates(estimate, now))  # what a block whose fee nobody entered cost
    counts.update(commitments.refresh(cloud, now))  # zonal RIs and Savings Plans: the prices they give
    counts["hours_rolled_up"] = utilization.roll_up_recent(now)
    counts.update(lending.reclaim_before_peaks(cloud, now))  # lent units back before the fleet's forecast peak
    offerings = getattr(cloud, "capacity_block_extension_offerings", None)
    counts.update(recompute_hourly(now, offerings))  # shrink, cancel, select, extend, end date, lend
    for member in clusters_of_the_account_and_region():  # the reservation doctor, per cluster, after this sync
        with cluster_scope(member) if member is not None else contextlib.nullcontext():
            add_counts(counts, doctor.examine(backends.cloud(), now))
            add_counts(counts, recompute_buy_advice(backends.cloud(), now))  # blocks for waiting GPU gangs
    counts.update(utilization.prune(now))
    counts.update(prune_history(now))
    counts.update(broker.prune_delivered(now))  # the quick start's embedded broker only
    return counts


def ledger_clouds(cloud) -> dict:
    """Our accounts' clouds for the ledger's attribution, by account id: this sync's cloud for the
    working cluster's account and, against AWS, every other account of ours with a cluster in the
    same region, through that cluster's backends (its role assumed through STS). The simulated
    world is one account's: its cloud answers for no other."""
    here = working_cluster()
    clouds = {here.account.account_id: cloud}
    if not is_aws():
        return clouds
    others = (Cluster.objects.select_related("account").filter(region=here.region)
              .exclude(account__account_id__in=clouds).order_by("account__account_id", "name"))
    for member in others:
        if member.account.account_id not in clouds:
            with cluster_scope(member):
                clouds[member.account.account_id] = backends.cloud()
    return clouds


def clusters_of_the_account_and_region() -> list:
    """The clusters an EC2 step's run serves: those of the scope's cluster's account and region (the
    run is in the scope of the first of them, scheduling.tasks); [None] with no scope open."""
    here = current_cluster()
    if here is None:
        return [None]
    return list(Cluster.objects.select_related("account").filter(account_id=here.account_id, region=here.region)
                .order_by("name"))


def add_counts(counts: dict, more: dict) -> None:
    for key, value in more.items():
        counts[key] = counts[key] + value if isinstance(value, int) and isinstance(counts.get(key), int) else value


def prune_history(now) -> dict:
    """Task runs past KARPWEB_TASK_RUN_RETENTION_DAYS and decisions past KARPWEB_DECISION_RETENTION_DAYS
    (the audit log of manual overrides is never pruned)."""
    task_runs = now - datetime.timedelta(days=settings.KARPWEB_TASK_RUN_RETENTION_DAYS)
    decisions = now - datetime.timedelta(days=settings.KARPWEB_DECISION_RETENTION_DAYS)
    return {
        "task_runs_pruned": TaskRun.objects.filter(started_at__lt=task_runs).exclude(status=TaskRun.Status.RUNNING).delete()[0],
        "decisions_pruned": Decision.objects.fleet().filter(created_at__lt=decisions).delete()[0],
        "doctor_findings_pruned": DoctorFinding.objects.fleet().filter(cleared_at__lt=decisions).delete()[0],
    }


def sync_catalogue(now=None) -> dict:
    if not is_aws():
        return {"skipped": "the simulated world's catalogue is the seeded one"}
    from scheduling.adapters.ec2.sync import collect_launch_templates, sync_catalogue as sync

    now = now or timezone.now()
    cloud = backends.cloud()
    counts = {key: value for key, value in vars(sync(cloud, now)).items() if isinstance(value, int)}
    if global_mode() == Mode.CONTROL:  # deleting is acting: observe mode leaves the account as it is
        counts["launch_templates_deleted"] = len(collect_launch_templates(cloud, now))
    return counts


def sync_kubernetes(now=None) -> dict:
    now = now or timezone.now()
    if is_kubernetes():
        from scheduling.adapters.kube.sync import ClusterSync, storage_listed

        cluster = backends.cluster()
        # First: whether this sync may be followed by acting at all (scheduling.modes reads it).
        counts = check_karpenter(cluster, now)
        if full_sync_due(now):
            stats = ClusterSync(cluster).sync_once()
            if stats.errors and not stats.lists:  # nothing read: a failed run (recorded, retried), never a quiet one
                raise ClusterUnreachable(f"the cluster's API server answered none of its lists: {stats.errors[-1].message}")
            counts.update(lists=stats.lists, errors=len(getattr(stats, "errors", []) or []))
            counts["drift_repaired"] = count_drift(stats, now)  # what the watch process missed, if one runs
            WatchState.record(world_as_of=now, **({"storage_listed_at": now} if storage_listed(stats.listed) else {}))
        else:
            counts["lists"] = 0  # the watch process keeps the models current: no full list this time
        counts.update(nodes.after_launch(backends.cloud(), cluster, now))  # registration, initialization, TTL
        if is_aws():  # failed EC2 status checks terminate their nodes (as upstream)
            counts.update(nodes.handle_instance_status(backends.cloud(), cluster, now))
    else:
        counts = simulated.tick_workloads(now)
        counts["pods_bound"] = simulated.bind_pending_pods(simulate_readable(current_world(now), now))
        WatchState.record(world_as_of=now)
    counts.update(audit_launches(now))  # NodeClaims karpweb did not create: did they miss a reservation?
    return counts


# What the lifecycle pass acts on after expiry: consolidation, drift, static NodePools above their replicas.
DISRUPTION_REASONS = frozenset({disruption.CONSOLIDATION, disruption.DRIFT, disruption.STATIC})


def provision(now=None, world_at=None) -> dict:
    if configured_mode() == Mode.CONTROL and (refusal := control_refusal()):
        log.warning("control mode refused, recommending only: %s", refusal)
    counts = {}
    queue = backends.interruption_queue()
    if queue is not None:  # nodes about to go are drained first; their pods are planned below or next run
        counts.update(nodes.handle_interruptions(queue, backends.cloud(), backends.cluster(), now))
    return {**counts, **provisioning.provision(backends.cloud(), backends.cluster(), now, world_at)}


def consolidate(now=None) -> dict:
    """Consolidation, drift (a reserved node whose reservation its EC2NodeClass no longer selects) and
    static NodePools' scale-down."""
    return disruption.act_on_disruptions(backends.cloud(), backends.cluster(), DISRUPTION_REASONS, now)


def expire_capacity_blocks(now=None) -> dict:
    return disruption.act_on_disruptions(backends.cloud(), backends.cluster(), {disruption.EXPIRY}, now)


def demote(now=None) -> dict:
    return disruption.demote(backends.cloud(), backends.cluster(), now)


def lifecycle(now=None, world_at=None) -> dict:
    """The 60 s steps on one engine run (at 5,000 nodes a run takes seconds): capacity-block drain,
    demotion, consolidation and drift, then the conditions. One pass of the engine plans all the
    disruptions together, as Karpenter's disruption controller does from one cluster snapshot.
    `world_at`: the watch process's kept world; while a watch process runs, it runs this step on
    that world and the beat's run (world_at None) leaves it to it."""
    now = now or timezone.now()
    if world_at is None and is_kubernetes() and watching(now):
        return {"skipped": "the watch process runs the lifecycle pass on the world it keeps"}
    cloud, cluster = backends.cloud(), backends.cluster()
    if not is_aws():
        refresh_node_class_status(now)
    parts = {"expire": refresh.expire(cluster, now), "repair": refresh.repair(cluster, now),
             "drift": refresh.mark_drift(cloud, cluster, now)}  # what the engine pass below acts on
    decisions = disruption.engine_decisions(cloud, now, world_at)
    parts |= {
        "expiry": disruption.act_on_disruptions(cloud, cluster, {disruption.EXPIRY}, now, decisions),
        "demote": disruption.demote(cloud, cluster, now, decisions),
        "consolidate": disruption.act_on_disruptions(cloud, cluster, DISRUPTION_REASONS, now, decisions),
        "status": status(now, decisions),
        "standing": {"opportunities": record_standing_opportunities(decisions, now)},
    }
    return {f"{part}_{key}": value for part, counts in parts.items() for key, value in counts.items()}


def status(now=None, decisions: dict | None = None) -> dict:
    """EC2NodeClass and NodePool conditions: CapacityReservationsReady, Ready, ReservedCapacityAvailable."""
    now = now or timezone.now()
    if decisions is None:
        if not is_aws():
            refresh_node_class_status(now)
        decisions = simulate_readable(current_world(now, include_pods=True), now)
    engine_conditions = {entry["name"]: entry["conditions"] for entry in decisions.get("nodePools", [])}
    cluster = backends.cluster()
    changed = 0
    refusal = control_refusal()  # once per run
    classes = classes_by_name()
    for pool in NodePool.objects.select_related("node_class"):
        engine = engine_conditions.get(pool.name, [])
        # NodeClassReady and Ready as upstream computes them (scheduling/nodepool_health.py).
        conditions = [Condition(**{k: c[k] for k in ("type", "status", "reason", "message")})
                      for c in [*[c for c in engine if c["type"] != "NodeClassReady"],
                                *computed_conditions(pool, resolved_node_class(pool, classes), engine)]]
        before = list(pool.conditions)
        for condition in conditions:
            pool.set_condition(condition.type, condition.status, condition.reason, condition.message, now=now)
        if pool.conditions != before:
            pool.save(update_fields=["conditions"])
            changed += 1
            # Only a pool karpweb controls has its conditions written to the cluster: in observe
            # mode karpweb reads the cluster and nothing more (beside Karpenter, Karpenter writes them).
            if is_kubernetes() and effective_mode(pool, refusal) == Mode.CONTROL:
                cluster.set_conditions("NodePool", pool.name, conditions)
    claims_changed = write_nodeclaim_conditions(engine_conditions, cluster, now, refusal)
    if is_kubernetes() and global_mode() == Mode.CONTROL:  # Karpenter writes its classes' status
        for node_class in EC2NodeClass.objects.all():
            condition = node_class.condition("CapacityReservationsReady")
            if condition:
                cluster.set_conditions("EC2NodeClass", node_class.name,
                                       [Condition(condition["type"], condition["status"], condition["reason"], condition["message"])],
                                       status_fields={"capacityReservations": node_class.status_capacity_reservations})
    return {"node_pools_changed": changed, "node_claims_changed": claims_changed}


def ready_condition(pool) -> Condition:
    """The pool's Ready: False (UnhealthyDependents) whenever NodeClassReady is False."""
    ready = computed_conditions(pool, resolved_node_class(pool))[1]
    return Condition(ready["type"], ready["status"], ready["reason"], ready["message"])
