"""The fleet's lists: one FilterSet per list, for the pages and the API alike."""

import django_filters
from django.db.models import Q

from fleet.models import AwsAccount, Cluster
from scheduling.choices import Mode
from scheduling.filtersets import FilterSet


class AwsAccountFilterSet(FilterSet):
    q = django_filters.CharFilter(method="search", label="Search")
    region = django_filters.CharFilter(method="filter_region", label="Region",
                                       help_text="Accounts read in this region (e.g. us-east-1).")

    class Meta:
        model = AwsAccount
        fields = ["q", "region"]

    def search(self, queryset, name, value):
        return queryset.filter(Q(name__icontains=value) | Q(account_id__icontains=value) | Q(role_arn__icontains=value))

    def filter_region(self, queryset, name, value):
        # Matched in Python: a JSON list's membership reads differently on SQLite and PostgreSQL, and
        # a fleet has tens of accounts, not thousands.
        wanted = value.strip()
        return queryset.filter(pk__in=[pk for pk, regions in queryset.values_list("pk", "regions")
                                       if wanted in (regions or [])])


class ClusterFilterSet(FilterSet):
    q = django_filters.CharFilter(method="search", label="Search")
    account = django_filters.CharFilter(field_name="account__account_id", label="Account",
                                        help_text="The AWS account ID.")
    region = django_filters.CharFilter(lookup_expr="iexact", label="Region")
    connection = django_filters.ChoiceFilter(choices=Cluster.Connection.choices, label="Connection")
    mode = django_filters.ChoiceFilter(choices=Mode.choices, label="Mode", help_text="The cluster's own mode "
                                                                                      "(blank ones follow the global mode).")
    shard = django_filters.CharFilter(label="Shard")

    class Meta:
        model = Cluster
        fields = ["q", "account", "region", "connection", "mode", "shard"]

    def search(self, queryset, name, value):
        return queryset.filter(Q(name__icontains=value) | Q(endpoint__icontains=value)
                               | Q(account__name__icontains=value))
