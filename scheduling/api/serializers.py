"""NodePools, NodeClaims, nodes, pods, instance types with offerings, decisions, task runs and the
simulate contract, as the API shows them (camelCase, as Kubernetes writes them)."""

from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from reservations.api.serializers import ConditionsField, StringMapField, ro, when
from scheduling.api.base import (AccountOfClusterField, ClusterHyperlinkedIdentityField, ClusterNameField,
                                 StrictInputMixin, with_cluster)
from scheduling.engine.requirements import OPERATORS
from scheduling.models import (
    AuditEntry, Decision, InstanceType, KarpenterLaunch, Mode, Node, NodeClaim, NodePool, Offering, Pod, TaskRun,
)
from fleet.scope import cluster_name
from karpweb.roles import can_administer_fleet
from scheduling.modes import control_refusal, effective_mode
from scheduling.world import node_memory_bytes

RESERVATION_LINK = {"view_name": "reservations-api:capacityreservation-detail", "lookup_field": "reservation_id"}

REQUIREMENTS_SCHEMA = {
    "type": "array",
    "description": "Node selector requirements: {key, operator, values, minValues}.",
    "items": {
        "type": "object",
        "properties": {
            "key": {"type": "string"},
            "operator": {"type": "string", "enum": list(OPERATORS)},
            "values": {"type": "array", "items": {"type": "string"}},
            "minValues": {"type": "integer"},
        },
    },
}
TAINTS_SCHEMA = {
    "type": "array",
    "items": {
        "type": "object",
        "properties": {"key": {"type": "string"}, "value": {"type": "string"}, "effect": {"type": "string"}},
    },
}
OBJECT_SCHEMA = {"type": "object", "additionalProperties": True}
OBJECT_LIST_SCHEMA = {"type": "array", "items": OBJECT_SCHEMA}


@extend_schema_field(REQUIREMENTS_SCHEMA)
class RequirementsField(serializers.JSONField):
    pass


@extend_schema_field(TAINTS_SCHEMA)
class TaintsField(serializers.JSONField):
    pass


@extend_schema_field(OBJECT_SCHEMA)
class ObjectField(serializers.JSONField):
    pass


@extend_schema_field(OBJECT_LIST_SCHEMA)
class ObjectListField(serializers.JSONField):
    pass


def reservation_link():
    return serializers.HyperlinkedRelatedField(source="reservation", read_only=True, allow_null=True, **RESERVATION_LINK)


# --- NodePools --------------------------------------------------------------------------------

class NodePoolSerializer(serializers.ModelSerializer):
    url = ClusterHyperlinkedIdentityField(view_name="scheduling-api:nodepool-detail", lookup_field="name")
    resourceVersion = ro("resource_version")
    nodeClass = serializers.SlugRelatedField(source="node_class", slug_field="name", read_only=True, allow_null=True)
    nodeClassRef = ObjectField(source="node_class_ref", read_only=True)
    replicas = serializers.IntegerField(read_only=True, allow_null=True,
                                        help_text="spec.replicas (alpha): a static NodePool's node count; null: dynamic.")
    requirements = RequirementsField(read_only=True)
    taints = TaintsField(read_only=True)
    startupTaints = TaintsField(source="startup_taints", read_only=True)
    labels = StringMapField(read_only=True, help_text="spec.template.metadata.labels")
    limits = StringMapField(read_only=True, help_text='e.g. {"cpu": "1000", "memory": "1000Gi"}')
    consolidationPolicy = ro("consolidation_policy")
    consolidateAfter = ro("consolidate_after")
    budgets = ObjectListField(read_only=True, help_text="spec.disruption.budgets")
    expireAfter = ro("expire_after")
    keepIdleReservedNodes = ro("keep_idle_reserved_nodes")
    mode = serializers.SerializerMethodField(help_text="observe or control; null follows the global mode.")
    effectiveMode = serializers.SerializerMethodField(help_text="The mode the loop applies to this NodePool.")
    nodeCount = serializers.IntegerField(source="node_count", read_only=True,
                                         help_text="Its nodes as its cluster's last loop step counted them.")
    conditions = ConditionsField(read_only=True)
    statusResources = StringMapField(source="status_resources", read_only=True, help_text="status.resources")
    createdAt = when("created_at")
    syncedAt = when("synced_at")

    cluster = ClusterNameField(help_text="The cluster it belongs to.")
    account = AccountOfClusterField()
    class Meta:
        model = NodePool
        fields = [
            "url", "cluster", "account",
            "name", "uid", "resourceVersion", "weight", "replicas", "nodeClass", "nodeClassRef", "requirements", "taints",
            "startupTaints", "labels", "limits", "consolidationPolicy", "consolidateAfter", "budgets", "expireAfter",
            "keepIdleReservedNodes", "mode", "effectiveMode", "nodeCount", "conditions", "statusResources",
            "createdAt", "syncedAt",
        ]
        read_only_fields = fields

    @extend_schema_field(serializers.ChoiceField(choices=Mode.choices, allow_null=True))
    def get_mode(self, pool):
        return pool.mode or None

    @extend_schema_field(serializers.ChoiceField(choices=Mode.choices))
    def get_effectiveMode(self, pool) -> str:
        if "control_refusal" not in self.context:  # once per response, however many pools
            self.context["control_refusal"] = control_refusal()
        return effective_mode(pool, self.context["control_refusal"])


