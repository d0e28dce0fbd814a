"""What EC2 says about capacity reservations, and how full they were over time."""

import datetime

from django.db import models
from django.db.models import Exists, ExpressionWrapper, FloatField, OuterRef, Q, Subquery, Sum
from django.db.models.signals import post_save
from django.dispatch import receiver
from karpweb.urlcache import cluster_detail_url, detail_url
from django.utils import timezone

from fleet import access, scope
from fleet.managers import ClusterScopedManager, cluster_field
from fleet.models import Cluster
from karpweb.conditions import ConditionsMixin
from scheduling.engine.commitments import at_basis
from scheduling.engine.capacityblocks import CapacityBlockTiming, capacity_block_timing
from scheduling.engine.reservations import UPCOMING_STATES
from scheduling.engine.timeutil import format_time

# AWS Health warns when a reservation stays under this utilization for 24 hours.
LOW_UTILIZATION_THRESHOLD = 0.20
LOW_UTILIZATION_WINDOW = datetime.timedelta(hours=24)
# A capacity block still running instances this close to its end is an alarm: drain has not emptied it.
BLOCK_ALARM_LEAD = datetime.timedelta(minutes=45)
# An EC2NodeClass's open mode on a cluster (a karpweb setting Karpenter ignores): "true" or absent.
OPEN_RESERVATIONS_ANNOTATION = "karpweb.io/open-reservations"


def seen_by_requester(requester: access.Access, reservation: str = "pk") -> Q:
    """The reservations a requester sees (fleet/access.py): those seen by an account it is bound to,
    or by the account of a cluster it sees. `reservation`: the row's path to its reservation."""
    accounts = (Q(account_id__in=list(requester.account_roles))
                | Q(account_id__in=Cluster._base_manager.filter(pk__in=list(requester.cluster_roles)).values("account_id")))
    return Q(Exists(ReservationVisibility._base_manager.filter(accounts, reservation=OuterRef(reservation))))


class ByReservationQuerySet(access.RequesterQuerySet):
    """The rows of a reservation (samples, hours, uses, recommendations): those of the reservations the
    requester sees."""

    def requester_q(self, requester):
        return seen_by_requester(requester, "reservation_id")


class CapacityReservationQuerySet(access.RequesterQuerySet):
    def requester_q(self, requester):
        return seen_by_requester(requester)

    def visible_to(self, cluster):
        """The reservations the cluster's account sees (ReservationVisibility) in the cluster's region,
        or with no region recorded (every region when the cluster names none)."""
        queryset = self.seen_by(cluster.account_id)
        return queryset.filter(Q(region=cluster.region) | Q(region="")) if cluster.region else queryset

    def seen_by(self, account):
        """The reservations an AwsAccount (or its primary key) sees: owns, or is shared."""
        return self.filter(Exists(ReservationVisibility.objects.filter(reservation=OuterRef("pk"), account=account)))

    def usable(self, now=None):
        now = now or timezone.now()
        return self.filter(Q(end_date__isnull=True) | Q(end_date__gt=now), state=CapacityReservation.State.ACTIVE)

    def with_recent_utilization(self, now=None):
        """Annotate `recent_utilization` (mean used/total over the samples of the last 24 whole hours)
        and `recent_since` (the oldest sample in that window), in the same query: correlated
        subqueries over the hourly roll-up, so a page of 50 reads at most 25 rows per reservation
        whatever the sampling rate (the raw samples come every sync, 2,880 a day)."""
        now = now or timezone.now()
        window = UtilizationHour.objects.filter(
            reservation=OuterRef("pk"), hour__gte=hour_of(now - LOW_UTILIZATION_WINDOW), share_samples__gt=0
        ).order_by().values("reservation")
        mean = ExpressionWrapper(Sum("share_sum") / Sum("share_samples"), output_field=FloatField())
        return self.annotate(
            recent_utilization=Subquery(window.annotate(value=mean).values("value"), output_field=FloatField()),
            recent_since=Subquery(window.annotate(value=models.Min("first_sampled_at")).values("value"),
                                  output_field=models.DateTimeField()),
        )


class VisibleReservationManager(models.Manager.from_queryset(CapacityReservationQuerySet)):
    """CapacityReservation.objects: inside a cluster scope, the reservations the cluster's account can
    see (ReservationVisibility) in the cluster's region (or with no region recorded); outside one,
    every reservation of the fleet. `fleet()` is every reservation whatever the scope."""

    def get_queryset(self):
        queryset = self.fleet()
        cluster = scope.current_cluster()
        return queryset if cluster is None else queryset.visible_to(cluster)

    def fleet(self):
        """Every reservation (those the requester may see: fleet/access.py), whatever the cluster scope."""
        return super().get_queryset()


def hour_of(moment: datetime.datetime) -> datetime.datetime:
    return moment.replace(minute=0, second=0, microsecond=0)


def used_allocations(used: int) -> list[dict]:
    """CapacityAllocations as DescribeCapacityReservations writes them: the units running instances use
    (the simulated world's and the demo's reservations, which no EC2 reports)."""
    return [{"AllocationType": "used", "Count": used}] if used else []


