"""AMIs from an EC2NodeClass's ``amiSelectorTerms``, as Karpenter's AWS provider resolves them
(aws/karpenter-provider-aws `pkg/providers/amifamily/`): an ``alias`` (al2023, al2, bottlerocket,
windows2019/2022/2025 at
``latest`` or a pinned version) through the public SSM parameters, one image per architecture and
accelerator variant; ``id``, ``name`` (+ ``owner``), ``tags`` and ``ssmParameter`` through
DescribeImages. Terms are ORed, a term's fields ANDed. The list is newest first (non-deprecated,
then CreationDate, then Name) and each instance type takes the first image that fits it."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from scheduling.engine.ec2types import AL2, AL2023, BOTTLEROCKET, WINDOWS_BUILDS, alias_family

from .client import Caller
from .interface import CloudAPIError

STANDARD, NVIDIA, NEURON = "standard", "nvidia", "neuron"
ALIAS_TTL = timedelta(hours=24)  # upstream caches the alias parameters a day
TERMS_TTL = timedelta(minutes=5)
_ARCH = {"x86_64": "amd64", "arm64": "arm64"}
_EC2_ARCH = {"amd64": "x86_64", "arm64": "arm64"}


class AMIError(CloudAPIError):
    """The terms cannot give an image: ``code`` is the AMIsReady reason (AMINotFound, UnsupportedAlias)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(code, message, "describe_images")


@dataclass(frozen=True)
class Image:
    id: str
    name: str
    arch: str  # amd64 | arm64
    variant: str | None  # standard | nvidia | neuron; None: any (an image chosen by id, name or tags)
    created: str = ""
    deprecated: bool = False

    def status(self) -> dict[str, Any]:
        """An entry of EC2NodeClass ``status.amis``, with its requirements as upstream writes them."""
        requirements = [{"key": "kubernetes.io/arch", "operator": "In", "values": [self.arch]}]
        gpu, accelerator = "karpenter.k8s.aws/instance-gpu-count", "karpenter.k8s.aws/instance-accelerator-count"
        if self.variant == STANDARD:
            requirements += [{"key": gpu, "operator": "DoesNotExist"}, {"key": accelerator, "operator": "DoesNotExist"}]
        elif self.variant == NVIDIA:
            requirements.append({"key": gpu, "operator": "Exists"})
        elif self.variant == NEURON:
            requirements.append({"key": accelerator, "operator": "Exists"})
        return {"id": self.id, "name": self.name, "requirements": requirements,
                **({"deprecated": True} if self.deprecated else {})}


def variant_of(labels: Mapping[str, str]) -> str:
    """The image variant an instance type needs, from its well-known labels."""
    if labels.get("karpenter.k8s.aws/instance-gpu-count"):
        return NVIDIA
    if labels.get("karpenter.k8s.aws/instance-accelerator-count"):
        return NEURON
    return STANDARD


def image_for(images: Sequence[Image], arch: str, variant: str) -> Image | None:
    """The first image (the list is newest first) that runs on this architecture and variant."""
    return next((i for i in images if i.arch == arch and (i.variant is None or i.variant == variant)), None)


def alias_parameters(alias: str, k8s: str) -> list[tuple[str, str, str]]:
    """(arch, variant, SSM parameter name) for an alias such as ``al2023@latest`` on Kubernetes 1.N.
    Raises AMIError(UnsupportedAlias) for an alias upstream refuses."""
    family = alias_family(alias)
    version = alias.split("@", 1)[1] if "@" in alias else ""
    if family is None or not version:
        raise AMIError("UnsupportedAlias", f"alias {alias!r} is not family@version with a family of al2023, al2, "
                                           "bottlerocket, windows2019, windows2022 or windows2025")
    latest = version == "latest"
    minor = int(k8s.split(".")[1])
    if family == AL2023:
        base = f"/aws/service/eks/optimized-ami/{k8s}/amazon-linux-2023"
        pairs = [("x86_64", STANDARD), ("x86_64", NVIDIA), ("x86_64", NEURON), ("arm64", STANDARD), ("arm64", NVIDIA)]
        return [(_ARCH[a], v, f"{base}/{a}/{v}/{'recommended' if latest else f'amazon-eks-node-al2023-{a}-{v}-{k8s}-{version}'}/image_id")
                for a, v in pairs]
    if family == AL2:
        if minor >= 33:
            raise AMIError("UnsupportedAlias", f"alias {alias!r}: Amazon Linux 2 has no EKS images for Kubernetes {k8s} "
                                               "(1.33 and later); use al2023")
        base = f"/aws/service/eks/optimized-ami/{k8s}"
        rows = [("amd64", (STANDARD,), "amazon-linux-2", "amazon-eks-node"),
                ("arm64", (STANDARD,), "amazon-linux-2-arm64", "amazon-eks-arm64-node"),
                ("amd64", (NVIDIA, NEURON), "amazon-linux-2-gpu", "amazon-eks-gpu-node")]
        return [(arch, v, f"{base}/{path}/{'recommended' if latest else f'{prefix}-{k8s}-{version}'}/image_id")
                for arch, variants, path, prefix in rows for v in variants]
    if family == BOTTLEROCKET:
        tag = "latest" if latest else version.removeprefix("v")
        base = f"/aws/service/bottlerocket/aws-k8s-{k8s}"
        return [("amd64", STANDARD, f"{base}/x86_64/{tag}/image_id"), ("amd64", NEURON, f"{base}/x86_64/{tag}/image_id"),
                ("arm64", STANDARD, f"{base}/arm64/{tag}/image_id"),
                ("amd64", NVIDIA, f"{base}-nvidia/x86_64/{tag}/image_id"), ("arm64", NVIDIA, f"{base}-nvidia/arm64/{tag}/image_id")]
    year = family.removeprefix("Windows")
    if not latest:
        raise AMIError("UnsupportedAlias", f"alias {alias!r}: Windows aliases take only @latest")
    if family == "Windows2025" and minor < 35:
        raise AMIError("UnsupportedAlias", f"alias {alias!r}: Windows Server 2025 images need Kubernetes 1.35 or later")
    assert family in WINDOWS_BUILDS
    return [("amd64", STANDARD, f"/aws/service/ami-windows-latest/Windows_Server-{year}-English-Core-EKS_Optimized-{k8s}/image_id")]


