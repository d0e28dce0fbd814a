from django.apps import apps
from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from scheduling.metrics import metrics_view

admin.site.site_header = "karpweb administration"
admin.site.site_title = "karpweb admin"
admin.site.index_title = "Manual overrides (every change is recorded in the audit log)"

urlpatterns = [
    path("admin/", admin.site.urls),
    path("metrics", metrics_view, name="metrics"),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("api/v1/", include("reservations.api.urls")),
    path("api/v1/", include("scheduling.api.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("", include("reservations.urls")),
    path("", include("scheduling.urls")),
]
if apps.is_installed("drf_spectacular_sidecar"):  # Swagger UI from local static files, never a CDN
    urlpatterns.append(path("api/docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"))
