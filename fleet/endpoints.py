"""What may stand where a URL leaves karpweb: an API server nodes join and karpweb sends a bearer
token to. Pure (no Django): the model's validator, the user data builder and the EKS connection all
ask `endpoint_problem`, so one rule holds on every path (form, API, admin, settings, launch).

An API server URL is ``https://`` + a host name or IP address + an optional port, and nothing else:
no user info, path (a lone "/" is the root, as moto's DescribeCluster writes it), query, fragment,
quotes, spaces or control characters. That is the form EKS's
DescribeCluster gives (``https://0123456789ABCDEF0123456789ABCDEF.gr7.us-east-1.eks.amazonaws.com``)."""

from __future__ import annotations

import ipaddress
import re
from urllib.parse import urlsplit

# A kubeconfig kept in a Secret of karpweb's own cluster: "secret:<namespace>/<name>[/<key>]".
SECRET_REFERENCE = re.compile(r"^secret:([a-z0-9][-a-z0-9.]*)/([a-z0-9][-a-z0-9.]*)(?:/([-._a-zA-Z0-9]+))?$")
HOST_LABEL = re.compile(r"^(?!-)[A-Za-z0-9-]{1,63}(?<!-)$")
# What a URL may hold at all before it is taken apart: letters, digits and the few marks a host,
# an IPv6 address and a port need.
URL_CHARACTERS = re.compile(r"^[A-Za-z0-9.:/\[\]-]+$")


def endpoint_problem(value: object) -> str:
    """"" when `value` is an API server URL karpweb may connect to and nodes may join; else what is wrong."""
    if not isinstance(value, str) or not value:
        return "is empty"
    if not URL_CHARACTERS.match(value):
        return "may hold only https://, a host name or IP address and a port (no quotes, spaces, $, ;, @, ?, # or %)"
    if not value.startswith("https://"):
        return "must start with https:// (karpweb never sends a token over plain http)"
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError as exc:
        return f"is not a URL: {exc}"
    if parts.path not in ("", "/") or parts.query or parts.fragment or parts.username or parts.password:
        return "must be https:// and a host (and port) only, with no path"
    if port == 0:
        return "has port 0"
    host = parts.hostname or ""
    if not host:
        return "names no host"
    if _is_ip(host):
        return ""
    if len(host) > 253 or not all(HOST_LABEL.match(label) for label in host.split(".")):
        return f'host "{host}" is not a DNS name or an IP address'
    return ""


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True
