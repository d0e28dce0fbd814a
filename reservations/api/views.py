"""Capacity reservations (read-only, with utilization and capacity-block timing) and EC2NodeClasses
(read, plus the one write operators make: capacityReservationSelectorTerms, conflict-safe)."""

import contextlib

from django.db.models import Case, ExpressionWrapper, F, FloatField, Prefetch, Value, When
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import generics, serializers
from rest_framework.decorators import action
from rest_framework.response import Response

from reservations.api.serializers import (
    DoctorFindingSerializer,
    AlarmSerializer,
    OpenTrapFixResultSerializer,
    OpenTrapFixSerializer,
    OpenTrapListSerializer,
    CapacityReservationSerializer,
    RecommendationApplySerializer,
    RecommendationSerializer,
    EC2NodeClassSerializer,
    SelectorTermsPreviewResultSerializer,
    SelectorTermsPreviewSerializer,
    SelectorTermsWriteSerializer,
    ReservationContentionSerializer,
    ReservationInstanceSerializer, BuyAdviceSerializer, BuyApproveSerializer, CapacityBlockPurchaseSerializer,
    ReservationUseSerializer,
    UtilizationHourSerializer,
    UtilizationSampleSerializer,
)
from reservations.filtersets import (
    BuyAdviceFilterSet, DoctorFindingFilterSet,
    CapacityReservationFilterSet, EC2NodeClassFilterSet, RecommendationFilterSet, UtilizationHourFilterSet,
    UtilizationSampleFilterSet,
)
from reservations.alarms import current_alarms, with_running_nodes
from reservations.models import (BuyAdvice, CapacityReservation, CapacityReservationGroup, DoctorFinding, EC2NodeClass,
                                 OpenReservationInstance, Recommendation, ReservationContention, ReservationInstance,
                                 ReservationUse,
                                 UtilizationHour, UtilizationSample)
from reservations.recommendation_actions import ApplyRefused, apply as apply_recommendation
from karpweb.jsonsafe import printable
from reservations.open_mode import OpenModeConflict, set_open_mode
from reservations.selector_terms import (
    FIELD,
    InvalidSelectorTerms,
    SelectorTermConflict,
    preview,
    save_selector_terms,
    terms_diff,
)
from scheduling.api.base import (
    Conflict,
    PreconditionFailed,
    PreconditionRequired,
    ReadOnlyViewSet,
    detail_schema,
    error_responses,
    get_or_404,
    list_schema,
)
from scheduling.api.permissions import IsOperatorOrReadOnly
from scheduling.models import AuditEntry

ETAG_HEADER = OpenApiParameter(
    "ETag", OpenApiTypes.STR, OpenApiParameter.HEADER, response=[200],
    description='The resourceVersion as a strong entity tag, e.g. `"7"`: send it back in If-Match.',
)
IF_MATCH_HEADER = OpenApiParameter(
    "If-Match", OpenApiTypes.STR, OpenApiParameter.HEADER, required=False,
    description=(
        'The ETag (resourceVersion) you read, e.g. `"7"`; a stale one gets 412. `*` matches any version. '
        "Either this header or the resourceVersion field is required."
    ),
)

SELECTOR_TERM_ERROR = OpenApiExample(
    "Invalid term",
    value={FIELD: [f'{FIELD}[1].id: "x" does not match ^cr-[0-9a-z]+$']},
    status_codes=["400"], response_only=True,
)
STALE_IF_MATCH = OpenApiExample(
    "Stale If-Match",
    value={"detail": 'EC2NodeClass default is at resourceVersion "8", not "7" (If-Match): someone else changed it; '
                     "GET it again and reapply your edit"},
    status_codes=["412"], response_only=True,
)


def etag(node_class: EC2NodeClass) -> str:
    return f'"{node_class.resource_version}"'


def if_match_versions(request) -> list[str] | None:
    """The versions an If-Match header names (`*` kept as is); None without the header. Tags may
    be quoted (`"7"`, as the ETag is), weak (`W/"7"`) or bare (`7`); an empty header names none."""
    header = request.headers.get("If-Match")
    if header is None:
        return None
    versions = []
    for tag in header.split(","):
        tag = tag.strip()
        tag = tag[2:] if tag.startswith("W/") else tag
        if len(tag) >= 2 and tag[0] == tag[-1] == '"':
            versions.append(tag[1:-1])
        elif tag:
            versions.append(tag)
    return versions


