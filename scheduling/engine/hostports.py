"""Host ports: on one node, each (hostIP, hostPort, protocol) the pods there use must be unique
(kube-scheduler's NodePorts filter; upstream Karpenter `pkg/scheduling/hostportusage.go` keeps
pods whose ports would clash off one node claim and off an existing node)."""

from __future__ import annotations

import ipaddress
from typing import Callable, Iterable, NamedTuple

PROTOCOLS = ("TCP", "UDP", "SCTP")
UNSPECIFIED = ""  # hostIP "", 0.0.0.0 or ::: every address of the node


class HostPort(NamedTuple):
    ip: str  # normalised address, UNSPECIFIED for every address
    port: int
    protocol: str

    def clashes(self, other: "HostPort") -> bool:
        """Same port and protocol, on the same address or where either takes every address."""
        return (self.port == other.port and self.protocol == other.protocol
                and (self.ip == other.ip or UNSPECIFIED in (self.ip, other.ip)))

    def __str__(self) -> str:
        return f"{self.ip or '0.0.0.0'}:{self.port}/{self.protocol}"


def parse_host_ports(containers: Iterable[tuple[str, object]], problem: Callable[[str, str], None]) -> tuple[HostPort, ...]:
    """The host ports of a pod's containers, given as (JSON path, container) pairs. Like upstream,
    only `containers` count (init containers have finished before the pod runs)."""
    found = []
    for path, container in containers:
        ports = container.get("ports") if isinstance(container, dict) else None
        if not isinstance(ports, list):
            continue
        for index, entry in enumerate(ports):
            if isinstance(entry, dict) and entry.get("hostPort") not in (None, 0):
                port = _host_port(entry, f"{path}.ports[{index}]", problem)
                if port is not None:
                    found.append(port)
    return tuple(found)


def _host_port(entry: dict, path: str, problem: Callable[[str, str], None]) -> HostPort | None:
    number, protocol, address = entry.get("hostPort"), entry.get("protocol") or "TCP", entry.get("hostIP") or ""
    if isinstance(number, bool) or not isinstance(number, int) or not 0 < number < 65536:
        problem(f"{path}.hostPort", f"expected a port number from 1 to 65535, got {number!r}")
        return None
    if protocol not in PROTOCOLS:
        problem(f"{path}.protocol", f"{protocol!r} is not one of {', '.join(PROTOCOLS)}")
        return None
    try:
        ip = ipaddress.ip_address(address) if address else None
    except (ValueError, TypeError):
        problem(f"{path}.hostIP", f"{address!r} is not an IP address")
        return None
    return HostPort(UNSPECIFIED if ip is None or ip.is_unspecified else str(ip), number, protocol)


def host_port_conflict(wanted: tuple[HostPort, ...], used: tuple[HostPort, ...]) -> str | None:
    """Why a pod asking for `wanted` cannot join pods already using `used`, or None."""
    for port in wanted:
        for taken in used:
            if port.clashes(taken):
                return f"host port {port} conflicts with {taken} of a pod already there"
    return None