class KarpenterSerializer(serializers.Serializer):
    live = serializers.BooleanField(source="karpenter_live", help_text="Karpenter is the active controller, as last checked.")
    reason = serializers.CharField(help_text="What the last check found, in words.")
    checkedAt = serializers.DateTimeField(source="checked_at", allow_null=True)
    lastLiveAt = serializers.DateTimeField(source="last_live_at", allow_null=True,
                                           help_text="When Karpenter was last seen running.")


class ControllerSerializer(serializers.Serializer):
    """Who controls the cluster: karpweb, or Karpenter (then karpweb only recommends)."""

    karpenter = KarpenterSerializer(source="guard")
    override = serializers.CharField(help_text="KARPWEB_KARPENTER: auto (detected), present or absent (declared).")
    configuredMode = serializers.CharField(source="configured_mode", help_text="KARPWEB_MODE as set.")
    globalMode = serializers.CharField(source="global_mode", help_text="The mode the loop applies by default now.")
    controlRefused = serializers.CharField(source="control_refusal", allow_null=True,
                                           help_text="Why karpweb may not act now; null when it may.")
    mayAllowControl = serializers.BooleanField(source="may_allow_control",
                                               help_text="Karpenter went away: an operator may POST allow-control/.")
    controlAllowedAt = serializers.DateTimeField(source="guard.control_allowed_at", allow_null=True)
    controlAllowedBy = serializers.CharField(source="guard.control_allowed_by")


class NodePoolModeSerializer(StrictInputMixin, serializers.Serializer):
    mode = serializers.ChoiceField(
        choices=Mode.choices, allow_null=True, allow_blank=True,
        help_text='observe (recommend only), control (act), or null / "" to follow the global mode.',
    )

    def validate_mode(self, value):
        return value or ""


# --- NodeClaims and nodes ---------------------------------------------------------------------

class NodeClaimSerializer(serializers.ModelSerializer):
    url = ClusterHyperlinkedIdentityField(view_name="scheduling-api:nodeclaim-detail", lookup_field="name")
    nodePool = serializers.SlugRelatedField(source="node_pool", slug_field="name", read_only=True, allow_null=True)
    nodeClass = serializers.SlugRelatedField(source="node_class", slug_field="name", read_only=True, allow_null=True)
    instanceType = ro("instance_type")
    capacityType = ro("capacity_type")
    reservationID = ro("reservation_label", help_text="karpenter.k8s.aws/capacity-reservation-id as labelled.")
    capacityReservation = reservation_link()
    labels = StringMapField(read_only=True)
    requirements = RequirementsField(read_only=True)
    resources = StringMapField(read_only=True, help_text="spec.resources.requests")
    providerID = ro("provider_id")
    nodeName = ro("node_name")
    imageID = ro("image_id")
    conditions = ConditionsField(read_only=True)
    createdAt = when("created_at")
    launchedAt = when("launched_at")
    registeredAt = when("registered_at")
    initializedAt = when("initialized_at")
    deletingSince = when("deleting_since")
    syncedAt = when("synced_at")

    cluster = ClusterNameField(help_text="The cluster it belongs to.")
    account = AccountOfClusterField()
    class Meta:
        model = NodeClaim
        fields = [
            "url", "cluster", "account",
            "name", "uid", "nodePool", "nodeClass", "instanceType", "zone", "capacityType", "reservationID",
            "capacityReservation", "labels", "requirements", "resources", "providerID", "nodeName", "imageID",
            "conditions", "createdAt", "launchedAt", "registeredAt", "initializedAt", "deletingSince", "syncedAt",
        ]
        read_only_fields = fields


