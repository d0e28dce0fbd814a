"""Capacity reservations, their utilization samples and EC2NodeClasses, as the API shows them.

Field names are camelCase, as Kubernetes and EC2 write them; query parameters (filters,
`ordering`) keep the names the pages use."""

from django.db import models
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from reservations.models import (BuyAdvice, CapacityBlockPurchase, CapacityReservation, DoctorFinding, EC2NodeClass, Recommendation, ReservationContention,
                                 ReservationInstance, ReservationUse,
                                 UtilizationHour, UtilizationSample)
from reservations.selector_terms import validation_problems
from scheduling.api.base import (AccountOfClusterField, ClusterHyperlinkedIdentityField, ClusterNameField,
                                 StrictInputMixin)
from scheduling.engine.selectors import GROUP_ARN_PATTERN, ID_PATTERN, MAX_TAGS, MAX_TERMS, OWNER_PATTERN
from reservations.block_fees import attach_fees, idle_value
from scheduling.queries import on_demand_prices

STRING_MAP = {"type": "object", "additionalProperties": {"type": "string"}}

CONDITIONS_SCHEMA = {
    "type": "array",
    "description": "Kubernetes-style status conditions.",
    "items": {
        "type": "object",
        "required": ["type", "status"],
        "properties": {
            "type": {"type": "string"},
            "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
            "reason": {"type": "string"},
            "message": {"type": "string"},
            "lastTransitionTime": {"type": "string", "format": "date-time"},
        },
    },
}

SELECTOR_TERM_SCHEMA = {
    "type": "object",
    "description": (
        "One capacityReservationSelectorTerm. Fields in a term are ANDed, terms are ORed. `id` and "
        "`resourceGroupARN` must be alone in their term; `ownerID` is never alone; a tag value `*` "
        "matches any value."
    ),
    "properties": {
        "id": {"type": "string", "pattern": ID_PATTERN.pattern, "example": "cr-0abc"},
        "tags": {**STRING_MAP, "maxProperties": MAX_TAGS, "example": {"team": "ml"}},
        "ownerID": {"type": "string", "pattern": OWNER_PATTERN.pattern},
        "instanceMatchCriteria": {"type": "string", "enum": ["open", "targeted"]},
        "resourceGroupARN": {"type": "string", "pattern": GROUP_ARN_PATTERN.pattern},
    },
    "additionalProperties": False,
}

SELECTOR_TERMS_SCHEMA = {"type": "array", "maxItems": MAX_TERMS, "items": SELECTOR_TERM_SCHEMA}

STATUS_RESERVATIONS_SCHEMA = {
    "type": "array",
    "description": "status.capacityReservations: the reservations the selector terms select now.",
    "items": {
        "type": "object",
        "required": ["id"],
        "properties": {
            "id": {"type": "string"},
            "availabilityZone": {"type": "string"},
            "instanceType": {"type": "string"},
            "instanceMatchCriteria": {"type": "string"},
            "ownerID": {"type": "string"},
            "reservationType": {"type": "string", "enum": ["default", "capacity-block"]},
            "interruptible": {"type": "boolean"},
            "state": {"type": "string"},
            "endTime": {"type": "string", "format": "date-time"},
        },
    },
}


@extend_schema_field(STRING_MAP)
class StringMapField(serializers.DictField):
    """Tags and labels: {key: value}, both strings."""

    child = serializers.CharField(allow_blank=True)


@extend_schema_field(CONDITIONS_SCHEMA)
class ConditionsField(serializers.JSONField):
    pass


@extend_schema_field(SELECTOR_TERMS_SCHEMA)
class SelectorTermsField(serializers.JSONField):
    """Any JSON in, so that the engine (not DRF) says what is wrong with each term."""


def ro(source, field_class=serializers.ReadOnlyField, **kwargs):
    """A read-only field under a camelCase name for a snake_case model attribute."""
    return field_class(source=source, read_only=True, **kwargs)


def when(source, *, null=True, **kwargs):
    """A read-only time under a camelCase name; null unless the model field is NOT NULL."""
    return serializers.DateTimeField(source=source, read_only=True, allow_null=null, **kwargs)


# --- capacity reservations --------------------------------------------------------------------

