"""karpweb's URLs under /console/ (a test of karpweb.urlcache following ROOT_URLCONF)."""

from django.urls import include, path

urlpatterns = [path("console/", include("karpweb.urls"))]
