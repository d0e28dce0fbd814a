"""Karpenter's launch templates for the open-reservation trap, read over HTTP from the EC2 test server:
DescribeLaunchTemplates by the karpenter.k8s.aws/cluster tag, then each one's latest version's
CapacityReservationPreference (DescribeLaunchTemplateVersions $Latest)."""

from scheduling.adapters.ec2.launch import KARPENTER_CLUSTER_TAG, KARPENTER_NODECLASS_TAG, NODECLASS_TAG


def template(raw_ec2, name, tags, preference=None):
    data = {"ImageId": "ami-12c6146b"}
    if preference:
        data["CapacityReservationSpecification"] = {"CapacityReservationPreference": preference}
    answer = raw_ec2.create_launch_template(
        LaunchTemplateName=name, LaunchTemplateData=data,
        TagSpecifications=[{"ResourceType": "launch-template", "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}])
    return answer["LaunchTemplate"]["LaunchTemplateId"]


def test_karpenters_templates_and_their_latest_preference(world, provider, raw_ec2):
    import uuid

    suffix = uuid.uuid4().hex[:8]
    opted_out = template(raw_ec2, f"karpenter.k8s.aws/{suffix}-a", {KARPENTER_CLUSTER_TAG: f"prod-{suffix}",
                                                                    KARPENTER_NODECLASS_TAG: "default"}, "open")
    # A newer version opts out: the latest is what Karpenter launches with.
    raw_ec2.create_launch_template_version(LaunchTemplateId=opted_out, SourceVersion="1", LaunchTemplateData={
        "ImageId": "ami-12c6146b", "CapacityReservationSpecification": {"CapacityReservationPreference": "none"}})
    template(raw_ec2, f"karpenter.k8s.aws/{suffix}-b", {KARPENTER_CLUSTER_TAG: f"prod-{suffix}"})
    template(raw_ec2, f"karpweb/{suffix}", {NODECLASS_TAG: "default"}, "none")  # karpweb's own: not Karpenter's
    found = [t for t in provider.cluster_launch_templates() if t.cluster == f"prod-{suffix}"]
    assert [(t.name, t.version, t.preference, t.node_class) for t in found] == [
        (f"karpenter.k8s.aws/{suffix}-a", 2, "none", "default"), (f"karpenter.k8s.aws/{suffix}-b", 1, "", "")]
    assert not any(t.name == f"karpweb/{suffix}" for t in provider.cluster_launch_templates())
    versions = [c.params.get("Versions") for c in world.calls_of("DescribeLaunchTemplateVersions")]
    assert versions and all(v == ["$Latest"] for v in versions)