class CapacityReservation(models.Model):
    """One On-Demand Capacity Reservation or Capacity Block, as DescribeCapacityReservations reports it."""

    class State(models.TextChoices):
        ACTIVE = "active"
        EXPIRED = "expired"
        CANCELLED = "cancelled"
        PENDING = "pending"
        FAILED = "failed"
        SCHEDULED = "scheduled"
        PAYMENT_PENDING = "payment-pending"
        PAYMENT_FAILED = "payment-failed"
        ASSESSING = "assessing"
        DELAYED = "delayed"
        UNSUPPORTED = "unsupported"

    class MatchCriteria(models.TextChoices):
        OPEN = "open"
        TARGETED = "targeted"

    class ReservationType(models.TextChoices):
        DEFAULT = "default"
        CAPACITY_BLOCK = "capacity-block"

    class EndDateType(models.TextChoices):
        UNLIMITED = "unlimited"
        LIMITED = "limited"

    reservation_id = models.CharField("ID", max_length=64, unique=True)
    arn = models.CharField("ARN", max_length=255, blank=True)
    owner_id = models.CharField("owner", max_length=12, db_index=True)
    owner_account = models.ForeignKey(
        "fleet.AwsAccount", null=True, blank=True, on_delete=models.SET_NULL, related_name="owned_reservations",
        help_text="The owner, when it is one of the fleet's accounts (owner_id names it either way).")
    region = models.CharField(max_length=32, blank=True)
    instance_type = models.CharField(max_length=64, db_index=True)
    instance_platform = models.CharField(max_length=64, default="Linux/UNIX")
    availability_zone = models.CharField("AZ", max_length=32, db_index=True)
    availability_zone_id = models.CharField("AZ ID", max_length=32, blank=True)
    tenancy = models.CharField(max_length=16, default="default")
    total_instance_count = models.PositiveIntegerField("total")
    available_instance_count = models.PositiveIntegerField("available")
    state = models.CharField(max_length=20, choices=State.choices, default=State.ACTIVE, db_index=True)
    instance_match_criteria = models.CharField(
        max_length=10, choices=MatchCriteria.choices, default=MatchCriteria.TARGETED
    )
    reservation_type = models.CharField(
        "type", max_length=20, choices=ReservationType.choices, default=ReservationType.DEFAULT, db_index=True
    )
    interruptible = models.BooleanField(default=False)
    ebs_optimized = models.BooleanField(default=False)
    ephemeral_storage = models.BooleanField(default=False)
    create_date = models.DateTimeField(null=True, blank=True)
    start_date = models.DateTimeField(null=True, blank=True)
    end_date = models.DateTimeField(null=True, blank=True, db_index=True)
    end_date_type = models.CharField(max_length=10, choices=EndDateType.choices, default=EndDateType.UNLIMITED)
    ultraserver_type = models.CharField("UltraServer type", max_length=64, blank=True)
    placement_group_arn = models.CharField(max_length=255, blank=True)
    outpost_arn = models.CharField(max_length=255, blank=True)
    unused_reservation_billing_owner_id = models.CharField(max_length=12, blank=True)
    capacity_allocations = models.JSONField(default=list, blank=True)
    # A future-dated reservation's commitment (CommitmentInfo): no shrink below the committed count and
    # no cancel before its end (EC2 refuses both).
    committed_instance_count = models.PositiveIntegerField("committed", null=True, blank=True)
    commitment_end_date = models.DateTimeField("commitment ends", null=True, blank=True)
    delivery_preference = models.CharField(max_length=16, blank=True, help_text="fixed or incremental (future-dated).")
    capacity_reservation_fleet_id = models.CharField(
        "Capacity Reservation Fleet", max_length=64, blank=True,
        help_text="Created by a Capacity Reservation Fleet: open matching only.")
    interruptible_allocation = models.JSONField(
        default=dict, blank=True,
        help_text="InterruptibleCapacityAllocation: units this reservation lends as an interruptible reservation.")
    interruption_source_id = models.CharField(
        "lent by", max_length=64, blank=True,
        help_text="InterruptionInfo.SourceCapacityReservationId: the reservation that lends this interruptible one.")
    tags = models.JSONField(default=dict, blank=True, help_text="EC2 tags as a {key: value} object.")
    last_seen = models.DateTimeField(null=True, blank=True, help_text="When EC2 last reported this reservation.")
    counted_at = models.DateTimeField(
        null=True, blank=True,
        help_text="The moment karpweb asked EC2 for the available count it holds (the clock before the call): "
                  "units launched after it are not in that count (reservations.ledger).")
    # karpweb's own override (the EC2 sync never writes these): keep karpweb from planning into it.
    planning_excluded = models.BooleanField(
        "keep karpweb from planning into it", default=False,
        help_text="karpweb launches and consolidates nothing into it; nodes already in it stay. The next sync keeps this.")
    planning_excluded_reason = models.TextField(
        "why", max_length=500, blank=True, help_text="Required to exclude it: what an operator reading the plan should know.")
    planning_excluded_by = models.CharField("excluded by", max_length=150, blank=True)
    planning_excluded_at = models.DateTimeField("excluded since", null=True, blank=True)

    objects = VisibleReservationManager()

    class Meta:
        ordering = ["reservation_id"]
        indexes = [models.Index(fields=["instance_type", "availability_zone"])]

    def __str__(self):
        kind = "capacity block" if self.is_capacity_block else "ODCR"
        return f"{self.reservation_id} ({kind} {self.instance_type} in {self.availability_zone})"

    def get_absolute_url(self):
        return detail_url("reservations:detail", self.reservation_id)

    @property
    def used_instance_count(self) -> int:
        """Units instances run in: lent units have left the available count but nobody here uses them."""
        return max(self.total_instance_count - self.available_instance_count - self.lent_count, 0)

    @property
    def utilization(self) -> float:
        """Used share of the reservation, 0..1."""
        if not self.total_instance_count:
            return 0.0
        return self.used_instance_count / self.total_instance_count

    @property
    def is_capacity_block(self) -> bool:
        return self.reservation_type == self.ReservationType.CAPACITY_BLOCK

    @property
    def is_ultraserver(self) -> bool:
        return bool(self.ultraserver_type)

    @property
    def timing(self) -> CapacityBlockTiming | None:
        """Drain and termination times of a capacity block; None for ODCRs without a block end."""
        if not self.is_capacity_block or self.end_date is None:
            return None
        return capacity_block_timing(self.end_date, ultraserver=self.is_ultraserver)

    def is_low_utilization(self, now=None) -> bool:
        """Under 20 % for a full 24 hours (needs `with_recent_utilization`), and still usable: an expired or
        cancelled reservation bills nothing more, so its past use is no alarm."""
        now = now or timezone.now()
        if not self.is_usable(now):
            return False
        since = getattr(self, "recent_since", None)
        average = getattr(self, "recent_utilization", None)
        # Samples come once per sync; allow one missed sample at the window's start.
        covered = since is not None and now - since >= LOW_UTILIZATION_WINDOW - datetime.timedelta(hours=1)
        return covered and average is not None and average < LOW_UTILIZATION_THRESHOLD

    def block_alarm(self, running_instances: int, now=None) -> bool:
        """True when a capacity block still has running instances 45 minutes (or less) before its end."""
        now = now or timezone.now()
        return bool(self.is_capacity_block and self.end_date and running_instances
                    and now >= self.end_date - BLOCK_ALARM_LEAD)

    def is_usable(self, now=None) -> bool:
        now = now or timezone.now()
        return self.state == self.State.ACTIVE and (self.end_date is None or self.end_date > now)

    def is_upcoming(self, now=None) -> bool:
        """Not started yet (scheduled before its start; assessing, pending, payment-pending, delayed):
        mirrored and shown, planned with only from its start (scheduling/engine/reservations.py `state_at`)."""
        now = now or timezone.now()
        if self.state == self.State.SCHEDULED and self.start_date is not None and self.start_date <= now:
            return False  # EC2 made it active at its start; the next sync says so
        return self.state in UPCOMING_STATES

    def seconds_until_start(self, now=None) -> int | None:
        """The countdown to its start while it has not started (0 once the asked start is past); None otherwise."""
        now = now or timezone.now()
        if not self.is_upcoming(now) or self.start_date is None:
            return None
        return max(int((self.start_date - now).total_seconds()), 0)

    def seconds_until_commitment_end(self, now=None) -> int | None:
        """The countdown to the end of its commitment (CommitmentInfo); None when it has none or it is over."""
        now = now or timezone.now()
        return int((self.commitment_end_date - now).total_seconds()) if self.is_committed(now) else None

    def is_committed(self, now=None) -> bool:
        """Under a commitment (CommitmentInfo) now: EC2 refuses a cancel, or a shrink below the
        committed count, before commitment_end_date."""
        now = now or timezone.now()
        return self.commitment_end_date is not None and self.commitment_end_date > now

    @property
    def lends_interruptible_capacity(self) -> bool:
        """The source of an interruptible allocation: shrinking or cancelling it reclaims a borrower's units."""
        return bool((self.interruptible_allocation or {}).get("InstanceCount")
                    or (self.interruptible_allocation or {}).get("TargetInstanceCount"))

    @property
    def lent_count(self) -> int:
        """Units lent as interruptible capacity now (InterruptibleCapacityAllocation.InstanceCount): gone from its
        available count, neither used by the fleet nor free for it, until reclaimed."""
        allocation = self.interruptible_allocation or {}
        return 0 if allocation.get("Status") == "canceled" else int(allocation.get("InstanceCount") or 0)

    @property
    def lent_target(self) -> int:
        allocation = self.interruptible_allocation or {}
        return 0 if allocation.get("Status") == "canceled" else int(allocation.get("TargetInstanceCount") or 0)

    @property
    def lent_to(self) -> str:
        """The interruptible reservation that holds the lent units."""
        return (self.interruptible_allocation or {}).get("InterruptibleCapacityReservationId") or ""

    @property
    def reclaiming(self) -> int:
        """Units being reclaimed (their borrowers warned, not yet gone)."""
        return max(self.lent_count - self.lent_target, 0)

    @property
    def planning_exclusion(self) -> str:
        """Who kept karpweb from planning into it, since when (as Kubernetes writes a time: the WORLD
        annotation) and why, in words; empty when nobody did."""
        return self.planning_exclusion_written(format_time)

    @property
    def planning_exclusion_on_pages(self) -> str:
        """planning_exclusion with the time as every page writes one ("2026-11-25 19:40 UTC")."""
        return self.planning_exclusion_written(lambda moment: f"{moment.astimezone(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC")

    def planning_exclusion_written(self, write_time) -> str:
        if not self.planning_excluded:
            return ""
        since = f" since {write_time(self.planning_excluded_at)}" if self.planning_excluded_at else ""
        return f"by {self.planning_excluded_by or 'an operator'}{since}: {self.planning_excluded_reason or 'no reason given'}"


