"""Kubernetes API errors, turned into sentences an operator can act on.

Every call the adapter makes goes through :func:`describe_api_error` when it fails, so the decision
log says, for example, "NodeClaim default-abc: forbidden: karpweb's service account
(karpweb/karpweb) may not create nodeclaims.karpenter.sh" instead of a raw HTTP dump.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

import urllib3
from kubernetes.client.exceptions import ApiException

from .resources import Resource

# Verbs as RBAC names them, for the sentence "may not <verb> <resource>".
VERBS = ("get", "list", "watch", "create", "update", "patch", "delete", "deletecollection")


@dataclass
class ClusterError(Exception):
    """A failed Kubernetes API call. ``message`` is the operator-facing sentence."""

    message: str
    status: int = 0  # HTTP status; 0 when the API server could not be reached
    reason: str = ""  # Kubernetes' Status.reason: Forbidden, Conflict, NotFound, TooManyRequests, ...
    verb: str = ""
    subject: str = ""  # "NodeClaim default-abc"
    causes: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        super().__init__(self.message)

    def __str__(self) -> str:
        return self.message

    @property
    def conflict(self) -> bool:
        return self.status == 409 and self.reason != "AlreadyExists"

    @property
    def not_found(self) -> bool:
        return self.status == 404

    @property
    def too_many_requests(self) -> bool:
        return self.status == 429

    @property
    def unreachable(self) -> bool:
        return self.status == 0

    @property
    def retriable(self) -> bool:
        """Worth trying again later without changing anything."""
        return self.status in (0, 409, 429, 500, 502, 503, 504) and self.reason != "AlreadyExists"


class ResourceVersionExpired(Exception):
    """A watch asked for a resourceVersion etcd has compacted away (410 Gone): list again."""

    def __init__(self, kind: str, resource_version: str, message: str = "") -> None:
        super().__init__(f"{kind} watch from resourceVersion {resource_version} expired (410 Gone){': ' + message if message else ''}")
        self.kind = kind
        self.resource_version = resource_version


def _status_body(exc: ApiException) -> dict:
    body = getattr(exc, "body", None)
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    if not body:
        return {}
    try:
        parsed = json.loads(body)
    except ValueError:
        return {"message": body.strip()[:500]}
    return parsed if isinstance(parsed, dict) else {}


def _who(message: str) -> str:
    """The identity the API server names in a 403: 'karpweb's service account (ns/name)'."""
    match = re.search(r'User "([^"]+)"', message)
    if not match:
        return "karpweb's identity"
    user = match.group(1)
    if user.startswith("system:serviceaccount:"):
        namespace, _, name = user[len("system:serviceaccount:"):].partition(":")
        return f"karpweb's service account ({namespace}/{name})"
    if user == "system:anonymous":
        return "karpweb (not authenticated: the API server saw an anonymous request)"
    return f'karpweb\'s user "{user}"'


def describe_api_error(
    exc: BaseException, *, verb: str, resource: Resource, name: str | None = None, namespace: str | None = None,
    host: str = "",
) -> ClusterError:
    """Map any exception from a Kubernetes call to a :class:`ClusterError` with a clear message."""
    if isinstance(exc, ClusterError):
        return exc
    subject = resource.describe(name, namespace)
    what = f"{resource.qualified}"
    if not isinstance(exc, ApiException):
        where = f" at {host}" if host else ""
        detail = _connection_detail(exc)
        return ClusterError(
            f"{subject}: cannot reach the Kubernetes API server{where} to {verb} {what}: {detail}",
            status=0, reason="Unreachable", verb=verb, subject=subject,
        )
    status = int(exc.status or 0)
    body = _status_body(exc)
    server_message = str(body.get("message") or exc.reason or "").strip()
    reason = str(body.get("reason") or "")
    details = body.get("details") if isinstance(body.get("details"), dict) else {}
    causes = [
        f"{c.get('field') + ': ' if c.get('field') else ''}{c.get('message', '')}".strip()
        for c in (details.get("causes") or []) if isinstance(c, dict)
    ]

    if status == 0:
        message = f"{subject}: cannot talk to the Kubernetes API server{' at ' + host if host else ''}: {exc.reason}"
        reason = reason or "Unreachable"
    elif status == 401:
        message = (f"{subject}: unauthorized: the API server rejected karpweb's credentials "
                   "(expired or invalid token or client certificate); check the kubeconfig or service account")
        reason = reason or "Unauthorized"
    elif status == 403:
        message = f"{subject}: forbidden: {_who(server_message)} may not {verb} {what}"
        if resource.namespaced and namespace:
            message += f" in namespace {namespace}"
        message += "; grant it in karpweb's ClusterRole (docs/kubernetes.md lists the rules)"
        reason = reason or "Forbidden"
    elif status == 404 and not details.get("name") and not name_in(server_message, name):
        message = (f"{subject}: the {resource.api_version} {resource.kind} API is not served by this cluster; "
                   f"install the CustomResourceDefinitions (Karpenter's, or karpweb's deploy/crds/)"
                   if resource.group not in ("", "policy") else f"{subject}: not found: {server_message}")
        reason = reason or "NotFound"
    elif status == 404:
        message = f"{subject}: not found (deleted in the meantime?)"
        reason = reason or "NotFound"
    elif status == 409 and reason == "AlreadyExists":
        message = f"{subject}: already exists"
    elif status == 409:
        message = (f"{subject}: conflict: it was changed by someone else after karpweb read it, "
                   f"so the {verb} was refused rather than overwrite their change; re-read and try again")
        reason = reason or "Conflict"
    elif status == 410:
        message = f"{subject}: the resourceVersion karpweb used has expired (410 Gone); list again"
        reason = reason or "Expired"
    elif status == 422:
        message = f"{subject}: the API server rejected the {verb} as invalid"
        message += ": " + "; ".join(causes) if causes else f": {server_message}"
        reason = reason or "Invalid"
    elif status == 429:
        message = f"{subject}: {server_message or 'too many requests'}"
        if causes:
            message += " (" + "; ".join(causes) + ")"
        reason = reason or "TooManyRequests"
    elif status >= 500:
        message = f"{subject}: the API server failed to {verb} {what} (HTTP {status}): {server_message}"
        reason = reason or "InternalError"
    else:
        message = f"{subject}: {verb} {what} failed (HTTP {status}): {server_message}"
    return ClusterError(message, status=status, reason=reason, verb=verb, subject=subject, causes=causes)


def name_in(message: str, name: str | None) -> bool:
    return bool(name) and f'"{name}"' in message


def _connection_detail(exc: BaseException) -> str:
    if isinstance(exc, urllib3.exceptions.MaxRetryError) and exc.reason is not None:
        exc = exc.reason
    text = str(exc)
    if "Connection refused" in text:
        return "connection refused (is the API server running, and is the kubeconfig's server address right?)"
    if isinstance(exc, (urllib3.exceptions.ReadTimeoutError, urllib3.exceptions.ConnectTimeoutError, TimeoutError)):
        return "timed out"
    if isinstance(exc, urllib3.exceptions.SSLError):
        return f"TLS failed ({text}); check the certificate authority in the kubeconfig"
    return f"{type(exc).__name__}: {text}"