class CapacityBlockTimingSerializer(serializers.Serializer):
    end = serializers.DateTimeField(help_text="When the block ends.")
    drainAt = serializers.DateTimeField(source="drain_at", help_text="karpweb starts draining its nodes (end - 40 min, 70 for UltraServer).")
    terminationAt = serializers.DateTimeField(source="termination_at", help_text="EC2 starts terminating its instances (end - 30 min, 60 for UltraServer).")
    ultraserver = serializers.BooleanField()
    expiring = serializers.BooleanField(help_text="Past drainAt: nothing new launches into the block.")
    secondsUntilDrain = serializers.FloatField()


class AlarmSerializer(serializers.Serializer):
    type = serializers.ChoiceField(
        choices=["LowUtilization", "CapacityBlockRunningNearEnd"],
        help_text="LowUtilization: under 20 % used for 24 hours (AWS's threshold). CapacityBlockRunningNearEnd: "
                  "a capacity block still has nodes 45 minutes (or less) before its end.",
    )
    reservationID = serializers.CharField()
    message = serializers.CharField()
    since = serializers.DateTimeField(allow_null=True, help_text="When the condition began (the window's start, or end - 45 min).")


class PrefetchedSlugsField(serializers.ListField):
    """One attribute (`slug`) of each related object, read from the list a Prefetch(to_attr=source)
    left on the row: a related manager would clone a queryset per row and field (a third of a
    50-row page's time)."""

    child = serializers.CharField()

    def __init__(self, slug: str, **kwargs):
        self.slug = slug
        super().__init__(read_only=True, **kwargs)

    def to_representation(self, data):
        return [getattr(item, self.slug) for item in data]


class CapacityReservationListSerializer(serializers.ListSerializer):
    """Fetch the on-demand prices for a whole page in one query (for idleCostPerHour)."""

    def to_representation(self, data):
        rows = list(data.all() if isinstance(data, models.manager.BaseManager) else data)
        self.context["prices"] = on_demand_prices({row.instance_type for row in rows})
        attach_fees(rows)  # the Capacity Blocks' fees, one query
        return [self.child.to_representation(row) for row in rows]


