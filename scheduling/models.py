"""The Kubernetes side (NodePools, NodeClaims, nodes, pods), the EC2 catalogue, and what the
loop decided, plus the audit log of manual changes."""

import datetime

from django.conf import settings
from django.contrib.contenttypes.models import ContentType
from django.db import models
from karpweb.urlcache import cluster_detail_url, detail_url
from django.utils import timezone

from fleet import access, scope
from fleet.managers import ClusterScopedManager, cluster_field
from karpweb.conditions import ConditionsMixin
from reservations.models import CapacityReservation, EC2NodeClass
from scheduling.choices import Mode  # noqa: F401 - its home for the models and modules that import it from here
from scheduling.engine.instances import instance_id


class CapacityType(models.TextChoices):
    ON_DEMAND = "on-demand"
    SPOT = "spot"
    RESERVED = "reserved"


class InstanceType(models.Model):
    """An EC2 instance type as DescribeInstanceTypes reports it."""

    name = models.CharField(max_length=64, unique=True)
    cpu_millicores = models.PositiveIntegerField("CPU (millicores)")
    memory_bytes = models.PositiveBigIntegerField("memory (bytes)", help_text="As EC2 reports it; nodes report less.")
    max_pods = models.PositiveIntegerField(default=110, help_text="The ENI limit on the default network card.")
    arch = models.CharField(max_length=16, default="amd64", db_index=True)
    os = models.CharField(max_length=16, default="linux")
    family = models.CharField(max_length=32, blank=True, db_index=True)
    size = models.CharField(max_length=32, blank=True)
    gpu_count = models.PositiveIntegerField(default=0)
    gpu_name = models.CharField(max_length=64, blank=True)
    bare_metal = models.BooleanField(default=False)
    labels = models.JSONField(default=dict, blank=True, help_text="Well-known labels, as Karpenter derives them.")
    resources = models.JSONField(
        default=dict, blank=True, help_text="Extended resources a node of this type advertises (GPUs, Neuron, EFA, pod ENIs)."
    )
    instance_store_gb = models.PositiveIntegerField("instance store (GB)", default=0)
    synced_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["name"]

    def __str__(self):
        return self.name

    def get_absolute_url(self):
        return detail_url("scheduling:instancetype", self.name)

    @property
    def vcpus(self) -> float:
        return self.cpu_millicores / 1000

    @property
    def memory_gib(self) -> float:
        return self.memory_bytes / 2**30


class Offering(models.Model):
    """Where and how an instance type can be bought: (capacity type, zone) with a price.

    Reserved offerings are one per reservation and priced at the on-demand price / 10,000,000,
    as Karpenter models them (free, but ordered)."""

    instance_type = models.ForeignKey(InstanceType, on_delete=models.CASCADE, related_name="offerings")
    capacity_type = models.CharField(max_length=10, choices=CapacityType.choices, db_index=True)
    zone = models.CharField(max_length=32, db_index=True)
    zone_id = models.CharField(max_length=32, blank=True)
    price = models.FloatField(help_text="Dollars per hour, list price as modelled.")
    available = models.BooleanField(default=True)
    reservation = models.ForeignKey(
        CapacityReservation, null=True, blank=True, on_delete=models.CASCADE, related_name="offerings"
    )
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["instance_type__name", "capacity_type", "zone"]
        constraints = [
            models.UniqueConstraint(
                fields=["instance_type", "capacity_type", "zone"],
                condition=models.Q(reservation__isnull=True),
                name="one_open_market_offering_per_pool",
            ),
            models.UniqueConstraint(
                fields=["reservation"], condition=models.Q(reservation__isnull=False),
                name="one_offering_per_reservation",
            ),
        ]

    def __str__(self):
        where = f" via {self.reservation.reservation_id}" if self.reservation_id else ""
        return f"{self.instance_type.name} {self.capacity_type} in {self.zone}{where} at ${self.price:.6g}/h"


