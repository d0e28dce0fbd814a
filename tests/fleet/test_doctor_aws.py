"""The reservation doctor against the EC2 test server (moto over HTTP, with its STS, IAM and RAM):
each finding whose cause lives in AWS appears for a seeded cause and is cleared once the cause is
fixed, through the loop's EC2 step in the cluster's scope (its account's role assumed through STS)."""

import json

import boto3
import pytest
from moto.ec2.models import ec2_backends
from moto.iam.models import iam_backends

from fleet.models import AwsAccount, Cluster
from fleet.scope import cluster_scope
from reservations import doctor
from reservations.models import DoctorFinding, EC2NodeClass
from scheduling.adapters.ec2.client import assumed_role_session
from scheduling.loop import backends
from scheduling.models import NodePool
from tests.support.ec2_fixtures import *  # noqa: F403 - the EC2 test server (moto, with its STS)
from tests.support.ec2_server import EC2TestServer

ACCOUNT = "333333333333"
KARPWEB_ROLE = f"arn:aws:iam::{ACCOUNT}:role/karpweb-reader"
KARPENTER_ROLE = f"arn:aws:iam::{ACCOUNT}:role/KarpenterController"
RESERVED = [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["reserved", "on-demand"]}]
TRUST = json.dumps({"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"AWS": "*"},
                                                            "Action": "sts:AssumeRole"}]})


def policy(*actions):
    return json.dumps({"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": list(actions),
                                                               "Resource": "*"}]})


@pytest.fixture
def aws(settings, ec2_endpoint, aws_test_credentials, world):
    settings.KARPWEB_PROVIDER = "aws"
    settings.KARPWEB_EC2_ENDPOINT_URL = ec2_endpoint
    settings.KARPWEB_AWS_REGION = "us-east-1"
    settings.KARPWEB_PRICING_SOURCE = "bundled"
    backends.forget()
    yield EC2TestServer(account_id=ACCOUNT)  # that account's world, on the same server
    ec2_backends[ACCOUNT].reset()
    iam_backends[ACCOUNT]["aws"].reset()
    backends.forget()


@pytest.fixture
def their(aws, ec2_endpoint):
    """Clients working as the cluster's account (its role assumed through STS)."""
    session = assumed_role_session(KARPWEB_ROLE, region="us-east-1", sts_endpoint_url=ec2_endpoint)
    return {name: session.client(name, region_name="us-east-1", endpoint_url=ec2_endpoint) for name in ("iam", "ram")}


@pytest.fixture
def prod(db, aws, their):
    iam = their["iam"]
    for name, actions in (("karpweb-reader", [*doctor.engine.KARPWEB_OBSERVE_ACTIONS, *doctor.engine.KARPWEB_CONTROL_ACTIONS]),
                          ("KarpenterController", ["ec2:DescribeCapacityReservations", "ec2:RunInstances",
                                                   "ec2:CreateLaunchTemplate"])):
        iam.create_role(RoleName=name, AssumeRolePolicyDocument=TRUST)
        iam.put_role_policy(RoleName=name, PolicyName="reservations", PolicyDocument=policy(*actions))
    account = AwsAccount.objects.create(account_id=ACCOUNT, name="ml-prod", role_arn=KARPWEB_ROLE,
                                        regions=["us-east-1"])
    return Cluster.objects.create(name="prod", account=account, region="us-east-1", karpenter_role_arn=KARPENTER_ROLE)


def run(cluster):
    from scheduling.adapters.ec2.sync import sync_reservations

    with cluster_scope(cluster):
        cloud = backends.cloud()
        sync_reservations(cloud, None)
        return doctor.examine(cloud)


def active(cluster):
    return {(f.code, f.reservation_id, f.node_class_name, f.evidence_data.get("action", ""))
            for f in DoctorFinding.objects.fleet().filter(cluster=cluster, cleared_at__isnull=True)}


