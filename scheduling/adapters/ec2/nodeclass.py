"""An EC2NodeClass resolved for launching (aws/karpenter-provider-aws ``pkg/controllers/nodeclass/``): its AMIs, subnets, security
groups and instance profile, the cluster facts its user data needs, and the status and conditions
Karpenter writes for them (AMIsReady, SubnetsReady, SecurityGroupsReady, InstanceProfileReady,
ValidationSucceeded, Ready), with upstream's reasons. A NodePool whose class is not Ready launches
nothing."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from scheduling.engine.ec2types import AL2023, AMI_FAMILIES, BOTTLEROCKET, NodeClassShape, ami_family, node_shape

from .amis import AMIError, AMIProvider, Image
from .clusterinfo import ClusterInfo, ClusterInfoProvider
from .instanceprofiles import InstanceProfileProvider
from .interface import CloudAPIError
from .securitygroups import SecurityGroup, SecurityGroupProvider
from .subnets import Subnet, SubnetProvider
from .userdata import Bootstrap, UserDataError, build, dropped_bottlerocket_keys

# Tags Karpenter sets itself; spec.tags may not carry them (its CRD's rule, TagValidationFailed).
RESTRICTED_TAG_KEYS = ("karpenter.sh/nodepool", "karpenter.sh/nodeclaim", "karpenter.k8s.aws/ec2nodeclass",
                       "eks:eks-cluster-name")
CONDITION_TYPES = ("AMIsReady", "SubnetsReady", "SecurityGroupsReady", "InstanceProfileReady", "ValidationSucceeded")


@dataclass
class NodeClassResolution:
    name: str
    family: str | None = None
    images: list[Image] = field(default_factory=list)
    subnets: list[Subnet] = field(default_factory=list)
    security_groups: list[SecurityGroup] = field(default_factory=list)
    instance_profile: str = ""
    cluster: ClusterInfo | None = None
    conditions: list[dict[str, str]] = field(default_factory=list)

    @property
    def ready(self) -> bool:
        return all(c["status"] == "True" for c in self.conditions)

    @property
    def why_not_ready(self) -> str:
        return "; ".join(f"{c['type']} is {c['status']} ({c['reason']}): {c['message']}"
                         for c in self.conditions if c["status"] != "True")

    def status_fields(self) -> dict[str, Any]:
        return {"amis": [i.status() for i in self.images], "subnets": [s.status() for s in self.subnets],
                "securityGroups": [g.status() for g in self.security_groups],
                **({"instanceProfile": self.instance_profile} if self.instance_profile else {})}

    def all_conditions(self) -> list[dict[str, str]]:
        """The five, then Ready (UnhealthyDependents while one of them is not True)."""
        ready = {"type": "Ready", "status": "True", "reason": "Ready", "message": ""} if self.ready else \
            {"type": "Ready", "status": "False", "reason": "UnhealthyDependents", "message": self.why_not_ready}
        return [*self.conditions, ready]


def _ok(kind: str) -> dict[str, str]:
    return {"type": kind, "status": "True", "reason": kind, "message": ""}


def _bad(kind: str, reason: str, message: str) -> dict[str, str]:
    return {"type": kind, "status": "False", "reason": reason, "message": message}


def resolve(name: str, uid: str, spec: Mapping[str, Any], *, amis: AMIProvider, subnets: SubnetProvider,
            security_groups: SecurityGroupProvider, profiles: InstanceProfileProvider,
            cluster: ClusterInfoProvider, create_profile: bool = True, status_profile: str = "") -> NodeClassResolution:
    """Each part in upstream's order; a failing part is a False condition naming the field, and the
    others are still resolved (the page shows everything that is wrong at once). Without
    `create_profile` (observe mode) a missing instance profile is only announced, not created."""
    result = NodeClassResolution(name=name, family=ami_family(spec))
    try:
        result.cluster = cluster.get()
    except CloudAPIError as exc:
        result.conditions.append(_bad("ValidationSucceeded", "ClusterCIDRResolutionFailed"
                                      if exc.code != "ClusterNameNotSet" else "ClusterNameNotSet", exc.message))
    result.conditions.insert(0, _amis(result, spec, amis))
    result.conditions.insert(1, _subnets(result, spec, subnets))
    result.conditions.insert(2, _security_groups(result, spec, security_groups))
    result.conditions.insert(3, _profile(result, name, uid, spec, profiles, create_profile, status_profile))
    if not any(c["type"] == "ValidationSucceeded" for c in result.conditions):
        result.conditions.append(_validation(spec, result))
    return result


def _amis(result: NodeClassResolution, spec: Mapping[str, Any], amis: AMIProvider) -> dict[str, str]:
    terms = spec.get("amiSelectorTerms") or []
    if not terms:
        return _bad("AMIsReady", "AMINotFound", "spec.amiSelectorTerms is empty")
    if result.cluster is None:
        return _bad("AMIsReady", "AMINotFound", "the Kubernetes version is unknown, so no alias can be resolved")
    try:
        result.images = amis.resolve(terms, result.cluster.version)
    except AMIError as exc:
        return _bad("AMIsReady", exc.code, f"spec.amiSelectorTerms: {exc.message}")
    except CloudAPIError as exc:
        return _bad("AMIsReady", "AMINotFound", f"spec.amiSelectorTerms: {exc.code}: {exc.message}")
    return _ok("AMIsReady")


def _selected(result: NodeClassResolution, spec: Mapping[str, Any], provider, *, field: str, attribute: str,
              condition: str, reason: str, noun: str) -> dict[str, str]:
    """Subnets or security groups from their selector terms: False with `reason` when none is found."""
    terms = spec.get(field) or []
    try:
        setattr(result, attribute, provider.resolve(terms) if terms else [])
    except CloudAPIError as exc:
        return _bad(condition, reason, f"spec.{field}: {exc.code}: {exc.message}")
    if not getattr(result, attribute):
        return _bad(condition, reason, f"spec.{field} selects no {noun}")
    return _ok(condition)


def _subnets(result: NodeClassResolution, spec: Mapping[str, Any], subnets: SubnetProvider) -> dict[str, str]:
    return _selected(result, spec, subnets, field="subnetSelectorTerms", attribute="subnets",
                     condition="SubnetsReady", reason="SubnetsNotFound", noun="subnet")


def _security_groups(result: NodeClassResolution, spec: Mapping[str, Any], groups: SecurityGroupProvider) -> dict[str, str]:
    return _selected(result, spec, groups, field="securityGroupSelectorTerms", attribute="security_groups",
                     condition="SecurityGroupsReady", reason="SecurityGroupsNotFound", noun="security group")


def _profile(result: NodeClassResolution, name: str, uid: str, spec: Mapping[str, Any],
             profiles: InstanceProfileProvider, create: bool, status_profile: str = "") -> dict[str, str]:
    if spec.get("instanceProfile"):
        result.instance_profile = spec["instanceProfile"]
        return _ok("InstanceProfileReady")
    if not spec.get("role"):
        return _bad("InstanceProfileReady", "InstanceProfileNotFound", "set spec.role or spec.instanceProfile")
    if result.cluster is None:
        return _bad("InstanceProfileReady", "InstanceProfileNotFound", "the cluster name is unknown")
    try:
        if status_profile and profiles.holds_role(status_profile, spec["role"]):
            result.instance_profile = status_profile  # status.instanceProfile still holds the role: kept, as upstream
            return _ok("InstanceProfileReady")
        if not create:
            found = profiles.find(cluster=result.cluster.name, node_class=name, node_class_uid=uid, role=spec["role"])
            result.instance_profile = found or ""
            return _ok("InstanceProfileReady") if found else {
                "type": "InstanceProfileReady", "status": "True", "reason": "InstanceProfileReady",
                "message": f"karpweb creates the instance profile for role {spec['role']} at the first launch in control mode"}
        result.instance_profile = profiles.ensure(cluster=result.cluster.name, node_class=name, node_class_uid=uid,
                                                  role=spec["role"], spec_tags=spec.get("tags") or {})
    except CloudAPIError as exc:
        return _bad("InstanceProfileReady", "InstanceProfileNotFound", f"spec.role {spec['role']}: {exc.code}: {exc.message}")
    return _ok("InstanceProfileReady")


def _validation(spec: Mapping[str, Any], result: NodeClassResolution) -> dict[str, str]:
    restricted = sorted(k for k in (spec.get("tags") or {})
                        if k in RESTRICTED_TAG_KEYS or k.startswith("kubernetes.io/cluster/"))
    if restricted:
        return _bad("ValidationSucceeded", "TagValidationFailed",
                    f"spec.tags may not set {', '.join(restricted)}: karpweb sets them on every launch")
    try:  # the user's userData must merge (a Bottlerocket class needs TOML, a MIME document must be multipart)
        build(ami_family(spec), Bootstrap("c", "https://e", "", "10.100.0.0/16", {}), spec.get("userData"))
    except UserDataError as exc:
        return _bad("ValidationSucceeded", "InvalidUserData", f"spec.userData: {exc}")
    return {**_ok("ValidationSucceeded"), "message": launch_notes(spec, result)}


def launch_notes(spec: Mapping[str, Any], result: NodeClassResolution) -> str:
    """What the nodes will be told that the class does not say itself: where their cluster DNS
    address comes from, and the Bottlerocket settings dropped from spec.userData."""
    notes = []
    if (spec.get("kubelet") or {}).get("clusterDNS"):
        notes.append(f"cluster DNS {', '.join(spec['kubelet']['clusterDNS'])} from spec.kubelet.clusterDNS")
    elif result.cluster is not None and result.cluster.dns_ip:
        notes.append(f"cluster DNS {result.cluster.dns_ip} from {result.cluster.dns_source}")
    elif result.cluster is not None:
        notes.append(f"cluster DNS: {result.cluster.dns_source}; nodes use their AMI's default")
    if result.family == BOTTLEROCKET and (dropped := dropped_bottlerocket_keys(spec.get("userData"))):
        notes.append(f"spec.userData: settings.kubernetes keys Bottlerocket does not know are dropped: {', '.join(dropped)}")
    return "; ".join(notes)


def planned_max_pods(spec: Mapping[str, Any], eni_pods: int, vcpus: int, arch: str) -> int | None:
    """The max pods the engine plans a node of this type with under this class (spec.kubelet.maxPods,
    else the ENI limit or Windows' 110, capped by podsPerCore except on Bottlerocket): what the
    user data pins, as upstream writes the instance type's pod capacity. None when the class cannot
    run the type."""
    kubelet = spec.get("kubelet") or {}
    family = ami_family(spec)
    shape = node_shape(eni_pods, vcpus, 0, arch, NodeClassShape(ami_family=family if family in AMI_FAMILIES else AL2023),
                       max_pods=_count(kubelet.get("maxPods")), pods_per_core=_count(kubelet.get("podsPerCore")))
    return shape.pods if shape else None


def _count(value: Any) -> int | None:
    return int(value) if isinstance(value, int) or (isinstance(value, str) and value.isdigit()) else None