class CapacityReservationSerializer(serializers.ModelSerializer):
    url = serializers.HyperlinkedIdentityField(
        view_name="reservations-api:capacityreservation-detail", lookup_field="reservation_id"
    )
    reservationID = ro("reservation_id")
    ownerID = ro("owner_id")
    account = ro("owner_id", serializers.CharField, help_text="The AWS account it belongs to: its owner (ownerID).")
    instanceType = ro("instance_type")
    instancePlatform = ro("instance_platform")
    availabilityZone = ro("availability_zone")
    availabilityZoneID = ro("availability_zone_id")
    instanceMatchCriteria = ro("instance_match_criteria")
    reservationType = ro("reservation_type")
    ultraserverType = ro("ultraserver_type")
    totalInstanceCount = ro("total_instance_count")
    availableInstanceCount = ro("available_instance_count")
    usedInstanceCount = serializers.IntegerField(source="used_instance_count", read_only=True)
    utilization = serializers.FloatField(read_only=True, help_text="Used share now, 0..1.")
    recentUtilization = serializers.FloatField(
        source="recent_utilization", read_only=True, allow_null=True,
        help_text="Mean used share over the samples of the last 24 whole hours (the hourly roll-up), 0..1; null without samples.",
    )
    lowUtilization = serializers.SerializerMethodField(help_text="Under 20 % for a full 24 hours, and still usable.")
    usable = serializers.SerializerMethodField(help_text="Active and not past its end date.")
    idleCostPerHour = serializers.SerializerMethodField(
        help_text=("What the idle instances are worth, dollars per hour: an ODCR's at the on-demand list price, a "
                   "Capacity Block's at its own price per unit-hour (upfront fee / (units x hours)) when its fee is known; "
                   "null when the price is unknown, 0 once the reservation has ended (it bills nothing more).")
    )
    idleCostSource = serializers.SerializerMethodField(
        help_text=("Where idleCostPerHour's unit price comes from: `fee paid`, `block fee entered`, `EC2 offerings "
                   "estimate` or `on-demand list price`."))
    idleCostBasis = serializers.SerializerMethodField(
        help_text="A Capacity Block's unit price in words (\"$6,360.00 / (4 units x 53 h)\"); empty at the list price.")
    timing = serializers.SerializerMethodField(help_text="Capacity blocks only: when draining and termination start.")
    createDate = when("create_date")
    startDate = when("start_date")
    endDate = when("end_date")
    endDateType = ro("end_date_type")
    tags = StringMapField(read_only=True)
    nodeClasses = PrefetchedSlugsField(
        "name", source="node_class_list", help_text="EC2NodeClasses whose status selects this reservation.",
    )
    lastSeen = when("last_seen", help_text="When EC2 last reported it.")
    alarms = serializers.SerializerMethodField(help_text="Its utilization alarms now (see /api/v1/alarms/).")
    openInstances = PrefetchedSlugsField(
        "instance_id", source="open_instance_list",
        help_text="On-demand instances EC2 runs in it by open matching (open mode): counted in usedInstanceCount, "
                  "never relabelled reserved.",
    )
    capacityReservationGroups = PrefetchedSlugsField(
        "arn", source="group_list", help_text="The resource groups karpweb knows it is in.",
    )
    upcoming = serializers.SerializerMethodField(
        help_text="Not started yet (scheduled before its start; assessing, pending, payment-pending, delayed): "
                  "karpweb plans with it only from its start.")
    secondsUntilStart = serializers.SerializerMethodField(
        help_text="While it has not started: seconds until its startDate (0 once that is past); null otherwise.")
    committedInstanceCount = ro("committed_instance_count", help_text="CommitmentInfo.CommittedInstanceCount: "
                                "EC2 refuses a shrink below it before commitmentEndDate.")
    commitmentEndDate = when("commitment_end_date", help_text="CommitmentInfo.CommitmentEndDate: no cancel before it.")
    secondsUntilCommitmentEnd = serializers.SerializerMethodField(
        help_text="Seconds until commitmentEndDate; null when it has no commitment or the commitment is over.")
    deliveryPreference = ro("delivery_preference", help_text="fixed or incremental (future-dated reservations); empty otherwise.")
    lentInstanceCount = serializers.IntegerField(
        source="lent_count", read_only=True, help_text="Units lent as interruptible capacity now "
        "(InterruptibleCapacityAllocation.instanceCount): neither used by the fleet nor free for it, not idle.")
    lentTargetInstanceCount = serializers.IntegerField(
        source="lent_target", read_only=True, help_text="The allocation's target: below lentInstanceCount while units are reclaimed.")
    lentTo = ro("lent_to", help_text="The interruptible Capacity Reservation that holds the lent units.")
    lentStatus = serializers.SerializerMethodField(help_text="The allocation's status (pending, active, updating while "
                                                             "units are reclaimed, canceled); empty when it lends nothing.")
    interruptionSourceID = ro("interruption_source_id", help_text="For an interruptible reservation: the reservation "
                                                                  "that lends its units (InterruptionInfo).")
    excludedFromPlanning = ro("planning_excluded", help_text="karpweb's own override (set in the admin, audited): "
                              "karpweb plans no launch or consolidation into it.")
    excludedFromPlanningReason = ro("planning_excluded_reason", help_text="Why, as the operator wrote it.")
    excludedFromPlanningBy = ro("planning_excluded_by", help_text="Who excluded it.")
    excludedFromPlanningSince = when("planning_excluded_at", help_text="Since when.")

    class Meta:
        model = CapacityReservation
        list_serializer_class = CapacityReservationListSerializer
        fields = [
            "url", "reservationID", "arn", "ownerID", "account",
            "region", "instanceType", "instancePlatform", "availabilityZone",
            "availabilityZoneID", "tenancy", "state", "instanceMatchCriteria", "reservationType", "interruptible",
            "ultraserverType", "totalInstanceCount", "availableInstanceCount", "usedInstanceCount", "utilization",
            "recentUtilization", "lowUtilization", "usable", "idleCostPerHour", "idleCostSource", "idleCostBasis", "timing", "createDate", "startDate",
            "endDate", "endDateType", "tags", "nodeClasses", "lastSeen", "alarms", "openInstances",
            "capacityReservationGroups", "excludedFromPlanning", "excludedFromPlanningReason", "excludedFromPlanningBy",
            "excludedFromPlanningSince", "upcoming", "secondsUntilStart", "committedInstanceCount", "commitmentEndDate",
            "secondsUntilCommitmentEnd", "deliveryPreference", "lentInstanceCount", "lentTargetInstanceCount", "lentTo",
            "lentStatus", "interruptionSourceID",
        ]
        read_only_fields = fields

    def _now(self):
        return self.context.setdefault("now", timezone.now())

    def get_lentStatus(self, obj) -> str:
        return (obj.interruptible_allocation or {}).get("Status") or ""

    @extend_schema_field(OpenApiTypes.BOOL)
    def get_lowUtilization(self, obj) -> bool:
        return obj.is_low_utilization(self._now())

    @extend_schema_field(AlarmSerializer(many=True))
    def get_alarms(self, obj):
        from reservations.alarms import reservation_alarms

        alarm = self._nested("alarm", AlarmSerializer)
        return [alarm.to_representation(entry) for entry in reservation_alarms(obj, self._now())]

    @extend_schema_field(OpenApiTypes.BOOL)
    def get_upcoming(self, obj) -> bool:
        return obj.is_upcoming(self._now())

    @extend_schema_field({"type": "integer", "nullable": True})
    def get_secondsUntilStart(self, obj):
        return obj.seconds_until_start(self._now())

    @extend_schema_field({"type": "integer", "nullable": True})
    def get_secondsUntilCommitmentEnd(self, obj):
        return obj.seconds_until_commitment_end(self._now())

    @extend_schema_field(OpenApiTypes.BOOL)
    def get_usable(self, obj) -> bool:
        return obj.is_usable(self._now())

    def _idle(self, obj):
        prices = self.context.get("prices")
        if prices is None:
            prices = on_demand_prices([obj.instance_type])
        return idle_value(obj, prices, self._now())

    @extend_schema_field({"type": "number", "format": "double", "nullable": True})
    def get_idleCostPerHour(self, obj):
        return self._idle(obj).cost

    @extend_schema_field(OpenApiTypes.STR)
    def get_idleCostSource(self, obj) -> str:
        return self._idle(obj).source

    @extend_schema_field(OpenApiTypes.STR)
    def get_idleCostBasis(self, obj) -> str:
        return self._idle(obj).unit.basis

    @extend_schema_field(CapacityBlockTimingSerializer(allow_null=True))
    def get_timing(self, obj):
        timing = obj.timing
        if timing is None:
            return None
        now = self._now()
        return self._nested("timing", CapacityBlockTimingSerializer).to_representation({
            "end": timing.end, "drain_at": timing.drain_at, "termination_at": timing.termination_at,
            "ultraserver": timing.ultraserver, "expiring": timing.is_expiring(now),
            "secondsUntilDrain": timing.seconds_until_drain(now),
        })

    def _nested(self, name, serializer_class):
        """One instance per page of each nested serializer: building one per row (its fields deep-copied)
        cost more than the row's own fields."""
        return self.context.setdefault(f"serializer:{name}", serializer_class())


