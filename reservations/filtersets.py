"""One FilterSet per list: the pages and the API filter the same way."""

import django_filters
from django import forms
from django.db.models import Q, TextField
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Cast

from fleet.models import AwsAccount, Cluster
from reservations.models import (BuyAdvice, CapacityReservation, DoctorFinding, EC2NodeClass, Recommendation, UtilizationHour,
                                 UtilizationSample)
from scheduling.engine.doctor import CODES as DOCTOR_CODES
from scheduling.filtersets import ClusterFilters, FilterSet, UtcDateTimeFilter


class CapacityReservationFilterSet(FilterSet):
    q = django_filters.CharFilter(method="search", label="Search")
    reservation_type = django_filters.ChoiceFilter(choices=CapacityReservation.ReservationType.choices, label="Type")
    availability_zone = django_filters.CharFilter(lookup_expr="iexact", label="AZ")
    instance_type = django_filters.CharFilter(lookup_expr="iexact")
    state = django_filters.MultipleChoiceFilter(choices=CapacityReservation.State.choices)
    owner_id = django_filters.CharFilter(label="Owner")
    instance_match_criteria = django_filters.ChoiceFilter(choices=CapacityReservation.MatchCriteria.choices)
    tag = django_filters.CharFilter(method="filter_tag", label="Tag", help_text="key=value, or key for any value")
    cluster = django_filters.CharFilter(method="filter_cluster", label="Cluster",
                                        help_text="Reservations the cluster's account sees in the cluster's region.")
    account = django_filters.CharFilter(method="filter_account", label="Account",
                                        help_text="Reservations this AWS account ID sees (owns, or is shared).")

    class Meta:
        model = CapacityReservation
        fields = ["q", "reservation_type", "availability_zone", "instance_type", "state", "owner_id", "tag"]

    def search(self, queryset, name, value):
        return queryset.filter(
            Q(reservation_id__icontains=value) | Q(instance_type__icontains=value) | Q(owner_id__icontains=value)
        )

    def filter_account(self, queryset, name, value):
        account = AwsAccount.objects.filter(account_id=value.strip()).first()
        return queryset.none() if account is None else queryset.seen_by(account)

    def filter_cluster(self, queryset, name, value):
        cluster = Cluster.objects.filter(name=value.strip()).first()
        return queryset.none() if cluster is None else queryset.visible_to(cluster)

    def filter_tag(self, queryset, name, value):
        key, _, tag_value = value.partition("=")
        key = key.strip()
        if not key:
            return queryset.none()
        queryset = queryset.filter(tags__has_key=key)
        if tag_value.strip() and tag_value.strip() != "*":
            # Cast: compare the tag as text, not as a JSON value (the same on SQLite and PostgreSQL).
            text = Cast(KeyTextTransform(key, "tags"), TextField())
            queryset = queryset.alias(tag_value=text).filter(tag_value=tag_value.strip())
        return queryset


class EC2NodeClassFilterSet(ClusterFilters, FilterSet):
    q = django_filters.CharFilter(field_name="name", lookup_expr="icontains", label="Search")

    class Meta:
        model = EC2NodeClass
        fields = ["q"]


class UtilizationSampleFilterSet(FilterSet):
    """The API's time window on one reservation's samples."""

    since = UtcDateTimeFilter(field_name="sampled_at", lookup_expr="gte", label="Sampled at or after")
    until = UtcDateTimeFilter(field_name="sampled_at", lookup_expr="lt", label="Sampled before")

    class Meta:
        model = UtilizationSample
        fields = ["since", "until"]


class UtilizationHourFilterSet(FilterSet):
    """The API's time window on one reservation's hourly means (by the hour's start)."""

    since = UtcDateTimeFilter(field_name="hour", lookup_expr="gte", label="Hours starting at or after")
    until = UtcDateTimeFilter(field_name="hour", lookup_expr="lt", label="Hours starting before")

    class Meta:
        model = UtilizationHour
        fields = ["since", "until"]


class RecommendationFilterSet(FilterSet):
    kind = django_filters.MultipleChoiceFilter(choices=Recommendation.Kind.choices, label="Kind")
    cluster = django_filters.CharFilter(method="filter_cluster", label="Cluster",
                                        help_text="Recommendations about the reservations the cluster's account sees in "
                                                  "the cluster's region.")
    account = django_filters.CharFilter(method="filter_account", label="Account",
                                        help_text="Recommendations about the reservations this AWS account ID sees.")
    reservation = django_filters.CharFilter(field_name="reservation__reservation_id", lookup_expr="iexact",
                                            label="Reservation")
    node_pool = django_filters.CharFilter(method="filter_node_pool", label="NodePool",
                                          help_text="Recommendations about reservations this NodePool's EC2NodeClass selects")
    state = django_filters.MultipleChoiceFilter(choices=Recommendation.State.choices, label="State")
    advised = django_filters.BooleanFilter(label="Advised", widget=forms.Select(
        choices=[("", "advised (the default)"), ("true", "advised"), ("false", "not advised")]), help_text="false: the extensions that cost more than the "
                                                                        "work they protect (the page hides them unless asked)")

    class Meta:
        model = Recommendation
        fields = ["kind", "reservation", "node_pool", "state"]

    def filter_cluster(self, queryset, name, value):
        cluster = Cluster.objects.filter(name=value.strip()).first()
        return queryset.none() if cluster is None else queryset.filter(
            reservation__in=CapacityReservation.objects.fleet().visible_to(cluster))

    def filter_account(self, queryset, name, value):
        account = AwsAccount.objects.filter(account_id=value.strip()).first()
        return queryset.none() if account is None else queryset.filter(
            reservation__in=CapacityReservation.objects.fleet().seen_by(account))

    def filter_node_pool(self, queryset, name, value):
        return queryset.filter(reservation__node_classes__node_pools__name=value).distinct()


class DoctorFindingFilterSet(ClusterFilters, FilterSet):
    """The reservation doctor's findings: by cluster, account, code, severity, reservation and class;
    active only unless `cleared` says otherwise."""

    code = django_filters.MultipleChoiceFilter(choices=[(c, c) for c in DOCTOR_CODES], label="Code")
    severity = django_filters.MultipleChoiceFilter(choices=DoctorFinding.Severity.choices, label="Severity")
    reservation = django_filters.CharFilter(field_name="reservation_id", label="Reservation")
    node_class = django_filters.CharFilter(field_name="node_class_name", label="EC2NodeClass")
    cleared = django_filters.BooleanFilter(field_name="cleared_at", lookup_expr="isnull", exclude=True, label="Cleared",
                                           help_text="true: the cleared ones (the cause was fixed); default: active.")

    class Meta:
        model = DoctorFinding
        fields = ["code", "severity", "reservation", "node_class", "cleared"]

    @property
    def qs(self):
        queryset = super().qs
        if self.form.cleaned_data.get("cleared") is None:
            queryset = queryset.filter(cleared_at__isnull=True)
        return queryset


class BuyAdviceFilterSet(ClusterFilters, FilterSet):
    """Capacity Block offerings for waiting accelerator gangs: by cluster, account, namespace, gang, type."""

    namespace = django_filters.CharFilter(label="Namespace")
    gang = django_filters.CharFilter(label="Gang")
    instance_type = django_filters.CharFilter(label="Instance type")

    class Meta:
        model = BuyAdvice
        fields = ["namespace", "gang", "instance_type"]
