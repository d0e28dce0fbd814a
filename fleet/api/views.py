"""/api/v1/accounts/ and /api/v1/clusters/: viewers read, fleet administrators add and change
(audited). An account's external ID is made by karpweb and shown once: in the answer to the POST
that adds the account, and in the answer to the POST that makes a new one (`external-id`)."""

from django.db import transaction
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import mixins
from rest_framework import serializers
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound
from rest_framework.response import Response

from fleet.api.serializers import AwsAccountSerializer, ClusterSerializer, ExternalIDSerializer
from fleet.filtersets import AwsAccountFilterSet, ClusterFilterSet
from fleet.external_ids import renew_external_id
from fleet.models import EXTERNAL_ID_HIDDEN, AwsAccount, Cluster
from scheduling.loop.removal import RemovalError, UnknownCluster, remove_cluster
from scheduling.api.base import Conflict, ErrorSerializer, ReadOnlyViewSet, detail_schema, error_responses, list_schema
from scheduling.api.permissions import IsFleetAdminOrReadOnly
from scheduling.audit import diff, record_change
from scheduling.loop.health import with_health
from scheduling.loop.coexistence import ControlNotAllowed, refuse_loosening
from scheduling.models import AuditEntry


class AuditedWrites(mixins.CreateModelMixin, mixins.UpdateModelMixin):
    """POST and PATCH, each recorded in the audit log with the fields it changed."""

    http_method_names = ["get", "post", "patch", "head", "options"]
    permission_classes = [IsFleetAdminOrReadOnly]

    def perform_create(self, serializer):
        with transaction.atomic():
            obj = serializer.save()
            record_change(user=self.request.user, source=AuditEntry.Source.API, obj=obj,
                          action=AuditEntry.Action.CREATE, changes=diff({}, dict(serializer.validated_data)),
                          as_decision=False)

    def before_update(self, instance, changes: dict) -> None:
        """A subclass refuses an update here (raises an APIException)."""

    def perform_update(self, serializer):
        with transaction.atomic():
            self.before_update(serializer.instance, serializer.validated_data)
            before = {name: getattr(serializer.instance, name) for name in serializer.validated_data}
            obj = serializer.save()
            changes = diff(before, {name: getattr(obj, name) for name in serializer.validated_data})
            if changes:  # the fleet's configuration, not a cluster's decision: the audit log alone
                record_change(user=self.request.user, source=AuditEntry.Source.API, obj=obj,
                              action=AuditEntry.Action.CHANGE, changes=changes, as_decision=False)


def write_schema(serializer, summary, *, created=False):
    return extend_schema(summary=summary, request=serializer,
                         responses={201 if created else 200: serializer,
                                    **error_responses(*((400, 401, 403) if created else (400, 401, 403, 404)))})


class RemovedSerializer(serializers.Serializer):
    name = serializers.CharField()
    holdsReleased = serializers.IntegerField(source="holds_released")
    decisionsKept = serializers.IntegerField(source="decisions_kept")
    auditEntriesKept = serializers.IntegerField(source="audit_entries_kept")
    rowsDeleted = serializers.DictField(source="rows_deleted", child=serializers.IntegerField())


