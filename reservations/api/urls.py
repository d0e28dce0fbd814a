from django.urls import path
from rest_framework.routers import SimpleRouter

from reservations.api import views

app_name = "reservations-api"

router = SimpleRouter()
router.register("capacity-reservations", views.CapacityReservationViewSet, basename="capacityreservation")
router.register("ec2nodeclasses", views.EC2NodeClassViewSet, basename="ec2nodeclass")
router.register("recommendations", views.RecommendationViewSet, basename="recommendation")
router.register("reservation-doctor", views.DoctorFindingViewSet, basename="doctorfinding")
router.register("capacity-block-advice", views.BuyAdviceViewSet, basename="buyadvice")

urlpatterns = [
    path("alarms/", views.AlarmList.as_view(), name="alarms"),
    path("open-reservation-traps/", views.OpenTrapList.as_view(), name="open-traps"),
    path("open-reservation-traps/fix/", views.OpenTrapFix.as_view(), name="open-traps-fix"),
    path(
        "capacity-reservations/<str:reservation_id>/samples/",
        views.UtilizationSampleList.as_view(),
        name="capacityreservation-samples",
    ),
    path(
        "capacity-reservations/<str:reservation_id>/hours/",
        views.UtilizationHourList.as_view(),
        name="capacityreservation-hours",
    ),
    path("capacity-reservations/<str:reservation_id>/uses/", views.ReservationUseList.as_view(),
         name="capacityreservation-uses"),
    path("capacity-reservations/<str:reservation_id>/instances/", views.ReservationInstanceList.as_view(),
         name="capacityreservation-instances"),
    path("capacity-reservations/<str:reservation_id>/contentions/", views.ReservationContentionList.as_view(),
         name="capacityreservation-contentions"),
    *router.urls,
]
