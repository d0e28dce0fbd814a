"""The API's one pagination (REST_FRAMEWORK names it as the default)."""

from rest_framework.pagination import LimitOffsetPagination

from karpweb.views_generic import MAX_PAGE_SIZE


class BoundedLimitOffsetPagination(LimitOffsetPagination):
    """`?limit=&offset=`; 50 rows unless asked, never more than 1000 in one response."""

    default_limit = 50
    max_limit = MAX_PAGE_SIZE  # the list pages' `per_page` limit too
