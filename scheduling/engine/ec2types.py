"""Instance types from EC2's own answer, as Karpenter's AWS provider derives them.

`derive` turns one `DescribeInstanceTypes` entry (`InstanceTypeInfo`, as boto3 and
`aws ec2 describe-instance-types` write it) into the well-known labels and the resources a node of
that type reports (aws/karpenter-provider-aws `pkg/providers/instancetype/types.go`). It is the one
place this is computed: the EC2 sync,
the simulated world, `seed_demo`, the benchmarks and WORLD.json's `describeInstanceTypes` all call
it, so that a NodePool written for Karpenter selects the same types here.

Only two facts come from a table (`data/aws_instance_facts.json`), because EC2 does not report
them: the documented baseline network bandwidth (where the table has no entry, the sum of the
network cards' `BaselineBandwidthInGbps` is used instead, so a type launched after the table was
made still gets the label) and the branch-ENI count behind `vpc.amazonaws.com/pod-eni`. A table can
add a value; it never decides whether a type is usable.

Per EC2NodeClass (`NodeClassShape`), the AMI family and `spec.kubelet` then decide max pods, the
kube-reserved memory, the OS labels and the root volume (`node_shape`).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Mapping

from .labels import ARCH, INSTANCE_TYPE, OS, WINDOWS_BUILD
from .quantities import CPU, EPHEMERAL_STORAGE, MEMORY, PODS

K = "karpenter.k8s.aws/"
INSTANCE_CATEGORY = K + "instance-category"
INSTANCE_GENERATION = K + "instance-generation"
INSTANCE_FAMILY = K + "instance-family"
INSTANCE_SIZE = K + "instance-size"
INSTANCE_CPU = K + "instance-cpu"
INSTANCE_CPU_MANUFACTURER = K + "instance-cpu-manufacturer"
INSTANCE_CPU_CLOCK = K + "instance-cpu-sustained-clock-speed-mhz"
INSTANCE_MEMORY = K + "instance-memory"
INSTANCE_HYPERVISOR = K + "instance-hypervisor"
INSTANCE_ENCRYPTION_IN_TRANSIT = K + "instance-encryption-in-transit-supported"
INSTANCE_LOCAL_NVME = K + "instance-local-nvme"
INSTANCE_NETWORK_BANDWIDTH = K + "instance-network-bandwidth"
INSTANCE_EBS_BANDWIDTH = K + "instance-ebs-bandwidth"
INSTANCE_GPU_NAME = K + "instance-gpu-name"
INSTANCE_GPU_MANUFACTURER = K + "instance-gpu-manufacturer"
INSTANCE_GPU_COUNT = K + "instance-gpu-count"
INSTANCE_GPU_MEMORY = K + "instance-gpu-memory"
INSTANCE_ACCELERATOR_NAME = K + "instance-accelerator-name"
INSTANCE_ACCELERATOR_MANUFACTURER = K + "instance-accelerator-manufacturer"
INSTANCE_ACCELERATOR_COUNT = K + "instance-accelerator-count"
INSTANCE_CAPABILITY_FLEX = K + "instance-capability-flex"

NVIDIA_GPU = "nvidia.com/gpu"
AMD_GPU = "amd.com/gpu"
HABANA_GAUDI = "habana.ai/gaudi"
NEURON = "aws.amazon.com/neuron"
NEURON_CORE = "aws.amazon.com/neuroncore"
NEURON_DEVICE = "aws.amazon.com/neurondevice"
EFA = "vpc.amazonaws.com/efa"
POD_ENI = "vpc.amazonaws.com/pod-eni"
# Every extended resource a node of some type advertises (the device plugins' and the VPC resource
# controller's names); a pod asking for any of them fits only where the type has it.
EXTENDED_RESOURCES = (NVIDIA_GPU, AMD_GPU, HABANA_GAUDI, NEURON, NEURON_CORE, NEURON_DEVICE, EFA, POD_ENI)
ACCELERATOR_RESOURCES = (NVIDIA_GPU, AMD_GPU, HABANA_GAUDI, NEURON, NEURON_CORE, NEURON_DEVICE)
_GPU_RESOURCE = {"NVIDIA": NVIDIA_GPU, "AMD": AMD_GPU, "Habana": HABANA_GAUDI}

# Upstream's VM_MEMORY_OVERHEAD_PERCENT default: the share of memory the hypervisor and the kernel keep.
VM_MEMORY_OVERHEAD_PERCENT = 0.075
ARM64_CMA_MIB = 64  # Graviton reserves this much for the CMA, so the node reports less
MIB = 2**20
GIB = 2**30

_ARCHITECTURES = {"x86_64": "amd64", "arm64": "arm64"}
_CATEGORY_GENERATION = re.compile(r"(^[a-z]+)(-[0-9]+tb)?([0-9]+).*\.")

# AMI families (EC2NodeClass spec.amiFamily, or the family of an `alias` AMI selector term).
AL2, AL2023, BOTTLEROCKET, CUSTOM = "AL2", "AL2023", "Bottlerocket", "Custom"
WINDOWS_BUILDS = {"Windows2019": "10.0.17763", "Windows2022": "10.0.20348", "Windows2025": "10.0.26100"}
AMI_FAMILIES = (AL2, AL2023, BOTTLEROCKET, CUSTOM, *WINDOWS_BUILDS)
_ALIAS_FAMILIES = {f.lower(): f for f in (AL2, AL2023, BOTTLEROCKET, *WINDOWS_BUILDS)}
DEFAULT_ROOT_VOLUME = {"windows": 50 * GIB, "linux": 20 * GIB}
WINDOWS_MAX_PODS = 110


@cache
def aws_facts() -> dict[str, dict[str, int]]:
    return json.loads((Path(__file__).parent / "data" / "aws_instance_facts.json").read_text())


@dataclass(frozen=True, slots=True)
class DerivedType:
    """What Karpenter's AWS provider knows about one instance type, before any EC2NodeClass."""

    name: str
    labels: dict[str, str]
    vcpus: int
    memory_mib: int  # as EC2 reports it (the `instance-memory` label); see `node_memory_mib`
    architecture: str  # amd64 | arm64
    eni_limited_pods: int  # on the default network card, no ENI reserved
    resources: dict[str, int]  # extended resources the node advertises, non-zero only
    usage_classes: tuple[str, ...] = ()
    bare_metal: bool = False
    instance_store_gb: int = 0
    gpu_name: str = ""
    gpu_count: int = 0


