"""Timestamps as Kubernetes and EC2 write them, always handled as aware UTC datetimes."""

from __future__ import annotations

from datetime import datetime, timezone


def parse_optional_time(value: object) -> datetime | None:
    """parse_time for a field that may be missing or malformed in an object read from an API: None."""
    if not value:
        return None
    try:
        return parse_time(value)
    except ValueError:
        return None


def parse_time(value: object) -> datetime:
    """Parse RFC 3339 / ISO 8601 (`2026-11-21T12:00:00Z`, `...+00:00`, fractional seconds) or
    accept a datetime (boto3 returns those). A naive value is taken to be UTC. Raises ValueError."""
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, str):
        text = value.strip()
        if text.endswith(("z", "Z")):
            text = text[:-1] + "+00:00"
        moment = datetime.fromisoformat(text)
    else:
        raise ValueError(f"{value!r} is not a timestamp")
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.astimezone(timezone.utc)


def format_time(moment: datetime) -> str:
    """`2026-11-21T12:20:00Z`, the form Kubernetes writes (`metav1.Time`)."""
    moment = moment.astimezone(timezone.utc)
    text = moment.strftime("%Y-%m-%dT%H:%M:%S")
    if moment.microsecond:
        text += f".{moment.microsecond:06d}".rstrip("0")
    return text + "Z"


def utcnow() -> datetime:
    return datetime.now(timezone.utc)