class ReservationVisibility(models.Model):
    """One of the fleet's accounts sees a reservation: its owner, or an account it is shared with
    through AWS RAM. A cluster scope reads the reservations its account sees."""

    objects = ByReservationQuerySet.as_manager()

    reservation = models.ForeignKey(CapacityReservation, on_delete=models.CASCADE, related_name="visibilities")
    account = models.ForeignKey("fleet.AwsAccount", on_delete=models.CASCADE, related_name="visible_reservations")
    shared = models.BooleanField(default=False, help_text="Seen through a RAM share; false: the account owns it.")
    first_seen = models.DateTimeField(default=timezone.now)

    class Meta:
        verbose_name_plural = "reservation visibilities"
        ordering = ["reservation", "account"]
        constraints = [models.UniqueConstraint(fields=["reservation", "account"], name="one_visibility_per_account")]

    def __str__(self):
        how = "shared with" if self.shared else "owned by"
        return f"{self.reservation.reservation_id} {how} {self.account}"


def record_visibility(reservation_ids, account=None) -> int:
    """Record that `account` (default: the working cluster's, fleet.scope) sees these reservations,
    and link each reservation to its owner when the owner is one of the fleet's accounts. Idempotent;
    returns how many visibilities are new. The EC2 sync calls it after its writes; a reservation saved
    one by one records it through the signal below."""
    from fleet.models import AwsAccount

    ids = list(reservation_ids)
    if not ids:
        return 0
    if account is None:
        cluster = scope.current_cluster()
        if cluster is None:
            try:
                cluster = scope.default_cluster()
            except scope.NoClusterScope:
                cluster = None  # several clusters, no scope: only the owners below are known to see them
        account = cluster.account if cluster is not None else None
    rows = list(CapacityReservation.objects.fleet().filter(pk__in=ids).values_list("pk", "owner_id", "owner_account_id"))
    owners = dict(AwsAccount.objects.filter(account_id__in={owner for _, owner, _ in rows}).values_list("account_id", "pk"))
    relink = {}  # owner account pk (None: not one of ours) -> the reservations to link to it
    for pk, owner, linked in rows:
        if owners.get(owner) != linked:
            relink.setdefault(owners.get(owner), []).append(pk)
    for account_pk, pks in relink.items():
        CapacityReservation.objects.fleet().filter(pk__in=pks).update(owner_account_id=account_pk)
    wanted = {(pk, owners[owner], False) for pk, owner, _ in rows if owner in owners}
    if account is not None:
        wanted |= {(pk, account.pk, owner != account.account_id) for pk, owner, _ in rows}
    seen = set(ReservationVisibility.objects.filter(reservation_id__in=ids).values_list("reservation_id", "account_id"))
    new = [ReservationVisibility(reservation_id=pk, account_id=account_id, shared=shared)
           for pk, account_id, shared in sorted(wanted) if (pk, account_id) not in seen]
    ReservationVisibility.objects.bulk_create(new, ignore_conflicts=True)
    return len(new)