class NodePool(ConditionsMixin, models.Model):
    """karpenter.sh/v1 NodePool."""

    class ConsolidationPolicy(models.TextChoices):
        WHEN_EMPTY = "WhenEmpty"
        WHEN_EMPTY_OR_UNDERUTILIZED = "WhenEmptyOrUnderutilized"

    cluster = cluster_field("node_pools")
    name = models.CharField(max_length=253)
    uid = models.CharField(max_length=64, blank=True)
    resource_version = models.CharField(max_length=64, blank=True)
    weight = models.PositiveIntegerField(default=0, help_text="Higher weight is tried first (0-100).")
    replicas = models.PositiveIntegerField(
        null=True, blank=True,
        help_text="spec.replicas (alpha): a static NodePool keeps this many nodes whatever the pods; blank: dynamic.")
    node_class = models.ForeignKey(
        EC2NodeClass, null=True, blank=True, on_delete=models.SET_NULL, related_name="node_pools"
    )
    node_class_ref = models.JSONField(default=dict, blank=True)
    requirements = models.JSONField(default=list, blank=True)
    taints = models.JSONField(default=list, blank=True)
    startup_taints = models.JSONField(default=list, blank=True)
    labels = models.JSONField(default=dict, blank=True, help_text="spec.template.metadata.labels")
    limits = models.JSONField(default=dict, blank=True, help_text='e.g. {"cpu": "1000", "memory": "1000Gi"}')
    consolidation_policy = models.CharField(
        max_length=32, choices=ConsolidationPolicy.choices, default=ConsolidationPolicy.WHEN_EMPTY_OR_UNDERUTILIZED
    )
    consolidate_after = models.CharField(max_length=32, default="0s", help_text='A duration ("30s", "5m") or "Never".')
    budgets = models.JSONField(default=list, blank=True, help_text='spec.disruption.budgets, e.g. [{"nodes": "10%"}]')
    expire_after = models.CharField(max_length=32, default="720h")
    termination_grace_period = models.CharField(  # db_default: the release before it still inserts NodePools
        max_length=32, blank=True, default="", db_default="",
        help_text='spec.template.spec.terminationGracePeriod ("48h"; blank: none).')
    keep_idle_reserved_nodes = models.BooleanField(
        default=False,
        help_text="Keep empty nodes that sit in a prepaid reservation instead of consolidating them away.",
    )
    mode = models.CharField(
        max_length=10, choices=Mode.choices, blank=True,
        help_text="Blank follows the global mode.",
    )
    conditions = models.JSONField(default=list, blank=True)
    status_resources = models.JSONField(default=dict, blank=True)
    registration_health = models.JSONField(
        default=dict, blank=True,
        help_text="The last registration results behind NodeRegistrationHealthy (scheduling/loop/registration_health.py).")
    created_at = models.DateTimeField(null=True, blank=True)
    synced_at = models.DateTimeField(null=True, blank=True)

    objects = ClusterScopedManager()

    class Meta:
        ordering = ["-weight", "name"]
        verbose_name = "NodePool"
        constraints = [models.UniqueConstraint(fields=["cluster", "name"], name="one_nodepool_name_per_cluster")]

    def get_absolute_url(self):
        return cluster_detail_url("scheduling:nodepool", self.cluster_id, self.name)

    def get_mode_url(self):
        return cluster_detail_url("scheduling:nodepool_mode", self.cluster_id, self.name)

    def __str__(self):
        return self.name


class NodeClaim(ConditionsMixin, models.Model):
    """karpenter.sh/v1 NodeClaim: a request for one instance, and what was launched for it."""

    cluster = cluster_field("node_claims")
    name = models.CharField(max_length=253)
    uid = models.CharField(max_length=64, blank=True)
    node_pool = models.ForeignKey(NodePool, null=True, blank=True, on_delete=models.SET_NULL, related_name="node_claims")
    node_class = models.ForeignKey(EC2NodeClass, null=True, blank=True, on_delete=models.SET_NULL, related_name="node_claims")
    instance_type = models.CharField(max_length=64, blank=True, db_index=True)
    zone = models.CharField(max_length=32, blank=True, db_index=True)
    capacity_type = models.CharField(max_length=10, choices=CapacityType.choices, blank=True, db_index=True)
    reservation = models.ForeignKey(
        CapacityReservation, null=True, blank=True, on_delete=models.SET_NULL, related_name="node_claims"
    )
    reservation_label = models.CharField(
        max_length=64, blank=True, help_text="karpenter.k8s.aws/capacity-reservation-id as labelled, even if unknown."
    )
    labels = models.JSONField(default=dict, blank=True)
    annotations = models.JSONField(default=dict, blank=True, help_text="The NodePool / EC2NodeClass hashes drift reads.")
    requirements = models.JSONField(default=list, blank=True)
    resources = models.JSONField(default=dict, blank=True, help_text="spec.resources.requests")
    expire_after = models.CharField(max_length=32, blank=True, help_text='spec.expireAfter ("720h", "Never"; blank: none written).')
    provider_id = models.CharField(max_length=255, blank=True, db_index=True)
    node_name = models.CharField(max_length=253, blank=True)
    image_id = models.CharField(max_length=64, blank=True)
    conditions = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(null=True, blank=True)
    launched_at = models.DateTimeField(null=True, blank=True)
    registered_at = models.DateTimeField(null=True, blank=True)
    initialized_at = models.DateTimeField(null=True, blank=True)
    deleting_since = models.DateTimeField(null=True, blank=True, help_text="metadata.deletionTimestamp")
    synced_at = models.DateTimeField(null=True, blank=True)

    objects = ClusterScopedManager()

    class Meta:
        ordering = ["name"]
        verbose_name = "NodeClaim"
        constraints = [models.UniqueConstraint(fields=["cluster", "name"], name="one_nodeclaim_name_per_cluster")]
        # The all-clusters list's order: its first page is read from the index, not sorted from the fleet's rows.
        indexes = [models.Index(fields=["name"], name="nodeclaim_fleet_list_order")]

    @property
    def instance_id(self) -> str:
        return instance_id(self.provider_id)

    def get_absolute_url(self):
        return cluster_detail_url("scheduling:nodeclaim", self.cluster_id, self.name)

    def __str__(self):
        return self.name


