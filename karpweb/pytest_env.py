"""A pytest plugin loaded (-p) before pytest-django sets Django up: test-only defaults for
settings that production must set."""

import os

os.environ.setdefault("SECRET_KEY", "test-only-secret-key-not-for-production-0123456789-abcdefghij")
# Playwright's sync API runs an event loop in the test thread; Django refuses ORM calls there otherwise.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
# The loop's tests run Celery on a real Redis (CI starts one; so do these machines).
os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:6379/0")
# The API's rate limits would trip over the tests' bursts of requests; the rate-limit tests set them.
os.environ.setdefault("KARPWEB_API_RATE", "off")
os.environ.setdefault("KARPWEB_API_ANON_RATE", "off")