class UtilizationSampleSerializer(serializers.ModelSerializer):
    sampledAt = when("sampled_at", null=False)
    utilization = serializers.SerializerMethodField(help_text="used / total, 0..1.")

    class Meta:
        model = UtilizationSample
        fields = ["sampledAt", "used", "available", "total", "utilization"]
        read_only_fields = fields

    @extend_schema_field(OpenApiTypes.DOUBLE)
    def get_utilization(self, obj) -> float:
        return obj.used / obj.total if obj.total else 0.0


class ReservationUseSerializer(serializers.ModelSerializer):
    sampledAt = when("sampled_at", null=False)
    clusters = serializers.DictField(child=serializers.IntegerField(), read_only=True,
                                     help_text="Cluster name -> units its nodes use.")
    ourAccounts = serializers.DictField(source="our_accounts", child=serializers.IntegerField(), read_only=True,
                                        help_text="Our account ID -> units its instances no cluster knows use.")
    otherAccounts = serializers.DictField(source="other_accounts", child=serializers.IntegerField(), read_only=True,
                                          help_text="Other account ID -> units it uses (GetCapacityReservationUsage).")

    class Meta:
        model = ReservationUse
        fields = ["sampledAt", "total", "used", "clusters", "ourAccounts", "otherAccounts", "unknown", "lent"]
        read_only_fields = fields


class ReservationInstanceSerializer(serializers.ModelSerializer):
    instanceId = serializers.CharField(source="instance_id", read_only=True)
    node = serializers.CharField(source="node_name", read_only=True, help_text="The node whose providerID names it; empty when none.")
    cluster = serializers.CharField(source="cluster.name", read_only=True, default=None, allow_null=True,
                                    help_text="The cluster of that node; null when no cluster of the fleet runs it.")
    account = serializers.CharField(source="account_id", read_only=True,
                                    help_text="The account whose DescribeInstances listed it.")
    instanceType = serializers.CharField(source="instance_type", read_only=True)
    zone = serializers.CharField(source="availability_zone", read_only=True)
    openMatching = serializers.BooleanField(source="open_matching", read_only=True,
                                            help_text="On-demand, in the reservation by open matching.")
    since = when("launched_at", help_text="EC2's LaunchTime.")
    lastSeen = when("last_seen", null=False)

    class Meta:
        model = ReservationInstance
        fields = ["instanceId", "node", "cluster", "account", "instanceType", "zone", "state", "openMatching", "since",
                  "lastSeen"]
        read_only_fields = fields