def stale_message(node_class, sent: str, where: str) -> str:
    return (
        f'EC2NodeClass {node_class.name} is at resourceVersion "{node_class.resource_version}", not "{sent}" ({where}): '
        "someone else changed it; GET it again and reapply your edit"
    )


@extend_schema_view(
    list=list_schema(
        CapacityReservationSerializer, summary="List capacity reservations",
        description="ODCRs and Capacity Blocks with used / available / total, utilization now and over 24 hours, "
                    "the idle cost at list price, and for capacity blocks when draining and termination start.",
    ),
    retrieve=detail_schema(CapacityReservationSerializer, summary="One capacity reservation"),
)
class CapacityReservationViewSet(ReadOnlyViewSet):
    serializer_class = CapacityReservationSerializer
    filterset_class = CapacityReservationFilterSet
    lookup_field = "reservation_id"
    ordering_fields = [
        "reservation_id", "instance_type", "availability_zone", "state", "reservation_type", "owner_id",
        "total_instance_count", "available_instance_count", "current_utilization", "recent_utilization",
        "start_date", "end_date", "last_seen",
    ]
    ordering = ["reservation_id"]

    def get_queryset(self):
        used_share = ExpressionWrapper(
            (F("total_instance_count") - F("available_instance_count")) * 1.0 / F("total_instance_count"),
            output_field=FloatField(),
        )
        return (
            with_running_nodes(CapacityReservation.objects.with_recent_utilization(self._now()))
            .annotate(current_utilization=Case(When(total_instance_count__gt=0, then=used_share), default=Value(0.0)))
            # PrefetchedSlugsField reads one field of each: the rest (a class's spec, status and conditions,
            # for every class of every cluster that selects the reservation) is never loaded.
            .prefetch_related(Prefetch("node_classes", EC2NodeClass.objects.only("name"), to_attr="node_class_list"),
                              Prefetch("open_instances", OpenReservationInstance.objects.only("instance_id", "reservation"),
                                       to_attr="open_instance_list"),
                              Prefetch("groups", CapacityReservationGroup.objects.only("arn"), to_attr="group_list"))
        )

    def _now(self):
        if not hasattr(self, "now"):
            self.now = timezone.now()
        return self.now

    def get_serializer_context(self):
        return {**super().get_serializer_context(), "now": self._now()}


@extend_schema(
    summary="Utilization samples of one reservation",
    description="How full the reservation was at each sync, newest first; `since` / `until` bound the time window.",
    responses={200: UtilizationSampleSerializer(many=True), **error_responses(400, 401, 403, 404)},
)
class UtilizationSampleList(generics.ListAPIView):
    """One reservation's history rows (`model`), the reservation named in the URL."""

    model = UtilizationSample
    serializer_class = UtilizationSampleSerializer
    permission_classes = [IsOperatorOrReadOnly]
    filterset_class = UtilizationSampleFilterSet
    ordering_fields = ["sampled_at", "used", "available"]
    ordering = ["-sampled_at"]

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # schema generation: no reservation in the URL
            return self.model.objects.none()
        reservation = get_or_404(CapacityReservation.objects.all(), reservation_id=self.kwargs["reservation_id"])
        return self.model.objects.filter(reservation=reservation)


@extend_schema(
    summary="Who used one reservation's units, across the fleet",
    description="The fleet ledger's attribution at each EC2 sync, newest first: units per cluster of the fleet, "
                "per account of ours no cluster knows, per other account (GetCapacityReservationUsage, when one of "
                "our accounts owns it) and unknown. Kept KARPWEB_SAMPLE_RETENTION_DAYS.",
    responses={200: ReservationUseSerializer(many=True), **error_responses(400, 401, 403, 404)},
)
class ReservationUseList(UtilizationSampleList):
    model = ReservationUse
    serializer_class = ReservationUseSerializer
    filterset_class = None
    ordering_fields = ["sampled_at", "used"]


@extend_schema(
    summary="Contention on one reservation",
    description="Launches refused for capacity (ReservationCapacityExceeded, InsufficientInstanceCapacity) into "
                "units the fleet ledger called free, newest first, with who held the units at the next sync. Read-only.",
    responses={200: ReservationContentionSerializer(many=True), **error_responses(400, 401, 403, 404)},
)
class ReservationContentionList(UtilizationSampleList):
    model = ReservationContention
    serializer_class = ReservationContentionSerializer
    filterset_class = None
    ordering_fields = ["created_at"]
    ordering = ["-created_at"]

    def get_queryset(self):
        return super().get_queryset().select_related("cluster")


