"""The simulated EC2's images, subnets and security groups, and how an EC2NodeClass's selector
terms resolve against them (status.amis, status.subnets, status.securityGroups), so that AMI,
subnet and security-group drift show in the demo and in tests without AWS.

Two Amazon Linux 2023 releases exist: `al2023@latest` resolves to the newer one, `al2023@v20261001`
pins the older. Pinning a class to the older release (or back) drifts its nodes (AMIDrift); a
subnet or security-group selector that stops matching what a node runs with drifts it too."""

from __future__ import annotations

from scheduling.adapters.ec2.amis import NVIDIA, STANDARD, Image, image_for, newest_first

RELEASES = ("v20261001", "v20261101")  # oldest first; the last is `latest`
LATEST = RELEASES[-1]
DISCOVERY = {"karpenter.sh/discovery": "demo"}
# (id, zone, zone id, tags)
SUBNETS = (
    ("subnet-0sim1a0000000001", "us-east-1a", "use1-az1", DISCOVERY),
    ("subnet-0sim1b0000000001", "us-east-1b", "use1-az2", DISCOVERY),
    ("subnet-0sim1c0000000001", "us-east-1c", "use1-az4", DISCOVERY),
    ("subnet-0sim1a0000000002", "us-east-1a", "use1-az1", {"karpenter.sh/discovery": "demo-private"}),
    ("subnet-0sim1b0000000002", "us-east-1b", "use1-az2", {"karpenter.sh/discovery": "demo-private"}),
    ("subnet-0sim1c0000000002", "us-east-1c", "use1-az4", {"karpenter.sh/discovery": "demo-private"}),
)
# (id, name, tags)
SECURITY_GROUPS = (
    ("sg-0sim00000000000001", "demo-nodes", DISCOVERY),
    ("sg-0sim00000000000002", "demo-cluster", DISCOVERY),
    ("sg-0sim00000000000003", "demo-strict", {"karpenter.sh/discovery": "demo-strict"}),
)


def images() -> list[Image]:
    """Every release for amd64 and arm64, standard and nvidia."""
    result = []
    for index, release in enumerate(RELEASES):
        for arch in ("amd64", "arm64"):
            for variant in (STANDARD, NVIDIA):
                ident = f"ami-0sim{index:02d}{'a' if arch == 'amd64' else 'g'}{'s' if variant == STANDARD else 'n'}0000000"
                name = f"amazon-eks-node-al2023-{arch}-{variant}-{release}"
                result.append(Image(ident, name, arch, variant, created=f"{release[1:5]}-{release[5:7]}-{release[7:9]}"))
    return result


def _tags_match(selector: dict, tags: dict) -> bool:
    return all(tags.get(k) == v or (v == "*" and k in tags) for k, v in (selector or {}).items())


def resolve_images(terms) -> list[Image]:
    chosen = []
    for term in terms or []:
        alias = term.get("alias", "")
        if alias.startswith("al2023@"):
            release = LATEST if alias == "al2023@latest" else alias.split("@", 1)[1]
            chosen += [i for i in images() if i.name.endswith(release)]
        elif term.get("id"):
            chosen += [i for i in images() if i.id == term["id"]]
        elif term.get("name"):
            chosen += [i for i in images() if i.name == term["name"]]
    return newest_first(list({i.id: i for i in chosen}.values()))


def resolve_subnets(terms) -> list[dict]:
    found = {sid: (sid, zone, zone_id) for term in terms or [] for sid, zone, zone_id, tags in SUBNETS
             if (term.get("id") == sid) or (not term.get("id") and term.get("tags") and _tags_match(term["tags"], tags))}
    return [{"id": sid, "zone": zone, "zoneID": zone_id} for sid, zone, zone_id in sorted(found.values())]


def resolve_security_groups(terms) -> list[dict]:
    found = {gid: name for term in terms or [] for gid, name, tags in SECURITY_GROUPS
             if term.get("id") == gid or (term.get("name") and term.get("name") == name)
             or (not term.get("id") and not term.get("name") and term.get("tags") and _tags_match(term["tags"], tags))}
    return [{"id": gid, "name": name} for gid, name in sorted(found.items())]


def resolve(spec: dict) -> dict:
    """The launch status of an EC2NodeClass spec: `amis`, `subnets`, `securityGroups`."""
    return {"amis": [i.status() for i in resolve_images(spec.get("amiSelectorTerms"))],
            "subnets": resolve_subnets(spec.get("subnetSelectorTerms")),
            "securityGroups": resolve_security_groups(spec.get("securityGroupSelectorTerms"))}


def launched_with(spec: dict, zone: str, arch: str, variant: str) -> tuple[str, str, list[str]]:
    """(image, subnet, security groups) an instance of this shape in this zone launches with."""
    image = image_for(resolve_images(spec.get("amiSelectorTerms")), arch, variant)
    subnet = next((s["id"] for s in resolve_subnets(spec.get("subnetSelectorTerms")) if s["zone"] == zone), "")
    groups = [g["id"] for g in resolve_security_groups(spec.get("securityGroupSelectorTerms"))]
    return (image.id if image else ""), subnet, groups