class ReservationContentionSerializer(serializers.ModelSerializer):
    createdAt = when("created_at", null=False)
    cluster = ClusterNameField(help_text="The cluster whose launch was refused.")
    account = AccountOfClusterField()
    unitsWanted = serializers.IntegerField(source="units_wanted", read_only=True)
    ledgerFree = serializers.IntegerField(source="ledger_free", read_only=True,
                                          help_text="Units the fleet ledger called free when the launch held them.")
    errorCode = serializers.CharField(source="error_code", read_only=True)
    takenBy = serializers.JSONField(source="taken_by", read_only=True,
                                    help_text="The next sync's attribution (clusters, ourAccounts, otherAccounts, unknown); "
                                              "empty until then.")
    explainedAt = when("explained_at")

    class Meta:
        model = ReservationContention
        fields = ["id", "createdAt", "cluster", "account",
                  "unitsWanted", "ledgerFree", "errorCode", "takenBy", "explainedAt"]
        read_only_fields = fields


class UtilizationHourSerializer(serializers.ModelSerializer):
    hour = serializers.DateTimeField(read_only=True, help_text="The hour's start (UTC).")
    used = serializers.FloatField(help_text="Mean used instances over the hour's samples.")
    available = serializers.FloatField(help_text="Mean available instances over the hour's samples.")
    total = serializers.FloatField(help_text="Mean total instances over the hour's samples.")
    utilization = serializers.SerializerMethodField(help_text="Mean of used / total over the hour's samples, 0..1; null when none had capacity.")

    class Meta:
        model = UtilizationHour
        fields = ["hour", "samples", "used", "available", "total", "utilization"]
        read_only_fields = fields

    @extend_schema_field(OpenApiTypes.DOUBLE)
    def get_utilization(self, obj) -> float | None:
        return obj.share_sum / obj.share_samples if obj.share_samples else None


# --- EC2NodeClasses ---------------------------------------------------------------------------

@extend_schema_field(STATUS_RESERVATIONS_SCHEMA)
class StatusReservationsField(serializers.JSONField):
    pass


class EC2NodeClassStatusSerializer(serializers.Serializer):
    capacityReservations = StatusReservationsField(source="status_capacity_reservations", read_only=True)
    conditions = ConditionsField(read_only=True)


class EC2NodeClassSerializer(serializers.ModelSerializer):
    url = ClusterHyperlinkedIdentityField(view_name="reservations-api:ec2nodeclass-detail", lookup_field="name")
    resourceVersion = ro("resource_version", help_text="Send it back (If-Match or resourceVersion) when changing the class.")
    capacityReservationSelectorTerms = SelectorTermsField(source="capacity_reservation_selector_terms", read_only=True)
    spec = serializers.JSONField(read_only=True, help_text="The rest of spec, as Kubernetes has it.")
    annotations = StringMapField(read_only=True)
    status = EC2NodeClassStatusSerializer(source="*", read_only=True)
    selectedReservations = serializers.SlugRelatedField(
        source="selected_reservations", many=True, read_only=True, slug_field="reservation_id",
        help_text="IDs of the reservations status.capacityReservations names.",
    )
    nodePools = serializers.SlugRelatedField(source="node_pools", many=True, read_only=True, slug_field="name")
    openReservations = ro(
        "open_reservations", serializers.BooleanField,
        help_text="Open mode: on-demand launches use CapacityReservationPreference open (annotation "
                  "karpweb.io/open-reservations on a cluster). Change it with PATCH.",
    )
    createdAt = when("created_at")
    syncedAt = when("synced_at")

    cluster = ClusterNameField(help_text="The cluster it belongs to.")
    account = AccountOfClusterField()
    class Meta:
        model = EC2NodeClass
        fields = [
            "url", "cluster", "account",
            "name", "uid", "resourceVersion", "capacityReservationSelectorTerms", "spec", "annotations",
            "status", "selectedReservations", "nodePools", "openReservations", "createdAt", "syncedAt",
        ]
        read_only_fields = fields


