"""karpweb settings: one module, every deployment value read from the environment.

See karpweb/env.py for the strict readers; README.md lists every variable.
"""

import datetime
import os
import secrets
from pathlib import Path

import plotly
from csp.constants import NONE, SELF, UNSAFE_INLINE
from django.core.exceptions import ImproperlyConfigured

from fleet.endpoints import endpoint_problem
from karpweb.env import (
    env_spread_defaults,
    env_bindings,
    env_networks,
    database_from_url,
    env_bool,
    env_choice,
    env_float,
    env_int,
    env_label_key,
    env_list,
    env_rate,
    env_str,
    env_url,
    secret_key_problem,
)

# Set by manage.py for the commands that serve no web page (see WEB_COMMANDS there).
CLI_MARKER = "KARPWEB_COMMAND_WITHOUT_WEB"
BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("KARPWEB_VAR_DIR", str(BASE_DIR / "var")))

DEBUG = env_bool("DEBUG", False)
SECRET_KEY = env_str("SECRET_KEY")
if not SECRET_KEY:
    if DEBUG:
        SECRET_KEY = "insecure-development-key-only-used-with-DEBUG-on"
    elif os.environ.get(CLI_MARKER) == "true":
        # manage.py, running a command that serves no page: nothing it signs outlives the process.
        SECRET_KEY = secrets.token_urlsafe(50)
    else:
        raise ImproperlyConfigured("SECRET_KEY must be set when DEBUG is off")
# Keys that still verify sessions and signatures while a new SECRET_KEY takes over (rotation,
# docs/operations.md); each must be as strong as the key itself.
SECRET_KEY_FALLBACKS = env_list("SECRET_KEY_FALLBACKS", []) if os.environ.get("SECRET_KEY_FALLBACKS") else []
if not DEBUG and os.environ.get(CLI_MARKER) != "true":
    # The web and the workers sign with it: a manifest's placeholder would sign with a public key.
    for _name, _key in (("SECRET_KEY", SECRET_KEY), *(("SECRET_KEY_FALLBACKS", k) for k in SECRET_KEY_FALLBACKS)):
        if problem := secret_key_problem(_key):
            raise ImproperlyConfigured(f"{_name} {problem} (generate one: python -c 'import secrets; "
                                       "print(secrets.token_urlsafe(50))')")
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"] if DEBUG else [])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    # API tokens stored as digests, with expiry (accounts/tokens.py); replaces rest_framework.authtoken,
    # whose keys were stored in clear (accounts' migration 0002 moved them over, hashed).
    "knox",
    "django_filters",
    "django_tables2",
    "django_htmx",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI's assets from local static files, no CDN
    "django_celery_beat",
    "axes",
    "mozilla_django_oidc",
    "accounts",
    "fleet",
    "reservations",
    "scheduling",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "csp.middleware.CSPMiddleware",  # Content-Security-Policy on every response (below)
    "karpweb.middleware.PermissionsPolicy",  # no camera, microphone, geolocation, ... for any page
    "karpweb.middleware.RefuseUnstorableText",  # a path with NUL or a lone surrogate: 404, not a database error
    "karpweb.uploads.RequestBodyLimit",  # a body over DATA_UPLOAD_MAX_MEMORY_SIZE: 413, unread
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "karpweb.health.HealthCheck",  # /healthz for any Host: load balancers' health checks send the pod's IP
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "karpweb.middleware.NoStoreForSignedIn",  # Cache-Control: no-store for whatever a signed-in user sees
    "scheduling.api.throttling.FailedAuthenticationRateLimit",
    "django.contrib.messages.middleware.MessageMiddleware",
    "fleet.middleware.RequesterAccess",  # what the requester may see and change: fleet/access.py
    "fleet.middleware.ClusterChoice",  # the cluster a console page shows (?cluster=, the session): fleet/middleware.py
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "axes.middleware.AxesMiddleware",  # last: it answers a locked-out sign-in
]

