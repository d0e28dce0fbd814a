"""Response headers for what a signed-in person sees."""

from django.utils.cache import add_never_cache_headers


class NoStoreForSignedIn:
    """`Cache-Control: no-store` (and private, max-age=0) on every response to a signed-in user or an
    API token: a shared computer's browser cache, or a proxy, must keep no copy of reservations, nodes
    or the audit log after the person signs out. A view that set its own Cache-Control keeps it."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        user = getattr(request, "user", None)
        signed_in = user is not None and user.is_authenticated
        if (signed_in or "HTTP_AUTHORIZATION" in request.META) and not response.has_header("Cache-Control"):
            add_never_cache_headers(response)
        return response