class SelectorTermsWriteSerializer(StrictInputMixin, serializers.Serializer):
    """PUT / PATCH body: the whole new list of terms, and (or an If-Match header) the version read."""

    capacityReservationSelectorTerms = SelectorTermsField(
        help_text="The complete new list (it replaces the old one). Validated per term, as the UI does."
    )
    resourceVersion = serializers.CharField(
        required=False, allow_blank=True, max_length=64,
        help_text="The resourceVersion you read; a stale one gets 409. Or send it as If-Match (stale: 412).",
    )
    openReservations = serializers.BooleanField(
        required=False,
        help_text="Open mode on or off (PATCH; recorded in the audit log). On-demand launches then use preference open.",
    )

    def validate_capacityReservationSelectorTerms(self, terms):
        problems = validation_problems(terms)
        if problems:
            raise serializers.ValidationError(problems)
        return terms


class SelectorTermsPreviewSerializer(StrictInputMixin, serializers.Serializer):
    capacityReservationSelectorTerms = SelectorTermsField(help_text="The terms to try; nothing is saved.")

    validate_capacityReservationSelectorTerms = SelectorTermsWriteSerializer.validate_capacityReservationSelectorTerms


class SelectorTermsPreviewResultSerializer(serializers.Serializer):
    capacityReservations = StatusReservationsField(help_text="What the terms would select, as status.capacityReservations.")
    added = serializers.ListField(child=serializers.CharField(), help_text="Selected now but not before.")
    removed = serializers.ListField(child=serializers.CharField(), help_text="Selected before but no longer.")
    ignored = serializers.ListField(child=serializers.CharField(), help_text="Matched but unusable, with why.")
    conditions = ConditionsField()
    diff = serializers.CharField(help_text="Unified diff from the current terms to these.")



class RecommendationSerializer(serializers.ModelSerializer):
    """What to do about a reservation, with its reasoning and the money per month at list price."""

    reservationID = serializers.CharField(source="reservation.reservation_id", read_only=True)
    savingsPerMonth = serializers.FloatField(source="savings_per_month", read_only=True,
                                             help_text="Recurring dollars a month at list price (730 hours); 0 for a "
                                                       "warning and for a one-off extension (see money).")
    money = serializers.CharField(read_only=True, help_text="monthly, one-off (a Capacity Block extension: its fee and "
                                                            "loss are in details) or warning; never summed together.")
    moneyText = serializers.CharField(source="money_text", read_only=True, help_text="The money in words.")
    moneyBasis = serializers.CharField(source="money_basis", read_only=True, help_text="Where the figure comes from.")
    priceBasis = serializers.CharField(source="price_basis", read_only=True,
                                       help_text='The price the money uses: "list", or "savings-plan" (a Savings Plan rate).')
    targetCount = serializers.IntegerField(source="target_count", read_only=True, allow_null=True)
    endDate = serializers.DateTimeField(source="end_date", read_only=True, allow_null=True)
    computedAt = serializers.DateTimeField(source="computed_at", read_only=True,
                                           help_text="Send it back when applying: a recomputed recommendation is refused.")
    appliedAt = serializers.DateTimeField(source="applied_at", read_only=True, allow_null=True)
    appliedBy = serializers.CharField(source="applied_by", read_only=True)
    awsCli = serializers.SerializerMethodField(help_text="The AWS CLI command that applies it.")
    awsRamShare = serializers.SerializerMethodField(
        help_text="For a split: the AWS RAM command that shares the new reservation once split (karpweb creates no "
                  "share; details.newReservationId names it after the apply); empty for the other kinds.")

    class Meta:
        model = Recommendation
        fields = ["id", "kind", "reservationID", "reason", "savingsPerMonth", "money", "moneyText", "moneyBasis", "priceBasis", "targetCount", "endDate", "details",
                  "computedAt", "state", "appliedAt", "appliedBy", "error", "awsCli", "awsRamShare"]
        read_only_fields = fields

    @extend_schema_field(OpenApiTypes.STR)
    def get_awsCli(self, obj):
        from reservations.recommendation_actions import cli_command

        return cli_command(obj)

    @extend_schema_field(OpenApiTypes.STR)
    def get_awsRamShare(self, obj):
        from reservations.recommendation_actions import share_command

        return share_command(obj) if obj.kind == Recommendation.Kind.SPLIT else ""