class Node(models.Model):
    """A v1 Node, with what its labels say about where it runs."""

    cluster = cluster_field("nodes")
    name = models.CharField(max_length=253)
    uid = models.CharField(max_length=64, blank=True)
    node_pool = models.ForeignKey(NodePool, null=True, blank=True, on_delete=models.SET_NULL, related_name="nodes")
    node_claim = models.OneToOneField(NodeClaim, null=True, blank=True, on_delete=models.SET_NULL, related_name="node")
    instance_type = models.CharField(max_length=64, blank=True, db_index=True)
    zone = models.CharField(max_length=32, blank=True, db_index=True)
    capacity_type = models.CharField(max_length=10, choices=CapacityType.choices, blank=True, db_index=True)
    reservation = models.ForeignKey(
        CapacityReservation, null=True, blank=True, on_delete=models.SET_NULL, related_name="nodes"
    )
    reservation_label = models.CharField(max_length=64, blank=True)
    labels = models.JSONField(default=dict, blank=True)
    annotations = models.JSONField(default=dict, blank=True)
    taints = models.JSONField(default=list, blank=True)
    allocatable_cpu_millicores = models.PositiveIntegerField(default=0)
    allocatable_memory_bytes = models.PositiveBigIntegerField(default=0)
    allocatable_pods = models.PositiveIntegerField(default=110)
    allocatable_extended = models.JSONField(
        default=dict, blank=True, help_text="Extended resources in status.allocatable (GPUs, Neuron, EFA, pod ENIs)."
    )
    provider_id = models.CharField(max_length=255, blank=True, db_index=True)
    ready = models.BooleanField(default=False)
    conditions = models.JSONField(default=list, blank=True, help_text="status.conditions (node repair reads them).")
    unschedulable = models.BooleanField(default=False, help_text="Cordoned.")
    created_at = models.DateTimeField(null=True, blank=True)
    deleting_since = models.DateTimeField(null=True, blank=True, help_text="metadata.deletionTimestamp")
    synced_at = models.DateTimeField(null=True, blank=True)

    objects = ClusterScopedManager()

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["cluster", "name"], name="one_node_name_per_cluster")]
        # The all-clusters list's order: its first page is read from the index, not sorted from the fleet's rows.
        indexes = [models.Index(fields=["name"], name="node_fleet_list_order")]

    def get_absolute_url(self):
        return cluster_detail_url("scheduling:node", self.cluster_id, self.name)

    def __str__(self):
        return self.name

    @property
    def instance_id(self) -> str:
        """aws:///us-east-1a/i-0abc -> i-0abc"""
        return instance_id(self.provider_id)


class Pod(models.Model):
    """A v1 Pod: bound (spec.nodeName set) or pending."""

    cluster = cluster_field("pods")
    namespace = models.CharField(max_length=253)
    name = models.CharField(max_length=253)
    uid = models.CharField(max_length=64, blank=True)
    node = models.ForeignKey(Node, null=True, blank=True, on_delete=models.SET_NULL, related_name="pods")
    node_name = models.CharField(max_length=253, blank=True, db_index=True)
    phase = models.CharField(max_length=16, default="Pending", db_index=True)
    cpu_request_millicores = models.PositiveIntegerField(default=0)
    memory_request_bytes = models.PositiveBigIntegerField(default=0)
    labels = models.JSONField(default=dict, blank=True)
    annotations = models.JSONField(default=dict, blank=True)
    spec = models.JSONField(
        default=dict, blank=True,
        help_text="Scheduling-relevant spec: containers' requests, nodeSelector, affinity, tolerations, topologySpreadConstraints.",
    )
    owner_kind = models.CharField(max_length=64, blank=True)
    owner_name = models.CharField(max_length=253, blank=True)
    priority = models.IntegerField(default=0)
    created_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True, help_text="status.startTime (do-not-disrupt durations count from it)")
    deleting_since = models.DateTimeField(null=True, blank=True, help_text="metadata.deletionTimestamp")
    synced_at = models.DateTimeField(null=True, blank=True)

    objects = ClusterScopedManager()

    class Meta:
        ordering = ["namespace", "name"]
        constraints = [models.UniqueConstraint(fields=["cluster", "namespace", "name"],
                                               name="unique_pod_per_cluster_namespace")]
        # The all-clusters list's order: its first page is read from the index, not sorted from the fleet's rows;
        # the pending pods' own (without it, that first page walked the whole order past every bound pod).
        indexes = [models.Index(fields=["namespace", "name"], name="pod_fleet_list_order"),
                   models.Index(fields=["namespace", "name"], condition=models.Q(node_name=""),
                                name="pod_pending_list_order")]

    def get_absolute_url(self):
        return cluster_detail_url("scheduling:pod", self.cluster_id, self.namespace, self.name)

    def __str__(self):
        return f"{self.namespace}/{self.name}"

    @property
    def is_pending(self) -> bool:
        return not self.node_name