# How many reverse proxies (ingress controller, load balancer) stand between the clients and karpweb
# and append to X-Forwarded-For: the sign-in lock-out, the API's limiters and the audit log take the
# client's address from there (karpweb/clientaddr.py), and X-Forwarded-Proto is believed only then.
# 0: no proxy, X-Forwarded-* ignored. docs/operations.md, "Behind a proxy: KARPWEB_TRUSTED_PROXY_HOPS".
KARPWEB_TRUSTED_PROXY_HOPS = env_int("KARPWEB_TRUSTED_PROXY_HOPS", 0, minimum=0)
# ... and the networks those proxies send from (the ingress controller's pods, e.g. 10.0.0.0/8): a
# request from any other address is taken as from that address, whatever X-Forwarded-For says.
# Blank: the nearest hop is trusted wherever it is (keep the shipped NetworkPolicy then).
KARPWEB_TRUSTED_PROXY_CIDRS = env_networks("KARPWEB_TRUSTED_PROXY_CIDRS")

# Local sign-in: django-axes counts failures per username and, separately, per client address, and
# locks either out after KARPWEB_LOGIN_FAILURE_LIMIT failures for KARPWEB_LOGIN_LOCKOUT_MINUTES (an
# administrator unlocks earlier by deleting the access attempt in the admin; both are audited).
# Local accounts are the break-glass way in; KARPWEB_LOCAL_LOGIN=false switches password sign-in off
# (API tokens keep working: they are not a sign-in).
KARPWEB_LOCAL_LOGIN = env_bool("KARPWEB_LOCAL_LOGIN", True)
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend"]
if KARPWEB_LOCAL_LOGIN:
    AUTHENTICATION_BACKENDS.append("django.contrib.auth.backends.ModelBackend")
AXES_FAILURE_LIMIT = env_int("KARPWEB_LOGIN_FAILURE_LIMIT", 5, minimum=1)
AXES_COOLOFF_TIME = datetime.timedelta(minutes=env_int("KARPWEB_LOGIN_LOCKOUT_MINUTES", 15, minimum=1))
AXES_LOCKOUT_PARAMETERS = [["username"], ["ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"
AXES_USERNAME_CALLABLE = "karpweb.signin.username_for_axes"
# Behind an ingress every request comes from the proxy's address: the client's comes from
# X-Forwarded-For, trusting only as many entries as there are proxies (karpweb/clientaddr.py).
AXES_CLIENT_IP_CALLABLE = "karpweb.clientaddr.client_address"

# Content-Security-Policy (django-csp, a well-kept middleware for exactly this): scripts only from
# karpweb's own static files, never inline (charts and countdowns read their data from the page:
# static/js/), so markup that slipped through escaping cannot run. Styles may be inline: plotly and
# htmx add <style> elements at run time. No framing, no plugins, forms and fetches to karpweb only
# (the single sign-on button is a link, not a form, so the provider's origin is not needed).
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF, UNSAFE_INLINE],
        "img-src": [SELF, "data:"],
        "font-src": [SELF, "data:"],
        "connect-src": [SELF],
        "object-src": [NONE],
        "base-uri": [SELF],
        "frame-ancestors": [NONE],
    },
}

