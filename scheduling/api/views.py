"""NodePools (read, plus the mode operators switch), NodeClaims, nodes, pods, instance types with
their offerings, decisions and task runs (read-only), and the simulate contract over HTTP."""

import contextlib

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.db.models import Prefetch
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_view
from django.urls import Resolver404, resolve
from rest_framework import exceptions, serializers, status
from rest_framework.decorators import api_view, permission_classes
from rest_framework.parsers import BaseParser
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.views import APIView

from scheduling.api.base import (
    Conflict,
    ErrorSerializer,
    ReadOnlyViewSet,
    RequestTooLarge,
    detail_schema,
    error_responses,
    get_or_404,
    list_schema,
)
from scheduling.api.permissions import IsFleetAdmin, IsOperatorOrReadOnly, IsViewer
from scheduling.api.serializers import (
    AuditEntrySerializer,
    ControllerSerializer,
    KarpenterLaunchSerializer,
    DECISIONS_SCHEMA,
    WORLD_SCHEMA,
    DecisionSerializer,
    InstanceTypeSerializer,
    NodeClaimSerializer,
    NodePoolModeSerializer,
    NodePoolSerializer,
    NodeSerializer,
    OfferingSerializer,
    PodSerializer,
    SimulationProblemsSerializer,
    TaskRunSerializer,
)
from scheduling.audit import diff, record_change
from scheduling.filtersets import (
    AuditEntryFilterSet,
    DecisionFilterSet,
    InstanceTypeFilterSet,
    KarpenterLaunchFilterSet,
    NodeClaimFilterSet,
    NodeFilterSet,
    NodePoolFilterSet,
    OfferingFilterSet,
    PodFilterSet,
    TaskRunFilterSet,
)
from scheduling.loop.coexistence import ControlNotAllowed, allow_control
from scheduling.models import (
    AuditEntry, ControllerGuard, Decision, InstanceType, KarpenterLaunch, Mode, Node, NodeClaim, NodePool, Offering, Pod, TaskRun,
)
from scheduling.modes import control_refusal, controller_status, global_mode
from scheduling.queries import pod_count
from scheduling.totals import pool_usage
from karpweb.costlimit import EngineBusy, engine_run
from scheduling.whatif import MAX_WORLD_BYTES, run_world_text
from scheduling.world import current_world
from fleet.access import visible_clusters
from fleet.scope import cluster_scope, fleet_clusters
from karpweb.jsonsafe import printable

ID_IN_PATH = r"[0-9]+"
CONTROL_REFUSED = ("Control is refused: Karpenter is the active controller of the cluster (or was, and no operator has "
                   "allowed karpweb to control since); `detail` says why.")


@extend_schema_view(
    list=list_schema(NodePoolSerializer, summary="List NodePools", description="Highest weight first, with their mode."),
    retrieve=detail_schema(NodePoolSerializer, summary="One NodePool",
                           description="`effectiveMode` is the mode the loop applies (the pool's, or the global one)."),
)
class NodePoolViewSet(ReadOnlyViewSet):
    """Read every NodePool; operators switch its mode (PATCH)."""

    serializer_class = NodePoolSerializer
    filterset_class = NodePoolFilterSet
    ordering_fields = ["name", "weight", "node_count", "created_at"]
    ordering = ["-weight", "name"]
    queryset = NodePool.objects.select_related("node_class")

    def get_queryset(self):
        # nodeCount: the pool's running total, as its cluster's last loop step counted it (scheduling/totals.py).
        return super().get_queryset().annotate(node_count=pool_usage()["node_count"])

    @extend_schema(
        summary="Switch a NodePool's mode",
        description="`observe` records decisions as recommendations, `control` acts on them, null or \"\" follows "
                    "the global mode. Recorded in the audit log.",
        request=NodePoolModeSerializer,
        responses={200: NodePoolSerializer, **error_responses(400, 401, 403, 404),
                   409: OpenApiResponse(ErrorSerializer, description=CONTROL_REFUSED)},
        examples=[OpenApiExample("Act on this pool", value={"mode": "control"}, request_only=True)],
    )
    def partial_update(self, request, name=None):
        pool = self.get_object()
        body = NodePoolModeSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        new_mode = body.validated_data["mode"]
        if new_mode == Mode.CONTROL and (refusal := control_refusal()):
            raise Conflict(f"mode: control is refused: {refusal}")
        with transaction.atomic():
            pool = NodePool.objects.select_for_update().get(pk=pool.pk)
            if new_mode != pool.mode:
                changes = diff({"mode": pool.mode}, {"mode": new_mode})
                pool.mode = new_mode
                pool.save(update_fields=["mode"])
                record_change(user=request.user, source=AuditEntry.Source.API, obj=pool,
                              action=AuditEntry.Action.CHANGE, changes=changes)
        return Response(self.get_serializer(self.get_queryset().get(pk=pool.pk)).data)


