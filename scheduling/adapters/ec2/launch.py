"""Launching one instance with CreateFleet (``instant``), as upstream does
(aws/karpenter-provider-aws `pkg/providers/instance/`, `pkg/providers/launchtemplate/types.go`).

* The capacity type is reserved > spot > on-demand among the offerings still available.
* Reserved offerings pass upstream's launch filters: one reservation partition (default ODCRs,
  capacity blocks, interruptible ODCRs: the cheapest wins, ties to default); a capacity block
  launch keeps exactly one offering; otherwise one reservation per (type, zone), the one with the
  most capacity. Spot offerings dearer than the cheapest on-demand one are dropped when both are
  allowed. At most 60 overrides, cheapest first.
* One launch template per reservation: ``CapacityReservationPreference=capacity-reservations-only``
  with the target id, or the target Capacity Reservation group when the offering names one (EC2
  then picks a member with room); ``InstanceMarketOptions.MarketType=capacity-block`` for capacity
  blocks; preference ``none`` for on-demand and spot (never consume open ODCRs by accident), except
  on-demand launches of an EC2NodeClass in open mode, which use ``open``.
* ``DefaultTargetCapacityType``: ``on-demand`` for ODCRs, ``capacity-block`` for blocks,
  ``reserved-capacity`` for interruptible ODCRs, else ``spot`` / ``on-demand``.
* A ``ClientToken`` derived from the NodeClaim name, so a retried launch never starts a second
  instance.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from scheduling.engine.quantities import EPHEMERAL_STORAGE, parse_resource

from .client import Caller
from .interface import (
    ON_DEMAND,
    RESERVATION_CAPACITY_BLOCK,
    RESERVED,
    SPOT,
    CloudAPIError,
    LaunchOffering,
    LaunchRequest,
)

log = logging.getLogger(__name__)

# karpenter-provider-aws pkg/errors/errors.go, unfulfillableCapacityErrorCodes.
UNFULFILLABLE_CAPACITY_CODES = frozenset(
    {
        "InsufficientInstanceCapacity",
        "MaxSpotInstanceCountExceeded",
        "VcpuLimitExceeded",
        "UnfulfillableCapacity",
        "Unsupported",
        "InsufficientFreeAddressesInSubnet",
        "MaxFleetCountExceeded",
        "ReservationCapacityExceeded",
    }
)
MAX_OVERRIDES = 60
NODECLAIM_TAG = "karpweb.io/nodeclaim"
NODECLASS_TAG = "karpweb.io/nodeclass"
# On a reserved launch template: the reservation id or group ARN it targets (what garbage collection checks).
TARGET_TAG = "karpweb.io/capacity-reservation-target"
MANAGED_TAG = "karpweb.io/managed"

# Partition priorities for ties in the reservation-type filter: lower wins.
_PARTITIONS = ("default", "capacity-block", "interruptible")


def partition_of(offering: LaunchOffering) -> str:
    if offering.reservation_type == RESERVATION_CAPACITY_BLOCK:
        return "capacity-block"
    return "interruptible" if offering.interruptible else "default"


@dataclass
class LaunchPlan:
    capacity_type: str
    partition: str | None  # for reserved launches
    offerings: list[LaunchOffering]


def plan(
    offerings: Sequence[LaunchOffering],
    reservation_count: Any,
    offering_unavailable: Any,
) -> LaunchPlan | None:
    """Pick the capacity type and the offerings CreateFleet gets; None when nothing is left.

    ``reservation_count(id) -> int`` is the in-memory availability; ``offering_unavailable(type,
    zone, capacity_type) -> bool`` is the ICE cache.
    """
    usable: list[LaunchOffering] = []
    for o in offerings:
        if o.capacity_type == RESERVED:
            if not o.reservation_id:
                continue
            count = int(reservation_count(o.reservation_id))
            if count > 0:
                usable.append(replace(o, reservation_capacity=count))
        elif not offering_unavailable(o.instance_type, o.zone, o.capacity_type):
            usable.append(o)

    reserved = [o for o in usable if o.capacity_type == RESERVED]
    if reserved:
        cheapest: dict[str, float] = {}
        for o in reserved:
            p = partition_of(o)
            cheapest[p] = min(cheapest.get(p, float("inf")), o.price)
        partition = min(cheapest, key=lambda p: (cheapest[p], _PARTITIONS.index(p)))
        kept = [o for o in reserved if partition_of(o) == partition]
        if partition == "capacity-block":
            # CreateFleet takes one capacity block per request: the cheapest, then the roomiest.
            kept = [min(kept, key=lambda o: (o.price, -o.reservation_capacity, o.reservation_id))]
        else:
            # One override per (type, zone) pool: the reservation with the most capacity.
            best: dict[tuple[str, str], LaunchOffering] = {}
            for o in kept:
                key = (o.instance_type, o.zone)
                if key not in best or (o.reservation_capacity, o.reservation_id) > (
                    best[key].reservation_capacity,
                    best[key].reservation_id,
                ):
                    best[key] = o
            kept = list(best.values())
        return LaunchPlan(RESERVED, partition, _truncate(kept))

    spot = [o for o in usable if o.capacity_type == SPOT]
    on_demand = [o for o in usable if o.capacity_type == ON_DEMAND]
    if spot and on_demand:
        ceiling = min(o.price for o in on_demand)
        spot = [o for o in spot if o.price <= ceiling]
    if spot:
        return LaunchPlan(SPOT, None, _truncate(spot))
    if on_demand:
        return LaunchPlan(ON_DEMAND, None, _truncate(on_demand))
    return None


def _truncate(offerings: list[LaunchOffering]) -> list[LaunchOffering]:
    return sorted(offerings, key=lambda o: (o.price, o.instance_type, o.zone, o.reservation_id or ""))[
        :MAX_OVERRIDES
    ]


def client_token(nodeclaim_name: str, attempt: int) -> str:
    """At most 64 ASCII characters, stable for a NodeClaim and attempt number."""
    digest = hashlib.sha256(f"{nodeclaim_name}/{attempt}".encode()).hexdigest()[:48]
    return f"karpweb-{digest}"


# The EC2NodeClass CRD's default metadataOptions (nodeadm needs IMDS; upstream's Go fallback for
# a nil value disables the endpoint, a regression karpweb does not copy).
DEFAULT_METADATA_OPTIONS = {"HttpEndpoint": "enabled", "HttpProtocolIpv6": "disabled", "HttpPutResponseHopLimit": 1,
                            "HttpTokens": "required"}


def image_of(request: LaunchRequest, instance_type: str) -> str:
    return request.image_ids.get(instance_type) or request.image_id


def user_data_of(request: LaunchRequest, instance_type: str) -> str | None:
    """The type's own user data (its maxPods differs) or the request's."""
    return request.user_data_by_type.get(instance_type) or request.user_data


TemplateKey = tuple[str | None, str, str | None]


def template_key(launch_plan: LaunchPlan, request: LaunchRequest, offering: LaunchOffering) -> TemplateKey:
    """One launch template per reservation (None for on-demand and spot), image and user data (as
    upstream makes one per distinct maxPods)."""
    reservation = offering.reservation_id if launch_plan.capacity_type == RESERVED else None
    return reservation, image_of(request, offering.instance_type), user_data_of(request, offering.instance_type)


def launch_template_data(
    request: LaunchRequest, offering: LaunchOffering | None, capacity_type: str, reserved_capacity: bool = True,
    image_id: str | None = None, user_data: str | None = None,
) -> dict[str, Any]:
    """Launch template data; ``offering`` is the reservation's offering for reserved launches.
    With the ReservedCapacity gate off no CapacityReservationSpecification is set (EC2's default
    ``open`` applies), as upstream."""
    data: dict[str, Any] = {
        "ImageId": image_id or request.image_id,
        "MetadataOptions": {**DEFAULT_METADATA_OPTIONS, **(request.metadata_options or {}), "InstanceMetadataTags": "disabled"},
    }
    if request.associate_public_ip is not None:
        # The public-address choice lives on the network interface, which then carries the groups.
        data["NetworkInterfaces"] = [{"DeviceIndex": 0, "Groups": list(request.security_group_ids),
                                      "AssociatePublicIpAddress": request.associate_public_ip}]
    elif request.security_group_ids:
        data["SecurityGroupIds"] = list(request.security_group_ids)
    if request.block_device_mappings:
        data["BlockDeviceMappings"] = [dict(m) for m in request.block_device_mappings]
    if request.detailed_monitoring:
        data["Monitoring"] = {"Enabled": True}
    template_tags = {k: v for k, v in request.tags.items() if k != "karpenter.sh/nodeclaim"}
    if template_tags:  # the interfaces (and a spot request) get the class's tags; the instance and volumes get them from CreateFleet
        tags = [{"Key": k, "Value": v} for k, v in sorted(template_tags.items())]
        data["TagSpecifications"] = [{"ResourceType": "network-interface", "Tags": tags}]
        if capacity_type == SPOT:  # as upstream's launch template builder
            data["TagSpecifications"].append({"ResourceType": "spot-instances-request", "Tags": list(tags)})
    user_data = user_data or request.user_data
    if user_data:
        data["UserData"] = base64.b64encode(user_data.encode()).decode()
    if request.instance_profile:
        data["IamInstanceProfile"] = {"Name": request.instance_profile}
    if capacity_type == RESERVED and offering is not None:
        target = (
            {"CapacityReservationResourceGroupArn": offering.reservation_group_arn}
            if offering.reservation_group_arn and offering.reservation_type != RESERVATION_CAPACITY_BLOCK
            else {"CapacityReservationId": offering.reservation_id}
        )
        data["CapacityReservationSpecification"] = {
            "CapacityReservationPreference": "capacity-reservations-only",
            "CapacityReservationTarget": target,
        }
        if offering.reservation_type == RESERVATION_CAPACITY_BLOCK:
            data["InstanceMarketOptions"] = {"MarketType": "capacity-block"}
        elif offering.interruptible:
            data["InstanceMarketOptions"] = {"MarketType": "interruptible-capacity-reservation"}
    elif reserved_capacity:
        # Opt on-demand and spot out of open ODCRs (upstream's targeted launch mode), unless the
        # EC2NodeClass opted its on-demand launches into them (open mode).
        preference = "open" if request.open_reservations and capacity_type == ON_DEMAND else "none"
        data["CapacityReservationSpecification"] = {"CapacityReservationPreference": preference}
    return data


class LaunchTemplates:
    """Creates launch templates on first use; the name carries a hash of the data, so a template
    is never changed in place and concurrent creators agree on it."""

    def __init__(self, ec2: Any, call: Caller) -> None:
        self._ec2 = ec2
        self._call = call
        self._ids: dict[str, str] = {}
        self._lock = threading.Lock()

    @staticmethod
    def name_for(nodeclass_name: str, data: Mapping[str, Any]) -> str:
        digest = hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:20]
        safe = "".join(c if c.isalnum() or c in "-_." else "-" for c in nodeclass_name)[:80]
        return f"karpweb/{safe}/{digest}"

    def ensure(self, nodeclass_name: str, data: Mapping[str, Any]) -> str:
        name = self.name_for(nodeclass_name, data)
        with self._lock:
            if name in self._ids:
                return self._ids[name]
        tags = [{"Key": NODECLASS_TAG, "Value": nodeclass_name}]
        target = reservation_target(data)
        if target:
            tags.append({"Key": TARGET_TAG, "Value": target})
        try:
            answer = self._call(
                self._ec2,
                "create_launch_template",
                LaunchTemplateName=name,
                LaunchTemplateData=dict(data),
                TagSpecifications=[{"ResourceType": "launch-template", "Tags": tags}],
            )
            template_id = answer["LaunchTemplate"]["LaunchTemplateId"]
        except CloudAPIError as exc:
            if exc.code != "InvalidLaunchTemplateName.AlreadyExistsException":
                raise
            answer = self._call(self._ec2, "describe_launch_templates", LaunchTemplateNames=[name])
            template_id = answer["LaunchTemplates"][0]["LaunchTemplateId"]
        with self._lock:
            self._ids[name] = template_id
        return template_id

    def forget(self, names: Iterable[str] | None = None) -> None:
        """Drop cached ids (all of them without `names`): the templates were deleted."""
        with self._lock:
            for name in list(self._ids) if names is None else names:
                self._ids.pop(name, None)

    def collect_garbage(self, live_nodeclasses: set[str], live_targets: set[str]) -> list[str]:
        """Delete karpweb's launch templates that can never be used again: their EC2NodeClass is
        gone, or the reservation (or group) they target is no longer launchable. Returns their names.
        Untagged templates and other tools' templates are never touched."""
        doomed = []
        for template in self._karpweb_templates():
            tags = {tag["Key"]: tag["Value"] for tag in template.get("Tags") or []}
            target = tags.get(TARGET_TAG)
            if tags.get(NODECLASS_TAG) not in live_nodeclasses or (target and target not in live_targets):
                doomed.append(template)
        deleted = []
        for template in doomed:
            try:
                self._call(self._ec2, "delete_launch_template", LaunchTemplateId=template["LaunchTemplateId"])
            except CloudAPIError as exc:
                if not exc.code.startswith("InvalidLaunchTemplate"):  # already gone is fine
                    raise
            deleted.append(template["LaunchTemplateName"])
        self.forget(deleted)
        return deleted

    def _karpweb_templates(self) -> Iterator[dict[str, Any]]:
        params: dict[str, Any] = {"Filters": [{"Name": "tag-key", "Values": [NODECLASS_TAG]}], "MaxResults": 200}
        seen: set[str] = set()
        while True:
            page = self._call(self._ec2, "describe_launch_templates", **params)
            yield from page.get("LaunchTemplates") or []
            token = page.get("NextToken")
            if not token or token in seen:
                return
            seen.add(token)
            params["NextToken"] = token