def _get(raw: Mapping[str, Any], *path: str) -> Any:
    value: Any = raw
    for key in path:
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def _kebab(text: str) -> str:
    """Upstream's lowerKabobCase: `Inferentia2` -> `inferentia2`, `Radeon Pro V520` -> `radeon-pro-v520`."""
    return text.replace(" ", "-").lower()


def unusable_reason(raw: Mapping[str, Any]) -> str | None:
    """Why Karpenter would not list this type at all (its DescribeInstanceTypes filters), else None."""
    if "hvm" not in (raw.get("SupportedVirtualizationTypes") or ["hvm"]):
        return "does not support HVM virtualization"
    arches = _get(raw, "ProcessorInfo", "SupportedArchitectures") or []
    if not any(a in _ARCHITECTURES for a in arches):
        return f"architecture {', '.join(arches) or 'unknown'} is neither x86_64 nor arm64"
    return None


def eni_limited_pods(raw: Mapping[str, Any]) -> int:
    """The VPC CNI's limit: ENIs on the default network card x (IPv4 addresses per ENI - 1) + 2."""
    network = raw.get("NetworkInfo") or {}
    cards = network.get("NetworkCards") or []
    index = network.get("DefaultNetworkCardIndex") or 0
    card = next((c for c in cards if c.get("NetworkCardIndex", 0) == index), None)
    enis = int((card or {}).get("MaximumNetworkInterfaces") or network.get("MaximumNetworkInterfaces") or 0)
    addresses = int(network.get("Ipv4AddressesPerInterface") or 0)
    if enis <= 0 or addresses <= 0:
        return 0
    return enis * (addresses - 1) + 2