def controller_data() -> dict:
    status_ = controller_status()
    return ControllerSerializer({
        **status_, "guard": ControllerGuard.found() or ControllerGuard(),
        "override": settings.KARPWEB_KARPENTER, "global_mode": global_mode(),
        "control_refusal": status_["control_refusal"] or None}).data


class ControllerView(APIView):
    """Who controls the cluster: karpweb, or Karpenter (then karpweb only recommends)."""

    permission_classes = [IsViewer]

    @extend_schema(summary="Who controls the cluster", responses={200: ControllerSerializer, **error_responses(401, 403)},
                   description="Whether Karpenter is the active controller (its leader-election Lease, its Deployment; "
                               "checked at every Kubernetes sync) and so whether karpweb may act or only recommends.")
    def get(self, request):
        return Response(controller_data())


class AllowControlView(APIView):
    permission_classes = [IsOperatorOrReadOnly]

    @extend_schema(
        summary="Let karpweb control again after Karpenter went away",
        description="Karpenter going away never switches karpweb to control by itself. An operator does it here "
                    "(audited). Refused with 409 while Karpenter runs, before karpweb has checked, or when nothing "
                    "is refused.",
        request=None, responses={200: ControllerSerializer, **error_responses(401, 403),
                                 409: OpenApiResponse(ErrorSerializer, description=CONTROL_REFUSED)})
    def post(self, request):
        try:
            allow_control(request.user, AuditEntry.Source.API, timezone.now())
        except ControlNotAllowed as exc:
            raise Conflict(f"control not allowed: {exc}") from None
        return Response(controller_data())


@extend_schema_view(
    list=list_schema(NodeClaimSerializer, summary="List NodeClaims"),
    retrieve=detail_schema(NodeClaimSerializer, summary="One NodeClaim"),
)
class NodeClaimViewSet(ReadOnlyViewSet):
    serializer_class = NodeClaimSerializer
    filterset_class = NodeClaimFilterSet
    ordering_fields = ["name", "instance_type", "zone", "capacity_type", "created_at", "launched_at"]
    ordering = ["name"]
    queryset = NodeClaim.objects.select_related("node_pool", "node_class", "reservation")


@extend_schema_view(
    list=list_schema(NodeSerializer, summary="List nodes"),
    retrieve=detail_schema(NodeSerializer, summary="One node"),
)
class NodeViewSet(ReadOnlyViewSet):
    serializer_class = NodeSerializer
    filterset_class = NodeFilterSet
    ordering_fields = ["name", "instance_type", "zone", "capacity_type", "pod_count", "created_at"]
    ordering = ["name"]
    queryset = Node.objects.select_related("node_pool", "node_claim", "reservation").annotate(pod_count=pod_count())


@extend_schema_view(
    list=list_schema(PodSerializer, summary="List pods", description="`pending=true` lists the pods waiting for a node."),
    retrieve=detail_schema(PodSerializer, summary="One pod"),
)
class PodViewSet(ReadOnlyViewSet):
    serializer_class = PodSerializer
    filterset_class = PodFilterSet
    ordering_fields = ["namespace", "name", "phase", "priority", "created_at", "cpu_request_millicores",
                       "memory_request_bytes"]
    ordering = ["namespace", "name"]
    queryset = Pod.objects.all()

    def get_object(self):
        pod = get_or_404(self.filter_queryset(self.get_queryset()), namespace=self.kwargs["namespace"],
                         name=self.kwargs["name"])
        self.check_object_permissions(self.request, pod)
        return pod


