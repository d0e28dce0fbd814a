"""Response headers for what a signed-in person sees."""

from django.http import HttpResponseNotFound
from django.utils.cache import add_never_cache_headers

from karpweb.jsonsafe import unstorable_text


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


class RefuseUnstorableText:
    """404 for a path holding NUL or a lone surrogate: no object is named so, and the database refuses
    it as a lookup's parameter (a 500 before). Query parameters are the filters' to refuse, by name."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if problem := unstorable_text(request.path):
            return HttpResponseNotFound(f"path: {problem}: no object is named so",
                                        content_type="text/plain; charset=utf-8")
        return self.get_response(request)


# The browser features no karpweb page uses, refused to any script that might run in one.
PERMISSIONS_POLICY = ("camera=(), microphone=(), geolocation=(), payment=(), usb=(), serial=(), bluetooth=(), "
                      "hid=(), midi=(), display-capture=()")


class PermissionsPolicy:
    """`Permissions-Policy` on every response: karpweb's pages need none of the powerful browser features."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        response.headers.setdefault("Permissions-Policy", PERMISSIONS_POLICY)
        return response