# aws/karpenter-provider-aws pkg/providers/launchtemplate: Karpenter tags the launch templates it
# makes with the cluster's name (and its EC2NodeClass's), and lists them by this tag.
KARPENTER_CLUSTER_TAG = "karpenter.k8s.aws/cluster"
KARPENTER_NODECLASS_TAG = "karpenter.k8s.aws/ec2nodeclass"


@dataclass(frozen=True)
class TemplatePreference:
    """A launch template made for a cluster, and the CapacityReservationPreference of its latest
    version ("" when it sets none: EC2's default, open)."""

    cluster: str
    template_id: str
    name: str
    version: int
    preference: str
    node_class: str = ""


def cluster_template_preferences(ec2: Any, call: Caller) -> list[TemplatePreference]:
    """Every launch template tagged karpenter.k8s.aws/cluster in the account and region, with its
    latest version's preference (DescribeLaunchTemplates, then DescribeLaunchTemplateVersions)."""
    params: dict[str, Any] = {"Filters": [{"Name": "tag-key", "Values": [KARPENTER_CLUSTER_TAG]}], "MaxResults": 200}
    templates: list[dict[str, Any]] = []
    seen: set[str] = set()
    while True:
        page = call(ec2, "describe_launch_templates", **params)
        templates += page.get("LaunchTemplates") or []
        token = page.get("NextToken")
        if not token or token in seen:
            break
        seen.add(token)
        params["NextToken"] = token
    found = []
    for template in templates:
        tags = {tag["Key"]: tag["Value"] for tag in template.get("Tags") or []}
        try:
            versions = call(ec2, "describe_launch_template_versions", LaunchTemplateId=template["LaunchTemplateId"],
                            Versions=["$Latest"]).get("LaunchTemplateVersions") or []
        except CloudAPIError as exc:
            if exc.code.startswith("InvalidLaunchTemplate"):  # deleted between the two calls
                continue
            raise
        data = (versions[0].get("LaunchTemplateData") or {}) if versions else {}
        spec = data.get("CapacityReservationSpecification") or {}
        found.append(TemplatePreference(
            cluster=tags.get(KARPENTER_CLUSTER_TAG, ""), template_id=template["LaunchTemplateId"],
            name=template.get("LaunchTemplateName", ""), version=int(template.get("LatestVersionNumber") or 0),
            preference=spec.get("CapacityReservationPreference") or "", node_class=tags.get(KARPENTER_NODECLASS_TAG, "")))
    return sorted(found, key=lambda t: (t.cluster, t.name))