@extend_schema_view(
    list=list_schema(InstanceTypeSerializer, summary="List instance types with their offerings"),
    retrieve=detail_schema(InstanceTypeSerializer, summary="One instance type with its offerings"),
)
class InstanceTypeViewSet(ReadOnlyViewSet):
    serializer_class = InstanceTypeSerializer
    filterset_class = InstanceTypeFilterSet
    ordering_fields = ["name", "cpu_millicores", "memory_bytes", "gpu_count", "family"]
    ordering = ["name"]
    queryset = InstanceType.objects.prefetch_related(
        Prefetch("offerings", queryset=Offering.objects.select_related("instance_type", "reservation"))
    )


@extend_schema_view(
    list=list_schema(OfferingSerializer, summary="List offerings",
                     description="Where and how each instance type can be bought; reserved offerings name their reservation."),
    retrieve=detail_schema(OfferingSerializer, summary="One offering"),
)
class OfferingViewSet(ReadOnlyViewSet):
    serializer_class = OfferingSerializer
    filterset_class = OfferingFilterSet
    lookup_field = "pk"
    lookup_value_regex = ID_IN_PATH
    ordering_fields = ["price", "zone", "capacity_type", "instance_type__name", "updated_at"]
    ordering = ["instance_type__name", "capacity_type", "zone"]
    queryset = Offering.objects.select_related("instance_type", "reservation")


@extend_schema_view(
    list=list_schema(KarpenterLaunchSerializer, summary="The Karpenter audit",
                     description="Every NodeClaim karpweb did not create, newest first: `missed-reservation` when it "
                                 "launched paid capacity while a compatible reserved unit was free at the last EC2 sync "
                                 "before it, with the list-price dollars the paid node cost while the unit sat idle."),
    retrieve=detail_schema(KarpenterLaunchSerializer, summary="One audited launch"),
)
class KarpenterLaunchViewSet(ReadOnlyViewSet):
    serializer_class = KarpenterLaunchSerializer
    filterset_class = KarpenterLaunchFilterSet
    lookup_field = "pk"
    lookup_value_regex = ID_IN_PATH
    ordering_fields = ["launched_at", "missed_dollars", "outcome"]
    ordering = ["-launched_at", "-id"]
    queryset = KarpenterLaunch.objects.all()


@extend_schema_view(
    list=list_schema(DecisionSerializer, summary="List decisions", description="What the loop decided and why, newest first."),
    retrieve=detail_schema(DecisionSerializer, summary="One decision"),
)
class DecisionViewSet(ReadOnlyViewSet):
    serializer_class = DecisionSerializer
    filterset_class = DecisionFilterSet
    lookup_field = "pk"
    lookup_value_regex = ID_IN_PATH
    ordering_fields = ["created_at", "kind", "outcome"]
    ordering = ["-created_at", "-id"]
    queryset = Decision.objects.select_related("node_pool", "reservation")


@extend_schema_view(
    list=list_schema(TaskRunSerializer, summary="List control-loop task runs", description="Newest first."),
    retrieve=detail_schema(TaskRunSerializer, summary="One task run"),
)
class TaskRunViewSet(ReadOnlyViewSet):
    serializer_class = TaskRunSerializer
    filterset_class = TaskRunFilterSet
    lookup_field = "pk"
    lookup_value_regex = ID_IN_PATH
    ordering_fields = ["started_at", "finished_at", "task", "status"]
    ordering = ["-started_at", "-id"]
    queryset = TaskRun.objects.all()


@extend_schema_view(
    list=list_schema(AuditEntrySerializer, summary="The audit log",
                     description="Every change a person made through the pages, the API, the admin or the CLI, every "
                                 "token made or revoked, role and group change and sign-in: who, what, from where. "
                                 "Newest first. Fleet administrators only."),
    retrieve=detail_schema(AuditEntrySerializer, summary="One audit entry"),
)
class AuditEntryViewSet(ReadOnlyViewSet):
    permission_classes = [IsFleetAdmin]
    serializer_class = AuditEntrySerializer
    filterset_class = AuditEntryFilterSet
    lookup_field = "pk"
    lookup_value_regex = ID_IN_PATH
    ordering_fields = ["created_at"]
    ordering = ["-created_at", "-id"]

    def get_queryset(self):
        return AuditEntry.objects.fleet().select_related("cluster", "content_type")


