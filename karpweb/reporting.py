"""What a technical error page (DEBUG on) and an error e-mail may show of the settings and the
request's environment: Django hides names with KEY, TOKEN, PASS, SECRET...; karpweb's connection
URLs (REDIS_URL, KARPWEB_CACHE_URL, CELERY_BROKER_URL, a cache's LOCATION) carry passwords in them
too, and DEBUG's page printed them."""

import re

from django.views.debug import SafeExceptionReporterFilter


class KarpwebExceptionReporterFilter(SafeExceptionReporterFilter):
    hidden_settings = re.compile("API|TOKEN|KEY|SECRET|PASS|SIGNATURE|HTTP_COOKIE|URL|LOCATION", flags=re.IGNORECASE)
