"""Which Capacity Block offerings would hold a pending accelerator gang (issue #50, "Buy").

A gang is the pending pods of one workload that ask for accelerators (GPUs, Neuron, Gaudi): those of
one JobSet, LeaderWorkerSet or pod group (their labels say so), else those of one controller (a Job,
say), else a pod alone. Karpenter never buys capacity; karpweb says, for a gang the plan could not
place, which of EC2's Capacity Block offerings (DescribeCapacityBlockOfferings) would hold all of its
pods at once, from when, for how long and at what upfront fee, cheapest first. Pure: the offerings
come in as EC2 writes them, the gang's pods and the instance types as the engine has them."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal, InvalidOperation
from typing import Any, Iterable

from .cluster import Pod
from .ec2types import AMD_GPU, HABANA_GAUDI, NEURON, NEURON_CORE, NEURON_DEVICE, NVIDIA_GPU
from .instancetypes import InstanceType
from .labels import CAPACITY_TYPE, INSTANCE_LABELS, OFFERING_LABELS, RESERVATION_TYPE, RESERVED, ZONE
from .quantities import CPU, MEMORY, ResourceList
from .timeutil import parse_time

ACCELERATORS = (NVIDIA_GPU, AMD_GPU, HABANA_GAUDI, NEURON, NEURON_CORE, NEURON_DEVICE)
# Labels that name a gang, in the order they are looked for: JobSet, LeaderWorkerSet, the coscheduling
# plugin's and scheduler-plugins' pod groups.
GANG_LABELS = ("jobset.sigs.k8s.io/jobset-name", "leaderworkerset.sigs.k8s.io/name", "scheduling.x-k8s.io/pod-group",
               "pod-group.scheduling.sigs.k8s.io")
NODE_KEYS = INSTANCE_LABELS | OFFERING_LABELS


@dataclass(frozen=True)
class Gang:
    namespace: str
    name: str  # what groups it: "jobset/train", "Job/etl", or the pod's own name
    pods: tuple[Pod, ...]

    @property
    def accelerators(self) -> int:
        return sum(pod.requests.get(name, 0) for pod in self.pods for name in ACCELERATORS)


@dataclass(frozen=True)
class BlockOffering:
    offering_id: str
    instance_type: str
    zone: str
    count: int
    start: datetime
    end: datetime
    hours: int
    fee: Decimal
    ultraserver_type: str = ""
    ultraserver_count: int = 0


@dataclass(frozen=True)
class BuyOption:
    gang: Gang
    offering: BlockOffering
    nodes: int  # of the offering's instances, how many the gang's pods fill
    starts_in: timedelta

    @property
    def fee_per_instance_hour(self) -> Decimal:
        return (self.offering.fee / (self.offering.count * self.offering.hours)).quantize(Decimal("0.0001"))


def accelerator_gangs(pods: Iterable[Pod]) -> list[Gang]:
    """The pending pods that ask for accelerators, grouped into gangs (largest first)."""
    groups: dict[tuple[str, str], list[Pod]] = {}
    for pod in pods:
        if pod.node_name or not any(pod.requests.get(name, 0) for name in ACCELERATORS):
            continue
        groups.setdefault((pod.namespace, gang_name(pod)), []).append(pod)
    gangs = [Gang(namespace, name, tuple(sorted(members, key=lambda p: p.name))) for (namespace, name), members in groups.items()]
    return sorted(gangs, key=lambda g: (-g.accelerators, g.namespace, g.name))


def gang_name(pod: Pod) -> str:
    for label in GANG_LABELS:
        if pod.labels.get(label):
            return f"{label.split('/')[0].split('.')[0]}/{pod.labels[label]}"
    if pod.owner is not None:
        return f"{pod.owner[0]}/{pod.owner[1]}"
    return pod.name


def options(gang: Gang, offerings: list[BlockOffering], instance_types: dict[str, InstanceType],
            now: datetime) -> list[BuyOption]:
    """The offerings that would hold every pod of the gang at once, cheapest fee first, then earliest."""
    found = []
    for offering in offerings:
        it = instance_types.get(offering.instance_type)
        if it is None or offering.end <= now or not all(_allowed(pod, it, offering) for pod in gang.pods):
            continue
        nodes = nodes_needed(gang.pods, it.allocatable, offering.count)
        if nodes is not None:
            found.append(BuyOption(gang, offering, nodes, max(offering.start - now, timedelta(0))))
    return sorted(found, key=lambda o: (o.offering.fee, o.offering.start, o.offering.offering_id))


def _allowed(pod: Pod, it: InstanceType, offering: BlockOffering) -> bool:
    """Whether the pod's node selection admits a node of this offering (instance and offering labels only:
    the NodePool that would launch it adds its own)."""
    labels = block_labels(it.labels, offering.zone)
    for alternative in pod.alternatives:
        if all((req.admits_absent if labels.get(req.key) is None else req.has(labels[req.key]))
               for req in alternative if req.key in NODE_KEYS):
            return True
    return False


def nodes_needed(pods: tuple[Pod, ...], allocatable: ResourceList, count: int) -> int | None:
    """First-fit decreasing onto at most `count` nodes of `allocatable`: how many it fills, or None."""
    nodes: list[ResourceList] = []
    for pod in sorted(pods, key=lambda p: (-sum(p.requests.get(n, 0) for n in ACCELERATORS),
                                           -p.requests.get(CPU, 0), -p.requests.get(MEMORY, 0), p.name)):
        for i, used in enumerate(nodes):
            if used.add(pod.requests).fits(allocatable):
                nodes[i] = used.add(pod.requests)
                break
        else:
            if len(nodes) == count or not pod.requests.fits(allocatable):
                return None
            nodes.append(ResourceList(pod.requests))
    return len(nodes)


def parse_offerings(items: Any) -> list[BlockOffering]:
    """DescribeCapacityBlockOfferings' `CapacityBlockOfferings` (boto3's datetimes or RFC 3339 text);
    an item missing what an offering needs is skipped."""
    found = []
    for item in items or ():
        try:
            start, end = _time(item["StartDate"]), _time(item["EndDate"])
            found.append(BlockOffering(
                offering_id=str(item["CapacityBlockOfferingId"]), instance_type=str(item["InstanceType"]),
                zone=str(item["AvailabilityZone"]), count=int(item["InstanceCount"]), start=start, end=end,
                hours=int(item.get("CapacityBlockDurationHours") or round((end - start).total_seconds() / 3600)),
                fee=Decimal(str(item["UpfrontFee"])), ultraserver_type=str(item.get("UltraserverType") or ""),
                ultraserver_count=int(item.get("UltraserverCount") or 0)))
        except (KeyError, TypeError, ValueError, InvalidOperation):
            continue
    return [o for o in found if o.count > 0 and o.hours > 0]


def _time(value: Any) -> datetime:
    return value if isinstance(value, datetime) else parse_time(str(value))


# Instance types whose Capacity Blocks EC2 sells only inside UltraServers: UltraServer type and instances in one.
# A gang whose pods would run on one of them (their node selection admits it: a nodeSelector or affinity on
# node.kubernetes.io/instance-type or the instance family) is asked for UltraServer offerings, as many as hold its
# nodes. Karpenter has no UltraServer label of its own to read.
ULTRASERVER_TYPES = {"p6e-gb200.36xlarge": (("u-p6e-gb200x36", 9), ("u-p6e-gb200x72", 18)),
                     "trn2u.48xlarge": (("u-trn2x64", 4),)}


def ultraserver_asks(instance_type: str, nodes: int) -> list[tuple[str, int]]:
    """(UltraServer type, how many) holding `nodes` instances of an UltraServer-only type; [] for any other type."""
    return [(name, -(-nodes // size)) for name, size in ULTRASERVER_TYPES.get(instance_type, ())]


def admits_type(gang: Gang, it: InstanceType) -> bool:
    """Whether every pod's node selection admits the type (its instance labels only; zone and capacity come later)."""
    return all(any(all((req.admits_absent if it.labels.get(req.key) is None else req.has(it.labels[req.key]))
                       for req in alternative if req.key in INSTANCE_LABELS) for alternative in pod.alternatives)
               for pod in gang.pods)