def network_bandwidth_mbps(raw: Mapping[str, Any]) -> int | None:
    """The documented baseline (upstream's table); else EC2's per-card baselines, summed."""
    name = raw.get("InstanceType") or ""
    documented = aws_facts()["networkBandwidthMbps"].get(name)
    if documented is not None:
        return documented
    baselines = [c.get("BaselineBandwidthInGbps") for c in _get(raw, "NetworkInfo", "NetworkCards") or []]
    if not baselines or any(b is None for b in baselines):
        return None
    return round(sum(baselines) * 1000)


def _labels(raw: Mapping[str, Any], name: str, vcpus: int, memory_mib: int, architecture: str) -> dict[str, str]:
    family_size = name.split(".")
    labels = {
        INSTANCE_TYPE: name,
        ARCH: architecture,
        OS: "linux",
        INSTANCE_CPU: str(vcpus),
        INSTANCE_MEMORY: str(memory_mib),
        INSTANCE_HYPERVISOR: raw.get("Hypervisor") or "",
        INSTANCE_ENCRYPTION_IN_TRANSIT: "true" if _get(raw, "NetworkInfo", "EncryptionInTransitSupported") else "false",
        INSTANCE_CAPABILITY_FLEX: "true" if "-flex" in family_size[0] else "false",
    }
    match = _CATEGORY_GENERATION.match(name)
    if match:
        labels[INSTANCE_CATEGORY], labels[INSTANCE_GENERATION] = match.group(1), match.group(3)
    if len(family_size) == 2:
        labels[INSTANCE_FAMILY], labels[INSTANCE_SIZE] = family_size
    processor = raw.get("ProcessorInfo")
    if isinstance(processor, Mapping):
        if processor.get("Manufacturer"):
            labels[INSTANCE_CPU_MANUFACTURER] = _kebab(processor["Manufacturer"])
        labels[INSTANCE_CPU_CLOCK] = str(round(float(processor.get("SustainedClockSpeedInGhz") or 0) * 1000))
    storage = raw.get("InstanceStorageInfo")
    if isinstance(storage, Mapping) and storage.get("NvmeSupport") != "unsupported" and storage.get("TotalSizeInGB") is not None:
        labels[INSTANCE_LOCAL_NVME] = str(storage["TotalSizeInGB"])
    bandwidth = network_bandwidth_mbps(raw)
    if bandwidth is not None:
        labels[INSTANCE_NETWORK_BANDWIDTH] = str(bandwidth)
    if _get(raw, "EbsInfo", "EbsOptimizedSupport") == "default":
        ebs = _get(raw, "EbsInfo", "EbsOptimizedInfo", "MaximumBandwidthInMbps")
        if ebs is not None:
            labels[INSTANCE_EBS_BANDWIDTH] = str(ebs)
    gpus = _get(raw, "GpuInfo", "Gpus") or []
    if len(gpus) == 1:
        gpu = gpus[0]
        labels[INSTANCE_GPU_NAME] = _kebab(gpu.get("Name") or "")
        labels[INSTANCE_GPU_MANUFACTURER] = _kebab(gpu.get("Manufacturer") or "")
        labels[INSTANCE_GPU_COUNT] = str(gpu.get("Count") or 0)
        labels[INSTANCE_GPU_MEMORY] = str(_get(gpu, "MemoryInfo", "SizeInMiB") or 0)  # per GPU, not the total
    neuron = _get(raw, "NeuronInfo", "NeuronDevices")
    accelerators = _get(raw, "InferenceAcceleratorInfo", "Accelerators") or []
    if neuron is not None:
        if len(neuron) == 1:
            labels[INSTANCE_ACCELERATOR_NAME] = _kebab(neuron[0].get("Name") or "")
            labels[INSTANCE_ACCELERATOR_MANUFACTURER] = "aws"
            labels[INSTANCE_ACCELERATOR_COUNT] = str(neuron[0].get("Count") or 0)
    elif len(accelerators) == 1:
        labels[INSTANCE_ACCELERATOR_NAME] = _kebab(accelerators[0].get("Name") or "")
        labels[INSTANCE_ACCELERATOR_MANUFACTURER] = _kebab(accelerators[0].get("Manufacturer") or "")
        labels[INSTANCE_ACCELERATOR_COUNT] = str(accelerators[0].get("Count") or 0)
    return labels