class AllocatableSerializer(serializers.Serializer):
    cpuMillicores = serializers.IntegerField(source="allocatable_cpu_millicores")
    memoryBytes = serializers.IntegerField(source="allocatable_memory_bytes")
    pods = serializers.IntegerField(source="allocatable_pods")


class NodeSerializer(serializers.ModelSerializer):
    url = ClusterHyperlinkedIdentityField(view_name="scheduling-api:node-detail", lookup_field="name")
    nodePool = serializers.SlugRelatedField(source="node_pool", slug_field="name", read_only=True, allow_null=True)
    nodeClaim = serializers.SlugRelatedField(source="node_claim", slug_field="name", read_only=True, allow_null=True)
    instanceType = ro("instance_type")
    capacityType = ro("capacity_type")
    reservationID = ro("reservation_label", help_text="karpenter.k8s.aws/capacity-reservation-id as labelled.")
    capacityReservation = reservation_link()
    labels = StringMapField(read_only=True)
    annotations = StringMapField(read_only=True)
    taints = TaintsField(read_only=True)
    allocatable = AllocatableSerializer(source="*", read_only=True)
    providerID = ro("provider_id")
    instanceID = serializers.CharField(source="instance_id", read_only=True)
    podCount = serializers.IntegerField(source="pod_count", read_only=True)
    createdAt = when("created_at")
    syncedAt = when("synced_at")

    cluster = ClusterNameField(help_text="The cluster it belongs to.")
    account = AccountOfClusterField()
    class Meta:
        model = Node
        fields = [
            "url", "cluster", "account",
            "name", "uid", "nodePool", "nodeClaim", "instanceType", "zone", "capacityType", "reservationID",
            "capacityReservation", "labels", "annotations", "taints", "allocatable", "providerID", "instanceID",
            "ready", "unschedulable", "podCount", "createdAt", "syncedAt",
        ]
        read_only_fields = fields


# --- pods -------------------------------------------------------------------------------------

class PodSerializer(serializers.ModelSerializer):
    url = serializers.SerializerMethodField()
    nodeName = ro("node_name", help_text="spec.nodeName; empty while pending.")
    pending = serializers.BooleanField(source="is_pending", read_only=True)
    cpuRequestMillicores = ro("cpu_request_millicores")
    memoryRequestBytes = ro("memory_request_bytes")
    labels = StringMapField(read_only=True)
    annotations = StringMapField(read_only=True)
    spec = ObjectField(read_only=True, help_text="Scheduling-relevant spec.")
    ownerKind = ro("owner_kind")
    ownerName = ro("owner_name")
    createdAt = when("created_at")
    syncedAt = when("synced_at")

    cluster = ClusterNameField(help_text="The cluster it belongs to.")
    account = AccountOfClusterField()
    class Meta:
        model = Pod
        fields = [
            "url", "cluster", "account",
            "namespace", "name", "uid", "nodeName", "phase", "pending", "cpuRequestMillicores",
            "memoryRequestBytes", "labels", "annotations", "spec", "ownerKind", "ownerName", "priority", "createdAt",
            "syncedAt",
        ]
        read_only_fields = fields

    @extend_schema_field(OpenApiTypes.URI)
    def get_url(self, pod) -> str:
        path = reverse("scheduling-api:pod-detail", kwargs={"namespace": pod.namespace, "name": pod.name})
        request = self.context.get("request")
        return with_cluster(request.build_absolute_uri(path) if request else path, pod)


# --- instance types and offerings -------------------------------------------------------------

class OfferingSerializer(serializers.ModelSerializer):
    instanceType = serializers.SlugRelatedField(source="instance_type", slug_field="name", read_only=True)
    capacityType = ro("capacity_type")
    zoneID = ro("zone_id")
    reservationID = serializers.SlugRelatedField(
        source="reservation", slug_field="reservation_id", read_only=True, allow_null=True,
        help_text="Reserved offerings: the reservation they stand for.",
    )
    updatedAt = when("updated_at", null=False)

    class Meta:
        model = Offering
        fields = ["id", "instanceType", "capacityType", "zone", "zoneID", "price", "available", "reservationID", "updatedAt"]
        read_only_fields = fields