def reservation_target(data: Mapping[str, Any]) -> str | None:
    """The reservation id or group ARN a launch template's data targets, if any."""
    target = (data.get("CapacityReservationSpecification") or {}).get("CapacityReservationTarget") or {}
    return target.get("CapacityReservationId") or target.get("CapacityReservationResourceGroupArn")


def fleet_request(
    request: LaunchRequest,
    launch_plan: LaunchPlan,
    template_ids: Mapping[TemplateKey, str],
) -> dict[str, Any]:
    """CreateFleet parameters without ``ClientToken``; ``template_ids`` maps (reservation id, None for
    on-demand/spot; image; user data) to its launch template id."""
    groups: dict[TemplateKey, list[LaunchOffering]] = {}
    for o in launch_plan.offerings:
        groups.setdefault(template_key(launch_plan, request, o), []).append(o)
    configs = []
    for key, offerings in groups.items():
        overrides = []
        for o in offerings:
            override: dict[str, Any] = {"InstanceType": o.instance_type, "AvailabilityZone": o.zone, "Priority": o.price}
            subnet = o.subnet_id or request.subnet_ids.get(o.zone)
            if subnet:
                override["SubnetId"] = subnet
            overrides.append(override)
        configs.append(
            {
                "LaunchTemplateSpecification": {"LaunchTemplateId": template_ids[key], "Version": "$Latest"},
                "Overrides": overrides,
            }
        )
    if launch_plan.capacity_type == RESERVED:
        default_type = {"capacity-block": "capacity-block", "interruptible": "reserved-capacity"}.get(
            launch_plan.partition or "default", "on-demand"
        )
    else:
        default_type = launch_plan.capacity_type
    tags = {**request.tags, NODECLAIM_TAG: request.nodeclaim_name, NODECLASS_TAG: request.nodeclass_name, MANAGED_TAG: "true"}
    tag_list = [{"Key": k, "Value": v} for k, v in sorted(tags.items())]
    params: dict[str, Any] = {
        "Type": "instant",
        "TargetCapacitySpecification": {"TotalTargetCapacity": 1, "DefaultTargetCapacityType": default_type},
        "LaunchTemplateConfigs": configs,
        "TagSpecifications": [{"ResourceType": r, "Tags": tag_list} for r in ("instance", "volume", "fleet")],
    }
    if default_type == "on-demand":
        params["OnDemandOptions"] = {"AllocationStrategy": "lowest-price"}
    elif default_type == "spot":
        params["SpotOptions"] = {"AllocationStrategy": "price-capacity-optimized"}
    elif default_type == "reserved-capacity":
        params["ReservedCapacityOptions"] = {"ReservationTypes": ["interruptible-capacity-reservation"]}
    if request.context:
        params["Context"] = request.context
    return params