@extend_schema_view(
    list=list_schema(AwsAccountSerializer, summary="List AWS accounts",
                     description="The accounts karpweb reads reservations in, with their clusters."),
    retrieve=detail_schema(AwsAccountSerializer, summary="One AWS account", description="By its 12-digit ID."),
    create=write_schema(AwsAccountSerializer, "Add an AWS account", created=True),
    partial_update=write_schema(AwsAccountSerializer, "Change an AWS account"),
)
class AwsAccountViewSet(AuditedWrites, ReadOnlyViewSet):
    serializer_class = AwsAccountSerializer
    filterset_class = AwsAccountFilterSet
    queryset = AwsAccount.objects.prefetch_related("clusters")
    lookup_field = "account_id"
    ordering_fields = ["name", "account_id", "created_at"]
    ordering = ["name"]

    def create(self, request, *args, **kwargs):
        answer = super().create(request, *args, **kwargs)
        account = AwsAccount.objects.get(account_id=answer.data["accountID"])
        answer.data["externalID"] = account.external_id  # shown once, to the administrator who added it
        return answer

    def perform_create(self, serializer):
        with transaction.atomic():
            obj = serializer.save()
            changes = diff({}, {**serializer.validated_data, "external_id": EXTERNAL_ID_HIDDEN})
            record_change(user=self.request.user, source=AuditEntry.Source.API, obj=obj,
                          action=AuditEntry.Action.CREATE, changes=changes, as_decision=False)

    @extend_schema(summary="Make a new external ID for an AWS account",
                   description="karpweb makes a new sts:ExternalId for the account and shows it once, here: put it in "
                               "the role's trust policy. The old one stops working for karpweb at once. Fleet "
                               "administrators only; audited.",
                   request=None, responses={200: ExternalIDSerializer, **error_responses(401, 403, 404)})
    @action(detail=True, methods=["post"], url_path="external-id")
    def external_id(self, request, account_id=None):
        account = renew_external_id(self.get_object(), user=request.user, source=AuditEntry.Source.API)
        return Response({"accountID": account.account_id, "externalID": account.external_id})


@extend_schema_view(
    list=list_schema(ClusterSerializer, summary="List clusters", description="The clusters karpweb mirrors."),
    retrieve=detail_schema(ClusterSerializer, summary="One cluster", description="By its name."),
    create=write_schema(ClusterSerializer, "Add a cluster", created=True),
    partial_update=extend_schema(
        summary="Change a cluster", request=ClusterSerializer,
        description="409 when the change would let karpweb control while Karpenter runs in the cluster "
                    "(mode control, or karpenter absent or auto), as allow-control answers.",
        responses={200: ClusterSerializer, **error_responses(400, 401, 403, 404),
                   409: OpenApiResponse(ErrorSerializer, description="Karpenter runs in the cluster")}),
    destroy=extend_schema(
        summary="Remove a cluster",
        description="Fleet administrators only; audited. Refused (409) while one of its loop steps runs, for the "
                    "fleet's only cluster and for the default cluster of a fleet of three or more. Its steps and "
                    "watch stop, its reservation holds are released, its decisions and audit entries stay as "
                    "history (with its name), its mirrored Kubernetes objects are deleted; its nodes and "
                    "instances are not touched.",
        responses={200: OpenApiResponse(RemovedSerializer, description="What was removed, released and kept"),
                   **error_responses(401, 403, 404),
                   409: OpenApiResponse(ErrorSerializer, description="A step runs, or the fleet needs the cluster")}),
)
class ClusterViewSet(AuditedWrites, ReadOnlyViewSet):
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]
    serializer_class = ClusterSerializer
    filterset_class = ClusterFilterSet
    queryset = Cluster.objects.select_related("account")
    ordering_fields = ["name", "region", "shard", "created_at"]

    def get_queryset(self):
        # Each cluster's failing steps in the list's one query (scheduling.loop.health).
        return with_health(super().get_queryset())
    ordering = ["name"]

    def before_update(self, instance, changes):
        try:
            refuse_loosening(instance, karpenter=changes.get("karpenter"), mode=changes.get("mode"))
        except ControlNotAllowed as exc:
            raise Conflict(f"control not allowed: {exc}") from None

    def destroy(self, request, *args, **kwargs):
        cluster = self.get_object()  # 404 for a name the requester cannot see
        try:
            removed = remove_cluster(cluster.name, user=request.user, source=AuditEntry.Source.API)
        except UnknownCluster as exc:  # removed meanwhile by another call
            raise NotFound(str(exc)) from None
        except RemovalError as exc:
            raise Conflict(str(exc)) from None
        return Response(RemovedSerializer(removed).data)

