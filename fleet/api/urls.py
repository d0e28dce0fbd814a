from rest_framework.routers import SimpleRouter

from fleet.api import views

app_name = "fleet-api"

router = SimpleRouter()
router.register("accounts", views.AwsAccountViewSet, basename="awsaccount")
router.register("clusters", views.ClusterViewSet, basename="cluster")

urlpatterns = router.urls