class InstanceTypeSerializer(serializers.ModelSerializer):
    url = serializers.HyperlinkedIdentityField(view_name="scheduling-api:instancetype-detail", lookup_field="name")
    cpuMillicores = ro("cpu_millicores")
    memoryBytes = ro("memory_bytes")
    vcpus = serializers.FloatField(read_only=True)
    memoryGiB = serializers.FloatField(source="memory_gib", read_only=True)
    maxPods = ro("max_pods")
    gpuCount = ro("gpu_count")
    gpuName = ro("gpu_name")
    bareMetal = ro("bare_metal")
    labels = StringMapField(read_only=True, help_text="Every well-known label Karpenter's AWS provider derives")
    resources = serializers.DictField(
        child=serializers.IntegerField(), read_only=True,
        help_text="Extended resources a node of this type advertises, e.g. nvidia.com/gpu, vpc.amazonaws.com/efa",
    )
    nodeMemoryBytes = serializers.SerializerMethodField(help_text="Memory a node reports: memoryBytes less the VM overhead")
    instanceStoreGB = ro("instance_store_gb")
    offerings = OfferingSerializer(many=True, read_only=True)
    syncedAt = when("synced_at")

    class Meta:
        model = InstanceType
        fields = [
            "url", "name", "cpuMillicores", "memoryBytes", "nodeMemoryBytes", "vcpus", "memoryGiB", "maxPods", "arch",
            "os", "family", "size", "gpuCount", "gpuName", "bareMetal", "instanceStoreGB", "labels", "resources",
            "offerings", "syncedAt",
        ]
        read_only_fields = fields


    def get_nodeMemoryBytes(self, obj) -> int:
        return node_memory_bytes(obj)


# --- the Karpenter audit -----------------------------------------------------------------------

class KarpenterLaunchSerializer(serializers.ModelSerializer):
    """One NodeClaim karpweb did not create, judged against the reservations its class selects."""

    nodeClaim = ro("claim_name", help_text="The NodeClaim's name (it may be gone).")
    nodePool = ro("node_pool_name")
    instanceType = ro("instance_type")
    capacityType = ro("capacity_type")
    launchedAt = when("launched_at", null=False)
    reservationID = ro("reservation_label", help_text="The reservation it used, missed, or was compared with.")
    ec2SyncAt = when("ec2_sync_at")
    freeUnits = ro("free_units", help_text="Free compatible units at that sync, less reserved launches since.")
    pricePerHour = ro("price_per_hour", help_text="The paid instance's price, dollars per hour, at priceBasis.")
    priceBasis = ro("price_basis", help_text='Where pricePerHour comes from: "list", "savings-plan" (a Savings Plan '
                    'rate) or "reserved-instance" (a zonal Reserved Instance pays for it: $0).')
    endedAt = when("ended_at")
    idleHours = ro("idle_hours", help_text="Hours it ran while the reservation had a free unit.")
    missedDollars = ro("missed_dollars", help_text="pricePerHour x idleHours: dollars at priceBasis, labelled as such.")

    cluster = ClusterNameField(help_text="The cluster it belongs to.")
    account = AccountOfClusterField()
    class Meta:
        model = KarpenterLaunch
        fields = ["id", "cluster", "account",
                  "nodeClaim", "nodePool", "instanceType", "zone", "capacityType", "launchedAt", "outcome",
                  "reason", "reservationID", "ec2SyncAt", "freeUnits", "pricePerHour", "priceBasis", "endedAt", "idleHours",
                  "missedDollars"]
        read_only_fields = fields


# --- decisions and task runs ------------------------------------------------------------------

class DecisionSerializer(serializers.ModelSerializer):
    createdAt = when("created_at", null=False)
    cluster = ClusterNameField(help_text="The cluster it was decided for (a removed cluster's name too).")
    account = AccountOfClusterField(help_text="That cluster's AWS account ID (null once the cluster is removed).")
    nodePool = serializers.SlugRelatedField(source="node_pool", slug_field="name", read_only=True, allow_null=True)
    reservationID = serializers.SlugRelatedField(
        source="reservation", slug_field="reservation_id", read_only=True, allow_null=True
    )
    objectsInvolved = ObjectField(source="objects_involved", read_only=True, help_text='e.g. {"pods": [...], "nodes": [...]}')
    details = ObjectField(read_only=True, help_text="The engine's decision as it produced it.")

    class Meta:
        model = Decision
        fields = ["id", "createdAt", "cluster", "account", "kind", "outcome", "mode", "subject", "reason", "nodePool",
                  "reservationID", "objectsInvolved", "details", "error"]
        read_only_fields = fields

    def to_representation(self, instance):
        data = super().to_representation(instance)
        if data["cluster"] is None and instance.cluster_name:  # kept as history by scheduling/loop/removal.py
            data["cluster"] = instance.cluster_name
        return data