# --- simulate ---------------------------------------------------------------------------------

TOO_LARGE = f"WORLD.json: larger than {MAX_WORLD_BYTES // 2**20} MiB"


def too_large() -> RequestTooLarge:
    return RequestTooLarge({"detail": TOO_LARGE, "problems": [TOO_LARGE]})


class WorldParser(BaseParser):
    """The raw JSON bytes, read no further than the size limit (the engine parses them, with its
    path-named messages)."""

    media_type = "application/json"

    def parse(self, stream, media_type=None, parser_context=None):
        raw = stream.read(MAX_WORLD_BYTES + 1)
        if len(raw) > MAX_WORLD_BYTES:
            raise too_large()
        return raw


def problems_response(problems: list[str]) -> Response:
    detail = f"WORLD.json has {len(problems)} problem(s)" if len(problems) != 1 else problems[0]
    return Response({"detail": detail, "problems": problems}, status=status.HTTP_400_BAD_REQUEST)


class SimulateView(APIView):
    """POST a WORLD.json, get the DECISIONS.json the control loop would produce. Nothing is changed."""

    permission_classes = [IsViewer]
    parser_classes = [WorldParser]

    @extend_schema(
        summary="Simulate: every decision the loop would take for a world",
        description=(
            "The `simulate` contract over HTTP: the body is a WORLD.json, the answer its DECISIONS.json. Bad input "
            "gets 400 with one line per problem naming the JSON path; a body over 5 MiB gets 413. Viewers may run it: "
            "it changes nothing. `GET /api/v1/world/` gives the current world as a starting point."
        ),
        request={"application/json": WORLD_SCHEMA},
        responses={
            200: OpenApiResponse(DECISIONS_SCHEMA, description="DECISIONS.json"),
            400: OpenApiResponse(SimulationProblemsSerializer, description="The world has problems; each names its JSON path.",
                                 examples=[OpenApiExample("Bad quantity", value={
                                     "detail": 'pods[3].spec.containers[0].resources.requests.cpu: "abc" is not a quantity',
                                     "problems": ['pods[3].spec.containers[0].resources.requests.cpu: "abc" is not a quantity'],
                                 })]),
            413: OpenApiResponse(SimulationProblemsSerializer, description=f"The body is larger than {MAX_WORLD_BYTES // 2**20} MiB."),
            429: OpenApiResponse(ErrorSerializer, description="Over the engine's cost limit (runs at once or engine "
                                 "seconds per minute, per user) or the request rate; see Retry-After."),
            **error_responses(401, 403, 415),
        },
    )
    def post(self, request):
        try:
            declared = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            declared = 0
        if declared > MAX_WORLD_BYTES:
            raise too_large()
        raw = request.data
        if not isinstance(raw, bytes) or not raw.strip():
            return problems_response(["WORLD.json: the request body is empty; send a WORLD.json document"])
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            return problems_response([f"WORLD.json: not UTF-8 ({exc.reason} at byte {exc.start})"])
        try:
            with engine_run(request.user):
                outcome = run_world_text(text)
        except EngineBusy as busy:
            raise exceptions.Throttled(wait=busy.retry_after, detail=str(busy)) from None
        if not outcome.ok:
            return problems_response(outcome.problems)
        return Response(outcome.decisions)