# Single sign-on (accounts/oidc.py, mozilla-django-oidc): on when KARPWEB_OIDC_ISSUER is set. The
# provider's endpoints come from its discovery document; roles from its group claim at every sign-in.
KARPWEB_OIDC_ISSUER = env_url("KARPWEB_OIDC_ISSUER", None, ("https", "http"))
OIDC_RP_CLIENT_ID = env_str("KARPWEB_OIDC_CLIENT_ID", required=bool(KARPWEB_OIDC_ISSUER)) or ""
OIDC_RP_CLIENT_SECRET = env_str("KARPWEB_OIDC_CLIENT_SECRET", required=bool(KARPWEB_OIDC_ISSUER)) or ""
OIDC_RP_SCOPES = env_str("KARPWEB_OIDC_SCOPES", "openid email profile groups")
OIDC_RP_SIGN_ALGO = env_choice("KARPWEB_OIDC_SIGN_ALGO", "RS256", ("RS256", "RS384", "RS512", "ES256", "ES384", "ES512"))
OIDC_USE_PKCE = True
OIDC_TIMEOUT = 10
OIDC_VERIFY_SSL = env_bool("KARPWEB_OIDC_VERIFY_TLS", True)
OIDC_AUTHENTICATION_CALLBACK_URL = "oidc_authentication_callback"
LOGIN_REDIRECT_URL_FAILURE = "/login/"
KARPWEB_OIDC_NAME = env_str("KARPWEB_OIDC_NAME", "single sign-on")
KARPWEB_OIDC_GROUPS_CLAIM = env_str("KARPWEB_OIDC_GROUPS_CLAIM", "groups")
KARPWEB_OIDC_USERNAME_CLAIM = env_str("KARPWEB_OIDC_USERNAME_CLAIM", "preferred_username")
KARPWEB_OIDC_VIEWER_GROUPS = env_list("KARPWEB_OIDC_VIEWER_GROUPS", [])
KARPWEB_OIDC_OPERATOR_GROUPS = env_list("KARPWEB_OIDC_OPERATOR_GROUPS", [])
KARPWEB_OIDC_ADMIN_GROUPS = env_list("KARPWEB_OIDC_ADMIN_GROUPS", [])
KARPWEB_OIDC_SESSION_HOURS = env_int("KARPWEB_OIDC_SESSION_HOURS", 8, minimum=1)
# Identity-provider groups bound to a role on a cluster, an account or the fleet (fleet/access.py):
# "ml-team=operator@cluster:prod-ml, finance=viewer@account:123456789012, sre=viewer@fleet".
KARPWEB_OIDC_GROUP_BINDINGS = env_bindings("KARPWEB_OIDC_GROUP_BINDINGS")
if KARPWEB_OIDC_ISSUER:
    AUTHENTICATION_BACKENDS.append("accounts.oidc.KarpwebOIDCBackend")
    if not (KARPWEB_OIDC_VIEWER_GROUPS or KARPWEB_OIDC_OPERATOR_GROUPS or KARPWEB_OIDC_ADMIN_GROUPS):
        raise ImproperlyConfigured("KARPWEB_OIDC_ISSUER is set but none of KARPWEB_OIDC_VIEWER_GROUPS, "
                                   "KARPWEB_OIDC_OPERATOR_GROUPS, KARPWEB_OIDC_ADMIN_GROUPS: nobody could sign in")
elif not KARPWEB_LOCAL_LOGIN:
    raise ImproperlyConfigured("KARPWEB_LOCAL_LOGIN=false needs KARPWEB_OIDC_ISSUER: nobody could sign in")

ROOT_URLCONF = "karpweb.urls"
# Connection URLs (with their passwords) hidden from DEBUG's error page too (karpweb/reporting.py).
DEFAULT_EXCEPTION_REPORTER_FILTER = "karpweb.reporting.KarpwebExceptionReporterFilter"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "karpweb.roles.roles_context",
                "scheduling.context_processors.cluster_freshness",
                "fleet.context_processors.cluster_choice",
            ],
        },
    },
]

WSGI_APPLICATION = "karpweb.wsgi.application"
ASGI_APPLICATION = "karpweb.asgi.application"

DATABASES = {"default": database_from_url("DATABASE_URL", f"sqlite:///{VAR_DIR / 'karpweb.sqlite3'}")}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = env_str("TIME_ZONE", "UTC")
if TIME_ZONE != "UTC":
    # django-celery-beat and the capacity-block countdowns assume UTC throughout.
    raise ImproperlyConfigured(f"TIME_ZONE={TIME_ZONE!r}: karpweb runs in UTC only")
