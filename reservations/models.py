"""What EC2 says about capacity reservations, and how full they were over time."""

from django.db import models
from django.utils import timezone

from karpweb.conditions import ConditionsMixin


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
    tags = models.JSONField(default=dict, blank=True, help_text="EC2 tags as a {key: value} object.")
    last_seen = models.DateTimeField(null=True, blank=True, help_text="When EC2 last reported this reservation.")

    class Meta:
        ordering = ["reservation_id"]
        indexes = [models.Index(fields=["instance_type", "availability_zone"])]

    def __str__(self):
        kind = "capacity block" if self.is_capacity_block else "ODCR"
        return f"{self.reservation_id} ({kind} {self.instance_type} in {self.availability_zone})"

    @property
    def used_instance_count(self) -> int:
        return max(self.total_instance_count - self.available_instance_count, 0)

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

    def is_usable(self, now=None) -> bool:
        now = now or timezone.now()
        return self.state == self.State.ACTIVE and (self.end_date is None or self.end_date > now)


class UtilizationSample(models.Model):
    """How full one reservation was at one sync."""

    reservation = models.ForeignKey(CapacityReservation, on_delete=models.CASCADE, related_name="samples")
    sampled_at = models.DateTimeField(default=timezone.now)
    used = models.PositiveIntegerField()
    available = models.PositiveIntegerField()
    total = models.PositiveIntegerField()

    class Meta:
        ordering = ["-sampled_at"]
        indexes = [models.Index(fields=["reservation", "-sampled_at"])]

    def __str__(self):
        return f"{self.reservation.reservation_id} at {self.sampled_at:%Y-%m-%d %H:%M}: {self.used}/{self.total} used"


class EC2NodeClass(ConditionsMixin, models.Model):
    """karpenter.k8s.aws/v1 EC2NodeClass: which reservations its nodes may launch into."""

    name = models.CharField(max_length=253, unique=True)
    uid = models.CharField(max_length=64, blank=True)
    resource_version = models.CharField(max_length=64, blank=True)
    capacity_reservation_selector_terms = models.JSONField(default=list, blank=True)
    spec = models.JSONField(default=dict, blank=True, help_text="The rest of spec, as Kubernetes has it.")
    annotations = models.JSONField(default=dict, blank=True)
    status_capacity_reservations = models.JSONField(
        "status.capacityReservations", default=list, blank=True
    )
    conditions = models.JSONField(default=list, blank=True)
    selected_reservations = models.ManyToManyField(
        CapacityReservation, blank=True, related_name="node_classes",
        help_text="The reservations status.capacityReservations names (kept for joins).",
    )
    created_at = models.DateTimeField(null=True, blank=True)
    synced_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["name"]
        verbose_name = "EC2NodeClass"
        verbose_name_plural = "EC2NodeClasses"

    def __str__(self):
        return self.name
