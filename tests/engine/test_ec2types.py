"""Instance types derived from DescribeInstanceTypes, checked against EC2's own answers.

The answers are moto's instance-type data, which is AWS's DescribeInstanceTypes output (the EC2 test
server serves the same file); the expected values are Karpenter's AWS provider's for the same types
(aws/karpenter-provider-aws `website/content/en/preview/reference/instance-types.md`, generated from
the provider)."""

from __future__ import annotations

import gzip
import json
from functools import cache
from pathlib import Path

import moto
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st


from scheduling.engine import parse_world, simulate
from scheduling.engine.ec2types import (
    BOTTLEROCKET, NodeClassShape, capacity, derive, node_memory_mib, node_shape, unusable_reason,
)
from scheduling.engine.requirements import Requirement
from scheduling.engine.world import WorldError
from tests.support.properties import examples

K = "karpenter.k8s.aws/"
MIB = 2**20


@cache
def described() -> dict[str, dict]:
    path = Path(moto.__file__).parent / "ec2" / "resources" / "instance_types.json.gz"
    return json.loads(gzip.decompress(path.read_bytes()))


# type: (category, generation, family, size, cpu, memory MiB, cpu manufacturer, encryption in transit,
#        ebs bandwidth, network bandwidth, local nvme, gpu (name, manufacturer, count, memory) or accelerator
#        (name, manufacturer, count), flex)
GOLDEN = {
    "m5.large": ("m", "5", "m5", "large", "2", "8192", "intel", "false", "4750", "750", None, None, None, "false"),
    "c7g.xlarge": ("c", "7", "c7g", "xlarge", "4", "8192", "aws", "true", "10000", "1876", None, None, None, "false"),
    "c6id.2xlarge": ("c", "6", "c6id", "2xlarge", "8", "16384", "intel", "true", "10000", "3125", "474", None, None, "false"),
    "r7iz.large": ("r", "7", "r7iz", "large", "2", "16384", "intel", "true", "10000", "781", None, None, None, "false"),
    "m7i-flex.large": ("m", "7", "m7i-flex", "large", "2", "8192", "intel", "true", "10000", "390", None, None, None, "true"),
    "g5.2xlarge": ("g", "5", "g5", "2xlarge", "8", "32768", "amd", "true", "3500", "5000", "450",
                   ("a10g", "nvidia", "1", "22888"), None, "false"),
    "g6e.xlarge": ("g", "6", "g6e", "xlarge", "4", "32768", "amd", "true", "5000", "2500", "250",
                   ("l40s", "nvidia", "1", "45776"), None, "false"),
    "p5.48xlarge": ("p", "5", "p5", "48xlarge", "192", "2097152", "amd", "true", "80000", "3200000", "30400",
                    ("h100", "nvidia", "8", "81920"), None, "false"),
    "inf2.xlarge": ("inf", "2", "inf2", "xlarge", "4", "16384", "amd", "true", "10000", "2083", None, None,
                    ("inferentia2", "aws", "1"), "false"),
    "trn1.32xlarge": ("trn", "1", "trn1", "32xlarge", "128", "524288", "intel", "true", "80000", "800000", "7600", None,
                      ("trainium", "aws", "16"), "false"),
}

