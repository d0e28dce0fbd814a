from django.urls import path

from fleet.views import object_routes
from karpweb.health import healthz
from scheduling import views
from scheduling.models import Node, NodeClaim, NodePool, Pod

app_name = "scheduling"

urlpatterns = [
    path("", views.OverviewView.as_view(), name="overview"),
    path("upcoming-reservations/", views.UpcomingReservationsView.as_view(), name="upcoming_reservations"),
    path("controller/allow-control/", views.AllowControlView.as_view(), name="allow_control"),
    path("nodepools/", views.NodePoolListView.as_view(), name="nodepools"),
    *object_routes("nodepools/<str:name>/", views.NodePoolDetailView.as_view(), "nodepool", NodePool, "name"),
    *object_routes("nodepools/<str:name>/mode/", views.NodePoolModeView.as_view(), "nodepool_mode", NodePool, "name"),
    path("instance-types/", views.InstanceTypeListView.as_view(), name="instancetypes"),
    path("instance-types/<str:name>/", views.InstanceTypeDetailView.as_view(), name="instancetype"),
    path("nodes/", views.NodeListView.as_view(), name="nodes"),
    *object_routes("nodes/<str:name>/", views.NodeDetailView.as_view(), "node", Node, "name"),
    path("nodeclaims/", views.NodeClaimListView.as_view(), name="nodeclaims"),
    *object_routes("nodeclaims/<str:name>/", views.NodeClaimDetailView.as_view(), "nodeclaim", NodeClaim, "name"),
    path("pods/", views.PodListView.as_view(), name="pods"),
    *object_routes("pods/<str:namespace>/<str:name>/", views.PodDetailView.as_view(), "pod", Pod, "namespace", "name"),
    path("decisions/", views.DecisionListView.as_view(), name="decisions"),
    path("audit/", views.AuditLogView.as_view(), name="audit_log"),
    path("karpenter-audit/", views.KarpenterAuditView.as_view(), name="karpenter_audit"),
    path("what-if/", views.WhatIfView.as_view(), name="whatif"),
    path("what-if/edit/", views.WhatIfEditView.as_view(), name="whatif_edit"),
    path("healthz", healthz, name="healthz"),  # GET and HEAD are answered earlier, by karpweb.health.HealthCheck
]
