from django.apps import apps
from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from django.http import HttpResponsePermanentRedirect
from django.templatetags.static import static
from django.views.generic import RedirectView

from accounts.oidc import CallbackView, SignInView
from accounts.views import APITokensView, SignInPageView
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from fleet.overview import FleetOverviewView
from scheduling.metrics import metrics_view

def favicon(request):
    """The static URL asked at request time (with hashed static names, not before collectstatic ran)."""
    return HttpResponsePermanentRedirect(static("favicon.svg"))


admin.site.site_header = "karpweb administration"
admin.site.site_title = "karpweb admin"
admin.site.index_title = ("What EC2 and Kubernetes say (read-only: the next sync overwrites it), karpweb's own "
                          "settings and overrides (every change is recorded in the audit log)")
# The index's list of models beside every page took a quarter of the width the change lists need.
admin.site.enable_nav_sidebar = False

urlpatterns = [
    # One sign-in page for the console and the admin: it offers single sign-on and knows when local
    # accounts are switched off.
    path("admin/login/", RedirectView.as_view(url="/login/", query_string=True)),
    path("admin/", admin.site.urls),
    path("metrics", metrics_view, name="metrics"),
    path("fleet/", FleetOverviewView.as_view(), name="fleet_overview"),
    # Browsers ask for /favicon.ico whatever the page says: the console's icon, not a 404.
    path("favicon.ico", favicon),
    path("login/", SignInPageView.as_view(), name="login"),
    path("oidc/authenticate/", SignInView.as_view(), name="oidc_authentication_init"),
    path("oidc/callback/", CallbackView.as_view(), name="oidc_authentication_callback"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("account/api-tokens/", APITokensView.as_view(), name="api_tokens"),
    path("api/v1/", include("fleet.api.urls")),
    path("api/v1/", include("reservations.api.urls")),
    path("api/v1/", include("scheduling.api.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("", include("fleet.urls")),
    path("", include("reservations.urls")),
    path("", include("scheduling.urls")),
]
if apps.is_installed("drf_spectacular_sidecar"):  # Swagger UI from local static files, never a CDN
    # The split view serves Swagger UI's start-up script as a file: the Content-Security-Policy forbids inline ones.
    urlpatterns.append(path("api/docs/", SpectacularSwaggerSplitView.as_view(url_name="api-schema"), name="api-docs"))
