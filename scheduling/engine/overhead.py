"""What a node keeps for itself: kube-reserved, system-reserved and the hard eviction thresholds.

Defaults follow the EKS AMIs and the Karpenter AWS provider, so plans match what real nodes offer:
  kube-reserved cpu     6% of the first core, 1% of the second, 0.5% of cores 3-4, 0.25% above
  kube-reserved memory  11Mi per pod (max pods) + 255Mi
  kube-reserved ephemeral-storage 1Gi
  eviction              memory.available 100Mi, nodefs.available 10% (of ephemeral-storage)
  system-reserved       nothing
An EC2NodeClass's `spec.kubelet` (maxPods, podsPerCore, kubeReserved, systemReserved, evictionHard)
overrides these per key. The instance type's `memory` in WORLD.json is the node's capacity as the
kubelet reports it (no further VM overhead is taken off); types given as `describeInstanceTypes`
get the VM overhead taken off first (ec2types.node_memory_mib).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal

from .quantities import CPU, EPHEMERAL_STORAGE, MEMORY, PODS, ResourceList, parse_decimal, parse_quantity

MIB = 2**20
_CPU_STEPS = ((1000, Decimal("0.06")), (1000, Decimal("0.01")), (2000, Decimal("0.005")), (None, Decimal("0.0025")))
DEFAULT_EVICTION = {"memory.available": "100Mi", "nodefs.available": "10%"}
_EVICTION_RESOURCE = {"memory.available": MEMORY, "nodefs.available": EPHEMERAL_STORAGE}


@dataclass(frozen=True, slots=True)
class KubeletConfig:
    max_pods: int | None = None
    pods_per_core: int | None = None
    kube_reserved: ResourceList = field(default_factory=ResourceList)
    system_reserved: ResourceList = field(default_factory=ResourceList)
    eviction_hard: dict[str, str] = field(default_factory=dict)


def default_kube_reserved(cpu_millis: int, max_pods: int) -> ResourceList:
    reserved_cpu = Decimal(0)
    remaining = cpu_millis
    for width, share in _CPU_STEPS:
        step = remaining if width is None else min(remaining, width)
        reserved_cpu += step * share
        remaining -= step
        if remaining <= 0:
            break
    return ResourceList({
        CPU: int(reserved_cpu),
        MEMORY: (11 * max_pods + 255) * MIB,
        EPHEMERAL_STORAGE: 2**30,
    })


def eviction_threshold(capacity: ResourceList, eviction_hard: dict[str, str]) -> ResourceList:
    thresholds = ResourceList()
    for signal, resource in _EVICTION_RESOURCE.items():
        value = eviction_hard.get(signal, DEFAULT_EVICTION[signal])
        if value.endswith("%"):
            thresholds[resource] = int(capacity.get(resource, 0) * parse_decimal(value[:-1]) / 100)
        else:
            thresholds[resource] = parse_quantity(value)
    return thresholds


def allocatable(capacity: ResourceList, kubelet: KubeletConfig, kube_reserved_pods: int | None = None) -> ResourceList:
    """The room pods get on a node of this capacity. `kube_reserved_pods` is the pod count the
    default kube-reserved memory is sized by (the ENI limit on AL2023, see ec2types.node_shape)."""
    pods = kubelet.max_pods if kubelet.max_pods is not None else capacity.get(PODS, 110)
    kube_reserved = default_kube_reserved(capacity.get(CPU, 0), pods if kube_reserved_pods is None else kube_reserved_pods)
    kube_reserved.update(kubelet.kube_reserved)
    result = ResourceList(capacity)
    result[PODS] = pods
    result = result.sub(kube_reserved).sub(kubelet.system_reserved).sub(eviction_threshold(capacity, kubelet.eviction_hard))
    result[PODS] = pods
    return result
