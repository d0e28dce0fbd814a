"""The API's exception handler (REST_FRAMEWORK names it): DRF's, plus a JSON 413 for a body over
DATA_UPLOAD_MAX_MEMORY_SIZE. Django raises RequestDataTooBig while DRF reads the body, and left
alone it becomes Django's HTML 400 ("Bad Request"), which an API client cannot tell from bad JSON."""

from django.core.exceptions import RequestDataTooBig
from rest_framework import exceptions, status
from rest_framework.views import exception_handler


class BodyTooLarge(exceptions.APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_detail = "The request body is too large."
    default_code = "too_large"


def api_exception_handler(exc, context):
    if isinstance(exc, RequestDataTooBig):
        exc = BodyTooLarge()
    return exception_handler(exc, context)