@extend_schema(
    summary="The instances in one reservation",
    description="Every live instance EC2 runs in the reservation, as DescribeInstances of the fleet's accounts "
                "reported it at the last EC2 sync (its CapacityReservationId, or open matching): its node and that "
                "node's cluster when a cluster of the fleet runs it, the account that listed it, and since when "
                "(EC2's LaunchTime). Instances of accounts outside the fleet are not listed (EC2 shows them only "
                "to their account): the `uses` list counts them. Read-only.",
    responses={200: ReservationInstanceSerializer(many=True), **error_responses(400, 401, 403, 404)},
)
class ReservationInstanceList(UtilizationSampleList):
    model = ReservationInstance
    serializer_class = ReservationInstanceSerializer
    filterset_class = None
    ordering_fields = ["instance_id", "launched_at", "node_name"]
    ordering = ["instance_id"]

    def get_queryset(self):
        return super().get_queryset().select_related("cluster")


@extend_schema(
    summary="Hourly utilization of one reservation",
    description="Mean used / available / total per hour, rolled up from the samples after every sync and kept "
                "KARPWEB_HOURLY_RETENTION_DAYS (raw samples: KARPWEB_SAMPLE_RETENTION_DAYS); newest first; "
                "`since` / `until` bound the hours' starts.",
    responses={200: UtilizationHourSerializer(many=True), **error_responses(400, 401, 403, 404)},
)
class UtilizationHourList(UtilizationSampleList):
    model = UtilizationHour
    serializer_class = UtilizationHourSerializer
    filterset_class = UtilizationHourFilterSet
    ordering_fields = ["hour", "used", "available"]
    ordering = ["-hour"]