@receiver(post_save, sender=CapacityReservation)
def _reservation_saved(sender, instance, created, raw=False, **kwargs):
    if created and not raw:
        record_visibility([instance.pk])


class UtilizationSample(models.Model):
    """How full one reservation was at one sync."""

    objects = ByReservationQuerySet.as_manager()

    reservation = models.ForeignKey(CapacityReservation, on_delete=models.CASCADE, related_name="samples")
    sampled_at = models.DateTimeField(default=timezone.now)
    used = models.PositiveIntegerField()
    available = models.PositiveIntegerField()
    total = models.PositiveIntegerField()

    class Meta:
        ordering = ["-sampled_at"]
        # The second index serves the roll-up (the last hour of every reservation) and pruning.
        indexes = [models.Index(fields=["reservation", "-sampled_at"]), models.Index(fields=["sampled_at"])]

    def __str__(self):
        return f"{self.reservation.reservation_id} at {self.sampled_at:%Y-%m-%d %H:%M}: {self.used}/{self.total} used"


class EC2NodeClass(ConditionsMixin, models.Model):
    """karpenter.k8s.aws/v1 EC2NodeClass: which reservations its nodes may launch into."""

    cluster = cluster_field("node_classes")
    name = models.CharField(max_length=253)
    uid = models.CharField(max_length=64, blank=True)
    resource_version = models.CharField(max_length=64, blank=True)
    capacity_reservation_selector_terms = models.JSONField(default=list, blank=True)
    spec = models.JSONField(default=dict, blank=True, help_text="The rest of spec, as Kubernetes has it.")
    annotations = models.JSONField(default=dict, blank=True)
    status_capacity_reservations = models.JSONField(
        "status.capacityReservations", default=list, blank=True
    )
    status_launch = models.JSONField(
        "launch status", default=dict, blank=True,
        help_text="status.amis, subnets, securityGroups and instanceProfile: what launches resolve to.")
    conditions = models.JSONField(default=list, blank=True)
    selected_reservations = models.ManyToManyField(
        CapacityReservation, blank=True, related_name="node_classes",
        help_text="The reservations status.capacityReservations names (kept for joins).",
    )
    open_reservations = models.BooleanField(
        "open mode", default=False,
        help_text="On-demand launches use CapacityReservationPreference open, so EC2 may run them in a matching "
                  "open reservation (they stay on-demand). On a cluster: annotation karpweb.io/open-reservations.",
    )
    created_at = models.DateTimeField(null=True, blank=True)
    synced_at = models.DateTimeField(null=True, blank=True)

    objects = ClusterScopedManager()

    class Meta:
        ordering = ["name"]
        verbose_name = "EC2NodeClass"
        verbose_name_plural = "EC2NodeClasses"
        constraints = [models.UniqueConstraint(fields=["cluster", "name"], name="one_nodeclass_name_per_cluster")]

    def get_absolute_url(self):
        return cluster_detail_url("reservations:nodeclass", self.cluster_id, self.name)

    def get_edit_url(self):
        return cluster_detail_url("reservations:nodeclass_edit", self.cluster_id, self.name)

    def get_open_mode_url(self):
        return cluster_detail_url("reservations:nodeclass_open_mode", self.cluster_id, self.name)

    def __str__(self):
        return self.name


class CapacityReservationGroup(models.Model):
    """A Capacity Reservation group (a resource group of ODCRs) that a selector term names, with
    its members as ListGroupResources last listed them (the simulated world stores them here)."""

    arn = models.CharField("ARN", max_length=512, unique=True)
    reservation_ids = models.JSONField(default=list, blank=True, help_text="Member reservation IDs, as EC2 lists them.")
    reservations = models.ManyToManyField(
        CapacityReservation, blank=True, related_name="groups", help_text="The members karpweb knows (for joins)."
    )
    synced_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["arn"]
        verbose_name = "capacity reservation group"

    def __str__(self):
        return self.name

    @property
    def name(self) -> str:
        return self.arn.rsplit("/", 1)[-1]


class OpenReservationInstance(models.Model):
    """An on-demand instance that EC2 runs inside a reservation by open matching (open mode): it
    uses one of the reservation's units and counts in its utilization, but it is not `reserved`
    and karpweb never relabels it (relabelling is what caused upstream's drift loops)."""

    objects = ByReservationQuerySet.as_manager()

    instance_id = models.CharField(max_length=32, unique=True)
    reservation = models.ForeignKey(CapacityReservation, on_delete=models.CASCADE, related_name="open_instances")
    instance_type = models.CharField(max_length=64)
    availability_zone = models.CharField("AZ", max_length=32)
    node_name = models.CharField(max_length=253, blank=True, help_text="The node running on it, when karpweb knows it.")
    first_seen = models.DateTimeField()
    last_seen = models.DateTimeField()

    class Meta:
        ordering = ["reservation", "instance_id"]

    def __str__(self):
        return f"{self.instance_id} (on-demand in {self.reservation.reservation_id})"


