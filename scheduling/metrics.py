"""Prometheus metrics at /metrics, read from the database at scrape time (so every web replica
reports the same figures and nothing is lost when a worker restarts).

Karpenter publishes nothing per reservation; these are the series operators ask for.

In a fleet (fleet/scope.py) every series about a cluster's objects carries `cluster` (the
cluster's name: decisions, launch failures, the Karpenter audit, standing opportunities, the watch,
Karpenter's presence), and every series per reservation carries `account` (its owner's AWS account
ID: a reservation belongs to no cluster, and several accounts may see it). /metrics reads the whole
fleet (no cluster scope). The loop's task runs, interruptions and recommendations are fleet-wide."""

import hmac

from django.conf import settings
from django.db.models import Count, Max, Q, Sum
from django.http import HttpResponse
from django.utils import timezone
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from fleet.models import Cluster
from reservations.alarms import with_running_nodes
from reservations.models import CapacityReservation, DoctorFinding, Recommendation, ReservationContention
from scheduling.loop.nodes import INTERRUPTION_MESSAGES, QUEUE_ERRORS, STATUS_ERRORS
from scheduling.loop.keptworld import MISMATCH
from scheduling.loop.watch import DRIFT
from scheduling.models import (ControllerGuard, Decision, EventCount, KarpenterLaunch, StandingOpportunity, TaskRun,
                               WatchState)
from reservations.block_fees import attach_fees
from scheduling.queries import idle_cost_per_hour, on_demand_prices

SYNC_TASKS = ("sync_ec2", "sync_kubernetes")