def block_labels(type_labels: dict[str, str], zone: str) -> dict[str, str]:
    """The labels a node of a Capacity Block has: its instance type's, its zone, reserved capacity."""
    return {**type_labels, ZONE: zone, CAPACITY_TYPE: RESERVED, RESERVATION_TYPE: "capacity-block"}


def pool_admits(requirements: Iterable[Any], labels: dict[str, str]) -> bool:
    """Whether a NodePool's requirements (parsed) admit a node with these labels on the keys a block decides
    (instance, zone, capacity type); its other keys it gives its nodes itself."""
    return all((req.admits_absent if labels.get(req.key) is None else req.has(labels[req.key]))
               for req in requirements if req.key in NODE_KEYS)


@dataclass(frozen=True)
class Waiting:
    """Buying compared with waiting, for one offering: when the gang would run in the block, and what the same
    nodes would list at on demand for the block's hours where EC2 offers the type on demand now."""

    starts_in: timedelta
    hours: int
    fee: Decimal
    on_demand_cost: Decimal | None  # nodes x hours x the type's on-demand price; None: not offered on demand

    def words(self) -> str:
        start = "starts now" if self.starts_in <= timedelta(0) else f"runs in {_hours(self.starts_in)}"
        said = f"With the block the gang {start}, for {self.hours} h. "
        if self.on_demand_cost is None:
            return said + "Waiting: no capacity of this type is known to free up for it (not offered on demand)."
        return said + (f"Waiting: on-demand nodes of this type are offered (${self.on_demand_cost:,.2f} for the same "
                       f"{self.hours} h, against ${self.fee:,.2f}), but the plan could not place the gang there now.")


def compared_with_waiting(option_start: datetime, now: datetime, hours: int, fee: Decimal, nodes: int,
                          on_demand_price: float | None) -> Waiting:
    cost = None if on_demand_price is None else (Decimal(str(on_demand_price)) * nodes * hours).quantize(Decimal("0.01"))
    return Waiting(option_start - now, hours, fee, cost)


def _hours(delta: timedelta) -> str:
    hours, minutes = divmod(max(1, int(delta.total_seconds() // 60)), 60)
    return " ".join(part for part in (f"{hours} h" if hours else "", f"{minutes} min" if minutes else "") if part)