USE_I18N = False
USE_TZ = True
FORMAT_MODULE_PATH = ["karpweb.formats"]  # one way of writing a time: "2026-11-26 08:49 UTC"

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
# plotly.min.js is served from the plotly package itself (no CDN, no vendored copy).
STATICFILES_DIRS = [BASE_DIR / "static", ("plotly", Path(plotly.__file__).parent / "package_data")]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"
        if DEBUG
        else "whitenoise.storage.CompressedManifestStaticFilesStorage"
    },
}

# A WORLD.json pasted into the what-if page may be up to 5 MiB (scheduling/whatif.py says so when it
# is larger); Django's default (2.5 MB) would refuse it with a bare 400 first.
DATA_UPLOAD_MAX_MEMORY_SIZE = 6 * 2**20
# Uploaded files are counted as they stream and stopped past this (karpweb/uploads.py): the largest
# WORLD.json the what-if page takes. Nothing larger reaches memory or the temporary directory.
KARPWEB_UPLOAD_MAX_BYTES = 5 * 2**20
FILE_UPLOAD_HANDLERS = [
    "karpweb.uploads.SizeLimitedUploadHandler",
    "django.core.files.uploadhandler.MemoryFileUploadHandler",
    "django.core.files.uploadhandler.TemporaryFileUploadHandler",
]

# Every list page's table (templates/tables/table.html: django-tables2's, with plain rows).
DJANGO_TABLES2_TEMPLATE = "tables/table.html"

LOGIN_URL = "/login/"
LOGIN_REDIRECT_URL = "/"

# --- Celery ----------------------------------------------------------------------------
# Without REDIS_URL the worker and beat use kombu's SQLAlchemy transport on a SQLite file under
# var/, so the embedded default needs no server. Not the file-system transport: its consumer can read
# a message file while the producer is still writing it, and the worker dies on the JSONDecodeError
# (about 10 minutes into a quick start). SQLite commits a message whole and kombu takes each one in a
# BEGIN IMMEDIATE transaction, so a reader sees it once and complete. A file of its own, not the
# app's database: the worker polls it every second. Production sets REDIS_URL.
REDIS_URL = env_url("REDIS_URL", None, ("redis", "rediss"))
CELERY_BROKER_FILE = VAR_DIR.resolve() / "celery-broker.sqlite3"  # absolute: not relative to the cwd
CELERY_BROKER_URL = REDIS_URL or f"sqla+sqlite:///{CELERY_BROKER_FILE}"
# Waits up to 30 s for the other process's write (web, worker, beat) rather than failing at once.
EMBEDDED_BROKER_TRANSPORT_OPTIONS = {"connect_args": {"timeout": 30}}
CELERY_BROKER_TRANSPORT_OPTIONS = {} if REDIS_URL else EMBEDDED_BROKER_TRANSPORT_OPTIONS
# Where ./karpweb.sh run's supervisor records each exit of the worker (scripts/supervise.sh), for the
# overview to say why the loop stopped. Only the quick start: in production the process manager
# restarts the worker.
KARPWEB_WORKER_RESTARTS = None if REDIS_URL else BASE_DIR / "var" / "celery-restarts.log"
# No result backend (tasks' results are ignored: the loop records its runs in TaskRun), so none to
# embed either.
CELERY_TASK_IGNORE_RESULT = True
CELERY_TIMEZONE = "UTC"
CELERY_ENABLE_UTC = True
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
CELERY_TASK_ACKS_LATE = True
# A worker process that dies mid-task (killed, OOM) puts its message back for another worker; every
# step is idempotent and leased per (step, cluster), so running it again acts once.
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# A lost broker connection (Redis restarted) lets running steps finish and record their run; they
# are idempotent and leased, and a restarted Redis has no copy of the message to redeliver anyway.
CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS = False

