"""Every AWS operation the EC2 adapter calls is in the IAM policy docs/ec2.md gives (and the list
in docs/operations.md's Security section): a call added without its permission fails here, not in an operator's account."""

import json
import re
from pathlib import Path

import botocore.session
from botocore import xform_name

ROOT = Path(__file__).resolve().parents[2]
SERVICES = {"ec2": "ec2", "pricing": "pricing", "resource-groups": "resource-groups", "ssm": "ssm", "iam": "iam",
            "eks": "eks", "sqs": "sqs"}  # botocore name: IAM prefix


def called_actions() -> set[str]:
    """`ec2:CreateFleet` for every operation name (as boto3 spells it) in the adapter's source."""
    session = botocore.session.get_session()
    by_method = {}
    for service, prefix in SERVICES.items():
        for operation in session.get_service_model(service).operation_names:
            by_method.setdefault(xform_name(operation), set()).add(f"{prefix}:{operation}")
    source = "\n".join(path.read_text() for path in (ROOT / "scheduling/adapters/ec2").glob("*.py"))
    found = set()
    for literal in re.findall(r'"([a-z][a-z0-9_]+)"', source):
        found |= by_method.get(literal, set())
    return found


def policy_actions() -> set[str]:
    text = (ROOT / "docs/ec2.md").read_text()
    policy = json.loads(re.search(r"```json\n(.*?)```", text, re.S)[1])
    return {action for statement in policy["Statement"] for action in
            ([statement["Action"]] if isinstance(statement["Action"], str) else statement["Action"])}


def test_the_adapter_calls_what_the_policy_allows():
    called = called_actions()
    # Sanity: the scan finds the calls made through helpers and over several lines.
    assert {"ec2:CreateFleet", "ec2:DescribeInstanceTypes", "ec2:DeleteLaunchTemplate", "pricing:GetProducts",
            "resource-groups:ListGroupResources", "ssm:GetParameter", "iam:CreateInstanceProfile",
            "eks:DescribeCluster"} <= called
    assert called - policy_actions() == set()


def test_the_operations_guide_lists_the_same_actions():
    guide = (ROOT / "docs/operations.md").read_text()
    assert {action for action in policy_actions() if f"`{action}`" not in guide} == set()