def _resources(raw: Mapping[str, Any], name: str) -> dict[str, int]:
    resources: dict[str, int] = {}
    for gpu in _get(raw, "GpuInfo", "Gpus") or []:
        resource = _GPU_RESOURCE.get(gpu.get("Manufacturer") or "")
        if resource:
            resources[resource] = resources.get(resource, 0) + int(gpu.get("Count") or 0)
    devices = _get(raw, "NeuronInfo", "NeuronDevices") or []
    if devices:
        count = sum(int(d.get("Count") or 0) for d in devices)
        resources[NEURON] = count
        resources[NEURON_DEVICE] = count  # the Neuron device plugin advertises both names
        resources[NEURON_CORE] = int(devices[0].get("Count") or 0) * int(_get(devices[0], "CoreInfo", "Count") or 0)
    efa = _get(raw, "NetworkInfo", "EfaInfo", "MaximumEfaInterfaces")
    if efa:
        resources[EFA] = int(efa)
    branches = aws_facts()["branchInterfaces"].get(name)
    if branches:
        resources[POD_ENI] = branches
    return {k: v for k, v in resources.items() if v > 0}


def derive(raw: Mapping[str, Any]) -> DerivedType:
    """Labels and resources of one `InstanceTypeInfo`. Raises ValueError naming a missing field."""
    name = raw.get("InstanceType")
    if not isinstance(name, str) or not name:
        raise ValueError("InstanceType is required")
    vcpus = _get(raw, "VCpuInfo", "DefaultVCpus")
    memory_mib = _get(raw, "MemoryInfo", "SizeInMiB")
    if not isinstance(vcpus, int) or vcpus <= 0:
        raise ValueError("VCpuInfo.DefaultVCpus must be a positive integer")
    if not isinstance(memory_mib, int) or memory_mib <= 0:
        raise ValueError("MemoryInfo.SizeInMiB must be a positive integer")
    arches = _get(raw, "ProcessorInfo", "SupportedArchitectures") or ["x86_64"]
    architecture = next((_ARCHITECTURES[a] for a in arches if a in _ARCHITECTURES), str(arches[0]))
    gpus = _get(raw, "GpuInfo", "Gpus") or []
    storage = raw.get("InstanceStorageInfo") or {}
    return DerivedType(
        name=name,
        labels=_labels(raw, name, vcpus, memory_mib, architecture),
        vcpus=vcpus,
        memory_mib=memory_mib,
        architecture=architecture,
        eni_limited_pods=eni_limited_pods(raw) or WINDOWS_MAX_PODS,  # no network info: the kubelet default
        resources=_resources(raw, name),
        usage_classes=tuple(raw.get("SupportedUsageClasses") or ()),
        bare_metal=bool(raw.get("BareMetal")),
        instance_store_gb=int(storage.get("TotalSizeInGB") or 0),
        gpu_name=(gpus[0].get("Name") or "") if gpus else "",
        gpu_count=sum(int(g.get("Count") or 0) for g in gpus),
    )