class KubeObject(models.Model):
    """A Kubernetes object mirrored whole for the engine (the storage kinds its volume rules read:
    StorageClass, PersistentVolume, PersistentVolumeClaim, CSINode; NodeOverlays; PodDisruptionBudgets; and the
    selectors of Services, ReplicaSets, StatefulSets and ReplicationControllers for default spread), as the API
    server wrote it less its managedFields. The world hands them to the engine as WORLD.json's lists."""

    class Kind(models.TextChoices):
        STORAGE_CLASS = "StorageClass"
        PERSISTENT_VOLUME = "PersistentVolume"
        PERSISTENT_VOLUME_CLAIM = "PersistentVolumeClaim"
        CSI_NODE = "CSINode"
        NODE_OVERLAY = "NodeOverlay"
        POD_DISRUPTION_BUDGET = "PodDisruptionBudget"
        DAEMON_SET = "DaemonSet"
        SERVICE = "Service"
        REPLICA_SET = "ReplicaSet"
        STATEFUL_SET = "StatefulSet"
        REPLICATION_CONTROLLER = "ReplicationController"

    cluster = cluster_field("kube_objects")
    kind = models.CharField(max_length=32, choices=Kind.choices)
    namespace = models.CharField(max_length=253, blank=True, help_text="Blank for a cluster-scoped kind.")
    name = models.CharField(max_length=253)
    body = models.JSONField(default=dict, help_text="The object as the API server wrote it (no managedFields).")
    synced_at = models.DateTimeField(null=True, blank=True)

    objects = ClusterScopedManager()

    class Meta:
        verbose_name = "mirrored Kubernetes object"
        ordering = ["kind", "namespace", "name"]
        constraints = [models.UniqueConstraint(fields=["cluster", "kind", "namespace", "name"],
                                               name="unique_kube_object_per_cluster")]

    def __str__(self):
        return f"{self.kind} {self.namespace}/{self.name}" if self.namespace else f"{self.kind} {self.name}"


class Decision(models.Model):
    """One thing the loop decided, why, and whether it was acted on."""

    class Kind(models.TextChoices):
        LAUNCH = "launch", "launch a node"
        BIND = "bind", "bind to an existing node"
        UNSCHEDULABLE = "unschedulable", "unschedulable"
        DEFER = "defer", "deferred"
        CONSOLIDATE_DELETE = "consolidate-delete", "consolidation: delete"
        CONSOLIDATE_REPLACE = "consolidate-replace", "consolidation: replace"
        DRAIN = "drain", "capacity-block drain"
        DEMOTE = "demote", "demotion to on-demand"
        DRIFT = "drift", "drift"
        STATUS = "status", "status change"
        OVERRIDE = "override", "manual override"
        REGISTRATION_TIMEOUT = "registration-timeout", "registration timeout"
        GARBAGE_COLLECT = "garbage-collect", "garbage collection"
        INTERRUPTION = "interruption", "interruption"
        TERMINATE = "terminate", "termination"
        EXPIRE = "expire", "expiration"
        REPAIR = "repair", "node repair"
        SCALE_DOWN = "scale-down", "static NodePool: scale down"

    class Outcome(models.TextChoices):
        RECOMMENDED = "recommended", "recommended (observe mode)"
        SCHEDULED = "scheduled", "scheduled (control mode, not due yet)"
        ACTED = "acted"
        FAILED = "failed"
        SKIPPED = "skipped"

    # A removed cluster's decisions stay as history (scheduling/loop/removal.py): the link is cleared and the
    # name kept in cluster_name, which is blank while the cluster exists.
    cluster = cluster_field("decisions", null=True, on_delete=models.SET_NULL)
    cluster_name = models.CharField(max_length=63, blank=True, help_text="The removed cluster's name (blank: see cluster).")
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    kind = models.CharField(max_length=24, choices=Kind.choices)
    outcome = models.CharField(max_length=12, choices=Outcome.choices, default=Outcome.RECOMMENDED)
    mode = models.CharField(max_length=10, choices=Mode.choices)
    subject = models.CharField(max_length=255, help_text='What it is about: "pod default/web-7", "node gpu-3".')
    reason = models.TextField(help_text="Why, in words an operator understands.")
    node_pool = models.ForeignKey(NodePool, null=True, blank=True, on_delete=models.SET_NULL, related_name="decisions")
    reservation = models.ForeignKey(
        CapacityReservation, null=True, blank=True, on_delete=models.SET_NULL, related_name="decisions"
    )
    objects_involved = models.JSONField(default=dict, blank=True, help_text='e.g. {"pods": [...], "nodes": [...]}')
    details = models.JSONField(default=dict, blank=True, help_text="The engine's decision as it produced it.")
    error = models.TextField(blank=True)

    objects = ClusterScopedManager()

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["kind", "-created_at"])]

    def __str__(self):
        return f"{self.get_kind_display()}: {self.subject} ({self.outcome})"


