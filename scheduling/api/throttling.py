"""The API's rate limits: DRF's anonymous and per-user throttles (REST_FRAMEWORK names them as the
defaults) with their rates read from settings on each request (KARPWEB_API_ANON_RATE and
KARPWEB_API_RATE; None means off), and a middleware for what DRF never counts. Over a limit: 429
with Retry-After."""

import time

from django.conf import settings
from django.core.cache import cache
from django.http import JsonResponse
from rest_framework import throttling

from karpweb.clientaddr import client_address


class ClientAddressMixin:
    def get_ident(self, request):
        # Not DRF's: it keys on the whole X-Forwarded-For unless NUM_PROXIES is set, so a client
        # choosing the header chooses its bucket (or a victim's).
        return client_address(request)


class AnonRateThrottle(ClientAddressMixin, throttling.AnonRateThrottle):
    """Requests without credentials, counted per client address."""

    def get_rate(self):
        return settings.KARPWEB_API_ANON_RATE


class UserRateThrottle(ClientAddressMixin, throttling.UserRateThrottle):
    """Requests of a signed-in user or API token, counted per user, in fixed windows of the rate's
    length with one atomic increment in the shared cache (Redis INCR) per request. DRF's own reads a
    list of times and writes it back, so parallel requests each see the old list: 687 requests got
    through in 47 s against 600/min under 16 parallel clients."""

    def get_rate(self):
        return settings.KARPWEB_API_RATE

    def allow_request(self, request, view):
        if self.rate is None:
            return True
        self.key = self.get_cache_key(request, view)
        if self.key is None:
            return True
        self.now = self.timer()
        window = int(self.now // self.duration)
        key = f"{self.key}:{window}"
        self.cache.add(key, 0, self.duration + 1)
        self._window_ends = (window + 1) * self.duration
        return self.cache.incr(key) <= self.num_requests

    def wait(self):
        return max(1.0, self._window_ends - self.now)


class FailedAuthenticationRateLimit:
    """DRF checks throttles after authentication and permissions, so a request refused with 401 (no
    credentials, a wrong or revoked token) is never counted: guessing tokens would be unlimited.
    This middleware counts every 401 under /api/ in the client address's anonymous bucket. Once the
    bucket is full, a request without credentials is answered 429 at once; one with credentials is
    authenticated first and only refused (429) if they failed, so that nobody sharing an address
    (or claiming it) can lock a valid token out. That a wrong token then answers 429 and a right one
    200 tells a guesser nothing usable: a key holds at least 160 random bits."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        rate = settings.KARPWEB_API_ANON_RATE
        signed_in = getattr(request, "user", None) is not None and request.user.is_authenticated
        if rate is None or signed_in or not request.path.startswith("/api/"):
            return self.get_response(request)
        throttle = AnonRateThrottle()
        limit, duration = throttle.parse_rate(rate)
        key = throttle.cache_format % {"scope": throttle.scope, "ident": throttle.get_ident(request)}
        now = time.time()
        history = [moment for moment in cache.get(key, []) if moment > now - duration]
        full = len(history) >= limit
        if full and "HTTP_AUTHORIZATION" not in request.META:
            return throttled(duration - (now - history[-1]))
        response = self.get_response(request)
        if response.status_code != 401:
            return response
        if full:
            return throttled(duration - (now - history[-1]))
        cache.set(key, [now, *history], duration)
        return response


def throttled(seconds: float) -> JsonResponse:
    wait = max(1, int(seconds))
    response = JsonResponse({"detail": f"Request was throttled. Expected available in {wait} seconds."}, status=429)
    response["Retry-After"] = str(wait)
    return response