class WorldView(APIView):
    """The current world as a WORLD.json: edit it and POST it to /api/v1/simulate/."""

    permission_classes = [IsViewer]

    @extend_schema(
        summary="The current world as a WORLD.json",
        description="What karpweb knows now of one cluster, in the simulate contract's format: a starting point for "
                    "a what-if. A world is one cluster's (its NodePools, nodes and pods, the reservations its account "
                    "sees): in a fleet of several clusters `?cluster=` names it.",
        parameters=[OpenApiParameter("cluster", OpenApiTypes.STR, description=(
            "The cluster whose world it is. Needed when the fleet has several clusters (and the token sees more than "
            "one): without it the answer is 400, the error under `cluster` naming them."))],
        responses={200: OpenApiResponse(WORLD_SCHEMA, description="WORLD.json"), **error_responses(400, 401, 403)},
    )
    def get(self, request):
        cluster = world_cluster(request.query_params.get("cluster"))
        with cluster_scope(cluster) if cluster is not None else contextlib.nullcontext():
            return Response(current_world())


def world_cluster(name: str | None):
    """The cluster whose world is asked for (None: a fleet of one, as a single-cluster karpweb answered);
    a ValidationError on `cluster` for a name the requester does not see, or for none among several."""
    clusters = visible_clusters(fleet_clusters())
    if name is None:
        if len(fleet_clusters()) > 1 and len(clusters) != 1:
            names = ", ".join(cluster.name for cluster in clusters)
            raise serializers.ValidationError({"cluster": [
                f"the fleet has {len(clusters)} clusters ({names}) and a world is one cluster's: say which with "
                "?cluster=<name>"]})
        return clusters[0] if len(fleet_clusters()) > 1 else None
    found = next((cluster for cluster in clusters if cluster.name == name), None)
    if found is None:
        raise serializers.ValidationError({"cluster": [f"no cluster named {printable(name, 63)!r} in the fleet"]})
    return found


@extend_schema(summary="The API's index", responses={
    200: OpenApiResponse(OpenApiTypes.OBJECT, description="endpoints (collection name: URL), schema and docs URLs"),
    **error_responses(401, 403)})
@api_view(["GET"])
@permission_classes([IsViewer])
def api_root(request):
    """GET /api/v1/: where each collection is, the OpenAPI schema and its docs (no data of its own).

    Read from the URLconf (api_collections): whatever is routed under /api/v1/ is listed, with no list
    here to forget one."""
    from django.urls import NoReverseMatch, reverse

    links = {name: request.build_absolute_uri(path) for name, path in api_collections().items()}
    docs = {"schema": request.build_absolute_uri(reverse("api-schema"))}
    try:
        docs["docs"] = request.build_absolute_uri(reverse("api-docs"))
    except NoReverseMatch:
        pass
    return Response({"endpoints": dict(sorted(links.items())), **docs})


API_PREFIX = "api/v1/"


def api_collections() -> dict[str, str]:
    """Every endpoint one segment under /api/v1/ that takes no argument (routers' lists, "alarms/",
    "pods/", "simulate/"...), by that segment: what the URLconf routes there, the index and the root
    view's URL patterns excluded. Deeper paths ("controller/allow-control/") are actions on one of them."""
    from django.urls import URLResolver, get_resolver, reverse
    from django.urls.resolvers import RegexPattern

    found = {}
    for top in get_resolver().url_patterns:
        if not isinstance(top, URLResolver) or str(top.pattern) != API_PREFIX:
            continue
        for pattern in top.url_patterns:
            if isinstance(pattern, URLResolver) or pattern.name in (None, "api-root", "not-found"):
                continue
            if isinstance(pattern.pattern, RegexPattern) and pattern.pattern.regex.groups:
                continue
            if not isinstance(pattern.pattern, RegexPattern) and pattern.pattern.converters:
                continue
            path = reverse(f"{top.namespace}:{pattern.name}")
            segments = path.split(f"/{API_PREFIX}", 1)[-1].strip("/").split("/")
            if len(segments) == 1 and segments[0]:
                found.setdefault(segments[0], path)
    return found


@extend_schema(exclude=True)
@api_view(["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"])
@permission_classes([AllowAny])
def not_found(request, *args, **kwargs):
    """Anything under /api/v1/ that is no endpoint: a JSON 404, never the pages' HTML one."""
    hint = ""
    if not request.path.endswith("/"):
        try:
            if resolve(request.path + "/").url_name != "not-found":
                hint = f" (did you mean {request.path}/ ?)"
        except Resolver404:
            pass
    raise exceptions.NotFound(f"No API endpoint at {request.path}{hint}.")