@extend_schema_view(
    list=list_schema(EC2NodeClassSerializer, summary="List EC2NodeClasses",
                     description="Selector terms, the reservations they select now, and conditions."),
    retrieve=extend_schema(
        summary="One EC2NodeClass", parameters=[ETAG_HEADER],
        description="The ETag header carries the resourceVersion: send it back as If-Match to change the class.",
        responses={200: EC2NodeClassSerializer, **error_responses(401, 403, 404)},
    ),
)
class EC2NodeClassViewSet(ReadOnlyViewSet):
    """Read every EC2NodeClass; operators replace capacityReservationSelectorTerms (PUT or PATCH)."""

    serializer_class = EC2NodeClassSerializer
    filterset_class = EC2NodeClassFilterSet
    ordering_fields = ["name", "created_at", "synced_at"]
    ordering = ["name"]
    queryset = EC2NodeClass.objects.prefetch_related("selected_reservations", "node_pools")

    def retrieve(self, request, *args, **kwargs):
        node_class = self.get_object()
        return Response(self.get_serializer(node_class).data, headers={"ETag": etag(node_class)})

    @extend_schema(
        summary="Replace the capacityReservationSelectorTerms",
        description=(
            "Replaces the whole list of terms, validated per term with the same messages as the UI. Conflict-safe: "
            "send the resourceVersion you read as `If-Match` (stale: 412) or as the `resourceVersion` field "
            "(stale: 409); without either the request is refused (428). Recorded in the audit log."
        ),
        request=SelectorTermsWriteSerializer,
        parameters=[IF_MATCH_HEADER, ETAG_HEADER],
        responses={200: EC2NodeClassSerializer, **error_responses(400, 401, 403, 404, 409, 412, 428)},
        examples=[SELECTOR_TERM_ERROR, STALE_IF_MATCH],
    )
    def update(self, request, *args, **kwargs):
        return self._write_terms(request, partial=False)

    @extend_schema(
        summary="Change the capacityReservationSelectorTerms",
        description="As PUT, but `capacityReservationSelectorTerms` may be left out (then nothing changes).",
        request=SelectorTermsWriteSerializer,
        parameters=[IF_MATCH_HEADER, ETAG_HEADER],
        responses={200: EC2NodeClassSerializer, **error_responses(400, 401, 403, 404, 409, 412, 428)},
        examples=[SELECTOR_TERM_ERROR, STALE_IF_MATCH],
    )
    def partial_update(self, request, *args, **kwargs):
        return self._write_terms(request, partial=True)

    def _write_terms(self, request, *, partial):
        node_class = self.get_object()
        current = node_class.resource_version
        # Preconditions first (RFC 9110 §13.2.2): a stale If-Match fails before the body is looked at.
        versions = if_match_versions(request)
        if versions == []:
            raise PreconditionFailed(f"If-Match names no version: send the ETag of a GET, e.g. If-Match: {etag(node_class)}")
        if versions is not None and "*" not in versions and current not in versions:
            raise PreconditionFailed(stale_message(node_class, versions[0], "If-Match"))
        body = SelectorTermsWriteSerializer(data=request.data, partial=partial)
        body.is_valid(raise_exception=True)
        sent_version = body.validated_data.get("resourceVersion")
        if sent_version is not None and sent_version != current:
            raise Conflict(stale_message(node_class, sent_version, "resourceVersion"))
        if versions is None and sent_version is None:
            raise PreconditionRequired(
                f"Changing EC2NodeClass {node_class.name} needs the version you read: send If-Match: {etag(node_class)} "
                "(from the ETag of a GET) or a resourceVersion field"
            )
        stale = PreconditionFailed if sent_version is None else Conflict
        if FIELD in body.validated_data:
            try:
                save_selector_terms(node_class, body.validated_data[FIELD], current, user=request.user,
                                    source=AuditEntry.Source.API)
            except InvalidSelectorTerms as exc:
                raise serializers.ValidationError({FIELD: exc.problems}) from exc
            except SelectorTermConflict as exc:
                raise stale(str(exc)) from exc
        if "openReservations" in body.validated_data:
            node_class.refresh_from_db()
            try:
                set_open_mode(node_class, body.validated_data["openReservations"], user=request.user,
                              source=AuditEntry.Source.API)
            except OpenModeConflict as exc:
                raise stale(str(exc)) from exc
        node_class = self.get_queryset().get(pk=node_class.pk)
        return Response(self.get_serializer(node_class).data, headers={"ETag": etag(node_class)})

    @extend_schema(
        summary="Preview selector terms without saving",
        description="What the terms would select from the reservations karpweb knows, and how that differs "
                    "from what the class selects now. Validated as a save would be; nothing is written.",
        request=SelectorTermsPreviewSerializer,
        responses={200: SelectorTermsPreviewResultSerializer, **error_responses(400, 401, 403, 404)},
        examples=[SELECTOR_TERM_ERROR],
    )
    @action(detail=True, methods=["post"])
    def preview(self, request, name=None):
        node_class = self.get_object()
        body = SelectorTermsPreviewSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        terms = body.validated_data[FIELD]
        now = timezone.now()
        result = preview(node_class, terms, now)
        before = {entry.get("id") for entry in node_class.status_capacity_reservations or [] if isinstance(entry, dict)}
        after = {reservation.id for reservation in result.reservations}
        return Response(SelectorTermsPreviewResultSerializer({
            "capacityReservations": [reservation.status_entry(now) for reservation in result.reservations],
            "added": sorted(after - before),
            "removed": sorted(before - after),
            "ignored": result.ignored,
            "conditions": [result.condition] if result.condition else [],
            "diff": terms_diff(node_class.capacity_reservation_selector_terms or [], terms),
        }).data)



ALARM_TYPES = ("LowUtilization", "CapacityBlockRunningNearEnd")


@extend_schema(
    summary="Utilization alarms",
    description="Every alarm now: reservations under 20 % used for 24 hours (AWS's own threshold) and capacity "
                "blocks still running nodes 45 minutes (or less) before their end. The overview shows the same.",
    parameters=[
        OpenApiParameter("type", OpenApiTypes.STR, enum=list(ALARM_TYPES), description="Only alarms of this type."),
        OpenApiParameter("reservation_id", OpenApiTypes.STR, description="Only the alarms of this reservation."),
    ],
    responses={200: AlarmSerializer(many=True), **error_responses(400, 401, 403)},
)
class AlarmList(generics.GenericAPIView):
    permission_classes = [IsOperatorOrReadOnly]
    serializer_class = AlarmSerializer
    pagination_class = None
    filter_backends = []

    def get(self, request):
        kind = request.query_params.get("type")
        if kind is not None and kind not in ALARM_TYPES:
            raise serializers.ValidationError({"type": [f'"{kind}" is not one of {", ".join(ALARM_TYPES)}']})
        reservation_id = request.query_params.get("reservation_id")
        alarms = [a for a in current_alarms()
                  if (kind is None or a["type"] == kind) and (reservation_id is None or a["reservationID"] == reservation_id)]
        return Response(AlarmSerializer(alarms, many=True).data)


