"""Security groups from an EC2NodeClass's ``securityGroupSelectorTerms`` (``id``, ``name``,
``tags``; terms ORed), as Karpenter's AWS provider finds them (aws/karpenter-provider-aws
`pkg/providers/securitygroup/`): all of
them go on the instance's network interface; ``status.securityGroups`` sorted by id."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from .client import Caller
from .subnets import tag_filters

REFRESH = timedelta(minutes=5)


@dataclass(frozen=True)
class SecurityGroup:
    id: str
    name: str

    def status(self) -> dict[str, str]:
        return {"id": self.id, "name": self.name}


class SecurityGroupProvider:
    def __init__(self, ec2: Any, call: Caller, clock: Callable[[], datetime]) -> None:
        self._ec2, self._call, self._clock = ec2, call, clock
        self._cache: dict[str, tuple[datetime, list[SecurityGroup]]] = {}
        self._lock = threading.Lock()

    def resolve(self, terms: Sequence[Mapping[str, Any]]) -> list[SecurityGroup]:
        key = json.dumps(list(terms), sort_keys=True)
        with self._lock:
            hit = self._cache.get(key)
            if hit and self._clock() - hit[0] < REFRESH:
                return hit[1]
        found: dict[str, SecurityGroup] = {}
        for term in terms:
            filters = tag_filters(term.get("tags") or {})
            if term.get("id"):
                filters.append({"Name": "group-id", "Values": [term["id"]]})
            if term.get("name"):
                filters.append({"Name": "group-name", "Values": [term["name"]]})
            if not filters:
                continue
            for item in self._call(self._ec2, "describe_security_groups", Filters=filters).get("SecurityGroups") or []:
                found[item["GroupId"]] = SecurityGroup(item["GroupId"], item.get("GroupName", ""))
        groups = sorted(found.values(), key=lambda g: g.id)
        with self._lock:
            self._cache[key] = (self._clock(), groups)
        return groups