def newest_first(images: Sequence[Image]) -> list[Image]:
    """Upstream's order (non-deprecated, then the newer CreationDate, then the greater Name), keeping
    one image per (architecture, variant): the first."""
    ordered = sorted(images, key=lambda i: (not i.deprecated, i.created, i.name), reverse=True)
    kept: dict[tuple[str, str | None], Image] = {}
    for image in ordered:
        kept.setdefault((image.arch, image.variant), image)
    return [image for image in ordered if kept[(image.arch, image.variant)] is image]


class AMIProvider:
    def __init__(self, ec2: Any, ssm: Any, call: Caller, clock: Callable[[], datetime]) -> None:
        self._ec2, self._ssm, self._call, self._clock = ec2, ssm, call, clock
        self._cache: dict[str, tuple[datetime, list[Image]]] = {}
        self._lock = threading.Lock()

    def resolve(self, terms: Sequence[Mapping[str, Any]], k8s: str) -> list[Image]:
        """Every image the terms select, newest first; raises AMIError when there is none."""
        key = json.dumps([terms, k8s], sort_keys=True)
        ttl = ALIAS_TTL if all("alias" in t for t in terms) else TERMS_TTL
        with self._lock:
            hit = self._cache.get(key)
            if hit and self._clock() - hit[0] < ttl:
                return hit[1]
        images: list[Image] = []
        for term in terms:
            images += self._alias(term["alias"], k8s) if "alias" in term else self._described(term)
        if not images:
            raise AMIError("AMINotFound", f"no available image matches amiSelectorTerms {json.dumps(list(terms))}")
        result = newest_first(images)
        with self._lock:
            self._cache[key] = (self._clock(), result)
        return result

    def _alias(self, alias: str, k8s: str) -> list[Image]:
        wanted = {}
        for arch, variant, name in alias_parameters(alias, k8s):
            image_id = self._parameter(name)
            if image_id:
                wanted.setdefault(image_id, []).append((arch, variant))
        if not wanted:
            return []
        described = {i["ImageId"]: i for i in self._describe(Filters=[{"Name": "image-id", "Values": sorted(wanted)}])}
        return [Image(image_id, described[image_id].get("Name", ""), arch, variant, described[image_id].get("CreationDate", ""),
                      bool(described[image_id].get("DeprecationTime")))
                for image_id, fits in wanted.items() if image_id in described for arch, variant in fits]

    def _parameter(self, name: str) -> str | None:
        try:
            value = self._call(self._ssm, "get_parameter", Name=name)["Parameter"]["Value"]
        except CloudAPIError as exc:
            if exc.code == "ParameterNotFound":
                return None  # not every family publishes every variant
            raise
        return value if value.startswith("ami-") else None

    def _described(self, term: Mapping[str, Any]) -> list[Image]:
        filters, owners = [], None
        if term.get("ssmParameter"):
            image_id = self._parameter(term["ssmParameter"])
            if not image_id:
                return []
            filters.append({"Name": "image-id", "Values": [image_id]})
        if term.get("id"):
            filters.append({"Name": "image-id", "Values": [term["id"]]})
        if term.get("name"):
            filters.append({"Name": "name", "Values": [term["name"]]})
            owners = [term["owner"]] if term.get("owner") else ["self", "amazon"]
        for key, value in (term.get("tags") or {}).items():
            filters.append({"Name": "tag-key", "Values": [key]} if value == "*" else {"Name": f"tag:{key}", "Values": [value]})
        if not filters:
            return []
        params: dict[str, Any] = {"Filters": filters}
        if owners:
            params["Owners"] = owners
        return [Image(i["ImageId"], i.get("Name", ""), _ARCH.get(i.get("Architecture", ""), i.get("Architecture", "")), None,
                      i.get("CreationDate", ""), bool(i.get("DeprecationTime")))
                for i in self._describe(**params) if i.get("Architecture") in _EC2_ARCH.values()]

    def _describe(self, **params: Any) -> list[dict[str, Any]]:
        params["Filters"] = [*params.get("Filters", []), {"Name": "state", "Values": ["available"]}]
        return self._call(self._ec2, "describe_images", IncludeDeprecated=True, **params).get("Images") or []
