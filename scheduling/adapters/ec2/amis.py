"""AMIs from an EC2NodeClass's ``amiSelectorTerms``, as Karpenter's AWS provider resolves them
(aws/karpenter-provider-aws ``pkg/providers/amifamily/``): an ``alias`` (al2023, al2, bottlerocket, windows2019/2022/2025 at
``latest`` or a pinned version) through the public SSM parameters, one image per architecture and
accelerator variant; ``id``, ``name`` (+ ``owner``), ``tags`` and ``ssmParameter`` through
DescribeImages. Terms are ORed, a term's fields ANDed.

As upstream (``pkg/providers/amifamily/ami.go``): an image is deprecated only once its
DeprecationTime has passed (AWS gives public images a future one by default); per requirement set
(architecture and variant, or the Windows build) the best image wins: not deprecated, then the
newer CreationDate, then the greater Name. The list is then ordered newest CreationDate first (ties
by id) and each instance type takes the first image that fits it."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
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
    windows_build: str | None = None  # a Windows alias image: it runs only on that OS and build

    def status(self) -> dict[str, Any]:
        """An entry of EC2NodeClass ``status.amis``, with its requirements as upstream writes them."""
        requirements = [{"key": "kubernetes.io/arch", "operator": "In", "values": [self.arch]}]
        if self.windows_build:
            requirements += [{"key": "kubernetes.io/os", "operator": "In", "values": ["windows"]},
                             {"key": "node.kubernetes.io/windows-build", "operator": "In", "values": [self.windows_build]}]
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


def alias_parameters(alias: str, k8s: str) -> list[tuple[str, str | None, str]]:
    """(arch, variant, SSM parameter name) for an alias such as ``al2023@latest`` on Kubernetes 1.N
    (variant None for Windows, whose image's requirements are its OS and build).
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
    return [("amd64", None, f"/aws/service/ami-windows-latest/Windows_Server-{year}-English-Core-EKS_Optimized-{k8s}/image_id")]


def parse_time(text: str | None) -> datetime | None:
    """An EC2 timestamp (``2026-11-01T00:00:00.000Z``), None when absent or unreadable."""
    if not text:
        return None
    try:
        parsed = datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)


def is_deprecated(deprecation_time: str | None, now: datetime) -> bool:
    """Deprecated once the DeprecationTime is reached; a future one (public images carry one from
    the day they are published) is not deprecation yet."""
    when = parse_time(deprecation_time)
    return when is not None and when <= now


def _better(candidate: Image, kept: Image) -> bool:
    """Upstream's compareAMI: not deprecated first, then the newer CreationDate, then the greater Name."""
    def rank(image: Image) -> tuple:
        created = parse_time(image.created)
        return (not image.deprecated, created.timestamp() if created else float("-inf"), image.name)
    return rank(candidate) > rank(kept)


def newest_first(images: Sequence[Image]) -> list[Image]:
    """One image per requirement set (the best, by ``_better``), then newest CreationDate first,
    ties by id: the order of ``status.amis`` and of the choice per instance type."""
    kept: dict[tuple[str, str | None, str | None], Image] = {}
    for image in images:
        key = (image.arch, image.variant, image.windows_build)
        if key not in kept or _better(image, kept[key]):
            kept[key] = image

    def order(image: Image) -> tuple:
        created = parse_time(image.created)
        return (-(created.timestamp()) if created else float("inf"), image.id)
    return sorted(kept.values(), key=order)


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
        build = WINDOWS_BUILDS.get(alias_family(alias) or "")
        now = self._clock()
        return [Image(image_id, described[image_id].get("Name", ""), arch, variant, described[image_id].get("CreationDate", ""),
                      is_deprecated(described[image_id].get("DeprecationTime"), now), build)
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
        now = self._clock()
        return [Image(i["ImageId"], i.get("Name", ""), _ARCH.get(i.get("Architecture", ""), i.get("Architecture", "")), None,
                      i.get("CreationDate", ""), is_deprecated(i.get("DeprecationTime"), now))
                for i in self._describe(**params) if i.get("Architecture") in _EC2_ARCH.values()]

    def _describe(self, **params: Any) -> list[dict[str, Any]]:
        params["Filters"] = [*params.get("Filters", []), {"Name": "state", "Values": ["available"]}]
        return self._call(self._ec2, "describe_images", IncludeDeprecated=True, **params).get("Images") or []


def bottlerocket_version(terms: Sequence[Mapping[str, Any]], images: Sequence[Image]) -> str:
    """The Bottlerocket version a class launches, as upstream finds it (amifamily/bottlerocket.go
    ``resolveAMIVersion``): an alias's version, else a ``v1.2.3`` part of a name term, else of the
    name of the image an id term selects, else of any resolved Bottlerocket image's name; "" when
    none says (RAID0 then binds explicit directories, which every version accepts)."""
    for term in terms:
        if term.get("alias") and term["alias"].count("@") == 1:
            return term["alias"].split("@", 1)[1]
    for term in terms:
        if term.get("name") and (version := _version_in(term["name"])):
            return version
    names = {image.id: image.name for image in images}
    for term in terms:
        name = names.get(term.get("id") or "", "")
        if "bottlerocket" in name and (version := _version_in(name)):
            return version
    for image in images:
        if "bottlerocket" in image.name and (version := _version_in(image.name)):
            return version
    return ""


def _version_in(name: str) -> str:
    return next((part for part in name.split("-") if part.startswith("v") and "." in part), "")