class KarpenterLaunch(models.Model):
    """The audit of one NodeClaim karpweb did not create (Karpenter's): did it use a reservation, or
    miss a free compatible one, and what did the paid node cost while the unit sat idle."""

    class Outcome(models.TextChoices):
        MISSED = "missed-reservation", "missed a free reservation"
        USED = "used-reservation", "used a reservation"
        NO_FREE_UNIT = "no-free-unit", "no free unit"
        NOT_COMPATIBLE = "no-compatible-reservation", "no compatible reservation"
        DISRUPTED = "reserved-node-disrupted", "reserved node disrupted beside paid nodes"

    cluster = cluster_field("karpenter_launches")
    claim_name = models.CharField(max_length=253)
    node_claim = models.OneToOneField(NodeClaim, null=True, blank=True, on_delete=models.SET_NULL,
                                      related_name="karpenter_launch")
    node_pool = models.ForeignKey(NodePool, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    node_pool_name = models.CharField(max_length=253, blank=True)
    instance_type = models.CharField(max_length=64)
    zone = models.CharField(max_length=32)
    capacity_type = models.CharField(max_length=10, choices=CapacityType.choices)
    launched_at = models.DateTimeField(db_index=True, help_text="When the NodeClaim appeared.")
    outcome = models.CharField(max_length=32, choices=Outcome.choices, db_index=True)
    reason = models.TextField()
    reservation = models.ForeignKey(
        "reservations.CapacityReservation", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    reservation_label = models.CharField(max_length=64, blank=True)
    ec2_sync_at = models.DateTimeField(null=True, blank=True, help_text="The EC2 sync the verdict relied on.")
    free_units = models.PositiveIntegerField(default=0)
    price_per_hour = models.FloatField(null=True, blank=True, help_text="The paid instance's price (its basis beside it).")
    price_basis = models.CharField(
        max_length=20, default="list", blank=True,
        help_text='Where price_per_hour comes from: "list", "savings-plan" (a Savings Plan rate) or "reserved-instance" '
                  '(a zonal RI pays for it: $0).')
    ended_at = models.DateTimeField(null=True, blank=True, help_text="When its NodeClaim went away.")
    idle_hours = models.FloatField(default=0, help_text="Hours it ran while the reservation had a free unit.")
    missed_dollars = models.FloatField(default=0, help_text="price_per_hour x idle_hours, at price_basis.")
    audited_at = models.DateTimeField(default=timezone.now)

    objects = ClusterScopedManager()

    class Meta:
        verbose_name = "Karpenter launch"
        verbose_name_plural = "Karpenter launches"
        ordering = ["-launched_at", "-id"]
        indexes = [models.Index(fields=["outcome", "-launched_at"])]
        constraints = [models.UniqueConstraint(fields=["cluster", "claim_name"], name="one_launch_audit_per_claim")]

    def __str__(self):
        return f"{self.claim_name}: {self.get_outcome_display()}"


class StandingOpportunity(models.Model):
    """Paid nodes whose pods fit into free reserved units right now: what consolidation into the
    reservation would save. Replaced by every lifecycle pass (the engine's consolidation plan)."""

    cluster = cluster_field("standing_opportunities")
    computed_at = models.DateTimeField(db_index=True)
    nodes = models.JSONField(default=list, help_text="The paid nodes the plan replaces.")
    node_pool_name = models.CharField(max_length=253, blank=True)
    capacity_type = models.CharField(max_length=10, choices=CapacityType.choices, help_text="What the nodes run as now.")
    reservation_label = models.CharField(max_length=64)
    replacement_instance_type = models.CharField(max_length=64)
    savings_per_hour = models.FloatField(help_text="The nodes' price (list, or what a Savings Plan or zonal Reserved Instance makes it) less the "
                                      "reserved replacement's.")
    reason = models.TextField()

    objects = ClusterScopedManager()

    class Meta:
        ordering = ["-savings_per_hour", "id"]
        verbose_name_plural = "standing opportunities"

    def __str__(self):
        return f"{', '.join(self.nodes)} -> {self.reservation_label}"


class ControllerGuard(models.Model):
    """One row per cluster: whether Karpenter controls the cluster, as the last Kubernetes sync found
    it, and whether an operator has let karpweb control since Karpenter was last seen (scheduling.modes)."""

    cluster = cluster_field("+")
    karpenter_live = models.BooleanField(default=False)
    reason = models.TextField(blank=True, help_text="What the last check found, in words.")
    checked_at = models.DateTimeField(null=True, blank=True)
    last_live_at = models.DateTimeField(null=True, blank=True, help_text="When Karpenter was last seen running.")
    control_allowed_at = models.DateTimeField(null=True, blank=True)
    control_allowed_by = models.CharField(max_length=150, blank=True)

    objects = ClusterScopedManager()

    class Meta:
        verbose_name = "controller guard"
        constraints = [models.UniqueConstraint(fields=["cluster"], name="one_controller_guard_per_cluster")]

    def __str__(self):
        return "Karpenter coexistence"

    @classmethod
    def current(cls) -> "ControllerGuard":
        """The working cluster's row (fleet.scope.working_cluster_id), made on first use."""
        return cls.objects.get_or_create(cluster_id=scope.working_cluster_id())[0]

    @classmethod
    def found(cls, for_update: bool = False) -> "ControllerGuard | None":
        """The working cluster's row, None before the first check made it (locked: `for_update`)."""
        rows = cls.objects.select_for_update() if for_update else cls.objects
        return rows.filter(cluster_id=scope.working_cluster_id()).first()


class AuditEntry(models.Model):
    """A manual change made by a person (admin, UI, API): who, when, what changed."""

    class Source(models.TextChoices):
        ADMIN = "admin"
        UI = "ui"
        API = "api"
        CLI = "cli"

    class Action(models.TextChoices):
        CREATE = "create", "created"
        CHANGE = "change", "changed"
        DELETE = "delete", "deleted"
        SIGN_IN = "sign-in", "signed in"
        REFUSED = "refused", "was refused sign-in"

    cluster = cluster_field(
        "+", null=True, on_delete=models.SET_NULL,
        help_text="The cluster whose scope the change was made in; blank: fleet-wide (sign-ins, accounts, "
                  "changes made with several clusters and no scope).")
    cluster_name = models.CharField(max_length=63, blank=True,
                                    help_text="The removed cluster's name (blank: see cluster; scheduling/loop/removal.py).")
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    actor = models.CharField(max_length=150, help_text="Username at the time of the change.")
    source = models.CharField(max_length=8, choices=Source.choices)
    action = models.CharField(max_length=8, choices=Action.choices)
    content_type = models.ForeignKey(ContentType, on_delete=models.PROTECT)
    object_id = models.CharField(max_length=64)
    object_repr = models.CharField(max_length=255)
    changes = models.JSONField(default=dict, blank=True, help_text='{"field": [old, new]}')

    objects = ClusterScopedManager()

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name_plural = "audit entries"
        indexes = [models.Index(fields=["content_type", "object_id"])]

    def __str__(self):
        return f"{self.actor} {self.get_action_display()} {self.object_repr} via {self.source}"


class TaskRunQuerySet(access.RequesterQuerySet):
    """A scoped requester reads the runs of its clusters (fleet/access.py), not the fleet-wide ones."""

    def requester_q(self, requester):
        return access.in_scope_clusters(requester)


class TaskRun(models.Model):
    """One run of a control-loop task: when, how long, what it counted, how it ended."""

    class Status(models.TextChoices):
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        FAILED = "failed"
        SKIPPED = "skipped", "skipped (another worker holds the lock)"

    task = models.CharField(max_length=64, db_index=True)
    task_id = models.CharField(max_length=64, blank=True, help_text="Celery's id for this execution.")
    worker = models.CharField(max_length=255, blank=True)
    started_at = models.DateTimeField(default=timezone.now, db_index=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.RUNNING)
    counts = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    mode = models.CharField(max_length=10, choices=Mode.choices, blank=True)
    # The cluster the run worked on (an EC2 step: the first cluster of its account and region);
    # blank for a run of the whole fleet (a dispatcher) and the runs from before the fleet.
    cluster = models.ForeignKey("fleet.Cluster", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")

    objects = TaskRunQuerySet.as_manager()

    class Meta:
        ordering = ["-started_at", "-id"]
        # (cluster, task, -started_at): each cluster's step health (scheduling.loop.health) stops at its newest rows.
        indexes = [models.Index(fields=["task", "-started_at"]),
                   models.Index(fields=["cluster", "task", "-started_at"], name="taskrun_cluster_task_started")]

    def __str__(self):
        return f"{self.task} at {self.started_at:%Y-%m-%d %H:%M:%S} ({self.status})"

    @property
    def duration(self):
        return (self.finished_at - self.started_at) if self.finished_at else None


class Lease(models.Model):
    """A named lock held until `expires_at`: claimed with a conditional UPDATE so that two workers
    never run the same loop step (or act on the same NodePool or node) at once."""

    name = models.CharField(max_length=255, unique=True)
    holder = models.CharField(max_length=255, blank=True)
    expires_at = models.DateTimeField(default=timezone.now)

    def __str__(self):
        return f"{self.name} held by {self.holder or 'nobody'} until {self.expires_at:%H:%M:%S}"


class WatchState(models.Model):
    """How current the mirrored cluster is (one row per cluster): the watch process's heartbeat and
    counts, and when the models last took in the cluster's state (a watch event or a full sync)."""

    # A watch that has not beaten for this long is not connected (it beats every 2 s).
    STALE_AFTER = datetime.timedelta(seconds=30)

    cluster = cluster_field("+")
    holder = models.CharField(max_length=255, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    last_event_at = models.DateTimeField(null=True, blank=True, help_text="The newest watch event applied.")
    events = models.PositiveBigIntegerField(default=0)
    relists = models.PositiveIntegerField(default=0, help_text="Lists after a 410 Gone.")
    reconnects = models.PositiveIntegerField(default=0, help_text="Watches resumed after a lost connection.")
    lag_seconds = models.FloatField(default=0, help_text="Longest wait from reading an event to writing it, "
                                                         "over the last heartbeat.")
    batches = models.PositiveIntegerField(default=0, help_text="Provisioning runs started by the batch window.")
    last_batch_at = models.DateTimeField(null=True, blank=True)
    world_as_of = models.DateTimeField(null=True, blank=True,
                                       help_text="When the models last took in the cluster's state.")
    kept_objects = models.PositiveIntegerField(default=0, help_text="Pods and nodes the watch process keeps parsed "
                                                                    "in memory (0 until it has loaded them).")
    storage_listed_at = models.DateTimeField(
        null=True, blank=True, help_text="When the storage kinds (StorageClasses, PersistentVolumes and their claims, "
                                         "CSINodes) were last listed: until then the plan reads no pod's volumes.")

    objects = ClusterScopedManager()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["cluster"], name="one_watch_state_per_cluster")]

    def __str__(self):
        return f"watch by {self.holder or 'nobody'}, world as of {self.world_as_of}"

    @classmethod
    def current(cls) -> "WatchState":
        """The working cluster's row (fleet.scope.working_cluster_id); an unsaved empty one before any."""
        cluster_id = scope.working_cluster_id()
        return cls.objects.filter(cluster_id=cluster_id).first() or cls(cluster_id=cluster_id)

    @classmethod
    def record(cls, **fields) -> None:
        """One UPDATE of the working cluster's row (the first call INSERTs); F() expressions add to the counts."""
        cluster_id = scope.working_cluster_id()
        if not cls.objects.filter(cluster_id=cluster_id).update(**fields):
            from django.db import IntegrityError, transaction

            try:
                with transaction.atomic():
                    cls.objects.create(cluster_id=cluster_id)
            except IntegrityError:
                pass  # another process created it meanwhile
            cls.objects.filter(cluster_id=cluster_id).update(**fields)

    def connected(self, now) -> bool:
        return bool(self.holder) and self.heartbeat_at is not None and now - self.heartbeat_at <= self.STALE_AFTER


class SimulatedInstance(models.Model):
    """An instance in the simulated EC2 (the embedded default and the what-if world)."""

    cluster = cluster_field("+")
    instance_id = models.CharField(max_length=32, unique=True)
    client_token = models.CharField(max_length=64, unique=True, help_text="A retried launch with this token returns this instance.")
    instance_type = models.CharField(max_length=64)
    zone = models.CharField(max_length=32)
    capacity_type = models.CharField(max_length=10, choices=CapacityType.choices)
    reservation_id = models.CharField(max_length=64, blank=True, db_index=True)
    reservation_type = models.CharField(max_length=20, blank=True)
    state = models.CharField(max_length=16, default="running", db_index=True)
    # What it was launched with (DescribeInstances' ImageId, SubnetId, SecurityGroups): drift reads them.
    image_id = models.CharField(max_length=64, blank=True)
    subnet_id = models.CharField(max_length=64, blank=True)
    security_group_ids = models.JSONField(default=list, blank=True)
    launched_at = models.DateTimeField(default=timezone.now)
    terminated_at = models.DateTimeField(null=True, blank=True)

    objects = ClusterScopedManager()

    class Meta:
        ordering = ["instance_id"]

    def __str__(self):
        where = f" in {self.reservation_id}" if self.reservation_id else ""
        return f"{self.instance_id} {self.instance_type} {self.capacity_type}{where} ({self.state})"


class EventCount(models.Model):
    """A monotonic count the loop keeps across processes (exported as a Prometheus counter), e.g.
    interruption-queue messages by result."""

    name = models.CharField(max_length=64)
    label = models.CharField(max_length=64, blank=True)
    value = models.PositiveBigIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["name", "label"], name="one_count_per_name_and_label")]

    def __str__(self):
        return f"{self.name}{{{self.label}}} = {self.value}"

    @classmethod
    def bump(cls, name: str, label: str = "", by: int = 1) -> None:
        """Atomic across workers: one conditional UPDATE, or the first INSERT."""
        if not cls.objects.filter(name=name, label=label).update(value=models.F("value") + by):
            from django.db import IntegrityError, transaction

            try:
                with transaction.atomic():
                    cls.objects.create(name=name, label=label, value=by)
            except IntegrityError:  # another worker created it meanwhile
                cls.objects.filter(name=name, label=label).update(value=models.F("value") + by)


