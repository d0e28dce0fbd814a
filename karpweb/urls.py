from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

admin.site.site_header = "karpweb administration"
admin.site.site_title = "karpweb admin"
admin.site.index_title = "Manual overrides (every change is recorded in the audit log)"

urlpatterns = [
    path("admin/", admin.site.urls),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("", include("reservations.urls")),
    path("", include("scheduling.urls")),
]
