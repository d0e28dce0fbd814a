"""`/healthz`: liveness and readiness for probes and load balancers."""

from django.db import connection
from django.http import JsonResponse


def healthz(request):
    """Liveness and readiness: the database answers."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return JsonResponse({"status": "ok"})


class HealthCheck:
    """`/healthz` answered before Django checks the Host header against ALLOWED_HOSTS: a load
    balancer's health check names the target by its address (an AWS ALB sends the pod's IP as the
    Host), and kubelet's probes do the same unless told otherwise. The answer holds no URL and no
    data, so any Host may have it; every other path (and any other method) is still refused for a
    host not allowed."""

    PATH = "/healthz"

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if request.path_info == self.PATH and request.method in ("GET", "HEAD"):
            return healthz(request)
        return self.get_response(request)
