"""One FilterSet per list: the pages and the API filter the same way."""

import datetime

import django_filters
from django import forms
from django.core.exceptions import ValidationError
from django.db.models import Q
from django_filters.fields import IsoDateTimeField

from fleet.scope import several_clusters
from karpweb import widgets

from scheduling.models import (
    AuditEntry, CapacityType, Decision, InstanceType, KarpenterLaunch, Mode, Node, NodeClaim, NodePool, Offering, Pod, TaskRun,
)


class UtcIsoDateTimeField(IsoDateTimeField):
    """ISO 8601, normalised to UTC: PostgreSQL refuses offsets beyond +-15:59 that ISO 8601 allows,
    and a time that does not exist in UTC is invalid input, not a server error."""

    def to_python(self, value):
        parsed = super().to_python(value)
        if parsed is None or parsed.tzinfo is None:
            return parsed
        try:
            return parsed.astimezone(datetime.timezone.utc)
        except OverflowError:
            raise ValidationError(self.error_messages["invalid"], code="invalid") from None


class UtcDateTimeFilter(django_filters.IsoDateTimeFilter):
    field_class = UtcIsoDateTimeField


class FilterSet(django_filters.FilterSet):
    """Every list's FilterSet: text filters take at most MAX_LENGTH characters (a longer value is a
    field error; SQLite refuses LIKE patterns over 50,000 bytes with a server error); a choice of
    several values is a row of checkboxes, so the page shows what is chosen."""

    MAX_LENGTH = 256
    # Filters a fleet of one cluster does not show on the pages (ClusterFilters).
    FLEET_FILTERS = ("cluster", "account")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        asked = self.data or {}
        if any(name in self.filters for name in self.FLEET_FILTERS) and not any(name in asked for name in self.FLEET_FILTERS) \
                and not several_clusters():
            # One cluster: the pages look as they did before the fleet; ?cluster= and ?account= still filter.
            for name in self.FLEET_FILTERS:
                self.filters.pop(name, None)
        for filter_ in self.filters.values():
            # A form field built before (the API schema builds them on the class's filters, and
            # instances copy them) would not see the settings below: build it afresh.
            filter_.__dict__.pop("_field", None)
            # The widgets: Django's, their HTML written without templates (karpweb/widgets.py).
            if isinstance(filter_, django_filters.CharFilter):
                filter_.extra.setdefault("max_length", self.MAX_LENGTH)
                filter_.extra.setdefault("widget", widgets.TextInput)
            elif isinstance(filter_, django_filters.IsoDateTimeFilter):
                filter_.extra.setdefault("widget", widgets.DateTimeInput)
            elif isinstance(filter_, django_filters.MultipleChoiceFilter):
                filter_.extra.setdefault("widget", widgets.CheckboxSelectMultiple)
            elif isinstance(filter_, django_filters.ChoiceFilter):
                filter_.extra.setdefault("empty_label", "any")
                filter_.extra.setdefault("widget", widgets.Select)


class ClusterFilters(django_filters.FilterSet):
    """`cluster` (its name) and `account` (its AWS account ID) for the lists of Kubernetes-side rows
    (fleet/scope.py): mixed into their FilterSets, before FilterSet."""

    cluster = django_filters.CharFilter(field_name="cluster__name", label="Cluster",
                                        help_text="The cluster's name (fleet.Cluster).")
    account = django_filters.CharFilter(field_name="cluster__account__account_id", label="Account",
                                        help_text="The AWS account ID of the row's cluster.")


class NodePoolFilterSet(ClusterFilters, FilterSet):
    q = django_filters.CharFilter(field_name="name", lookup_expr="icontains", label="Search")
    mode = django_filters.ChoiceFilter(choices=Mode.choices, empty_label="any mode")

    class Meta:
        model = NodePool
        fields = ["q", "mode"]


class NodeFilterSet(ClusterFilters, FilterSet):
    q = django_filters.CharFilter(method="search", label="Search")
    capacity_type = django_filters.ChoiceFilter(choices=CapacityType.choices)
    zone = django_filters.CharFilter(lookup_expr="iexact")
    instance_type = django_filters.CharFilter(lookup_expr="iexact")
    node_pool = django_filters.CharFilter(field_name="node_pool__name", label="NodePool")
    reservation = django_filters.CharFilter(field_name="reservation_label", label="Reservation")

    class Meta:
        model = Node
        fields = ["q", "capacity_type", "zone", "instance_type", "node_pool", "reservation"]

    def search(self, queryset, name, value):
        return queryset.filter(Q(name__icontains=value) | Q(provider_id__icontains=value))


class NodeClaimFilterSet(NodeFilterSet):
    class Meta:
        model = NodeClaim
        fields = ["q", "capacity_type", "zone", "instance_type", "node_pool", "reservation"]

    def search(self, queryset, name, value):
        return queryset.filter(Q(name__icontains=value) | Q(node_name__icontains=value) | Q(provider_id__icontains=value))


class PodFilterSet(ClusterFilters, FilterSet):
    q = django_filters.CharFilter(method="search", label="Search")
    namespace = django_filters.CharFilter()
    pending = django_filters.BooleanFilter(
        field_name="node_name", method="filter_pending", label="Scheduled",
        widget=forms.Select(choices=[("", "any"), ("true", "pending (no node)"), ("false", "on a node")]))
    node = django_filters.CharFilter(field_name="node_name", label="Node")

    class Meta:
        model = Pod
        fields = ["q", "namespace", "pending", "node"]

    def search(self, queryset, name, value):
        return queryset.filter(Q(name__icontains=value) | Q(namespace__icontains=value))

    def filter_pending(self, queryset, name, value):
        return queryset.filter(node_name="") if value else queryset.exclude(node_name="")