class ReservationInstance(models.Model):
    """One instance EC2 runs in a reservation, as DescribeInstances of one of the fleet's accounts
    reported it at the last EC2 sync (its CapacityReservationId, or the open reservation it runs in):
    the instances the ledger already reads (reservations/ledger.py record_use), kept for the
    reservation's page and API. A row goes when its account's next answer no longer lists the
    instance in a live state; an account that did not answer keeps its rows."""

    objects = ByReservationQuerySet.as_manager()

    instance_id = models.CharField(max_length=32, unique=True)
    reservation = models.ForeignKey(CapacityReservation, on_delete=models.CASCADE, related_name="instances")
    account_id = models.CharField("account", max_length=12, help_text="The account whose DescribeInstances listed it.")
    instance_type = models.CharField(max_length=64)
    availability_zone = models.CharField("AZ", max_length=32)
    state = models.CharField(max_length=16)
    open_matching = models.BooleanField(default=False, help_text="On-demand, in the reservation by open matching.")
    launched_at = models.DateTimeField(null=True, blank=True, help_text="EC2's LaunchTime.")
    node_name = models.CharField(max_length=253, blank=True, help_text="The node whose providerID names it.")
    cluster = models.ForeignKey("fleet.Cluster", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    first_seen = models.DateTimeField()
    last_seen = models.DateTimeField()

    class Meta:
        ordering = ["reservation", "instance_id"]

    def __str__(self):
        return f"{self.instance_id} in {self.reservation.reservation_id}"

    @property
    def node_url(self) -> str:
        return cluster_detail_url("scheduling:node", self.cluster_id, self.node_name) if self.node_name else ""


class ClusterLaunchTemplate(models.Model):
    """A launch template Karpenter made for a cluster (tag karpenter.k8s.aws/cluster), as the EC2 sync
    last read it: its latest version's CapacityReservationPreference says whether the cluster's
    launches opt out of open reservations (`none`: the open-reservation trap, scheduling/engine/opentrap.py)."""

    cluster = cluster_field(related_name="launch_templates")
    template_id = models.CharField(max_length=64)
    name = models.CharField(max_length=255)
    version = models.PositiveIntegerField(default=0, help_text="Its latest version, the one read.")
    preference = models.CharField(
        max_length=32, blank=True,
        help_text="CapacityReservationSpecification.CapacityReservationPreference (blank: unset, EC2's default open).")
    node_class = models.CharField("EC2NodeClass", max_length=253, blank=True,
                                  help_text="Its karpenter.k8s.aws/ec2nodeclass tag, when it has one.")
    synced_at = models.DateTimeField()

    objects = ClusterScopedManager()

    class Meta:
        ordering = ["cluster", "name"]
        constraints = [models.UniqueConstraint(fields=["cluster", "template_id"], name="one_row_per_cluster_launch_template")]

    def __str__(self):
        return f"{self.name} ({self.preference or 'no preference'})"


class UtilizationHour(models.Model):
    """One reservation's samples of one hour, rolled up (reservations/utilization.py): what the
    charts and the low-utilization alarm read, so they cost the same at any sampling rate."""

    objects = ByReservationQuerySet.as_manager()

    reservation = models.ForeignKey(CapacityReservation, on_delete=models.CASCADE, related_name="hours")
    hour = models.DateTimeField(help_text="The hour's start (UTC).")
    samples = models.PositiveIntegerField()
    first_sampled_at = models.DateTimeField()
    used = models.FloatField(help_text="Mean used instances over the hour's samples.")
    peak_used = models.FloatField(null=True, blank=True, help_text="The most instances used at one sample in the hour.")
    available = models.FloatField(help_text="Mean available instances over the hour's samples.")
    total = models.FloatField(help_text="Mean total instances over the hour's samples.")
    share_sum = models.FloatField(help_text="Sum of used/total over the samples with a total above 0.")
    share_samples = models.PositiveIntegerField(help_text="How many samples had a total above 0.")
    clusters = models.JSONField(default=dict, blank=True,
                                help_text="Cluster name -> mean units its nodes used over the hour (the fleet ledger's reads).")

    class Meta:
        ordering = ["-hour"]
        constraints = [models.UniqueConstraint(fields=["reservation", "hour"], name="one_roll_up_per_reservation_hour")]
        indexes = [models.Index(fields=["hour"])]

    def __str__(self):
        return f"{self.reservation.reservation_id} {self.hour:%Y-%m-%d %H}:00: {self.used:.1f}/{self.total:.1f} used"


class Recommendation(models.Model):
    """What to do about a reservation, from its measured use (scheduling.engine.recommendations):
    recomputed after each hourly roll-up; applied by an operator in control mode."""

    objects = ByReservationQuerySet.as_manager()

    class Kind(models.TextChoices):
        SHRINK = "shrink", "shrink"
        CANCEL = "cancel", "cancel"
        SELECT = "select", "select it"
        EXTEND = "extend", "extend the Capacity Block"
        END_DATE = "end-date", "end date ahead"
        SPLIT = "split", "split off and share"
        MOVE = "move", "move units"
        LEND = "lend", "lend as interruptible"
        RECLAIM = "reclaim", "reclaim lent units"

    class State(models.TextChoices):
        OPEN = "open", "open"
        APPLYING = "applying", "being applied"
        APPLIED = "applied", "applied"
        FAILED = "failed", "failed"
        SUPERSEDED = "superseded", "superseded"  # an alternative for the same reservation was applied

    kind = models.CharField(max_length=16, choices=Kind.choices, db_index=True)
    reservation = models.ForeignKey(CapacityReservation, on_delete=models.CASCADE, related_name="recommendations")
    reason = models.TextField()
    savings_per_month = models.FloatField(help_text="Dollars a month (730 hours) at its price basis (list, or a Savings Plan's rate).")
    target_count = models.PositiveIntegerField(null=True, blank=True)
    end_date = models.DateTimeField(null=True, blank=True)
    details = models.JSONField(default=dict, blank=True)
    # What the reservation looked like when this was computed: applying refuses if it changed since.
    seen_total = models.PositiveIntegerField()
    seen_end_date = models.DateTimeField(null=True, blank=True)
    computed_at = models.DateTimeField(db_index=True)
    state = models.CharField(max_length=10, choices=State.choices, default=State.OPEN, db_index=True)
    applied_at = models.DateTimeField(null=True, blank=True)
    applied_by = models.CharField(max_length=150, blank=True)
    error = models.TextField(blank=True)
    superseded_by = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="superseded")
    advised = models.BooleanField(default=True, db_index=True,
                                  help_text="False: an extension dearer than the work it protects, shown on request only.")

    class Meta:
        ordering = ["-savings_per_month", "kind", "id"]

    def __str__(self):
        return f"{self.get_kind_display()} {self.reservation.reservation_id}"

    # Money has one rule (scheduling.engine.recommendations): monthly savings, one-off amounts and
    # warnings are told apart and never summed together.
    @property
    def money(self) -> str:
        """monthly | one-off | warning (rows computed before the rule: from the kind)."""
        default = "one-off" if self.kind == self.Kind.EXTEND else "monthly" if self.savings_per_month else "warning"
        return (self.details or {}).get("money") or default

    @property
    def is_monthly(self) -> bool:
        return self.money == "monthly" and bool(self.savings_per_month)

    @property
    def money_text(self) -> str:
        """What the figure is, in words: "saves $140.16 a month (recurring)", "one-off: ..."."""
        if self.money == "one-off":
            lost, cost = (self.details or {}).get("lostWork") or 0.0, (self.details or {}).get("oneOffCost")
            buy = (f"an extension costs ${cost:,.2f} once" if cost is not None else "EC2 offers no extension to buy now")
            return f"one-off: {buy}, against a one-off loss of about ${lost:,.2f} of work"
        if self.is_monthly:
            return f"saves ${self.savings_per_month:,.2f} a month (recurring, {at_basis(self.price_basis)})"
        idle = (self.details or {}).get("idleCostPerMonth")
        if idle is not None:  # a split nobody in the fleet would use yet: what its idle units cost
            return f"a warning: nothing saved yet; its {(self.details or {}).get('count')} idle units cost ${idle:,.2f} a month"
        return "a warning: nothing saved"

    @property
    def money_basis(self) -> str:
        return (self.details or {}).get("moneyBasis", "")

    @property
    def price_basis(self) -> str:
        """The price its money uses: "list", or "savings-plan" (scheduling/engine/commitments.py)."""
        return (self.details or {}).get("priceBasis", "list")

    @property
    def node_class_edit_url(self) -> str:
        """The selector-term editor of the EC2NodeClass a *select* names, in the cluster it names."""
        details = self.details or {}
        name, cluster = details.get("nodeClass") or "", details.get("cluster") or ""
        if cluster and scope.several_clusters() and scope.cluster_named(cluster) is not None:
            return detail_url("reservations:nodeclass_edit", cluster, name)
        return detail_url("reservations:nodeclass_edit", name)

    @property
    def can_apply(self) -> tuple[bool, str]:
        """(whether an Apply button may be offered, why not) from the recommendation alone (the mode aside)."""
        if self.state != self.State.OPEN:
            return False, f"it is {self.get_state_display()}"
        if self.kind == self.Kind.EXTEND and not (self.details or {}).get("offerings"):
            return False, "EC2 offers no extension of this Capacity Block now"
        if self.kind == self.Kind.RECLAIM:
            return False, "the loop reclaims lent units itself in control mode"
        if self.kind == self.Kind.SELECT and not (self.details or {}).get("nodeClass"):
            return False, "no EC2NodeClass is known for the on-demand nodes beside it; edit one's selector terms"
        return True, ""

    def get_absolute_url(self):
        from django.urls import reverse

        return reverse("reservations:recommendation", args=[self.pk])


