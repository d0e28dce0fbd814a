from django.urls import path

from reservations import views

app_name = "reservations"

urlpatterns = [
    path("reservations/", views.ReservationListView.as_view(), name="list"),
    path("reservations/unselected/", views.UnselectedReservationsView.as_view(), name="unselected"),
    path("reservations/open-trap/", views.OpenTrapView.as_view(), name="open_trap"),
    path("reservations/open-trap/panel/", views.OpenTrapPanelView.as_view(), name="open_trap_panel"),
    path("reservations/open-trap/fix/", views.OpenTrapFixView.as_view(), name="open_trap_fix"),
    path("reservations/open-trap/<str:cluster>/<str:reservation_id>.yaml", views.OpenTrapYamlView.as_view(),
         name="open_trap_yaml"),
    path("reservations/<str:reservation_id>/", views.ReservationDetailView.as_view(), name="detail"),
    path("nodeclasses/", views.NodeClassListView.as_view(), name="nodeclasses"),
    path("nodeclasses/<str:name>/", views.NodeClassDetailView.as_view(), name="nodeclass"),
    path("nodeclasses/<str:name>/edit/", views.NodeClassEditView.as_view(), name="nodeclass_edit"),
    path("nodeclasses/<str:name>/open-mode/", views.NodeClassOpenModeView.as_view(), name="nodeclass_open_mode"),
    path("capacity-blocks/", views.CapacityBlockView.as_view(), name="capacity_blocks"),
    path("recommendations/", views.RecommendationListView.as_view(), name="recommendations"),
    path("recommendations/<int:pk>/", views.RecommendationDetailView.as_view(), name="recommendation"),
    path("recommendations/<int:pk>/apply/", views.RecommendationApplyView.as_view(), name="recommendation_apply"),
]
