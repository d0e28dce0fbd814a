from django.urls import path, re_path
from rest_framework.routers import SimpleRouter

from scheduling.api import views

app_name = "scheduling-api"

router = SimpleRouter()
router.register("nodepools", views.NodePoolViewSet, basename="nodepool")
router.register("nodeclaims", views.NodeClaimViewSet, basename="nodeclaim")
router.register("nodes", views.NodeViewSet, basename="node")
router.register("instance-types", views.InstanceTypeViewSet, basename="instancetype")
router.register("offerings", views.OfferingViewSet, basename="offering")
router.register("decisions", views.DecisionViewSet, basename="decision")
router.register("karpenter-launches", views.KarpenterLaunchViewSet, basename="karpenterlaunch")
router.register("task-runs", views.TaskRunViewSet, basename="taskrun")
router.register("audit", views.AuditEntryViewSet, basename="auditentry")

urlpatterns = [
    # Pods are named within a namespace, as on the pages: /api/v1/pods/<namespace>/<name>/.
    path("pods/", views.PodViewSet.as_view({"get": "list"}), name="pod-list"),
    path("pods/<str:namespace>/<str:name>/", views.PodViewSet.as_view({"get": "retrieve"}), name="pod-detail"),
    path("simulate/", views.SimulateView.as_view(), name="simulate"),
    path("world/", views.WorldView.as_view(), name="world"),
    path("controller/", views.ControllerView.as_view(), name="controller"),
    path("controller/allow-control/", views.AllowControlView.as_view(), name="allow-control"),
    *router.urls,
    # The index of every collection under /api/v1/, read from the URLconf (views.api_collections).
    path("", views.api_root, name="api-root"),
    # Last under /api/v1/ (after the reservations API too): unknown paths get a JSON 404.
    re_path(r"^", views.not_found, name="not-found"),
]