class ReservationUse(models.Model):
    """Who held a reservation's units at one sync, across the fleet (scheduling.engine.attribution):
    per cluster of ours, our accounts' instances no cluster knows, other accounts, and unknown.
    History is kept and pruned as UtilizationSample is (KARPWEB_SAMPLE_RETENTION_DAYS)."""

    objects = ByReservationQuerySet.as_manager()

    reservation = models.ForeignKey(CapacityReservation, on_delete=models.CASCADE, related_name="uses")
    sampled_at = models.DateTimeField(default=timezone.now)
    total = models.PositiveIntegerField()
    used = models.PositiveIntegerField()
    clusters = models.JSONField(default=dict, blank=True, help_text="Cluster name -> units its nodes use.")
    our_accounts = models.JSONField(default=dict, blank=True,
                                    help_text="Our account ID -> units its instances no cluster knows use.")
    other_accounts = models.JSONField(default=dict, blank=True, help_text="Other account ID -> units it uses.")
    unknown = models.PositiveIntegerField(default=0, help_text="Used units nothing above explains.")
    lent = models.PositiveIntegerField(default=0, help_text="Units lent as interruptible capacity: neither used "
                                                            "by the fleet nor free for it.")

    class Meta:
        ordering = ["-sampled_at"]
        indexes = [models.Index(fields=["reservation", "-sampled_at"]), models.Index(fields=["sampled_at"])]

    def __str__(self):
        return f"{self.reservation.reservation_id} at {self.sampled_at:%Y-%m-%d %H:%M}: {self.used}/{self.total} used"

    @property
    def others(self) -> int:
        return sum((self.other_accounts or {}).values())


class ReservationHold(models.Model):
    """Units of a reservation one cluster claimed for a launch it planned (reservations.ledger): no
    unit is given to two clusters. Held until the launch succeeds (launched: counted until EC2's count
    is read after the launch, released when EC2 shows the instance in the reservation), fails
    (released), or HOLD_TTL passes (the launch timeout)."""

    objects = ByReservationQuerySet.as_manager()

    class State(models.TextChoices):
        HELD = "held"
        LAUNCHED = "launched"
        RELEASED = "released"

    reservation = models.ForeignKey(CapacityReservation, on_delete=models.CASCADE, related_name="holds")
    cluster = models.ForeignKey("fleet.Cluster", on_delete=models.CASCADE, related_name="reservation_holds")
    units = models.PositiveIntegerField(default=1)
    claim_name = models.CharField(max_length=253, blank=True, help_text="The NodeClaim the units are held for.")
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField()
    updated_at = models.DateTimeField(default=timezone.now)
    state = models.CharField(max_length=10, choices=State.choices, default=State.HELD, db_index=True)
    launched_at = models.DateTimeField(
        null=True, blank=True, help_text="When EC2 answered the launch (the clock after the call): a count read "
                                         "before it does not hold the unit yet.")
    instance_id = models.CharField(max_length=32, blank=True, help_text="The instance the launch started.")

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["reservation", "state"])]

    def __str__(self):
        return f"{self.units} of {self.reservation.reservation_id} for {self.cluster} ({self.state})"


class ReservationContention(models.Model):
    """A launch met ReservationCapacityExceeded or InsufficientInstanceCapacity on a reservation the
    ledger called free: what it wanted, what the ledger said, and who took the units (filled in at
    the next sync's attribution)."""

    objects = ByReservationQuerySet.as_manager()

    reservation = models.ForeignKey(CapacityReservation, on_delete=models.CASCADE, related_name="contentions")
    cluster = models.ForeignKey("fleet.Cluster", on_delete=models.CASCADE, related_name="reservation_contentions")
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    units_wanted = models.PositiveIntegerField(default=1)
    ledger_free = models.IntegerField(help_text="Units the ledger called free when the units were held.")
    error_code = models.CharField(max_length=64)
    taken_by = models.JSONField(default=dict, blank=True,
                                help_text="The next sync's attribution of the reservation (clusters, accounts, unknown).")
    explained_at = models.DateTimeField(null=True, blank=True, help_text="When taken_by was filled in.")

    class Meta:
        ordering = ["-created_at"]

    def __str__(self):
        return f"{self.reservation.reservation_id}: {self.cluster} met {self.error_code}"

    @property
    def taken_by_text(self) -> str:
        if not self.explained_at:
            return "not known until the next sync"
        parts = [f"cluster {name}: {units}" for name, units in sorted((self.taken_by.get("clusters") or {}).items())]
        parts += [f"account {a} (ours, no cluster): {u}" for a, u in sorted((self.taken_by.get("ourAccounts") or {}).items())]
        parts += [f"account {a}: {u}" for a, u in sorted((self.taken_by.get("otherAccounts") or {}).items())]
        if self.taken_by.get("unknown"):
            parts.append(f"unknown: {self.taken_by['unknown']}")
        return ", ".join(parts) or "nobody holds a unit now"


