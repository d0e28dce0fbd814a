"""What both apps' API packages share: error bodies and their OpenAPI descriptions, and the
read-only viewset every resource starts from. Permissions and pagination are in their own modules
(REST_FRAMEWORK names them as defaults, so they must not import DRF's views).

Unauthenticated requests get 401 JSON with `WWW-Authenticate: Token`, never a login redirect."""

from urllib.parse import urlencode

from django.core.exceptions import MultipleObjectsReturned
from django.http import Http404
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import exceptions, serializers, status, viewsets

from drf_spectacular.utils import extend_schema_field

from fleet.scope import cluster_name, kept_cluster, several_clusters
from scheduling.api.permissions import IsOperatorOrReadOnly
from scheduling.filtersets import ClusterFilters

# Names are Kubernetes names or EC2 ids: they may contain dots (m5.large, node-1.ec2.internal).
NAME_IN_PATH = r"[^/]+"


# --- which cluster and account a row belongs to -----------------------------------------------

@extend_schema_field({"type": "string", "nullable": True, "example": "prod-eu"})
class ClusterNameField(serializers.Field):
    """The row's cluster by name, from the process's kept list of clusters (fleet.scope: no query a row)."""

    def __init__(self, **kwargs):
        super().__init__(source="cluster_id", read_only=True, **kwargs)

    def to_representation(self, cluster_id):
        return cluster_name(cluster_id) if cluster_id is not None else None


@extend_schema_field({"type": "string", "nullable": True, "pattern": "^[0-9]{12}$", "example": "123456789012"})
class AccountOfClusterField(serializers.Field):
    """The AWS account ID of the row's cluster, from the kept list of clusters (no query a row)."""

    def __init__(self, **kwargs):
        kwargs.setdefault("help_text", "The AWS account ID of its cluster.")
        super().__init__(source="cluster_id", read_only=True, **kwargs)

    def to_representation(self, cluster_id):
        cluster = None if cluster_id is None else kept_cluster(cluster_id)
        return None if cluster is None else cluster.account.account_id


# --- errors -----------------------------------------------------------------------------------

class PreconditionFailed(exceptions.APIException):
    status_code = status.HTTP_412_PRECONDITION_FAILED
    default_detail = "The resource changed since the version in If-Match."
    default_code = "precondition_failed"


class PreconditionRequired(exceptions.APIException):
    status_code = status.HTTP_428_PRECONDITION_REQUIRED
    default_detail = "Send the version you read: an If-Match header or a resourceVersion field."
    default_code = "precondition_required"


class Conflict(exceptions.APIException):
    status_code = status.HTTP_409_CONFLICT
    default_detail = "The resource changed since the resourceVersion you sent."
    default_code = "conflict"