def node_memory_mib(memory_mib: int, architecture: str, overhead_percent: float = VM_MEMORY_OVERHEAD_PERCENT) -> int:
    """The memory a node of this type reports: less the Graviton CMA and the VM overhead."""
    usable = memory_mib - (ARM64_CMA_MIB if architecture == "arm64" else 0)
    return usable - math.ceil(usable * overhead_percent)


def capacity(derived: DerivedType, overhead_percent: float = VM_MEMORY_OVERHEAD_PERCENT) -> dict[str, int]:
    """The node's capacity in the engine's units (millicores, bytes), before any EC2NodeClass:
    max pods is the ENI limit, ephemeral storage the default root volume."""
    result = {
        CPU: derived.vcpus * 1000,
        MEMORY: node_memory_mib(derived.memory_mib, derived.architecture, overhead_percent) * MIB,
        PODS: derived.eni_limited_pods,
        EPHEMERAL_STORAGE: DEFAULT_ROOT_VOLUME["linux"],
    }
    result.update(derived.resources)
    return result


# Per EC2NodeClass ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class NodeClassShape:
    """What of an EC2NodeClass changes the nodes' shape (beyond kube-reserved and eviction)."""

    ami_family: str = AL2023
    instance_store_raid0: bool = False  # spec.instanceStorePolicy RAID0
    root_volume_bytes: int | None = None  # the blockDeviceMappings entry marked rootVolume

    @property
    def windows_build(self) -> str | None:
        return WINDOWS_BUILDS.get(self.ami_family)


def ami_family(spec: Mapping[str, Any]) -> str | None:
    """`spec.amiFamily`, else the family of the first `alias` AMI selector term; None when neither."""
    family = spec.get("amiFamily")
    if isinstance(family, str) and family:
        return family
    for term in spec.get("amiSelectorTerms") or ():
        alias = term.get("alias") if isinstance(term, Mapping) else None
        if isinstance(alias, str) and "@" in alias:
            return _ALIAS_FAMILIES.get(alias.split("@", 1)[0])
    return None


def alias_family(alias: str) -> str | None:
    """The AMI family of an `alias` term such as `al2023@latest`, None when unknown."""
    return _ALIAS_FAMILIES.get(alias.split("@", 1)[0]) if alias.count("@") == 1 else None


@dataclass(frozen=True, slots=True)
class NodeShape:
    pods: int
    kube_reserved_pods: int  # the pods kube-reserved memory is computed from
    ephemeral_storage: int | None  # None: the type's own (the default root volume)
    labels: dict[str, str]


def node_shape(eni_pods: int, vcpus: int, instance_store_gb: int, architecture: str, shape: NodeClassShape,
               max_pods: int | None = None, pods_per_core: int | None = None) -> NodeShape | None:
    """Max pods, kube-reserved's pod count, root volume and OS labels of one type under one
    EC2NodeClass (upstream `pods`, `kubeReservedResources`, `ephemeralStorage`, `getOS`); None
    when the class cannot run the type (Windows on arm64)."""
    windows = shape.windows_build is not None
    if windows and architecture != "amd64":
        return None
    if max_pods is not None:
        pods = max_pods
    elif windows:
        pods = WINDOWS_MAX_PODS
    else:
        pods = eni_pods
    if pods_per_core and shape.ami_family != BOTTLEROCKET:
        pods = min(pods, pods_per_core * vcpus)
    # AL2, AL2023 and Custom size kube-reserved memory by the ENI limit, whatever maxPods says.
    reserved_pods = eni_pods if shape.ami_family in (AL2, AL2023, CUSTOM) else pods
    if shape.instance_store_raid0 and instance_store_gb:
        ephemeral = instance_store_gb * 10**9
    elif shape.root_volume_bytes is not None:
        ephemeral = shape.root_volume_bytes
    else:
        ephemeral = DEFAULT_ROOT_VOLUME["windows"] if windows else None
    labels = {OS: "windows", WINDOWS_BUILD: shape.windows_build} if windows else {}
    return NodeShape(pods, reserved_pods, ephemeral, labels)
