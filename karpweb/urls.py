from django.contrib import admin
from django.urls import path
from django.views.generic import RedirectView

admin.site.site_header = "karpweb administration"
admin.site.site_title = "karpweb admin"
admin.site.index_title = "Manual overrides (every change is recorded in the audit log)"

urlpatterns = [
    path("admin/", admin.site.urls),
    # The operator pages replace this redirect when they land.
    path("", RedirectView.as_view(url="/admin/", permanent=False)),
]