# --- running totals: what the fleet's pages sum, kept by the loop (scheduling/totals.py) ---------

class ClusterTotals(models.Model):
    """One cluster's nodes and pods as its last loop step counted them (scheduling/totals.py): the
    fleet's pages read these instead of counting the fleet's rows on every request."""

    cluster = models.OneToOneField("fleet.Cluster", on_delete=models.CASCADE, related_name="totals")
    nodes = models.PositiveIntegerField(default=0)
    pods = models.PositiveIntegerField(default=0)
    pending_pods = models.PositiveIntegerField(default=0, help_text="Pending with no node (as the fleet overview counts them).")
    refreshed_at = models.DateTimeField(null=True, blank=True, help_text="When the loop last counted them.")

    objects = ClusterScopedManager()

    class Meta:
        verbose_name_plural = "cluster totals"

    def __str__(self):
        return f"{self.nodes} nodes, {self.pods} pods as of {self.refreshed_at}"


class NodePoolTotals(models.Model):
    """One NodePool's nodes and their allocatable CPU and memory as its cluster's last loop step
    counted them (the pool lists and the overview's limits). No foreign-key constraint on the pool:
    a pool deleted between the count and the write leaves a row the next refresh drops."""

    cluster = cluster_field("+")
    node_pool = models.OneToOneField(NodePool, on_delete=models.DO_NOTHING, db_constraint=False, related_name="totals")
    nodes = models.PositiveIntegerField(default=0)
    cpu_allocatable = models.PositiveBigIntegerField(default=0, help_text="millicores")
    memory_allocatable = models.PositiveBigIntegerField(default=0, help_text="bytes")

    objects = ClusterScopedManager()

    class Meta:
        verbose_name_plural = "NodePool totals"

    def __str__(self):
        return f"{self.nodes} nodes"


