"""The instance profile a node runs with (aws/karpenter-provider-aws
``pkg/controllers/nodeclass/instanceprofile.go``): ``spec.instanceProfile`` as is; from
``spec.role``, the profile the class's ``status.instanceProfile`` names while it still holds that
role (as upstream reuses it, whoever created it: Karpenter or karpweb), else one karpweb creates and
tags as Karpenter names it: ``<cluster>_<number>`` under ``/karpenter/<region>/<cluster>/<EC2NodeClass
uid>/``, holding exactly that role. The number is a digest of region, class and role, so every
worker agrees on the name and a new role gets a new profile. Known profiles are kept 15 minutes, as
upstream caches GetInstanceProfile."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any

from .client import Caller
from .interface import CloudAPIError

CACHE = timedelta(minutes=15)


def profile_name(cluster: str, region: str, node_class: str, node_class_uid: str, role: str) -> str:
    digest = int.from_bytes(hashlib.sha256(f"{region}/{node_class}/{node_class_uid}/{role}".encode()).digest()[:8], "big")
    return f"{cluster}_{digest}"[:128]


def profile_tags(cluster: str, region: str, node_class: str, spec_tags: Mapping[str, str]) -> dict[str, str]:
    return {**spec_tags, f"kubernetes.io/cluster/{cluster}": "owned", "eks:eks-cluster-name": cluster,
            "karpenter.k8s.aws/ec2nodeclass": node_class, "topology.kubernetes.io/region": region}


class InstanceProfileProvider:
    def __init__(self, iam: Any, call: Caller, clock: Callable[[], datetime], region: str) -> None:
        self._iam, self._call, self._clock, self._region = iam, call, clock, region
        self._known: dict[str, tuple[datetime, str]] = {}
        self._lock = threading.Lock()

    def holds_role(self, name: str, role: str) -> bool:
        """Whether profile `name` exists and its (first) role is `role`: then the class keeps it."""
        role_name = role.rsplit("/", 1)[-1]
        with self._lock:
            hit = self._known.get(name)
            if hit and self._clock() - hit[0] < CACHE:
                return hit[1] == role_name
        try:
            profile = self._call(self._iam, "get_instance_profile", InstanceProfileName=name)["InstanceProfile"]
        except CloudAPIError as exc:
            if exc.code == "NoSuchEntity":
                return False
            raise
        roles = [r["RoleName"] for r in profile.get("Roles") or []]
        with self._lock:
            self._known[name] = (self._clock(), roles[0] if roles else "")
        return bool(roles) and roles[0] == role_name

    def find(self, *, cluster: str, node_class: str, node_class_uid: str, role: str) -> str | None:
        """The profile's name if it exists already (observe mode creates nothing)."""
        name = profile_name(cluster, self._region, node_class, node_class_uid, role)
        try:
            self._call(self._iam, "get_instance_profile", InstanceProfileName=name)
        except CloudAPIError as exc:
            if exc.code == "NoSuchEntity":
                return None
            raise
        return name

    def ensure(self, *, cluster: str, node_class: str, node_class_uid: str, role: str,
               spec_tags: Mapping[str, str]) -> str:
        """The profile's name, created (and its role set) if needed. Idempotent."""
        name = profile_name(cluster, self._region, node_class, node_class_uid, role)
        role_name = role.rsplit("/", 1)[-1]  # a role ARN or path: the profile takes the bare name
        with self._lock:
            hit = self._known.get(name)
            if hit and self._clock() - hit[0] < CACHE and hit[1] == role_name:
                return name
        try:
            profile = self._call(self._iam, "get_instance_profile", InstanceProfileName=name)["InstanceProfile"]
        except CloudAPIError as exc:
            if exc.code != "NoSuchEntity":
                raise
            tags = profile_tags(cluster, self._region, node_class, spec_tags)
            try:
                self._call(self._iam, "create_instance_profile", InstanceProfileName=name,
                           Path=f"/karpenter/{self._region}/{cluster}/{node_class_uid or node_class}/",
                           Tags=[{"Key": k, "Value": v} for k, v in sorted(tags.items())])
            except CloudAPIError as created:
                if created.code != "EntityAlreadyExists":  # another worker made it first
                    raise
            profile = {"Roles": []}
        roles = [r["RoleName"] for r in profile.get("Roles") or []]
        for other in roles:
            if other != role_name:
                self._call(self._iam, "remove_role_from_instance_profile", InstanceProfileName=name, RoleName=other)
        if role_name not in roles:
            try:
                self._call(self._iam, "add_role_to_instance_profile", InstanceProfileName=name, RoleName=role_name)
            except CloudAPIError as exc:
                if exc.code != "LimitExceeded":  # the role is already there (a concurrent worker)
                    raise
        with self._lock:
            self._known[name] = (self._clock(), role_name)
        return name