class RequestTooLarge(exceptions.APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_detail = "The request body is too large."
    default_code = "too_large"


class ErrorSerializer(serializers.Serializer):
    """`{"detail": "..."}`: DRF's error body for everything but validation errors."""

    detail = serializers.CharField()


ValidationErrorSchema = {
    "type": "object",
    "description": (
        "Field-level errors: each key names the field (or query parameter) that is wrong and lists what is wrong "
        "with it; a body that is not JSON gets `detail` instead."
    ),
    "additionalProperties": {"anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "string"}]},
}

ERROR_DESCRIPTIONS = {
    400: "Invalid input: field-level messages.",
    401: "No or invalid credentials (send `Authorization: Token <key>`, or log in for a session).",
    403: "Authenticated, but the user's role does not allow this (viewer reads, operator writes).",
    404: "No such object.",
    409: ("A conflict, under the field it concerns: the object changed since it was read (the `resourceVersion` or "
          "`computedAt` sent is not the current one), or the action is refused now (karpweb only observes)."),
    412: "The `If-Match` version is not the current one: someone else changed the object.",
    413: "The request body is larger than the limit.",
    415: "The request body must be `application/json`.",
    428: "Neither an `If-Match` header nor a `resourceVersion` field was sent.",
}


def error_responses(*codes: int) -> dict:
    """OpenAPI responses for the error codes of one operation."""
    responses = {}
    for code in codes:
        if code in (400, 409):  # a 409 names its field too (a stale page, observe mode), or says `detail`
            responses[code] = OpenApiResponse(ValidationErrorSchema, description=ERROR_DESCRIPTIONS[code])
        else:
            responses[code] = OpenApiResponse(ErrorSerializer, description=ERROR_DESCRIPTIONS[code])
    return responses


DETAIL_ERRORS = (401, 403, 404)
LIST_ERRORS = (400, 401, 403)  # 400: a filter value that is not valid

LIST_DESCRIPTION = (
    "Filter with the query parameters (the pages' filters), order with `ordering` (a listed field, `-` for "
    "descending), page with `limit` (at most 1000) and `offset`."
)


def list_schema(serializer, *, summary, description=""):
    return extend_schema(
        summary=summary, description=f"{description} {LIST_DESCRIPTION}".strip(),
        responses={200: serializer(many=True), **error_responses(*LIST_ERRORS)},
    )


def detail_schema(serializer, *, summary, description=""):
    return extend_schema(
        summary=summary, description=description or "Read-only; 404 when there is no such object.",
        responses={200: serializer, **error_responses(*DETAIL_ERRORS)},
    )


# --- viewsets ---------------------------------------------------------------------------------

def takes_cluster(view) -> bool:
    """Whether `view` finds a Kubernetes-side object (unique per cluster and name) by its name, and so
    its detail takes the list's `?cluster=` (ClusterFilters: get_object filters as the list does)."""
    filterset = getattr(view, "filterset_class", None)
    return getattr(view, "lookup_field", "pk") != "pk" and filterset is not None and issubclass(filterset, ClusterFilters)


class ReadOnlyViewSetSchema(AutoSchema):
    """Documents the `?cluster=` of the details addressed by name (retrieve, writes and actions) of
    the viewsets that take it (takes_cluster), and their 400; the lists document it with their other
    filters."""

    def _takes_cluster(self) -> bool:
        lookup = self.view.lookup_url_kwarg or self.view.lookup_field
        return takes_cluster(self.view) and f"{{{lookup}}}" in self.path

    def get_override_parameters(self):
        parameters = super().get_override_parameters()
        if self._takes_cluster():
            kind = self.view.filterset_class._meta.model._meta.verbose_name
            parameters = [*parameters, OpenApiParameter(
                "cluster", str, description=(
                    f"The name of the cluster the {kind} is in. Needed only when several clusters of the fleet have a "
                    f"{kind} of this name: without it the request is then refused with 400, the error under `cluster` "
                    f"naming those clusters. With it, 404 when that cluster has no {kind} of this name. An object's "
                    "`url` carries it once the fleet has several clusters."))]
        return parameters

    def _get_response_bodies(self, direction="response"):
        # Not get_response_serializers: @extend_schema's responses replace what it returns.
        responses = super()._get_response_bodies(direction)
        if self._takes_cluster() and "400" not in responses:
            responses["400"] = self._get_response_for_code(OpenApiResponse(ValidationErrorSchema, description=(
                "Several clusters have an object of this name and no `cluster` says which, or `cluster` is not a "
                "valid value (over 256 characters, a NUL): the message is under `cluster`.")), "400", direction=direction)
        return responses


class ReadOnlyViewSet(viewsets.ReadOnlyModelViewSet):
    """List + detail, looked up by a name unless the subclass says otherwise. The detail of a
    Kubernetes-side object (unique per cluster and name) takes the list's `?cluster=` too: with
    several clusters holding the name and no `?cluster=`, 400 naming the parameter and the clusters
    (documented on every such detail by ReadOnlyViewSetSchema)."""

    schema = ReadOnlyViewSetSchema()
    permission_classes = [IsOperatorOrReadOnly]
    lookup_field = "name"
    lookup_value_regex = NAME_IN_PATH

    def get_object(self):
        try:
            return super().get_object()
        except MultipleObjectsReturned:
            raise ambiguous(self.filter_queryset(self.get_queryset()), {
                self.lookup_field: self.kwargs[self.lookup_url_kwarg or self.lookup_field]}) from None


def ambiguous(queryset, lookup: dict) -> serializers.ValidationError:
    """400 on `cluster`: several clusters have an object of this name; the request must say which."""
    clusters = sorted(set(queryset.filter(**lookup).values_list("cluster__name", flat=True)))
    label = "/".join(str(value) for value in lookup.values())
    return serializers.ValidationError({"cluster": [
        f'{len(clusters)} clusters have a {queryset.model._meta.verbose_name} "{label}" ({", ".join(clusters)}): '
        "say which with ?cluster=<name>"]})


def with_cluster(url: str, obj) -> str:
    """A Kubernetes-side object's detail `url`, with `?cluster=<its cluster>` once the fleet has several
    clusters (two clusters may both have a NodePool "default")."""
    if url and getattr(obj, "cluster_id", None) is not None and several_clusters():
        url = f"{url}?{urlencode({'cluster': cluster_name(obj.cluster_id)})}"
    return url


class ClusterHyperlinkedIdentityField(serializers.HyperlinkedIdentityField):
    """The `url` of a Kubernetes-side object: its detail endpoint, with_cluster."""

    def get_url(self, obj, view_name, request, format):
        return with_cluster(super().get_url(obj, view_name, request, format), obj)


class StrictInputMixin:
    """Refuse keys a write serializer does not accept, so that a typo or a read-only field is an
    error instead of a silent no-op."""

    def validate(self, attrs):
        attrs = super().validate(attrs)
        if isinstance(self.initial_data, dict):
            writable = {name for name, field in self.fields.items() if not field.read_only}
            unknown = sorted(set(self.initial_data) - writable)
            if unknown:
                accepted = ", ".join(sorted(writable))
                raise serializers.ValidationError(
                    {key: [f"not a field this endpoint changes (it accepts {accepted})"] for key in unknown}
                )
        return attrs


def get_or_404(queryset, **lookup):
    try:
        return queryset.get(**lookup)
    except queryset.model.DoesNotExist as exc:
        raise Http404(f"No {queryset.model._meta.verbose_name} matches {lookup}.") from exc
    except MultipleObjectsReturned:
        raise ambiguous(queryset, lookup) from None


class SlugField(serializers.SlugRelatedField):
    """SlugRelatedField that refuses a NUL character as "does not exist" before looking it up:
    PostgreSQL refuses NUL in a text parameter (a 500 otherwise)."""

    def to_internal_value(self, data):
        if isinstance(data, str) and "\x00" in data:
            self.fail("does_not_exist", slug_name=self.slug_field, value=data.replace("\x00", "\\x00")[:64])
        return super().to_internal_value(data)