# type: (max pods, extended resources, allocatable cpu millicores, allocatable memory MiB) under AL2023 defaults
ALLOCATABLE = {
    "m5.large": (29, {"vpc.amazonaws.com/pod-eni": 9}, 1930, 6903),
    "c7g.xlarge": (58, {"vpc.amazonaws.com/pod-eni": 18}, 3920, 6525),
    "p5.48xlarge": (100, {"nvidia.com/gpu": 8, "vpc.amazonaws.com/efa": 32, "vpc.amazonaws.com/pod-eni": 120}, 191450, 1938410),
    "g5.2xlarge": (58, {"nvidia.com/gpu": 1, "vpc.amazonaws.com/pod-eni": 17}, 7910, 29317),
    "inf2.xlarge": (58, {"aws.amazon.com/neuron": 1, "aws.amazon.com/neurondevice": 1, "aws.amazon.com/neuroncore": 2,
                         "vpc.amazonaws.com/pod-eni": 18}, 3920, 14162),
    "trn1.32xlarge": (247, {"aws.amazon.com/neuron": 16, "aws.amazon.com/neurondevice": 16, "aws.amazon.com/neuroncore": 32,
                            "vpc.amazonaws.com/efa": 8, "vpc.amazonaws.com/pod-eni": 82}, 127610, 481894),
    "m7i-flex.large": (29, {"vpc.amazonaws.com/pod-eni": 3}, 1930, 6903),
}


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_labels_as_karpenter_derives_them(name):
    (category, generation, family, size, cpu, memory, manufacturer, eit, ebs, network, nvme, gpu, accelerator,
     flex) = GOLDEN[name]
    labels = derive(described()[name]).labels
    expected = {
        "node.kubernetes.io/instance-type": name, "kubernetes.io/arch": "arm64" if manufacturer == "aws" else "amd64",
        "kubernetes.io/os": "linux", K + "instance-category": category, K + "instance-generation": generation,
        K + "instance-family": family, K + "instance-size": size, K + "instance-cpu": cpu, K + "instance-memory": memory,
        K + "instance-cpu-manufacturer": manufacturer, K + "instance-encryption-in-transit-supported": eit,
        K + "instance-ebs-bandwidth": ebs, K + "instance-network-bandwidth": network, K + "instance-hypervisor": "nitro",
        K + "instance-capability-flex": flex,
    }
    if nvme:
        expected[K + "instance-local-nvme"] = nvme
    if gpu:
        for suffix, value in zip(("name", "manufacturer", "count", "memory"), gpu):
            expected[f"{K}instance-gpu-{suffix}"] = value
    if accelerator:
        for suffix, value in zip(("name", "manufacturer", "count"), accelerator):
            expected[f"{K}instance-accelerator-{suffix}"] = value
    clock = labels.pop(K + "instance-cpu-sustained-clock-speed-mhz")
    assert clock.isdigit() and 2000 <= int(clock) <= 4000
    assert labels == expected


def test_sustained_clock_speed_in_mhz():
    assert derive(described()["r7iz.large"]).labels[K + "instance-cpu-sustained-clock-speed-mhz"] == "3900"
    assert derive(described()["c7g.xlarge"]).labels[K + "instance-cpu-sustained-clock-speed-mhz"] == "2600"


@pytest.mark.parametrize("name", sorted(ALLOCATABLE))
def test_capacity_and_allocatable_as_a_node_reports_them(name):
    pods, extended, cpu, memory_mib = ALLOCATABLE[name]
    derived = derive(described()[name])
    assert derived.eni_limited_pods == pods
    assert derived.resources == extended
    world = parse_world({"describeInstanceTypes": {"InstanceTypes": [described()[name]]},
                         "instanceTypes": [{"name": name}],
                         "ec2NodeClasses": [{"metadata": {"name": "default"},
                                             "spec": {"amiSelectorTerms": [{"alias": "al2023@latest"}]}}]})
    nc = world.node_classes[0]
    it = world.instance_types[0].for_node_class(nc.kubelet, nc.shape, ())
    assert it.allocatable["cpu"] == cpu
    assert it.allocatable["memory"] == memory_mib * MIB
    assert it.allocatable["pods"] == pods
    assert it.allocatable["ephemeral-storage"] == 17 * 2**30
    assert {k: v for k, v in it.allocatable.items() if "/" in k} == extended


def test_vm_overhead_and_graviton_cma():
    assert node_memory_mib(8192, "amd64") == 8192 - 615  # m5.large: 7577Mi
    assert node_memory_mib(8192, "arm64") == 8128 - 610
    assert node_memory_mib(8192, "amd64", 0.0) == 8192
    world = parse_world({"describeInstanceTypes": [described()["m5.large"]], "vmMemoryOverheadPercent": 0.1,
                         "instanceTypes": [{"name": "m5.large"}]})
    assert world.instance_types[0].capacity["memory"] == (8192 - 820) * MIB


