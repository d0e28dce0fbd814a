"""The API's one pagination (REST_FRAMEWORK names it as the default)."""

from rest_framework.pagination import LimitOffsetPagination


class BoundedLimitOffsetPagination(LimitOffsetPagination):
    """`?limit=&offset=`; 50 rows unless asked, never more than 1000 in one response."""

    default_limit = 50
    max_limit = 1000
