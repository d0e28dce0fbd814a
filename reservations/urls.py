from django.urls import path

from fleet.views import object_routes
from reservations import views
from reservations.models import EC2NodeClass

app_name = "reservations"

urlpatterns = [
    path("reservations/", views.ReservationListView.as_view(), name="list"),
    path("reservations/unselected/", views.UnselectedReservationsView.as_view(), name="unselected"),
    path("reservations/doctor/", views.DoctorView.as_view(), name="doctor"),
    path("reservations/usage/", views.UsageView.as_view(), name="usage"),
    path("reservations/open-trap/", views.OpenTrapView.as_view(), name="open_trap"),
    path("reservations/open-trap/panel/", views.OpenTrapPanelView.as_view(), name="open_trap_panel"),
    path("reservations/open-trap/fix/", views.OpenTrapFixView.as_view(), name="open_trap_fix"),
    path("reservations/open-trap/<str:cluster>/<str:reservation_id>.yaml", views.OpenTrapYamlView.as_view(),
         name="open_trap_yaml"),
    path("reservations/<str:reservation_id>/", views.ReservationDetailView.as_view(), name="detail"),
    path("nodeclasses/", views.NodeClassListView.as_view(), name="nodeclasses"),
    *object_routes("nodeclasses/<str:name>/", views.NodeClassDetailView.as_view(), "nodeclass", EC2NodeClass, "name"),
    *object_routes("nodeclasses/<str:name>/edit/", views.NodeClassEditView.as_view(), "nodeclass_edit", EC2NodeClass, "name"),
    *object_routes("nodeclasses/<str:name>/open-mode/", views.NodeClassOpenModeView.as_view(), "nodeclass_open_mode",
                   EC2NodeClass, "name"),
    path("capacity-blocks/", views.CapacityBlockView.as_view(), name="capacity_blocks"),
    path("capacity-blocks/to-buy/", views.BuyAdviceListView.as_view(), name="buy_advice"),
    path("capacity-blocks/to-buy/<int:pk>/approve/", views.BuyApproveView.as_view(), name="buy_approve"),
    path("capacity-blocks/to-buy/<int:pk>/purchase/", views.BuyPurchaseView.as_view(), name="buy_purchase"),
    path("recommendations/", views.RecommendationListView.as_view(), name="recommendations"),
    path("recommendations/<int:pk>/", views.RecommendationDetailView.as_view(), name="recommendation"),
    path("recommendations/<int:pk>/apply/", views.RecommendationApplyView.as_view(), name="recommendation_apply"),
]
