"""One FilterSet per list: the pages and the API filter the same way."""

import django_filters
from django.db.models import Q

from scheduling.models import CapacityType, Decision, Mode, Node, NodeClaim, NodePool, Pod


class NodePoolFilterSet(django_filters.FilterSet):
    q = django_filters.CharFilter(field_name="name", lookup_expr="icontains", label="Search")
    mode = django_filters.ChoiceFilter(choices=Mode.choices, empty_label="any mode")

    class Meta:
        model = NodePool
        fields = ["q", "mode"]


class NodeFilterSet(django_filters.FilterSet):
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


class PodFilterSet(django_filters.FilterSet):
    q = django_filters.CharFilter(method="search", label="Search")
    namespace = django_filters.CharFilter()
    pending = django_filters.BooleanFilter(field_name="node_name", lookup_expr="exact", method="filter_pending")
    node = django_filters.CharFilter(field_name="node_name")

    class Meta:
        model = Pod
        fields = ["q", "namespace", "pending", "node"]

    def search(self, queryset, name, value):
        return queryset.filter(Q(name__icontains=value) | Q(namespace__icontains=value))

    def filter_pending(self, queryset, name, value):
        return queryset.filter(node_name="") if value else queryset.exclude(node_name="")


class DecisionFilterSet(django_filters.FilterSet):
    q = django_filters.CharFilter(method="search", label="Search")
    kind = django_filters.MultipleChoiceFilter(choices=Decision.Kind.choices)
    outcome = django_filters.ChoiceFilter(choices=Decision.Outcome.choices)
    node_pool = django_filters.CharFilter(field_name="node_pool__name", label="NodePool")
    reservation = django_filters.CharFilter(field_name="reservation__reservation_id", label="Reservation")
    since = django_filters.IsoDateTimeFilter(field_name="created_at", lookup_expr="gte")

    class Meta:
        model = Decision
        fields = ["q", "kind", "outcome", "node_pool", "reservation", "since"]

    def search(self, queryset, name, value):
        return queryset.filter(Q(subject__icontains=value) | Q(reason__icontains=value))