# --- karpweb ---------------------------------------------------------------------------
KARPWEB_PROVIDER = env_choice("KARPWEB_PROVIDER", "simulated", ("simulated", "aws"))
KARPWEB_CLUSTER = env_choice("KARPWEB_CLUSTER", "simulated", ("simulated", "kubernetes"))
# A real cluster starts in observe; the simulated world acts, so that the demo shows the loop working.
_SIMULATED = KARPWEB_PROVIDER == "simulated" and KARPWEB_CLUSTER == "simulated"
KARPWEB_MODE = env_choice("KARPWEB_MODE", "control" if _SIMULATED else "observe", ("observe", "control"))
# Is Karpenter the cluster's controller? auto: found from its leader-election Lease and Deployment at
# every Kubernetes sync; present / absent: declared. While it is, karpweb only recommends.
KARPWEB_KARPENTER = env_choice("KARPWEB_KARPENTER", "auto", ("auto", "present", "absent"))
KARPWEB_KARPENTER_LEASE_NAME = env_str("KARPWEB_KARPENTER_LEASE_NAME", "karpenter-leader-election")
# The EKS cluster nodes join (Karpenter's CLUSTER_NAME, CLUSTER_ENDPOINT, CLUSTER_CA_BUNDLE): what is
# not set comes from EKS DescribeCluster (docs/ec2.md, "Launching nodes that join the cluster").
KARPWEB_CLUSTER_NAME = env_str("KARPWEB_CLUSTER_NAME", "")
KARPWEB_CLUSTER_ENDPOINT = env_str("KARPWEB_CLUSTER_ENDPOINT", "")
if KARPWEB_CLUSTER_ENDPOINT and endpoint_problem(KARPWEB_CLUSTER_ENDPOINT):  # it goes into every node's boot script
    raise ImproperlyConfigured(f"KARPWEB_CLUSTER_ENDPOINT={KARPWEB_CLUSTER_ENDPOINT[:200]!r} "
                               f"{endpoint_problem(KARPWEB_CLUSTER_ENDPOINT)}")