def test_habana_gaudi_and_amd_gpus_are_advertised():
    # moto has no dl1 or g4ad; these entries are written from EC2's documented answers for them.
    dl1 = {"InstanceType": "dl1.24xlarge", "VCpuInfo": {"DefaultVCpus": 96}, "MemoryInfo": {"SizeInMiB": 786432},
           "ProcessorInfo": {"SupportedArchitectures": ["x86_64"], "Manufacturer": "Intel"},
           "GpuInfo": {"Gpus": [{"Name": "Gaudi HL-205", "Manufacturer": "Habana", "Count": 8,
                                 "MemoryInfo": {"SizeInMiB": 32768}}]},
           "NetworkInfo": {"EfaInfo": {"MaximumEfaInterfaces": 4}, "MaximumNetworkInterfaces": 60,
                           "Ipv4AddressesPerInterface": 50}}
    derived = derive(dl1)
    assert derived.resources["habana.ai/gaudi"] == 8 and derived.resources["vpc.amazonaws.com/efa"] == 4
    assert derived.labels[K + "instance-gpu-name"] == "gaudi-hl-205"
    assert derived.labels[K + "instance-gpu-manufacturer"] == "habana"
    g4ad = {**dl1, "InstanceType": "g4ad.xlarge",
            "GpuInfo": {"Gpus": [{"Name": "Radeon Pro V520", "Manufacturer": "AMD", "Count": 1,
                                  "MemoryInfo": {"SizeInMiB": 8192}}]}}
    assert derive(g4ad).resources["amd.com/gpu"] == 1
    assert derive(g4ad).labels[K + "instance-gpu-name"] == "radeon-pro-v520"


def test_a_type_no_table_knows_gets_its_labels_from_the_answer_alone():
    raw = json.loads(json.dumps(described()["c7g.xlarge"]))
    raw["InstanceType"] = "c99gz.3xlarge"
    labels = derive(raw).labels
    assert labels[K + "instance-category"] == "c" and labels[K + "instance-generation"] == "99"
    assert labels[K + "instance-family"] == "c99gz" and labels[K + "instance-size"] == "3xlarge"
    # The bandwidth table does not know it: EC2's per-card baseline, summed, stands in.
    assert labels[K + "instance-network-bandwidth"] == "1876"


def test_every_type_ec2_knows_gets_the_core_labels():
    usable = {name: raw for name, raw in described().items() if unusable_reason(raw) is None}
    assert len(usable) > 1300
    for name, raw in usable.items():
        derived = derive(raw)
        for key in ("instance-category", "instance-generation", "instance-family", "instance-size", "instance-cpu",
                    "instance-memory"):
            assert K + key in derived.labels, (name, key)
        cap = capacity(derived)
        assert cap["cpu"] > 0 and cap["memory"] > 0 and cap["pods"] > 0, name
    assert unusable_reason(described()["mac1.metal"])


@settings(max_examples=examples(200), deadline=None)
@given(st.sampled_from(sorted(described())), st.integers(min_value=1, max_value=300), st.integers(min_value=1, max_value=50))
def test_node_shape_never_exceeds_what_the_kubelet_allows(name, max_pods, per_core):
    derived = derive(described()[name])
    shape = node_shape(derived.eni_limited_pods, derived.vcpus, derived.instance_store_gb, derived.architecture,
                       NodeClassShape(), None, per_core)
    assert shape.pods == min(derived.eni_limited_pods, per_core * derived.vcpus)
    assert shape.kube_reserved_pods == derived.eni_limited_pods  # AL2023 sizes kube-reserved by the ENI limit
    pinned = node_shape(derived.eni_limited_pods, derived.vcpus, 0, derived.architecture, NodeClassShape(), max_pods)
    assert pinned.pods == max_pods