def test_each_aws_cause_is_found_and_cleared_when_fixed(world, aws, their, prod):
    own = aws.add_reservation("m5.large", "us-east-1a", 2)
    offered = world.add_reservation("m5.large", "us-east-1a", 1)  # another account's, offered through RAM
    invitation = world.invite(offered, ACCOUNT, "gpu-share")
    with cluster_scope(prod):
        node_class = EC2NodeClass.objects.create(
            name="default", capacity_reservation_selector_terms=[{"id": own}, {"tags": {"team": "nobody"}}])
        NodePool.objects.create(name="default", node_class=node_class, requirements=RESERVED)

    counts = run(prod)
    found = active(prod)
    assert ("ram-share-not-accepted", offered, "", "") in found
    assert ("selector-matches-nothing", "", "default", "") in found
    assert ("iam-permission-missing", "", "", "ec2:CreateFleet") in found  # Karpenter's role, by simulation
    assert not [f for f in found if f[3] and f[3] != "ec2:CreateFleet"]  # karpweb's own role has what it needs
    assert counts["doctor_new"] == len(found)
    invite = DoctorFinding.objects.fleet().get(cluster=prod, code="ram-share-not-accepted")
    assert invite.fix_command.endswith(invitation) and invite.severity == "critical"
    first_seen = invite.first_seen

    # Seen again: the same findings, first_seen kept.
    run(prod)
    assert active(prod) == found
    assert DoctorFinding.objects.fleet().get(pk=invite.pk).first_seen == first_seen

    # Fix each cause where it lives: accept the invitation, fix the policy, fix the term.
    their["ram"].accept_resource_share_invitation(resourceShareInvitationArn=invitation)
    their["iam"].put_role_policy(RoleName="KarpenterController", PolicyName="launch",
                                 PolicyDocument=policy("ec2:CreateFleet"))
    with cluster_scope(prod):
        EC2NodeClass.objects.filter(name="default").update(
            capacity_reservation_selector_terms=[{"id": own}, {"id": offered}])
    counts = run(prod)
    assert active(prod) == set()
    cleared = DoctorFinding.objects.fleet().filter(cluster=prod, cleared_at__isnull=False)
    assert {f.code for f in cleared} == {"ram-share-not-accepted", "selector-matches-nothing", "iam-permission-missing"}
    assert counts["doctor_cleared"] == len(found)


def test_a_refused_simulation_is_evidence_not_an_error(world, aws, prod):
    world.refuse_simulation()
    run(prod)
    refused = DoctorFinding.objects.fleet().filter(cluster=prod, code="iam-not-simulated", cleared_at__isnull=True)
    assert {f.evidence_data["principal"] for f in refused} == {"karpweb", "karpenter"}
    assert all("AccessDenied" in f.evidence and f.severity == "info" for f in refused)
    world.refuse_simulation(False)
    run(prod)
    assert not DoctorFinding.objects.fleet().filter(cluster=prod, code="iam-not-simulated", cleared_at__isnull=True)


def test_an_explicit_deny_in_karpwebs_own_role(aws, their, prod):
    deny = {"Version": "2012-10-17", "Statement": [{"Effect": "Deny", "Action": "ram:Get*", "Resource": "*"}]}
    their["iam"].put_role_policy(RoleName="karpweb-reader", PolicyName="deny", PolicyDocument=json.dumps(deny))
    run(prod)
    finding = DoctorFinding.objects.fleet().get(cluster=prod, code="iam-permission-missing",
                                                evidence_data__principal="karpweb")
    assert finding.evidence_data["decision"] == "explicitDeny"
    assert finding.evidence_data["action"] == "ram:GetResourceShareInvitations"
    assert "--role-name karpweb-reader" in finding.fix_command


def test_an_aws_error_keeps_what_could_not_be_checked(world, aws, prod):
    offered = world.add_reservation("m5.large", "us-east-1a", 1)
    world.invite(offered, ACCOUNT)
    run(prod)
    assert ("ram-share-not-accepted", offered, "", "") in active(prod)
    world.faults.inject("GetResourceShareInvitations", "InvalidParameterException", status=400)
    run(prod)  # RAM did not answer: the finding is neither renewed nor cleared
    assert ("ram-share-not-accepted", offered, "", "") in active(prod)