KARPWEB_CLUSTER_CA_BUNDLE = env_str("KARPWEB_CLUSTER_CA_BUNDLE", "")
KARPWEB_CLUSTER_CIDR = env_str("KARPWEB_CLUSTER_CIDR", "")
KARPWEB_KUBERNETES_VERSION = env_str("KARPWEB_KUBERNETES_VERSION", "")
KARPWEB_CLUSTER_DNS = env_str("KARPWEB_CLUSTER_DNS", "")
# The watch process's batch window (Karpenter's BATCH_IDLE_DURATION and BATCH_MAX_DURATION).
KARPWEB_BATCH_IDLE_SECONDS = env_float("KARPWEB_BATCH_IDLE_SECONDS", 1.0, minimum=0.1, below=60)
KARPWEB_BATCH_MAX_SECONDS = env_float("KARPWEB_BATCH_MAX_SECONDS", 10.0, minimum=1, below=600)
# While the watch process runs, the periodic sync lists every kind only this often (the safety net).
KARPWEB_KUBERNETES_RESYNC_SECONDS = env_int("KARPWEB_KUBERNETES_RESYNC_SECONDS", 300, minimum=30)
# How often manage.py watch runs the lifecycle pass (drain, demotion, consolidation, drift, conditions)
# on its kept world; the beat's lifecycle task leaves it to the watch process while one runs.
KARPWEB_LIFECYCLE_SECONDS = env_int("KARPWEB_LIFECYCLE_SECONDS", 60, minimum=10)
# How often the watch process compares the world it keeps in memory with the database.
KARPWEB_KEPT_WORLD_CHECK_SECONDS = env_int("KARPWEB_KEPT_WORLD_CHECK_SECONDS", 600, minimum=10)
# Reservation recommendations (scheduling/engine/recommendations.py).
KARPWEB_RECOMMEND_SHRINK_WINDOW_DAYS = env_int("KARPWEB_RECOMMEND_SHRINK_WINDOW_DAYS", 14, minimum=1)
KARPWEB_RECOMMEND_HEADROOM_INSTANCES = env_int("KARPWEB_RECOMMEND_HEADROOM_INSTANCES", 1, minimum=0)
KARPWEB_RECOMMEND_HEADROOM_PERCENT = env_float("KARPWEB_RECOMMEND_HEADROOM_PERCENT", 10.0, minimum=0, below=1000)
# Buying Capacity Blocks for waiting GPU gangs (reservations/purchases.py): the most karpweb may spend on them, in
# dollars per AWS account over any 30 days (what it bought there in the window plus the next block). 0, the
# default, turns buying off: nobody spends money through karpweb until an administrator says how much.
KARPWEB_CAPACITY_BLOCK_SPEND_LIMIT = env_int("KARPWEB_CAPACITY_BLOCK_SPEND_LIMIT", 0, minimum=0)
KARPWEB_RECOMMEND_END_DATE_WARNING_DAYS = env_int("KARPWEB_RECOMMEND_END_DATE_WARNING_DAYS", 14, minimum=1)
# Lending idle units as interruptible capacity (#50): idle this many hours (and forecast to stay idle)
# before a lend is advised, keeping this many units back beyond the forecast peak.
KARPWEB_LEND_IDLE_HOURS = env_int("KARPWEB_LEND_IDLE_HOURS", 24, minimum=1)
KARPWEB_LEND_MARGIN_INSTANCES = env_int("KARPWEB_LEND_MARGIN_INSTANCES", 1, minimum=0)
# The pod label whose values the usage page holds reserved units by, beside the namespace (#48).
KARPWEB_TEAM_LABEL = env_label_key("KARPWEB_TEAM_LABEL", "team")
# How often the overview, node and reservation pages refresh themselves (static/js/refresh.js).
KARPWEB_PAGE_REFRESH_SECONDS = env_int("KARPWEB_PAGE_REFRESH_SECONDS", 30, minimum=5)
# How long before karpweb drains a Capacity Block that still runs instances the alert
# KarpwebCapacityBlockDrainingSoon fires (exported as karpweb_capacity_block_drain_warning_seconds).
KARPWEB_CAPACITY_BLOCK_DRAIN_WARNING_HOURS = env_int("KARPWEB_CAPACITY_BLOCK_DRAIN_WARNING_HOURS", 6, minimum=1)
# kube-scheduler's PodTopologySpread defaultConstraints, if the cluster's scheduler is configured with some (JSON list,
# e.g. [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "ScheduleAnyway"}]): pending
# pods without constraints of their own are planned with them, as kube-scheduler will place them (docs/simulate.md).
KARPWEB_DEFAULT_TOPOLOGY_SPREAD_CONSTRAINTS = env_spread_defaults("KARPWEB_DEFAULT_TOPOLOGY_SPREAD_CONSTRAINTS")
# Upstream's registrationTTL: how long a launched NodeClaim may wait for its node to register.
KARPWEB_REGISTRATION_TTL_MINUTES = env_int("KARPWEB_REGISTRATION_TTL_MINUTES", 15, minimum=1)
# Upstream's NodeRepair feature gate (off by default): replace a node unhealthy past its toleration
# (Ready False/Unknown 30 min, and the node monitoring agent's conditions) by deleting its NodeClaim.
KARPWEB_NODE_REPAIR = env_bool("KARPWEB_NODE_REPAIR", False)
# Instances karpweb launched that no NodeClaim holds are terminated once this old (garbage collection).
KARPWEB_INSTANCE_GC_GRACE_SECONDS = env_int("KARPWEB_INSTANCE_GC_GRACE_SECONDS", 120, minimum=30)
# Karpenter's INTERRUPTION_QUEUE: the SQS queue EventBridge sends EC2 interruption events to (name or URL).
KARPWEB_INTERRUPTION_QUEUE = env_str("KARPWEB_INTERRUPTION_QUEUE", "")
KARPWEB_FEATURE_RESERVED_CAPACITY = env_bool("KARPWEB_FEATURE_RESERVED_CAPACITY", True)
# Upstream's VM_MEMORY_OVERHEAD_PERCENT: the share of an instance type's memory a node does not report.
KARPWEB_VM_MEMORY_OVERHEAD_PERCENT = env_float("KARPWEB_VM_MEMORY_OVERHEAD_PERCENT", 0.075, minimum=0, below=1)
KARPWEB_AWS_REGION = env_str("KARPWEB_AWS_REGION", env_str("AWS_REGION", "us-east-1"))
KARPWEB_EC2_ENDPOINT_URL = env_url("KARPWEB_EC2_ENDPOINT_URL", None, ("http", "https"))
KARPWEB_KUBECONFIG = env_str("KUBECONFIG")
# The one directory a fleet cluster's kubeconfig path may name (blank: none; Secret references only),
# and whether those kubeconfigs may run a credential command (exec plugins): docs/security.md.
KARPWEB_KUBECONFIG_DIR = env_str("KARPWEB_KUBECONFIG_DIR", "")
KARPWEB_KUBECONFIG_ALLOW_EXEC = env_bool("KARPWEB_KUBECONFIG_ALLOW_EXEC", False)
KARPWEB_METRICS_TOKEN = env_str("KARPWEB_METRICS_TOKEN", "")
# Without a token /metrics answers 403, unless this says that anyone who reaches it may read it.
KARPWEB_METRICS_PUBLIC = env_bool("KARPWEB_METRICS_PUBLIC", False)
# Raw utilization samples (one per reservation per sync: 2,880 a day at 30 s) and their hourly roll-up.
KARPWEB_SAMPLE_RETENTION_DAYS = env_int("KARPWEB_SAMPLE_RETENTION_DAYS", 7, minimum=1)
KARPWEB_HOURLY_RETENTION_DAYS = env_int("KARPWEB_HOURLY_RETENTION_DAYS", 400, minimum=2)
# The loop's own history: task runs (about 15,000 a day) and decisions. Manual overrides (the audit log) are kept.
KARPWEB_TASK_RUN_RETENTION_DAYS = env_int("KARPWEB_TASK_RUN_RETENTION_DAYS", 14, minimum=1)
KARPWEB_DECISION_RETENTION_DAYS = env_int("KARPWEB_DECISION_RETENTION_DAYS", 90, minimum=1)

