"""The client's address, the one way every part of karpweb finds it: the sign-in lock-out
(AXES_CLIENT_IP_CALLABLE), the API's limiters and the audit log.

Behind KARPWEB_TRUSTED_PROXY_HOPS proxies (an ingress controller, a load balancer), REMOTE_ADDR is
the nearest proxy's and X-Forwarded-For ends with the addresses those proxies saw. Each trusted proxy
appends the address it received the request from, so the client is the entry `hops` places from the
right; anything further left was sent by the client and may be forged. With 0 hops (no proxy, the
default) X-Forwarded-For is ignored altogether."""

import ipaddress

from django.conf import settings


def client_address(request) -> str:
    """The address of whoever sent the request, as far as the trusted proxies vouch for it."""
    remote = request.META.get("REMOTE_ADDR") or ""
    hops = settings.KARPWEB_TRUSTED_PROXY_HOPS
    if hops <= 0 or not from_trusted_proxy(remote):
        return remote
    forwarded = [part.strip() for part in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if part.strip()]
    if not forwarded:
        return remote  # reached karpweb without passing the proxy (a probe inside the cluster)
    # Fewer entries than hops: the outermost proxy saw the client itself (DRF's NUM_PROXIES does the same).
    candidate = forwarded[-min(hops, len(forwarded))]
    return _valid_address(candidate) or remote


def from_trusted_proxy(remote: str) -> bool:
    """Whether the request came from a proxy's network (KARPWEB_TRUSTED_PROXY_CIDRS; blank: any)."""
    networks = getattr(settings, "KARPWEB_TRUSTED_PROXY_CIDRS", [])
    if not networks:
        return True
    address = _valid_address(remote)
    return address is not None and any(ipaddress.ip_address(address) in network for network in networks)


def _valid_address(text: str) -> str | None:
    """The address in canonical form, or None: whatever is stored or keyed on is a real address."""
    try:
        return str(ipaddress.ip_address(text[:64]))
    except ValueError:
        return None