@extend_schema_view(
    list=list_schema(RecommendationSerializer, summary="List recommendations",
                     description="Shrink, cancel, select, extend, end-date, split and move, biggest money first."),
    retrieve=detail_schema(RecommendationSerializer, summary="One recommendation"),
)
class RecommendationViewSet(ReadOnlyViewSet):
    serializer_class = RecommendationSerializer
    filterset_class = RecommendationFilterSet
    lookup_field = "pk"
    lookup_value_regex = r"[0-9]+"
    ordering_fields = ["savings_per_month", "kind", "computed_at"]
    ordering = ["-savings_per_month", "kind", "id"]
    queryset = Recommendation.objects.select_related("reservation")

    @extend_schema(
        summary="Apply a recommendation (operators, control mode)",
        description="ModifyCapacityReservation, CancelCapacityReservation, PurchaseCapacityBlockExtension, "
                    "CreateCapacityReservationBySplitting, MoveCapacityReservationInstances or (select) the EC2NodeClass's "
                    "selector terms, once: "
                    "a second apply returns the applied recommendation. 409 when the recommendation or the reservation "
                    "changed since `computedAt`, or karpweb only observes (the body names the field and says why).",
        request=RecommendationApplySerializer,
        responses={200: RecommendationSerializer, **error_responses(400, 401, 403, 404, 409)},
    )
    @action(detail=True, methods=["post"])
    def apply(self, request, pk=None):
        from scheduling.loop import backends

        rec = self.get_object()
        body = RecommendationApplySerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        try:
            applied = apply_recommendation(rec.pk, seen_computed_at=data["computedAt"], user=request.user,
                                           source=AuditEntry.Source.API, cloud=backends.cloud_for_reservation,
                                           offering_id=data.get("offeringID"), end_date=data.get("endDate"),
                                           confirm_not_advised=data.get("confirmNotAdvised", False))
        except ApplyRefused as refused:
            return Response({refused.field: [refused.message]}, status=refused.status)
        return Response(RecommendationSerializer(applied).data)


@extend_schema_view(
    list=list_schema(DoctorFindingSerializer, summary="List the reservation doctor's findings",
                     description="What stops each reservation from being used, with evidence and fix: active ones "
                                 "unless cleared=true. Filter by cluster, account, code, severity, reservation."),
    retrieve=detail_schema(DoctorFindingSerializer, summary="One finding"),
)
class DoctorFindingViewSet(ReadOnlyViewSet):
    serializer_class = DoctorFindingSerializer
    filterset_class = DoctorFindingFilterSet
    lookup_field = "pk"
    lookup_value_regex = r"[0-9]+"
    ordering_fields = ["severity", "code", "first_seen", "last_seen"]
    ordering = ["severity", "code", "reservation_id", "node_class_name", "id"]
    queryset = DoctorFinding.objects.select_related("cluster")


