"""Subnets from an EC2NodeClass's ``subnetSelectorTerms`` (``id``, ``tags``; terms ORed), as
Karpenter's AWS provider finds them (aws/karpenter-provider-aws `pkg/providers/subnet/`):
``status.subnets`` sorted by free
addresses, most first, and per zone the subnet with the most free addresses for a launch."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from .client import Caller

REFRESH = timedelta(minutes=1)  # upstream's SUBNET_REFRESH_INTERVAL


@dataclass(frozen=True)
class Subnet:
    id: str
    zone: str
    zone_id: str
    available_ips: int

    def status(self) -> dict[str, str]:
        return {"id": self.id, "zone": self.zone, "zoneID": self.zone_id}


def tag_filters(tags: Mapping[str, str]) -> list[dict[str, Any]]:
    """EC2 filters for a selector term's tags: ``tag:K=V``, or ``tag-key`` for ``*``."""
    return [{"Name": "tag-key", "Values": [k]} if v == "*" else {"Name": f"tag:{k}", "Values": [v]}
            for k, v in tags.items()]


def per_zone(subnets: Sequence[Subnet]) -> dict[str, str]:
    """zone -> the subnet with the most free addresses (ties: the smaller id)."""
    best: dict[str, Subnet] = {}
    for subnet in subnets:
        current = best.get(subnet.zone)
        if current is None or (subnet.available_ips, current.id) > (current.available_ips, subnet.id):
            best[subnet.zone] = subnet
    return {zone: subnet.id for zone, subnet in best.items()}


class SubnetProvider:
    def __init__(self, ec2: Any, call: Caller, clock: Callable[[], datetime]) -> None:
        self._ec2, self._call, self._clock = ec2, call, clock
        self._cache: dict[str, tuple[datetime, list[Subnet]]] = {}
        self._lock = threading.Lock()

    def resolve(self, terms: Sequence[Mapping[str, Any]]) -> list[Subnet]:
        key = json.dumps(list(terms), sort_keys=True)
        with self._lock:
            hit = self._cache.get(key)
            if hit and self._clock() - hit[0] < REFRESH:
                return hit[1]
        found: dict[str, Subnet] = {}
        ids = [t["id"] for t in terms if t.get("id")]
        queries = ([[{"Name": "subnet-id", "Values": ids}]] if ids else []) + \
            [tag_filters(t["tags"]) for t in terms if t.get("tags") and not t.get("id")]
        for filters in queries:
            for item in self._call(self._ec2, "describe_subnets", Filters=filters).get("Subnets") or []:
                found[item["SubnetId"]] = Subnet(item["SubnetId"], item["AvailabilityZone"], item.get("AvailabilityZoneId", ""),
                                                 int(item.get("AvailableIpAddressCount") or 0))
        subnets = sorted(found.values(), key=lambda s: (-s.available_ips, s.id))
        with self._lock:
            self._cache[key] = (self._clock(), subnets)
        return subnets