# API rate limits per client (scheduling/api/throttling.py): a signed-in user or token, and anonymous
# requests by address. "off" turns one off. Counted in the cache below, per process unless
# KARPWEB_CACHE_URL names a Redis that all web processes share.
KARPWEB_API_RATE = env_rate("KARPWEB_API_RATE", "600/min")
KARPWEB_API_ANON_RATE = env_rate("KARPWEB_API_ANON_RATE", "60/min")
# The engine endpoints' cost limit per user (karpweb/costlimit.py: simulate, the what-if pages), counted
# in the same cache: simulations running at once, and engine seconds in a clock minute.
KARPWEB_ENGINE_RUNS_PER_USER = env_int("KARPWEB_ENGINE_RUNS_PER_USER", 1, minimum=1)
KARPWEB_ENGINE_SECONDS_PER_MINUTE = env_int("KARPWEB_ENGINE_SECONDS_PER_MINUTE", 30, minimum=1)
KARPWEB_CACHE_URL = env_url("KARPWEB_CACHE_URL", None, ("redis", "rediss"))
CACHES = {
    "default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": KARPWEB_CACHE_URL}
    if KARPWEB_CACHE_URL
    else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
}

# API tokens (accounts/tokens.py): how long a new one lives. Keys are 64 hex characters after the
# "karpweb_" prefix (which lets secret scanners recognise a leaked one), stored as SHA-512 digests.
KARPWEB_API_TOKEN_DAYS = env_int("KARPWEB_API_TOKEN_DAYS", 90, minimum=1)
# How many live API tokens one user may hold, and make in an hour (accounts/tokens.py).
KARPWEB_API_TOKENS_PER_USER = env_int("KARPWEB_API_TOKENS_PER_USER", 10, minimum=1)
KARPWEB_API_TOKEN_CREATE_PER_HOUR = env_int("KARPWEB_API_TOKEN_CREATE_PER_HOUR", 20, minimum=1)
REST_KNOX = {
    "TOKEN_TTL": datetime.timedelta(days=KARPWEB_API_TOKEN_DAYS),
    "TOKEN_PREFIX": "karpweb_",
    "AUTO_REFRESH": False,  # an expiry is a date the owner can plan for, not a sliding window
}

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        # Token first: an unauthenticated request gets 401 with `WWW-Authenticate: Token`.
        "accounts.tokens.TokenAuthentication",
        "accounts.tokens.SessionAuthentication",
    ],
    # The UI's roles: viewers read, operators write (scheduling/api/permissions.py).
    "DEFAULT_PERMISSION_CLASSES": ["scheduling.api.permissions.IsOperatorOrReadOnly"],
    "DEFAULT_THROTTLE_CLASSES": ["scheduling.api.throttling.AnonRateThrottle", "scheduling.api.throttling.UserRateThrottle"],
    "DEFAULT_FILTER_BACKENDS": [
        "django_filters.rest_framework.DjangoFilterBackend",
        "rest_framework.filters.OrderingFilter",
    ],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    # ?limit=&offset=, 50 rows by default and at most 1000.
    "DEFAULT_PAGINATION_CLASS": "scheduling.api.pagination.BoundedLimitOffsetPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["scheduling.api.parsers.JSONBodyParser"],
    "EXCEPTION_HANDLER": "scheduling.api.exceptions.api_exception_handler",  # a JSON 413 for a large body
    "TEST_REQUEST_DEFAULT_FORMAT": "json",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "karpweb API",
    "DESCRIPTION": (
        "Kubernetes nodes on EC2 reserved capacity: reservations, node pools, decisions. "
        "Authenticate with `Authorization: Token <key>` (`manage.py api_token USER`) or a browser session. "
        "Viewers read; operators change EC2NodeClass selector terms and NodePool modes. See docs/api.md."
    ),
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SCHEMA_PATH_PREFIX": r"/api/v1",
    "COMPONENT_SPLIT_REQUEST": True,
    "ENUM_NAME_OVERRIDES": {
        "CapacityTypeEnum": "scheduling.models.CapacityType",
        "ModeEnum": "scheduling.models.Mode",
    },
    # Swagger UI at /api/docs/ only from local static files (drf-spectacular-sidecar), never a CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_choice("LOG_LEVEL", "INFO", ("DEBUG", "INFO", "WARNING", "ERROR"))},
    # Never below INFO, whatever LOG_LEVEL says: at DEBUG these log request headers (AWS signatures
    # with the access key id, Kubernetes bearer tokens) and bodies.
    "loggers": {
        **{name: {"level": "INFO"} for name in ("botocore", "boto3", "urllib3", "kubernetes", "s3transfer")},
        # django-axes announces itself at every start and each failed sign-in at INFO; lock-outs are WARNING.
        "axes": {"level": "WARNING"},
    },
}

# Probes and load balancers' health checks ask over plain HTTP, straight to the pod (whenever a
# redirect to https:// is on, DEBUG or not).
SECURE_REDIRECT_EXEMPT = [r"^healthz$"]
if not DEBUG:
    SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", True)
    CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", True)
    SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", False)
    SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31536000, minimum=0)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True
    if KARPWEB_TRUSTED_PROXY_HOPS:
        # Only a proxy karpweb trusts may say the client used HTTPS; without one, a client could
        # send the header itself and make a plain-HTTP request look secure.
        SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
