"""A pytest plugin loaded (-p) before pytest-django sets Django up: test-only defaults for
settings that production must set."""

import os
import tempfile

os.environ.setdefault("SECRET_KEY", "test-only-secret-key-not-for-production-0123456789-abcdefghij")
# Playwright's sync API runs an event loop in the test thread; Django refuses ORM calls there otherwise.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
# The loop's tests run Celery on a real Redis (CI starts one; so do these machines).
os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:6379/0")
# The API's rate limits would trip over the tests' bursts of requests; the rate-limit tests set them.
os.environ.setdefault("KARPWEB_API_RATE", "off")
os.environ.setdefault("KARPWEB_API_ANON_RATE", "off")
# The cluster launched nodes join (the launch tests that ask EKS DescribeCluster clear these).
os.environ.setdefault("KARPWEB_CLUSTER_NAME", "karpweb-test")
os.environ.setdefault("KARPWEB_CLUSTER_ENDPOINT", "https://0123456789ABCDEF.gr7.us-east-1.eks.amazonaws.com")
os.environ.setdefault("KARPWEB_CLUSTER_CA_BUNDLE", "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCnRlc3QKLS0tLS1FTkQgQ0VSVElGSUNBVEUtLS0tLQo=")
os.environ.setdefault("KARPWEB_CLUSTER_CIDR", "10.100.0.0/16")
os.environ.setdefault("KARPWEB_KUBERNETES_VERSION", "1.31")
# /metrics needs its token in production; the tests that scrape it do so without one (the metrics
# tests in tests/security and tests/ops set the token or switch this off).
os.environ.setdefault("KARPWEB_METRICS_PUBLIC", "true")
# The kube-apiserver test servers write their kubeconfigs under pytest's temporary directory.
os.environ.setdefault("KARPWEB_KUBECONFIG_DIR", tempfile.gettempdir())
# Tests make many tokens for users whose keys SQLite reuses; the token tests set the limits they test.
os.environ.setdefault("KARPWEB_API_TOKEN_CREATE_PER_HOUR", "100000")