def test_ami_families_change_the_shape():
    world = parse_world({
        "describeInstanceTypes": [described()["m5.large"], described()["c7g.xlarge"], described()["c6id.2xlarge"]],
        "instanceTypes": [{"name": "m5.large"}, {"name": "c7g.xlarge"}, {"name": "c6id.2xlarge"}],
        "ec2NodeClasses": [
            {"metadata": {"name": "br"}, "spec": {"amiSelectorTerms": [{"alias": "bottlerocket@latest"}],
                                                  "kubelet": {"maxPods": 110, "podsPerCore": 2}}},
            {"metadata": {"name": "win"}, "spec": {"amiSelectorTerms": [{"alias": "windows2022@latest"}]}},
            {"metadata": {"name": "nvme"}, "spec": {"amiFamily": "AL2023", "instanceStorePolicy": "RAID0",
                                                    "kubelet": {"maxPods": 110}}},
        ]})
    by_class = {nc.name: {it.name: it.for_node_class(nc.kubelet, nc.shape, ()) for it in world.instance_types}
                for nc in world.node_classes}
    br = by_class["br"]["m5.large"]
    assert br.capacity["pods"] == 110  # Bottlerocket ignores podsPerCore
    assert br.allocatable["memory"] == (7577 - (11 * 110 + 255) - 100) * MIB  # kube-reserved by its 110 pods
    win = by_class["win"]
    assert win["c7g.xlarge"] is None  # no Windows on arm64
    assert win["m5.large"].labels["kubernetes.io/os"] == "windows"
    assert win["m5.large"].labels["node.kubernetes.io/windows-build"] == "10.0.20348"
    assert win["m5.large"].capacity["pods"] == 110 and win["m5.large"].capacity["ephemeral-storage"] == 50 * 2**30
    nvme = by_class["nvme"]
    assert nvme["c6id.2xlarge"].capacity["ephemeral-storage"] == 474 * 10**9  # the instance store, RAID0
    assert nvme["m5.large"].capacity["ephemeral-storage"] == 20 * 2**30  # no instance store: the root volume
    # AL2023 keeps sizing kube-reserved memory by the ENI limit (29), whatever maxPods says.
    assert nvme["m5.large"].capacity["pods"] == 110
    assert nvme["m5.large"].allocatable["memory"] == 6903 * MIB
    assert BOTTLEROCKET == world.node_classes[0].shape.ami_family


def test_bad_node_class_shape_is_named():
    with pytest.raises(WorldError) as error:
        parse_world({"ec2NodeClasses": [{"metadata": {"name": "x"}, "spec": {
            "amiFamily": "Ubuntu2", "amiSelectorTerms": [{"alias": "al2024@latest"}], "instanceStorePolicy": "RAID5",
            "kubelet": {"podsPerCore": 0}}}]})
    lines = error.value.lines()
    assert any(line.startswith("ec2NodeClasses[0].spec.amiFamily:") for line in lines)
    assert any(line.startswith("ec2NodeClasses[0].spec.amiSelectorTerms[0].alias:") for line in lines)
    assert any(line.startswith("ec2NodeClasses[0].spec.instanceStorePolicy:") for line in lines)
    assert any(line.startswith("ec2NodeClasses[0].spec.kubelet.podsPerCore:") for line in lines)


def test_bad_describe_instance_types_entries_are_named():
    with pytest.raises(WorldError) as error:
        parse_world({"describeInstanceTypes": {"InstanceTypes": [{"InstanceType": "x.large"}, 7]},
                     "vmMemoryOverheadPercent": 2})
    assert error.value.lines() == [
        "vmMemoryOverheadPercent: expected a number from 0 to below 1 (0.075 is 7.5 %), got 2",
        "describeInstanceTypes.InstanceTypes[0]: VCpuInfo.DefaultVCpus must be a positive integer",
        "describeInstanceTypes.InstanceTypes[1]: expected an object",
    ]