class RecommendationApplySerializer(StrictInputMixin, serializers.Serializer):
    computedAt = serializers.DateTimeField(help_text="The computedAt you read.")
    offeringID = serializers.CharField(required=False, max_length=64, help_text="extend: the extension offering to buy.")
    endDate = serializers.DateTimeField(required=False, help_text="end-date: the new end date (UTC, in the future).")
    confirmNotAdvised = serializers.BooleanField(
        required=False, default=False,
        help_text="extend: true to buy an extension that is not advised (it costs more than the work it protects).")


# --- the reservation doctor ---------------------------------------------------------------------

class DoctorFindingSerializer(serializers.ModelSerializer):
    """One thing stopping a reservation from being used, with its evidence and fix (docs/reservation-doctor.md)."""

    cluster = serializers.SlugRelatedField(slug_field="name", read_only=True)
    account = ro("account_id", help_text="The cluster's AWS account ID.")
    reservationID = ro("reservation_id", help_text="The reservation it is about; empty when about a class or a role.")
    nodeClass = ro("node_class_name", help_text="The EC2NodeClass it is about, if any.")
    evidenceData = ro("evidence_data", field_class=serializers.JSONField, help_text="The evidence as data.")
    fixCommand = ro("fix_command", help_text="A command or YAML to apply, when one exists.")
    firstSeen = when("first_seen", null=False)
    lastSeen = when("last_seen", null=False)
    clearedAt = when("cleared_at", help_text="When a run no longer found it; null while it is found.")

    class Meta:
        model = DoctorFinding
        fields = ["id", "code", "severity", "cluster", "account", "reservationID", "nodeClass", "evidence",
                  "evidenceData", "fix", "fixCommand", "firstSeen", "lastSeen", "clearedAt"]
        read_only_fields = fields


class BuyAdviceSerializer(serializers.ModelSerializer):
    """A Capacity Block offering that would hold a gang of pending accelerator pods (docs/console.md,
    "Capacity Blocks for waiting GPU work")."""

    cluster = ClusterNameField()
    account = AccountOfClusterField()
    offeringID = ro("offering_id", help_text="DescribeCapacityBlockOfferings' CapacityBlockOfferingId.")
    instanceType = ro("instance_type")
    availabilityZone = ro("availability_zone")
    instanceCount = ro("instance_count", field_class=serializers.IntegerField, help_text="Instances in the block.")
    nodesUsed = ro("nodes_used", field_class=serializers.IntegerField, help_text="Of them, how many the gang fills.")
    startDate = when("start", null=False)
    endDate = when("end", null=False)
    upfrontFee = ro("upfront_fee", field_class=serializers.DecimalField, max_digits=12, decimal_places=2,
                    help_text="What EC2 asks up front ($).")
    ultraserverType = ro("ultraserver_type", help_text="An UltraServer offering's type; empty for instances.")
    computedAt = when("computed_at", null=False)
    comparedWithWaiting = serializers.SerializerMethodField(
        help_text="When the gang would run in the block, against waiting (and what on-demand nodes of the type list at "
                  "for the same hours, where EC2 offers them).")
    cliCommand = serializers.SerializerMethodField(help_text="The AWS CLI command that buys it (observe mode).")
    purchase = serializers.SerializerMethodField(help_text="Its approval and purchase, if an operator approved it.")

    class Meta:
        model = BuyAdvice
        fields = ["id", "cluster", "account", "namespace", "gang", "pods", "offeringID", "instanceType", "availabilityZone",
                  "instanceCount", "nodesUsed", "ultraserverType", "startDate", "endDate", "hours", "upfrontFee",
                  "computedAt", "comparedWithWaiting", "cliCommand", "purchase"]
        read_only_fields = fields

    def get_comparedWithWaiting(self, advice) -> str:
        from reservations.purchases import waiting_for

        return waiting_for(advice, timezone.now(), self.context.get("prices")).words()

    def get_cliCommand(self, advice) -> str:
        from reservations.purchases import cli_command

        return cli_command(advice)

    @extend_schema_field(serializers.DictField(allow_null=True))
    def get_purchase(self, advice):
        from reservations.purchases import purchases_for

        known = self.context.get("purchases")
        found = (known if known is not None else purchases_for([advice])).get(advice.key)
        return CapacityBlockPurchaseSerializer(found).data if found is not None else None