class DoctorFinding(models.Model):
    """One thing the reservation doctor (scheduling.engine.doctor) found stopping a reservation from
    being used in one cluster, with its evidence and fix. Rewritten by every EC2 step
    (reservations/doctor.py): a finding seen again keeps its first_seen and moves last_seen; one no
    longer found gets cleared_at (kept as history, pruned with the decisions)."""

    class Severity(models.TextChoices):
        CRITICAL = "critical"
        WARNING = "warning"
        INFO = "info"

    cluster = cluster_field("doctor_findings")
    key = models.CharField(max_length=512, help_text="What makes two runs' findings the same finding.")
    code = models.CharField(max_length=40, db_index=True)
    severity = models.CharField(max_length=10, choices=Severity.choices, db_index=True)
    account_id = models.CharField("account", max_length=12, blank=True)
    reservation_id = models.CharField("reservation", max_length=64, blank=True, db_index=True)
    node_class_name = models.CharField("EC2NodeClass", max_length=253, blank=True, db_index=True)
    evidence = models.TextField()
    evidence_data = models.JSONField(default=dict, blank=True)
    fix = models.TextField()
    fix_command = models.TextField(blank=True, help_text="A command or YAML to apply, when one exists.")
    first_seen = models.DateTimeField()
    last_seen = models.DateTimeField()
    cleared_at = models.DateTimeField(null=True, blank=True, db_index=True,
                                      help_text="When a run no longer found it (the cause was fixed).")

    objects = ClusterScopedManager()

    class Meta:
        ordering = ["cleared_at", "severity", "code", "reservation_id", "node_class_name"]
        constraints = [models.UniqueConstraint(fields=["cluster", "key"], name="one_doctor_finding_per_key")]

    def __str__(self):
        return f"{self.code}: {self.reservation_id or self.node_class_name}"

    @property
    def is_active(self) -> bool:
        return self.cleared_at is None

    @property
    def node_class_url(self) -> str:
        """The page of the EC2NodeClass it concerns, in its own cluster ("" when it concerns none)."""
        return cluster_detail_url("reservations:nodeclass", self.cluster_id, self.node_class_name) if self.node_class_name else ""


class CapacityBlockFee(models.Model):
    """What a Capacity Block cost up front, keyed by its reservation id: karpweb's own record (EC2's
    DescribeCapacityReservations says nothing of a block's fee). An idle unit of the block is worth
    fee / (units x the block's hours) (scheduling/engine/block_price.py), from the first of: the fee karpweb
    saw paid, the `block_fee` an administrator entered, EC2's offerings estimate (the EC2 sync writes it)."""

    reservation_id = models.CharField(
        "reservation", max_length=64, unique=True,
        help_text="The Capacity Block's reservation ID (cr-...), as EC2 reports it.")
    paid_fee = models.DecimalField(
        "fee paid", max_digits=12, decimal_places=2, null=True, blank=True,
        help_text="The upfront fee karpweb saw paid for the block ($), when it knows it.")
    block_fee = models.DecimalField(
        "block fee", max_digits=12, decimal_places=2, null=True, blank=True,
        help_text="The upfront fee the block cost when bought ($, from its purchase confirmation or the bill; without "
                  "the extensions karpweb bought, which it adds); used when no paid fee is known, before EC2's estimate.")
    extensions_paid = models.DecimalField(
        "extensions paid", max_digits=12, decimal_places=2, default=0,
        help_text="What karpweb paid EC2 to extend the block (PurchaseCapacityBlockExtension), $: added to the paid or "
                  "entered fee, since the block's hours include the extensions.")
    estimated_fee = models.DecimalField(
        "EC2 offerings estimate", max_digits=12, decimal_places=2, null=True, blank=True,
        help_text="The lowest upfront fee DescribeCapacityBlockOfferings asks for the same type, count and hours ($).")
    estimated_hours = models.PositiveIntegerField(
        null=True, blank=True, help_text="The block duration the estimate was asked for (a new end date asks again).")
    estimated_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["reservation_id"]

    def __str__(self):
        return f"fee of {self.reservation_id}"

    def clean(self):
        from django.core.exceptions import ValidationError

        if self.block_fee is not None and self.block_fee <= 0:
            raise ValidationError({"block_fee": f"{self.block_fee} is not a fee: enter the dollars the block cost "
                                                "up front (more than 0), or leave it empty."})
        reservation = CapacityReservation._base_manager.filter(reservation_id=self.reservation_id).first()
        if reservation is None:
            raise ValidationError({"reservation_id": f"No reservation {self.reservation_id!r} is known: "
                                                     "enter the ID of a Capacity Block EC2 reported."})
        if not reservation.is_capacity_block:
            raise ValidationError({"reservation_id": f"{self.reservation_id} is an ODCR, not a Capacity Block: "
                                                     "its idle units are worth their on-demand rate, not a fee."})