class NodeGroupTotals(models.Model):
    """A cluster's nodes of one NodePool, instance type, zone, capacity type and reservation, with
    their allocatable and their running pods' requests, as its last loop step counted them: the
    node lists' totals line (count, list price an hour, CPU and memory requested of allocatable)
    with no filter or one of these, and the fleet overview's nodes by reservation."""

    cluster = cluster_field("+")
    node_pool = models.ForeignKey(NodePool, null=True, blank=True, on_delete=models.DO_NOTHING, db_constraint=False,
                                  related_name="+")
    instance_type = models.CharField(max_length=64, blank=True)
    zone = models.CharField(max_length=32, blank=True)
    capacity_type = models.CharField(max_length=10, choices=CapacityType.choices, blank=True)
    reservation = models.ForeignKey(CapacityReservation, null=True, blank=True, on_delete=models.DO_NOTHING,
                                    db_constraint=False, related_name="+")
    nodes = models.PositiveIntegerField(default=0)
    cpu_allocatable = models.PositiveBigIntegerField(default=0, help_text="millicores")
    memory_allocatable = models.PositiveBigIntegerField(default=0, help_text="bytes")
    cpu_requested = models.PositiveBigIntegerField(default=0, help_text="millicores, by pods not Succeeded or Failed")
    memory_requested = models.PositiveBigIntegerField(default=0, help_text="bytes, by pods not Succeeded or Failed")

    objects = ClusterScopedManager()

    class Meta:
        verbose_name_plural = "node group totals"

    def __str__(self):
        return f"{self.nodes} {self.instance_type} {self.capacity_type} in {self.zone}"