class TaskRunSerializer(serializers.ModelSerializer):
    taskID = ro("task_id", help_text="Celery's id for this execution.")
    startedAt = when("started_at", null=False)
    finishedAt = when("finished_at")
    durationSeconds = serializers.SerializerMethodField()
    counts = ObjectField(read_only=True, help_text="What the run counted, e.g. launched, drained.")
    cluster = ClusterNameField(help_text="The cluster it worked on (an EC2 step: its account and region's "
                                                 "first cluster); null: the whole fleet (a dispatcher).")
    account = AccountOfClusterField(help_text="That cluster's AWS account ID; null: the whole fleet.")
    error = serializers.SerializerMethodField(help_text="Why it failed: its last line; fleet administrators get "
                                                        "the whole traceback (also in the worker's log).")

    class Meta:
        model = TaskRun
        fields = ["id", "task", "taskID", "worker", "cluster", "account",
                  "startedAt", "finishedAt", "durationSeconds", "status",
                  "counts", "error", "mode"]
        read_only_fields = fields

    def get_error(self, run) -> str:
        request = self.context.get("request")
        if request is not None and can_administer_fleet(request.user):
            return run.error
        lines = [line for line in run.error.strip().splitlines() if line.strip()]
        return lines[-1].strip() if lines else ""

    @extend_schema_field({"type": "number", "format": "double", "nullable": True})
    def get_durationSeconds(self, run):
        return run.duration.total_seconds() if run.duration is not None else None


# --- simulate ---------------------------------------------------------------------------------

WORLD_SCHEMA = {
    "type": "object",
    "description": (
        "WORLD.json (see the simulate contract): Kubernetes objects as `kubectl get -o json` writes them and "
        "reservations as `aws ec2 describe-capacity-reservations` does."
    ),
    "properties": {
        "now": {"type": "string", "format": "date-time"},
        "featureGates": {"type": "object", "additionalProperties": {"type": "boolean"}},
        "instanceTypes": OBJECT_LIST_SCHEMA,
        "describeInstanceTypes": {
            "description": "`aws ec2 describe-instance-types` output (or its InstanceTypes list): instanceTypes "
                           "entries naming one of these need only a name and offerings",
            "oneOf": [OBJECT_SCHEMA, OBJECT_LIST_SCHEMA],
        },
        "vmMemoryOverheadPercent": {"type": "number", "minimum": 0, "maximum": 1, "exclusiveMaximum": True, "default": 0.075},
        "capacityReservations": OBJECT_LIST_SCHEMA,
        "capacityReservationGroups": OBJECT_LIST_SCHEMA,
        "ec2NodeClasses": OBJECT_LIST_SCHEMA,
        "nodePools": OBJECT_LIST_SCHEMA,
        "nodes": OBJECT_LIST_SCHEMA,
        "pods": OBJECT_LIST_SCHEMA,
    },
    "additionalProperties": True,
}

DECISIONS_SCHEMA = {
    "type": "object",
    "description": "DECISIONS.json: every decision the control loop would take for the world.",
    "properties": {
        key: OBJECT_LIST_SCHEMA
        for key in ("nodeClaims", "bindings", "unschedulable", "deferred", "disruptions", "demotions", "nodeClasses",
                    "nodePools")
    },
    "additionalProperties": True,
}


class SimulationProblemsSerializer(serializers.Serializer):
    detail = serializers.CharField()
    problems = serializers.ListField(
        child=serializers.CharField(),
        help_text='One line per problem, naming the JSON path: `pods[3].spec.containers[0].resources.requests.cpu: "abc" is not a quantity`.',
    )


class AuditEntrySerializer(serializers.ModelSerializer):
    """One change a person made (or a sign-in): who, from which face, what, and its old and new values."""

    user = ro("actor", help_text="The username at the time of the change.")
    cluster = serializers.SlugRelatedField(read_only=True, slug_field="name", allow_null=True,
                                           help_text="The cluster whose scope it was made in; null: fleet-wide.")
    account = AccountOfClusterField(help_text="That cluster's AWS account ID; null: fleet-wide.")
    kind = serializers.SerializerMethodField(help_text="What was changed, e.g. cluster, nodepool, auth token.")
    object = ro("object_repr", help_text="Which one, as it was called then.")
    changes = ObjectField(read_only=True, help_text='{"field": [old, new]}; ip_address: where it came from.')
    createdAt = when("created_at", null=False)

    class Meta:
        model = AuditEntry
        fields = ["id", "createdAt", "user", "source", "action", "cluster", "account", "kind", "object", "changes"]
        read_only_fields = fields

    def get_kind(self, entry) -> str:
        return str(entry.content_type.model_class()._meta.verbose_name) if entry.content_type.model_class() else ""