class KarpwebCollector:
    def collect(self):
        now = timezone.now()
        self.cluster_names = dict(Cluster.objects.values_list("pk", "name"))
        yield from self.reservations(now)
        yield from self.decisions()
        yield from self.task_runs(now)
        yield from self.karpenter()
        yield from self.interruptions()
        yield from self.recommendations()
        yield from self.watch(now)
        yield from self.contention()
        yield from self.doctor()
        yield from self.open_trap(now)

    def doctor(self):
        """The reservation doctor's active findings (reservations/doctor.py), by cluster, account, code and
        severity: 0 for a code and severity a cluster had and no longer has, so an alert resolves."""
        findings = GaugeMetricFamily("karpweb_reservation_doctor_findings",
                                     "What the reservation doctor finds stopping reservations from being used, "
                                     "by cluster, account, code and severity.",
                                     labels=["cluster", "account", "code", "severity"])
        counts: dict[tuple[str, str, str, str], int] = {}
        for row in (DoctorFinding.objects.fleet().values("cluster_id", "account_id", "code", "severity")
                    .annotate(n=Count("id", filter=Q(cleared_at__isnull=True))).order_by()):
            key = (self.cluster_names.get(row["cluster_id"], ""), row["account_id"], row["code"], row["severity"])
            counts[key] = counts.get(key, 0) + row["n"]
        for key, n in sorted(counts.items()):
            findings.add_metric(list(key), n)
        yield findings

    def contention(self):
        """Launches refused for capacity into units the fleet ledger called free (reservations/ledger.py)."""
        met = CounterMetricFamily("karpweb_reservation_contention",
                                  "Launches refused for capacity into reservation units the fleet ledger called free, "
                                  "by reservation and cluster.", labels=["reservation", "cluster"])
        for reservation, cluster, n in (ReservationContention.objects.values_list("reservation__reservation_id", "cluster__name")
                                        .annotate(n=Count("id")).order_by("reservation__reservation_id", "cluster__name")):
            met.add_metric([reservation, cluster], n)
        yield met

    def open_trap(self, now):
        """Open reservations idle beside paid nodes of clusters whose launches skip open ones (reservations/open_trap.py)."""
        from reservations import open_trap

        met = GaugeMetricFamily("karpweb_open_reservation_double_paid_dollars_per_hour",
                                "List-price dollars per hour paid twice: an open reservation's idle units beside on-demand "
                                "nodes of its type and zone in a cluster whose launches opt out of open matching.",
                                labels=["cluster", "account", "reservation"])
        for trap in open_trap.find(now):
            met.add_metric([trap.cluster, trap.account, trap.reservation_id], trap.dollars_per_hour)
        yield met

    def recommendations(self):
        savings = GaugeMetricFamily("karpweb_recommendation_savings_dollars_per_month",
                                    "Open recommendations' money per month (at list price, or a Savings Plan rate where one prices the units), by kind.", labels=["kind"])
        totals = dict(Recommendation.objects.filter(state=Recommendation.State.OPEN).values_list("kind")
                      .annotate(total=Sum("savings_per_month")).values_list("kind", "total"))
        for kind in Recommendation.Kind.values:
            savings.add_metric([kind], totals.get(kind) or 0.0)
        yield savings

    def watch(self, now):
        """Per cluster: its watch process's row, or an empty one before any ran."""
        rows = {state.cluster_id: state for state in WatchState.objects.fleet()}
        states = [(name, rows.get(pk) or WatchState(cluster_id=pk)) for pk, name in sorted(self.cluster_names.items(),
                                                                                        key=lambda item: item[1])]
        connected = GaugeMetricFamily("karpweb_watch_connected", "1 while a watch process beats (manage.py watch).",
                                      labels=["cluster"])
        counters = [CounterMetricFamily(f"karpweb_watch_{name}", text, labels=["cluster"]) for name, text in (
            ("events", "Watch events applied to the models."), ("relists", "Lists after a 410 Gone."),
            ("reconnects", "Watches resumed after a lost connection."),
            ("batches", "Provisioning runs started by the batch window."))]
        lag = GaugeMetricFamily("karpweb_watch_lag_seconds", "Longest wait from reading a watch event to writing "
                                "it, over the last heartbeat.", labels=["cluster"])
        for name, state in states:
            connected.add_metric([name], int(state.connected(now)))
            for family, value in zip(counters, (state.events, state.relists, state.reconnects, state.batches)):
                family.add_metric([name], value)
            lag.add_metric([name], state.lag_seconds)
        yield connected
        yield from counters
        yield lag

    def interruptions(self):
        for count, metric, text in (
            (INTERRUPTION_MESSAGES, "karpweb_interruption_messages", "Messages taken from the interruption queue, by "
             "kind (spot_interrupted, scheduled_change, ..., ignored, unknown: malformed or not an interruption event)."),
            (QUEUE_ERRORS, "karpweb_interruption_queue_errors", "Receives from (or deletes on) the interruption queue "
             "that failed, by error code (QueueDoesNotExist, AccessDenied, ...): interruptions are not handled meanwhile."),
            (STATUS_ERRORS, "karpweb_instance_status_errors", "DescribeInstanceStatus calls that failed, by error code: "
             "failed EC2 status checks are not acted on meanwhile."),
            (DRIFT, "karpweb_kubernetes_drift_repairs", "Objects the periodic full sync had to change while the watch "
             "process ran: changes the watch missed, by kind."),
            (MISMATCH, "karpweb_kept_world_mismatches", "Objects the watch process's kept world had wrong when compared "
             "with the database (it reloads then), by kind."),
        ):
            family = CounterMetricFamily(metric, text, labels=["kind"])
            for label, value in EventCount.objects.filter(name=count).values_list("label", "value"):
                family.add_metric([label], value)
            yield family

    def reservations(self, now):
        labels = ["reservation_id", "instance_type", "availability_zone", "reservation_type", "account"]
        used = GaugeMetricFamily("karpweb_reservation_used_instances", "Instances running in the reservation.", labels=labels)
        available = GaugeMetricFamily("karpweb_reservation_available_instances", "Free instances in the reservation.", labels=labels)
        total = GaugeMetricFamily("karpweb_reservation_total_instances", "Instances the reservation holds.", labels=labels)
        idle_cost = GaugeMetricFamily("karpweb_reservation_idle_cost_dollars_per_hour",
                                      "List price of the reservation's idle instances, per hour.", labels=labels)
        drain = GaugeMetricFamily("karpweb_capacity_block_seconds_to_drain",
                                  "Seconds until karpweb drains the block's nodes (negative: draining).", labels=labels)
        alarm = GaugeMetricFamily("karpweb_capacity_block_running_near_end",
                                  "1 when a capacity block still runs instances 45 minutes or less before its end.", labels=labels)
        low = GaugeMetricFamily("karpweb_reservation_low_utilization",
                                "1 when the reservation averaged under 20 % used over a full 24 hours.", labels=labels)
        reservations = list(with_running_nodes(CapacityReservation.objects.usable(now).with_recent_utilization(now)))
        prices = on_demand_prices({r.instance_type for r in reservations})
        attach_fees(reservations)  # the blocks' fees, one query
        for r in reservations:
            values = [r.reservation_id, r.instance_type, r.availability_zone, r.reservation_type, r.owner_id]
            used.add_metric(values, r.used_instance_count)
            available.add_metric(values, r.available_instance_count)
            total.add_metric(values, r.total_instance_count)
            cost = idle_cost_per_hour(r, prices)
            if cost is not None:
                idle_cost.add_metric(values, cost)
            low.add_metric(values, int(r.is_low_utilization(now)))
            if r.timing:
                drain.add_metric(values, r.timing.seconds_until_drain(now))
                alarm.add_metric(values, int(r.block_alarm(r.running_nodes, now)))
        warning = GaugeMetricFamily(
            "karpweb_capacity_block_drain_warning_seconds",
            "How long before a Capacity Block's drain KarpwebCapacityBlockDrainingSoon fires "
            "(KARPWEB_CAPACITY_BLOCK_DRAIN_WARNING_HOURS).",
            value=settings.KARPWEB_CAPACITY_BLOCK_DRAIN_WARNING_HOURS * 3600)
        yield from (used, available, total, idle_cost, drain, alarm, low, warning)

    def decisions(self):
        names = self.cluster_names
        decided = CounterMetricFamily("karpweb_decisions", "Decisions recorded, by cluster, kind and outcome.",
                                      labels=["cluster", "kind", "outcome"])
        for row in Decision.objects.values("cluster_id", "kind", "outcome").annotate(n=Count("id")).order_by():
            decided.add_metric([names.get(row["cluster_id"], ""), row["kind"], row["outcome"]], row["n"])
        failures = CounterMetricFamily("karpweb_launch_failures", "Launches that failed, by cluster and error code.",
                                       labels=["cluster", "code"])
        counted: dict[tuple[str, str], int] = {}
        for row in (Decision.objects.filter(kind=Decision.Kind.LAUNCH, outcome=Decision.Outcome.FAILED)
                    .values("cluster_id", "error").annotate(n=Count("id")).order_by()):
            key = (names.get(row["cluster_id"], ""), (row["error"] or "unknown").split(":", 1)[0])
            counted[key] = counted.get(key, 0) + row["n"]
        for key, n in sorted(counted.items()):
            failures.add_metric(list(key), n)
        yield from (decided, failures)

    def task_runs(self, now):
        runs = CounterMetricFamily("karpweb_task_runs", "Loop task runs, by task and status.", labels=["task", "status"])
        for row in TaskRun.objects.values("task", "status").annotate(n=Count("id")).order_by():
            runs.add_metric([row["task"], row["status"]], row["n"])
        last = GaugeMetricFamily("karpweb_task_last_duration_seconds", "Duration of each task's latest finished run.", labels=["task"])
        lag = GaugeMetricFamily("karpweb_sync_lag_seconds", "Seconds since the last successful sync.", labels=["task"])
        latest = TaskRun.objects.filter(finished_at__isnull=False).values("task").annotate(latest=Max("id")).order_by()
        for run in TaskRun.objects.filter(id__in=[row["latest"] for row in latest]):
            last.add_metric([run.task], (run.finished_at - run.started_at).total_seconds())
        successes = (TaskRun.objects.filter(task__in=SYNC_TASKS, status=TaskRun.Status.SUCCEEDED)
                     .values("task").annotate(at=Max("finished_at")).order_by())
        for row in successes:
            lag.add_metric([row["task"]], (now - row["at"]).total_seconds())
        yield from (runs, last, lag)
        yield from self.cluster_steps(now)

    def cluster_steps(self, now):
        """Per cluster and loop step: 1 while its newest run failed (scheduling.loop.health), 0 otherwise, so
        that an alert resolves when the step succeeds again; one query for the fleet."""
        from scheduling.loop.health import clusters_health
        from scheduling.loop.names import STEPS

        failing = GaugeMetricFamily("karpweb_cluster_step_failing",
                                    "1 while the cluster's loop step's newest run failed.", labels=["cluster", "step"])
        since = GaugeMetricFamily("karpweb_cluster_step_failing_seconds",
                                  "Seconds since the first failure of the cluster's failing loop step.",
                                  labels=["cluster", "step"])
        for cluster_id, steps in sorted(clusters_health(Cluster.objects.all()).items()):
            name = self.cluster_names.get(cluster_id, "")
            by_step = {step.step: step for step in steps}
            for step in STEPS:
                failing.add_metric([name, step], 1 if step in by_step else 0)
                if step in by_step:
                    since.add_metric([name, step], (now - by_step[step].since).total_seconds())
        yield from (failing, since)


    def karpenter(self):
        names = self.cluster_names
        missed = CounterMetricFamily(
            "karpweb_missed_reservation_dollars",
            "List-price dollars Karpenter's paid nodes cost while a compatible reserved unit sat free (the audit).",
            labels=["cluster", "reservation_id", "nodepool"])
        rows = (KarpenterLaunch.objects.filter(outcome=KarpenterLaunch.Outcome.MISSED)
                .values("cluster_id", "reservation_label", "node_pool_name").annotate(dollars=Sum("missed_dollars"))
                .order_by())
        for row in rows:
            missed.add_metric([names.get(row["cluster_id"], ""), row["reservation_label"], row["node_pool_name"]],
                              row["dollars"] or 0.0)
        yield missed
        standing = GaugeMetricFamily(
            "karpweb_standing_savings_dollars_per_hour",
            "List-price dollars per hour that moving paid nodes into free reserved units would save now.",
            labels=["cluster", "reservation_id", "nodepool"])
        for row in StandingOpportunity.objects.values("cluster_id", "reservation_label", "node_pool_name").annotate(
                per_hour=Sum("savings_per_hour")).order_by():
            standing.add_metric([names.get(row["cluster_id"], ""), row["reservation_label"], row["node_pool_name"]],
                                row["per_hour"] or 0.0)
        yield standing
        live = GaugeMetricFamily("karpweb_karpenter_live",
                                 "1 while Karpenter is the cluster's active controller (karpweb then only recommends).",
                                 labels=["cluster"])
        for cluster_id, karpenter_live in (ControllerGuard.objects.fleet().filter(checked_at__isnull=False)
                                           .values_list("cluster_id", "karpenter_live").order_by("cluster_id")):
            live.add_metric([names.get(cluster_id, "")], int(karpenter_live))
        yield live


def metrics_view(request):
    token = settings.KARPWEB_METRICS_TOKEN
    if not token and not settings.KARPWEB_METRICS_PUBLIC:
        # The figures name reservations, instance types and costs: not for anyone who can reach the port.
        return HttpResponse("metrics need KARPWEB_METRICS_TOKEN (or KARPWEB_METRICS_PUBLIC=true to serve them to "
                            "anyone)\n", status=403, content_type="text/plain")
    if token:
        sent = request.headers.get("Authorization", "").removeprefix("Bearer ").strip()
        # Compared as bytes: compare_digest refuses a str with non-ASCII characters (a 500).
        if not hmac.compare_digest(sent.encode("utf-8", "backslashreplace"), token.encode()):
            return HttpResponse("metrics need the bearer token in KARPWEB_METRICS_TOKEN\n", status=401, content_type="text/plain")
    registry = CollectorRegistry()
    registry.register(KarpwebCollector())
    return HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)