class CapacityBlockPurchaseSerializer(serializers.ModelSerializer):
    """A Capacity Block an operator approved for a waiting gang, and what karpweb bought (docs/console.md,
    "Buying a Capacity Block for a waiting gang")."""

    offeringID = ro("offering_id")
    nodeClass = ro("node_class", help_text="The EC2NodeClass whose selector terms gain the block's id.")
    approvedBy = ro("approved_by")
    approvedAt = when("approved_at", null=False)
    purchasedBy = ro("purchased_by")
    purchasedAt = when("purchased_at")
    reservationID = ro("reservation_id", help_text="The block bought (cr-...), once bought.")
    upfrontFee = ro("upfront_fee", field_class=serializers.DecimalField, max_digits=12, decimal_places=2,
                    help_text="The fee approved ($).")
    paidFee = ro("paid_fee", field_class=serializers.DecimalField, max_digits=12, decimal_places=2, allow_null=True,
                 help_text="The fee paid ($), once bought.")

    class Meta:
        model = CapacityBlockPurchase
        fields = ["id", "namespace", "gang", "offeringID", "state", "nodeClass", "approvedBy", "approvedAt", "purchasedBy",
                  "purchasedAt", "reservationID", "upfrontFee", "paidFee", "error"]
        read_only_fields = fields


class BuyApproveSerializer(StrictInputMixin, serializers.Serializer):
    nodeClass = serializers.CharField(required=False, allow_blank=True, max_length=253,
                                      help_text="The EC2NodeClass that will select the block; blank: the only class of "
                                                "the NodePools that admit its nodes.")


class OpenTrapPatchSerializer(serializers.Serializer):
    kind = serializers.CharField(help_text="EC2NodeClass or NodePool.")
    name = serializers.CharField()
    resourceVersion = serializers.CharField(source="resource_version", help_text="The version the patch was computed on.")
    before = serializers.JSONField(help_text="capacityReservationSelectorTerms or requirements now.")
    after = serializers.JSONField(help_text="The same field, fixed.")


class OpenTrapSerializer(serializers.Serializer):
    cluster = serializers.CharField()
    account = serializers.CharField(help_text="The cluster's AWS account ID.")
    reservationID = serializers.CharField(source="reservation_id")
    instanceType = serializers.CharField(source="instance_type")
    availabilityZone = serializers.CharField(source="zone")
    idleUnits = serializers.IntegerField(source="idle", help_text="The reservation's idle units given to this cluster.")
    paidNodes = serializers.ListField(source="paid_nodes", child=serializers.CharField(),
                                      help_text="On-demand nodes of its type and zone whose NodePool cannot launch into it.")
    unitsPaidTwice = serializers.IntegerField(source="units")
    pricePerHour = serializers.FloatField(source="price_per_hour", allow_null=True, help_text="On-demand list price.")
    doublePaidDollarsPerHour = serializers.FloatField(source="dollars_per_hour")
    basis = serializers.CharField(help_text="Where the dollars come from.")
    optedOutBecause = serializers.ListField(source="opted_out_because", child=serializers.CharField(),
                                            help_text="Why the cluster's launches skip open reservations.")
    patches = OpenTrapPatchSerializer(many=True)
    yaml = serializers.SerializerMethodField(help_text="The fix, for kubectl apply --server-side -f.")

    def get_yaml(self, trap) -> str:
        from reservations.open_trap import fix_yaml

        return fix_yaml(trap)


class OpenTrapListSerializer(serializers.Serializer):
    doublePaidDollarsPerHour = serializers.FloatField(source="total")
    traps = OpenTrapSerializer(many=True)


class OpenTrapFixSerializer(StrictInputMixin, serializers.Serializer):
    cluster = serializers.CharField(max_length=63)
    reservationID = serializers.CharField(max_length=64)
    versions = serializers.JSONField(
        help_text='The resourceVersions you read, {"EC2NodeClass/name": "41", "NodePool/name": "42"} (the trap\'s patches).')

    def validate_versions(self, value):
        # One flat message for the field (a per-key error map would not be the API's error shape).
        if (not isinstance(value, dict) or len(value) > 100
                or not all(isinstance(k, str) and isinstance(v, str) and len(k) <= 300 and len(v) <= 64
                           for k, v in value.items())):
            raise serializers.ValidationError(
                'expected an object of resourceVersions, {"EC2NodeClass/name": "41", ...}: strings of at most 64 characters')
        return value


class OpenTrapFixResultSerializer(serializers.Serializer):
    applied = serializers.ListField(child=serializers.CharField(), help_text="The objects written; empty: nothing to do.")