# The AMI families' default volumes when spec.blockDeviceMappings is empty (upstream's defaults).
_DEFAULT_VOLUMES = {
    "AL2": [("/dev/xvda", 20)], "AL2023": [("/dev/xvda", 20)],
    "Bottlerocket": [("/dev/xvda", 4), ("/dev/xvdb", 20)],
    "Windows2019": [("/dev/sda1", 50)], "Windows2022": [("/dev/sda1", 50)], "Windows2025": [("/dev/sda1", 50)],
}
_EBS_FIELDS = {"volumeType": "VolumeType", "iops": "Iops", "throughput": "Throughput", "encrypted": "Encrypted",
               "kmsKeyID": "KmsKeyId", "deleteOnTermination": "DeleteOnTermination", "snapshotID": "SnapshotId"}
_METADATA_FIELDS = {"httpEndpoint": "HttpEndpoint", "httpProtocolIPv6": "HttpProtocolIpv6",
                    "httpPutResponseHopLimit": "HttpPutResponseHopLimit", "httpTokens": "HttpTokens"}


def block_device_mappings(spec_mappings: Sequence[Mapping[str, Any]] | None, family: str | None) -> list[dict[str, Any]]:
    """EC2NodeClass ``spec.blockDeviceMappings`` in EC2's shape (sizes in GiB, rounded up), else the
    AMI family's default: encrypted gp3 volumes."""
    if not spec_mappings:
        return [{"DeviceName": device, "Ebs": {"VolumeSize": size, "VolumeType": "gp3", "Encrypted": True}}
                for device, size in _DEFAULT_VOLUMES.get(family or "AL2023", [])]
    result = []
    for mapping in spec_mappings:
        ebs_spec = mapping.get("ebs") or {}
        ebs = {ec2: ebs_spec[name] for name, ec2 in _EBS_FIELDS.items() if ebs_spec.get(name) is not None}
        if ebs_spec.get("volumeSize") is not None:
            size = parse_resource(EPHEMERAL_STORAGE, str(ebs_spec["volumeSize"]))
            ebs["VolumeSize"] = -(-size // 2**30)
        result.append({"DeviceName": mapping.get("deviceName", ""), "Ebs": ebs})
    return result


def metadata_options(spec_options: Mapping[str, Any] | None) -> dict[str, Any]:
    """EC2NodeClass ``spec.metadataOptions`` in EC2's shape, over the CRD's defaults."""
    given = {ec2: spec_options[name] for name, ec2 in _METADATA_FIELDS.items() if (spec_options or {}).get(name) is not None}
    return {**DEFAULT_METADATA_OPTIONS, **given}
