from django.urls import path

from fleet import views

app_name = "fleet"

urlpatterns = [
    path("fleet/accounts/", views.AwsAccountListView.as_view(), name="accounts"),
    path("fleet/accounts/<str:account_id>/", views.AwsAccountDetailView.as_view(), name="account"),
    path("fleet/clusters/", views.ClusterListView.as_view(), name="clusters"),
    path("fleet/clusters/<str:name>/", views.ClusterDetailView.as_view(), name="cluster"),
]