@extend_schema_view(
    list=list_schema(BuyAdviceSerializer, summary="List the Capacity Block offerings for waiting accelerator gangs",
                     description="Per gang of pending GPU/Neuron pods the plan could not place, the offerings EC2 quoted at "
                                 "the last EC2 sync that would hold every pod at once, cheapest first; an operator approves "
                                 "one and karpweb buys it in control mode (approve, purchase). Filter by cluster, account, "
                                 "namespace, gang, instance type."),
    retrieve=detail_schema(BuyAdviceSerializer, summary="One offering for a gang"),
)
class BuyAdviceViewSet(ReadOnlyViewSet):
    serializer_class = BuyAdviceSerializer
    filterset_class = BuyAdviceFilterSet
    lookup_field = "pk"
    lookup_value_regex = r"[0-9]+"
    ordering_fields = ["upfront_fee", "start", "namespace", "gang"]
    ordering = ["namespace", "gang", "upfront_fee", "start", "id"]
    queryset = BuyAdvice.objects.select_related("cluster")

    def get_serializer(self, *args, **kwargs):
        """A page's purchases and on-demand prices read once for all its rows."""
        from reservations.purchases import on_demand_offered, purchases_for

        if kwargs.get("many") and args:
            rows = list(args[0])
            kwargs.setdefault("context", self.get_serializer_context()).update(
                purchases=purchases_for(rows), prices=on_demand_offered({r.instance_type for r in rows}))
            args = (rows, *args[1:])
        return super().get_serializer(*args, **kwargs)

    @extend_schema(
        summary="Approve buying this Capacity Block for its gang (operators)",
        description="Records the operator's approval of this offering for its gang, and the EC2NodeClass that will "
                    "select the block (one approval at a time per gang; approving it again returns it). Nothing is bought "
                    "yet: see purchase. 409 naming the field when the gang no longer waits or has another offering "
                    "approved; 400 when no EC2NodeClass can be told.",
        request=BuyApproveSerializer,
        responses={200: CapacityBlockPurchaseSerializer, **error_responses(400, 401, 403, 404, 409)},
    )
    @action(detail=True, methods=["post"])
    def approve(self, request, pk=None):
        from reservations.purchases import PurchaseRefused, approve

        advice = self.get_object()
        body = BuyApproveSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        try:
            row = approve(advice.pk, user=request.user, source=AuditEntry.Source.API,
                          node_class=body.validated_data.get("nodeClass") or "")
        except PurchaseRefused as refused:
            return Response({refused.field: [refused.message]}, status=refused.status)
        return Response(CapacityBlockPurchaseSerializer(row).data)

    @extend_schema(
        summary="Buy this approved Capacity Block (operators, control mode)",
        description="PurchaseCapacityBlock with the account's credentials, once (a second call returns the purchase), "
                    "after re-checking that EC2 still sells the offering at the approved fee and the gang still waits. "
                    "409 naming the field: not approved (`approval`), observe mode (`mode`, with the AWS CLI command), "
                    "over KARPWEB_CAPACITY_BLOCK_SPEND_LIMIT (`spendLimit`), the offering gone (`offering`), the gang "
                    "placed (`gang`).",
        request=None,
        responses={200: CapacityBlockPurchaseSerializer, **error_responses(401, 403, 404, 409)},
    )
    @action(detail=True, methods=["post"])
    def purchase(self, request, pk=None):
        from reservations.purchases import PurchaseRefused, purchase_advice
        from scheduling.loop import backends

        advice = self.get_object()
        try:
            row = purchase_advice(advice.pk, user=request.user, source=AuditEntry.Source.API, cloud=backends.cloud)
        except PurchaseRefused as refused:
            return Response({refused.field: [refused.message]}, status=refused.status)
        return Response(CapacityBlockPurchaseSerializer(row).data)


@extend_schema(
    summary="Open-reservation traps",
    description="Open ODCRs with idle units beside paid on-demand nodes of their type and zone, in clusters whose "
                "launches opt out of open matching; each with its double payment in dollars per hour and the fix "
                "(the EC2NodeClass and NodePool patches, and their YAML). `?cluster=` shows one cluster's.",
    parameters=[OpenApiParameter("cluster", OpenApiTypes.STR, description="Only this cluster's traps.")],
    responses={200: OpenTrapListSerializer, **error_responses(400, 401, 403)},
)
class OpenTrapList(generics.GenericAPIView):
    permission_classes = [IsOperatorOrReadOnly]
    serializer_class = OpenTrapListSerializer
    pagination_class = None
    filter_backends = []

    def get(self, request):
        from fleet.scope import cluster_scope
        from reservations import open_trap

        name = request.query_params.get("cluster")
        if name is not None and not open_trap.cluster_exists(name):
            raise serializers.ValidationError({"cluster": [f"no cluster named {printable(name, 63)!r} in the fleet"]})
        with cluster_scope(name) if name else contextlib.nullcontext():
            traps = open_trap.find()
        return Response(OpenTrapListSerializer(open_trap.summary(traps)).data)


@extend_schema(
    summary="Fix an open-reservation trap",
    description="Control mode only: adds the reservation's id term to the EC2NodeClass(es) and `reserved` to the "
                "NodePool(s) capacity-type requirement, as the YAML says, audited. Refused (409) in observe mode and "
                "when an object changed since its version was read; a trap already fixed is nothing to do.",
    request=OpenTrapFixSerializer,
    responses={200: OpenTrapFixResultSerializer, **error_responses(400, 401, 403, 409)},
)
class OpenTrapFix(generics.GenericAPIView):
    permission_classes = [IsOperatorOrReadOnly]
    serializer_class = OpenTrapFixSerializer
    pagination_class = None
    filter_backends = []

    def post(self, request):
        from reservations import open_trap

        body = OpenTrapFixSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        try:
            result = open_trap.apply_fix(data["cluster"], data["reservationID"], data["versions"], user=request.user,
                                         source=AuditEntry.Source.API)
        except open_trap.FixRefused as refused:
            return Response({refused.field: [refused.message]}, status=400 if refused.field == "cluster" else 409)
        return Response({"applied": result.applied})
