"""/api/v1/accounts/ and /api/v1/clusters/: viewers read, operators add and change (audited)."""

from django.db import transaction
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import mixins

from fleet.api.serializers import AwsAccountSerializer, ClusterSerializer
from fleet.filtersets import AwsAccountFilterSet, ClusterFilterSet
from fleet.models import AwsAccount, Cluster
from scheduling.api.base import ReadOnlyViewSet, detail_schema, error_responses, list_schema
from scheduling.audit import diff, record_change
from scheduling.models import AuditEntry


class AuditedWrites(mixins.CreateModelMixin, mixins.UpdateModelMixin):
    """POST and PATCH, each recorded in the audit log with the fields it changed."""

    http_method_names = ["get", "post", "patch", "head", "options"]

    def perform_create(self, serializer):
        with transaction.atomic():
            obj = serializer.save()
            record_change(user=self.request.user, source=AuditEntry.Source.API, obj=obj,
                          action=AuditEntry.Action.CREATE, changes=diff({}, dict(serializer.validated_data)))

    def perform_update(self, serializer):
        with transaction.atomic():
            before = {name: getattr(serializer.instance, name) for name in serializer.validated_data}
            obj = serializer.save()
            changes = diff(before, {name: getattr(obj, name) for name in serializer.validated_data})
            if changes:
                record_change(user=self.request.user, source=AuditEntry.Source.API, obj=obj,
                              action=AuditEntry.Action.CHANGE, changes=changes)


def write_schema(serializer, summary, *, created=False):
    return extend_schema(summary=summary, request=serializer,
                         responses={201 if created else 200: serializer,
                                    **error_responses(*((400, 401, 403) if created else (400, 401, 403, 404)))})


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


@extend_schema_view(
    list=list_schema(ClusterSerializer, summary="List clusters", description="The clusters karpweb mirrors."),
    retrieve=detail_schema(ClusterSerializer, summary="One cluster", description="By its name."),
    create=write_schema(ClusterSerializer, "Add a cluster", created=True),
    partial_update=write_schema(ClusterSerializer, "Change a cluster"),
)
class ClusterViewSet(AuditedWrites, ReadOnlyViewSet):
    serializer_class = ClusterSerializer
    filterset_class = ClusterFilterSet
    queryset = Cluster.objects.select_related("account")
    ordering_fields = ["name", "region", "shard", "created_at"]
    ordering = ["name"]