def test_gte_and_lte_in_node_pools_only():
    assert Requirement.of("g", "Gte", ["3"]).has("3") and not Requirement.of("g", "Gte", ["3"]).has("2")
    assert Requirement.of("g", "Lte", ["3"]).has("3") and not Requirement.of("g", "Lte", ["3"]).has("4")
    pool = {"metadata": {"name": "p"}, "spec": {"template": {"spec": {
        "nodeClassRef": {"name": "default"},
        "requirements": [{"key": K + "instance-generation", "operator": "Gte", "values": ["3"]}]}}}}
    pod = {"metadata": {"name": "a", "namespace": "d"}, "spec": {
        "containers": [{"name": "c"}],
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": K + "instance-generation", "operator": "Gte", "values": ["3"]}]}]}}}}}
    parse_world({"nodePools": [pool]})
    with pytest.raises(WorldError) as error:
        parse_world({"pods": [pod]})
    assert "is valid in NodePool requirements only" in str(error.value)


def test_the_reason_names_the_node_pools_requirement_that_emptied_the_list():
    """A pod asking for amd64 on a catalogue of amd64 types, in a NodePool whose category rules all out."""
    names = ["m5.large", "c6id.2xlarge", "t3.medium"]
    world = {
        "now": "2026-11-21T12:00:00Z",
        "describeInstanceTypes": [described()[n] for n in names],
        "instanceTypes": [{"name": n, "offerings": [{"capacityType": "on-demand", "zone": "us-east-1a", "price": 0.1}]}
                          for n in names],
        "ec2NodeClasses": [{"metadata": {"name": "default"}, "spec": {}}],
        "nodePools": [{"metadata": {"name": "default"}, "spec": {"template": {"spec": {
            "nodeClassRef": {"name": "default"},
            "requirements": [{"key": K + "instance-category", "operator": "In", "values": ["x"]}]}}}}],
        "pods": [
            {"metadata": {"name": "a", "namespace": "d"}, "spec": {"nodeSelector": {"kubernetes.io/arch": "amd64"},
                                                                   "containers": [{"name": "c"}]}},
        ],
    }
    reason = simulate(world)["unschedulable"][0]["reason"]
    assert "instance-category In [x]" in reason and "3 instance type(s) would" in reason
    assert "arch amd64" not in reason
    world["nodePools"][0]["spec"]["template"]["spec"]["requirements"] = []
    world["pods"][0]["spec"]["containers"][0]["resources"] = {"requests": {"habana.ai/gaudi": "1"}}
    assert simulate(world)["unschedulable"][0]["reason"] == "no instance type offers habana.ai/gaudi (EC2NodeClass default)"


def test_zone_ids_come_from_offerings_and_reservations():
    offerings = [{"capacityType": "on-demand", "zone": z, "zoneId": zid, "price": 0.096}
                 for z, zid in (("us-east-1a", "use1-az1"), ("us-east-1b", "use1-az2"))]
    world = {
        "now": "2026-11-21T12:00:00Z",
        "describeInstanceTypes": [described()["m5.large"]],
        "instanceTypes": [{"name": "m5.large", "offerings": offerings}],
        "capacityReservations": [{"CapacityReservationId": "cr-0aa", "InstanceType": "m5.large",
                                  "AvailabilityZone": "us-east-1b", "AvailabilityZoneId": "use1-az2",
                                  "AvailableInstanceCount": 1, "InstanceMatchCriteria": "targeted", "Tags": []}],
        "ec2NodeClasses": [{"metadata": {"name": "default"}, "spec": {"capacityReservationSelectorTerms": [{"id": "cr-0aa"}]}}],
        "nodePools": [{"metadata": {"name": "default"}, "spec": {"template": {"spec": {
            "nodeClassRef": {"name": "default"},
            "requirements": [{"key": "topology.k8s.aws/zone-id", "operator": "In", "values": ["use1-az2"]}]}}}}],
        "pods": [{"metadata": {"name": f"p{i}", "namespace": "d"},
                  "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}} for i in range(2)],
    }
    claims = simulate(world)["nodeClaims"]
    assert [c["launch"]["capacityType"] for c in claims] == ["reserved", "on-demand"]
    assert all(c["launch"]["zone"] == "us-east-1b" and c["labels"]["topology.k8s.aws/zone-id"] == "use1-az2"
               for c in claims)