class BuyAdvice(models.Model):
    """A Capacity Block offering that would hold a gang of pending accelerator pods (issue #50, "Buy"): what
    EC2's DescribeCapacityBlockOfferings quoted at the last EC2 sync for a gang the plan could not place
    (scheduling/engine/buying.py). Advice only: karpweb buys nothing on its own."""

    cluster = cluster_field("buy_advice")
    namespace = models.CharField(max_length=253)
    gang = models.CharField(max_length=300, help_text='What groups its pods: "jobset/llm", "Job/finetune", or a pod.')
    pods = models.JSONField(default=list, help_text="The pending pods (namespace/name) the block would hold.")
    offering_id = models.CharField("offering", max_length=64)
    instance_type = models.CharField(max_length=64)
    availability_zone = models.CharField("AZ", max_length=32)
    instance_count = models.PositiveIntegerField(help_text="Instances in the block.")
    nodes_used = models.PositiveIntegerField(help_text="Of them, how many the gang's pods fill.")
    start = models.DateTimeField()
    end = models.DateTimeField()
    hours = models.PositiveIntegerField()
    upfront_fee = models.DecimalField(max_digits=12, decimal_places=2, help_text="What EC2 asks up front ($).")
    ultraserver_type = models.CharField("UltraServer type", max_length=64, blank=True,
                                        help_text="An UltraServer offering's type (its instances come whole UltraServers).")
    computed_at = models.DateTimeField()

    objects = ClusterScopedManager()

    class Meta:
        verbose_name_plural = "buy advice"
        ordering = ["namespace", "gang", "upfront_fee", "start"]
        constraints = [models.UniqueConstraint(fields=["cluster", "namespace", "gang", "offering_id"],
                                               name="one_buy_advice_per_gang_and_offering")]

    def __str__(self):
        return f"{self.namespace}/{self.gang}: {self.instance_count} x {self.instance_type} from {self.start:%Y-%m-%d %H:%M}"

    @property
    def key(self) -> tuple:
        return (self.cluster_id, self.namespace, self.gang, self.offering_id)


class CapacityBlockPurchase(models.Model):
    """A Capacity Block an operator approved for a waiting gang, and what karpweb bought (issue #50, "Buy";
    reservations/purchases.py). Its own row, not a state of the BuyAdvice it came from: the advice is EC2's quote
    of the moment, replaced at each EC2 sync and gone once the gang runs, while what was approved and paid must
    last (who approved, the reservation bought, its fee: the spending limit sums them over 30 days). It keeps the
    offering as approved; the purchase re-checks it with EC2 before it buys."""

    class State(models.TextChoices):
        APPROVED = "approved", "approved"
        PURCHASING = "purchasing", "purchasing"
        PURCHASED = "purchased", "purchased"
        FAILED = "failed", "failed"

    LIVE = (State.APPROVED, State.PURCHASING)  # one at a time per gang

    cluster = cluster_field("block_purchases")
    namespace = models.CharField(max_length=253)
    gang = models.CharField(max_length=300)
    pods = models.JSONField(default=list, help_text="The waiting pods (namespace/name) the block is bought for.")
    offering_id = models.CharField("offering", max_length=64)
    instance_type = models.CharField(max_length=64)
    availability_zone = models.CharField("AZ", max_length=32)
    instance_count = models.PositiveIntegerField()
    ultraserver_type = models.CharField("UltraServer type", max_length=64, blank=True)
    start = models.DateTimeField()
    end = models.DateTimeField()
    hours = models.PositiveIntegerField()
    upfront_fee = models.DecimalField(max_digits=12, decimal_places=2, help_text="The fee approved ($).")
    node_class = models.CharField("EC2NodeClass", max_length=253,
                                  help_text="The class whose capacityReservationSelectorTerms gain the block's id.")
    state = models.CharField(max_length=10, choices=State.choices, default=State.APPROVED, db_index=True)
    approved_by = models.CharField(max_length=150)
    approved_at = models.DateTimeField()
    claimed_at = models.DateTimeField(null=True, blank=True, help_text="When a purchase began (a crashed one is retried).")
    purchased_by = models.CharField(max_length=150, blank=True)
    purchased_at = models.DateTimeField(null=True, blank=True)
    reservation_id = models.CharField("reservation", max_length=64, blank=True, help_text="The block bought (cr-...).")
    paid_fee = models.DecimalField("fee paid", max_digits=12, decimal_places=2, null=True, blank=True)
    error = models.TextField(blank=True)

    objects = ClusterScopedManager()

    class Meta:
        ordering = ["-approved_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "namespace", "gang"], condition=Q(state__in=["approved", "purchasing"]),
                                    name="one_live_block_purchase_per_gang"),
            models.UniqueConstraint(fields=["cluster", "offering_id"], condition=Q(state="purchased"),
                                    name="one_purchase_per_offering"),
        ]

    def __str__(self):
        return f"{self.namespace}/{self.gang}: {self.instance_count} x {self.instance_type} ({self.state})"

    @property
    def purchase_tag(self) -> str:
        """The value of the `karpweb:purchase` tag the block is bought with: how a retry finds it."""
        return f"{self.cluster_id}-{self.pk}-{self.offering_id}"

class PriceCommitments(models.Model):
    """What an account already pays for, per region, as the EC2 sync last read it: its active zonal
    Reserved Instances (DescribeReservedInstances) and its EC2 Savings Plans with their rates here
    (savingsplans DescribeSavingsPlans, DescribeSavingsPlanRates). The engine prices on-demand
    offerings with them (scheduling/engine/commitments.py); what could not be read (no permission)
    leaves list prices, and `list_prices_because` says why (the overview shows it)."""

    account_id = models.CharField("account ID", max_length=12, blank=True,
                                  help_text="The AWS account (blank: karpweb's own credentials' account, a fleet of one).")
    region = models.CharField(max_length=32)
    reserved_instances = models.JSONField(
        default=list, blank=True, help_text="Active zonal Reserved Instances, as DescribeReservedInstances writes them.")
    savings_plans = models.JSONField(
        default=list, blank=True, help_text="Active Compute and EC2 Instance Savings Plans, each with its Linux/UNIX rates here.")
    list_prices_because = models.JSONField(
        default=list, blank=True, help_text='What could not be read, e.g. "no permission to read Reserved Instances".')
    read_at = models.DateTimeField()

    class Meta:
        verbose_name_plural = "price commitments"
        ordering = ["account_id", "region"]
        constraints = [models.UniqueConstraint(fields=("account_id", "region"), name="one_price_commitments_per_account_region")]

    def __str__(self):
        return f"commitments of {self.account_id or 'own account'} in {self.region}"

    def as_world(self) -> dict:
        """WORLD.json `commitments` (scheduling/engine/commitments.py)."""
        return {"reservedInstances": self.reserved_instances, "savingsPlans": self.savings_plans,
                "listPricesBecause": self.list_prices_because}
