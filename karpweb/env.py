"""Strict readers for settings that come from the environment.

A bad value stops start-up with ImproperlyConfigured naming the variable, so a typo in a
deployment never silently turns into a default.
"""

import json
import os
import re
from urllib.parse import urlparse

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def env_str(name: str, default: str | None = None, *, required: bool = False) -> str | None:
    value = os.environ.get(name)
    if value is None or value == "":
        if required:
            raise ImproperlyConfigured(f"{name} must be set")
        return default
    return value


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    lowered = value.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name}={value!r} is not a boolean (use true or false)")


def env_int(name: str, default: int, *, minimum: int | None = None) -> int:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    try:
        number = int(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={value!r} is not an integer") from None
    if minimum is not None and number < minimum:
        raise ImproperlyConfigured(f"{name}={number} must be at least {minimum}")
    return number


_LABEL_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
_LABEL_PREFIX = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def env_label_key(name: str, default: str) -> str:
    """A Kubernetes label key: an optional DNS-subdomain prefix and "/", then a name of at most 63
    characters (letters, digits, "-", "_", "."; a letter or digit at each end)."""
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    prefix, _, key = value.rpartition("/")
    if not _LABEL_NAME.match(key) or ("/" in value and (not prefix or len(prefix) > 253 or not _LABEL_PREFIX.match(prefix))):
        raise ImproperlyConfigured(f"{name}={value!r} is not a Kubernetes label key (such as team or example.com/team)")
    return value


def env_float(name: str, default: float, *, minimum: float, below: float) -> float:
    """A number in [minimum, below)."""
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    try:
        number = float(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={value!r} is not a number") from None
    if not minimum <= number < below:
        raise ImproperlyConfigured(f"{name}={value} must be at least {minimum} and below {below}")
    return number


def env_list(name: str, default: list[str]) -> list[str]:
    value = os.environ.get(name)
    if value is None:
        return default
    items = [item.strip() for item in value.split(",")]
    if any(not item for item in items):
        raise ImproperlyConfigured(f"{name}={value!r} has an empty entry")
    return items


def env_choice(name: str, default: str, choices: tuple[str, ...]) -> str:
    value = os.environ.get(name) or default
    if value not in choices:
        raise ImproperlyConfigured(f"{name}={value!r} must be one of: {', '.join(choices)}")
    return value


_RATE = re.compile(r"^[1-9][0-9]*/(s|sec|second|m|min|minute|h|hour|d|day)$")


def env_rate(name: str, default: str) -> str | None:
    """A request rate as DRF's throttles read it ("600/min", "10/s"), or None for "off"."""
    value = (os.environ.get(name) or default).strip()
    if value.lower() == "off":
        return None
    if not _RATE.match(value):
        raise ImproperlyConfigured(f"{name}={value!r} is not a rate like 600/min, 10/s or off")
    return value


def env_url(name: str, default: str | None, schemes: tuple[str, ...]) -> str | None:
    value = os.environ.get(name) or default
    if value is None:
        return None
    parsed = urlparse(value)
    if parsed.scheme not in schemes:
        raise ImproperlyConfigured(
            f"{name}={_redact(value)!r} must be a URL with scheme {' or '.join(schemes)}"
        )
    return value


def database_from_url(name: str, default: str) -> dict:
    """DATABASE_URL -> Django DATABASES entry, via dj-database-url, with a clear error."""
    import dj_database_url

    url = env_url(name, default, ("sqlite", "postgres", "postgresql", "pgsql"))
    try:
        config = dj_database_url.parse(url, conn_max_age=60, conn_health_checks=True)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} is not a usable database URL: {exc}") from None
    if config["ENGINE"] == "django.db.backends.sqlite3":
        config["CONN_MAX_AGE"] = 0
        # SQLite and several processes (web, worker, beat): wait for the lock instead of failing.
        # IMMEDIATE: take the write lock when a transaction starts, so that two writers wait for
        # each other instead of deadlocking on a read-to-write upgrade ("database is locked").
        config.setdefault("OPTIONS", {}).update(timeout=20, transaction_mode="IMMEDIATE")
        # Tests on a file, not the shared in-memory database: that one ignores the busy timeout
        # and fails concurrent writers with "database table is locked".
        # One file per test process, so that concurrent test runs never share one.
        config["TEST"] = {"NAME": f"{config['NAME']}.test-{os.getpid()}"}
    return config


def _redact(url: str) -> str:
    parsed = urlparse(url)
    if parsed.password:
        return url.replace(parsed.password, "***")
    return url


# What a secret key must not look like: a placeholder from a manifest or a tutorial.
PLACEHOLDER_WORDS = ("change-me", "changeme", "change_me", "replace-me", "replaceme", "your-secret", "secret-key-here",
                     "django-insecure")
MIN_SECRET_KEY_LENGTH = 50
MIN_SECRET_KEY_CHARACTERS = 5


def secret_key_problem(value: str) -> str:
    """Why a secret key is unfit to sign production sessions ("" if it is fit); never shows the key."""
    lowered = value.lower()
    if any(word in lowered for word in PLACEHOLDER_WORDS):
        return "is a placeholder, not a secret"
    if len(value) < MIN_SECRET_KEY_LENGTH:
        return f"is {len(value)} characters long; use at least {MIN_SECRET_KEY_LENGTH}"
    if len(set(value)) < MIN_SECRET_KEY_CHARACTERS:
        return f"has {len(set(value))} distinct characters; use at least {MIN_SECRET_KEY_CHARACTERS}"
    return ""


BINDING = re.compile(r"^([^=\s]+)=(viewer|operator)@(?:(fleet)|(cluster|account):([A-Za-z0-9-]{1,63}))$")


def env_bindings(name: str) -> list[tuple[str, str, str, str]]:
    """`group=role@cluster:NAME`, `group=role@account:ID` or `group=role@fleet`, comma-separated, as
    (group, role, kind, target)."""
    value = os.environ.get(name) or ""
    bindings = []
    for entry in (part.strip() for part in value.split(",") if part.strip()):
        match = BINDING.match(entry)
        if not match:
            raise ImproperlyConfigured(f"{name}: {entry!r} is not group=viewer|operator@cluster:NAME, "
                                       "@account:ID or @fleet")
        group, role, fleet, kind, target = match.groups()
        bindings.append((group, role, "fleet" if fleet else kind, target or ""))
    return bindings


def env_networks(name: str) -> list:
    """Comma-separated CIDR blocks (10.0.0.0/8, fd00::/8) as ipaddress networks."""
    import ipaddress

    networks = []
    for entry in env_list(name, []) if os.environ.get(name) else []:
        try:
            networks.append(ipaddress.ip_network(entry, strict=False))
        except ValueError as exc:
            raise ImproperlyConfigured(f"{name}: {entry!r} is not a CIDR block: {exc}") from None
    return networks


def env_spread_defaults(name: str) -> list[dict]:
    """kube-scheduler's PodTopologySpread `defaultConstraints` as JSON (a list of constraints without
    labelSelector), checked as the engine checks them; unset or empty: none."""
    from scheduling.engine.defaultspread import default_constraint_problems

    value = os.environ.get(name)
    if value is None or not value.strip():
        return []
    try:
        parsed = json.loads(value)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} is not JSON ({exc})") from None
    problems = default_constraint_problems(parsed)
    if problems:
        raise ImproperlyConfigured(f"{name}: " + "; ".join(problems))
    return parsed