class DecisionFilterSet(ClusterFilters, FilterSet):
    q = django_filters.CharFilter(method="search", label="Search")
    kind = django_filters.MultipleChoiceFilter(choices=Decision.Kind.choices)
    outcome = django_filters.ChoiceFilter(choices=Decision.Outcome.choices)
    node_pool = django_filters.CharFilter(field_name="node_pool__name", label="NodePool")
    reservation = django_filters.CharFilter(field_name="reservation__reservation_id", label="Reservation")
    since = UtcDateTimeFilter(field_name="created_at", lookup_expr="gte", label="Since")

    class Meta:
        model = Decision
        fields = ["q", "kind", "outcome", "node_pool", "reservation", "since"]

    def search(self, queryset, name, value):
        return queryset.filter(Q(subject__icontains=value) | Q(reason__icontains=value))


def _key_value(value: str) -> None:
    key, sep, _ = value.partition("=")
    if not sep or not key.strip():
        # A parameter, not an f-string: django-filter's API backend applies `message % params`, so a
        # "%" in the value would otherwise be a format error (a 500).
        raise ValidationError('"%(value)s" is not key=value (e.g. karpenter.k8s.aws/instance-category=c)',
                              params={"value": value})


class InstanceTypeFilterSet(FilterSet):
    q = django_filters.CharFilter(field_name="name", lookup_expr="icontains", label="Search")
    family = django_filters.CharFilter(lookup_expr="iexact", label="Family")
    arch = django_filters.CharFilter(lookup_expr="iexact", label="Architecture")
    gpu = django_filters.BooleanFilter(method="filter_gpu", label="GPUs", widget=forms.Select(
        choices=[("", "any"), ("true", "with GPUs"), ("false", "without GPUs")]))
    zone = django_filters.CharFilter(method="filter_zone", label="Offered in zone")
    label = django_filters.CharFilter(method="filter_label", label="Label (key=value)", validators=[_key_value],
                                      help_text="A well-known label, e.g. karpenter.k8s.aws/instance-category=c")

    class Meta:
        model = InstanceType
        fields = ["q", "family", "arch", "gpu", "zone", "label"]

    def filter_label(self, queryset, name, value):
        # Matched in Python: label keys hold dots and slashes, which SQLite's JSON paths mishandle,
        # and a region's catalogue is a few thousand rows at most.
        key, _, wanted = (part.strip() for part in value.partition("="))
        matching = [pk for pk, labels in queryset.values_list("pk", "labels") if (labels or {}).get(key) == wanted]
        return queryset.filter(pk__in=matching)

    def filter_gpu(self, queryset, name, value):
        return queryset.filter(gpu_count__gt=0) if value else queryset.filter(gpu_count=0)

    def filter_zone(self, queryset, name, value):
        return queryset.filter(pk__in=Offering.objects.filter(zone__iexact=value).values("instance_type"))


class OfferingFilterSet(FilterSet):
    instance_type = django_filters.CharFilter(field_name="instance_type__name", lookup_expr="iexact")
    capacity_type = django_filters.ChoiceFilter(choices=CapacityType.choices)
    zone = django_filters.CharFilter(lookup_expr="iexact")
    available = django_filters.BooleanFilter(label="Available")
    reservation = django_filters.CharFilter(field_name="reservation__reservation_id", label="Reservation")

    class Meta:
        model = Offering
        fields = ["instance_type", "capacity_type", "zone", "available", "reservation"]


class AuditEntryFilterSet(FilterSet):
    """The audit log, for administrators: by who, which cluster, what and when."""

    user = django_filters.CharFilter(field_name="actor", lookup_expr="iexact", label="User")
    cluster = django_filters.CharFilter(field_name="cluster__name", label="Cluster",
                                        help_text="The cluster whose scope the change was made in.")
    action = django_filters.MultipleChoiceFilter(choices=AuditEntry.Action.choices, label="Action")
    source = django_filters.MultipleChoiceFilter(choices=AuditEntry.Source.choices, label="Source")
    since = UtcDateTimeFilter(field_name="created_at", lookup_expr="gte", label="Since")
    until = UtcDateTimeFilter(field_name="created_at", lookup_expr="lt", label="Until")

    class Meta:
        model = AuditEntry
        fields = ["user", "cluster", "action", "source", "since", "until"]


class TaskRunFilterSet(FilterSet):
    task = django_filters.CharFilter()
    cluster = django_filters.CharFilter(field_name="cluster__name", label="Cluster",
                                        help_text="The cluster's name (fleet.Cluster).")
    status = django_filters.MultipleChoiceFilter(choices=TaskRun.Status.choices)
    since = UtcDateTimeFilter(field_name="started_at", lookup_expr="gte", label="Since")

    class Meta:
        model = TaskRun
        fields = ["task", "cluster", "status", "since"]


class KarpenterLaunchFilterSet(ClusterFilters, FilterSet):
    q = django_filters.CharFilter(method="search", label="Search")
    outcome = django_filters.MultipleChoiceFilter(choices=KarpenterLaunch.Outcome.choices, label="Outcome")
    reservation = django_filters.CharFilter(field_name="reservation_label", label="Reservation")
    node_pool = django_filters.CharFilter(field_name="node_pool_name", label="NodePool")
    day = django_filters.DateFilter(field_name="launched_at", lookup_expr="date", label="Day (UTC)")
    since = UtcDateTimeFilter(field_name="launched_at", lookup_expr="gte", label="Since")

    class Meta:
        model = KarpenterLaunch
        fields = ["q", "outcome", "reservation", "node_pool", "day", "since"]

    def search(self, queryset, name, value):
        return queryset.filter(Q(claim_name__icontains=value) | Q(reason__icontains=value))
