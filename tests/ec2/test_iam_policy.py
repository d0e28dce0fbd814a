"""The IAM policies karpweb ships (deploy/iam/) allow every AWS operation the EC2 adapter calls and
nothing else: a boto3 call added without its permission fails here, not in an operator's account.

The calls are read from the source (ast): every string constant and every called attribute in
scheduling/adapters/ec2 that names an operation of a service karpweb makes a client for. That
directory is the only place that imports boto3 or botocore (checked below), so the scan sees every
call, including those made through the adapter's retrying `Caller` (`call(ec2, "create_fleet")`).

The observe policy (attached on its own) holds only reads; the control policy is attached beside it
to act, and holds the mutating calls and the interruption queue's."""

import ast
import json
import re
import string
from pathlib import Path

import botocore.session
from botocore import xform_name
from moto.iam.policy_validation import IAMPolicyDocumentValidator

ROOT = Path(__file__).resolve().parents[2]
ADAPTER = ROOT / "scheduling/adapters/ec2"
OBSERVE = ROOT / "deploy/iam/karpweb-observe-policy.json"
CONTROL = ROOT / "deploy/iam/karpweb-control-policy.json"
# botocore service name: IAM action prefix. A client for a service missing here fails the test.
SERVICES = {"ec2": "ec2", "pricing": "pricing", "resource-groups": "resource-groups", "ssm": "ssm", "iam": "iam",
            "eks": "eks", "sqs": "sqs", "sts": "sts", "ram": "ram", "savingsplans": "savingsplans"}
# Authorized by AWS along with a call, never called on their own: tags given at creation need them.
IMPLIED = {
    "ec2:RunInstances": "an instant CreateFleet is authorized as RunInstances on each resource it launches with",
    "ec2:CreateTags": "RunInstances, CreateFleet, CreateLaunchTemplate and PurchaseCapacityBlock with TagSpecifications",
    "iam:PassRole": "a launch with an instance profile, and AddRoleToInstanceProfile, pass the node role",
    "iam:TagInstanceProfile": "CreateInstanceProfile with Tags",
}
# A read that still belongs with acting: the interruption queue's URL is looked up only to consume
# it, and a message received there is taken from every other consumer (Karpenter's, beside Karpenter).
WITH_ACTING = {"sqs:GetQueueUrl"}
# Reads, assuming the role karpweb reads another account of the fleet through, and the reservation
# doctor's IAM policy simulation (it evaluates a role's policies): none changes anything.
READ = re.compile(r"^([a-z0-9-]+:(Describe|Get|List)[A-Za-z]+|sts:AssumeRole|iam:SimulatePrincipalPolicy)$")
PLACEHOLDERS = {"AWS_PARTITION", "AWS_REGION", "AWS_ACCOUNT_ID", "CLUSTER_NAME", "NODE_ROLE_NAME", "INTERRUPTION_QUEUE"}
SAMPLE = {"AWS_PARTITION": "aws", "AWS_REGION": "eu-west-1", "AWS_ACCOUNT_ID": "111122223333", "CLUSTER_NAME": "prod",
          "NODE_ROLE_NAME": "KarpenterNodeRole-prod", "INTERRUPTION_QUEUE": "prod"}


def adapter_trees() -> dict[Path, ast.Module]:
    return {path: ast.parse(path.read_text(), str(path)) for path in sorted(ADAPTER.glob("*.py"))}


def client_services(trees) -> set[str]:
    """The services the adapter makes clients for: `session.client("ec2", ...)`, `make_client("sqs", ...)`."""
    found = set()
    for tree in trees.values():
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call) or not node.args:
                continue
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            first = node.args[0]
            if name in ("client", "make_client") and isinstance(first, ast.Constant) and isinstance(first.value, str):
                found.add(first.value)
    return found


def called_actions(trees) -> set[str]:
    """`ec2:CreateFleet` for every operation name (as boto3 spells it) in the adapter's source."""
    session = botocore.session.get_session()
    by_method: dict[str, set[str]] = {}
    for service, prefix in SERVICES.items():
        for operation in session.get_service_model(service).operation_names:
            by_method.setdefault(xform_name(operation), set()).add(f"{prefix}:{operation}")
    found = set()
    for tree in trees.values():
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                found |= by_method.get(node.value, set())
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                found |= by_method.get(node.func.attr, set())
    return found


def load(path: Path) -> dict:
    return json.loads(path.read_text())


def actions(policy: dict) -> set[str]:
    return {action for statement in policy["Statement"]
            for action in ([statement["Action"]] if isinstance(statement["Action"], str) else statement["Action"])}


def test_only_the_ec2_adapter_imports_boto3():
    """Otherwise the scan below would miss calls made elsewhere."""
    importers = set()
    for package in ("accounts", "karpweb", "reservations", "scheduling", "scripts"):
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                modules = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                           else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
                if any(module.split(".")[0] in ("boto3", "botocore", "aiobotocore") for module in modules):
                    importers.add(path.parent.relative_to(ROOT).as_posix())
    assert importers == {"scheduling/adapters/ec2"}


def test_every_client_service_has_an_iam_prefix():
    services = client_services(adapter_trees())
    assert {"ec2", "pricing", "resource-groups", "ssm", "iam", "eks", "sqs"} <= services  # the scan finds them
    assert services - set(SERVICES) == set()


def test_the_policies_are_valid_iam_policy_documents():
    for path in (OBSERVE, CONTROL):
        policy = load(path)
        assert set(policy) == {"Version", "Statement"} and policy["Version"] == "2012-10-17", path.name
        sids = [statement["Sid"] for statement in policy["Statement"]]
        assert len(sids) == len(set(sids)) and all(re.fullmatch(r"[A-Za-z0-9]+", sid) for sid in sids), path.name
        for statement in policy["Statement"]:
            assert set(statement) <= {"Sid", "Effect", "Action", "Resource", "Condition"}, statement["Sid"]
            assert statement["Effect"] == "Allow" and "Resource" in statement, statement["Sid"]
            listed = [statement["Action"]] if isinstance(statement["Action"], str) else statement["Action"]
            assert listed and all(re.fullmatch(r"[a-z0-9-]+:[A-Z][A-Za-z]+", a) for a in listed), statement["Sid"]  # no wildcards
            resources = [statement["Resource"]] if isinstance(statement["Resource"], str) else statement["Resource"]
            assert all(r == "*" or r.startswith("arn:${AWS_PARTITION}:") for r in resources), statement["Sid"]
            for operator, keys in statement.get("Condition", {}).items():
                assert operator in {"StringEquals", "StringLike"} and isinstance(keys, dict), statement["Sid"]
        assert set(re.findall(r"\$\{([^}]*)\}", path.read_text())) <= PLACEHOLDERS, path.name
        # Filled in as the walkthrough does (envsubst), it passes moto's implementation of IAM's
        # policy grammar (the check CreatePolicy makes) and stays under a managed policy's 6,144
        # characters (whitespace not counted).
        filled = string.Template(path.read_text()).substitute(SAMPLE)
        IAMPolicyDocumentValidator(filled).validate()
        assert len(re.sub(r"\s", "", filled)) <= 6144, path.name


def test_the_adapter_calls_only_what_the_policies_allow():
    called = called_actions(adapter_trees())
    # Sanity: the scan finds the calls made through helpers, a variable operation name and several lines.
    assert {"ec2:CreateFleet", "ec2:DescribeInstanceTypes", "ec2:DescribeInstanceTypeOfferings",
            "ec2:DeleteLaunchTemplate", "pricing:GetProducts", "resource-groups:ListGroupResources",
            "ssm:GetParameter", "iam:CreateInstanceProfile", "eks:DescribeCluster", "sqs:ReceiveMessage"} <= called
    observe, control = actions(load(OBSERVE)), actions(load(CONTROL))
    assert called - (observe | control) == set()
    # And nothing more: every allowed action is called, or authorized along with one that is.
    assert (observe | control) - called - set(IMPLIED) == set()


def test_observe_reads_and_control_acts():
    called = called_actions(adapter_trees())
    observe, control = actions(load(OBSERVE)), actions(load(CONTROL))
    assert {action for action in observe if not READ.match(action)} == set()  # nothing that changes anything
    reads = {action for action in called if READ.match(action)}
    assert reads - WITH_ACTING - observe == set()  # observe mode alone sees everything it shows
    assert control & observe == set()  # the acting half is one policy, detached to go back to observe
    assert {action for action in control if READ.match(action)} == WITH_ACTING
    assert called - reads <= control
    assert {action for action in IMPLIED if not READ.match(action)} <= control


def test_the_guides_name_every_action():
    allowed = actions(load(OBSERVE)) | actions(load(CONTROL))
    for guide in ("docs/operations.md", "docs/ec2.md"):
        text = (ROOT / guide).read_text()
        assert {action for action in allowed if f"`{action}`" not in text} == set(), guide
    walkthrough = (ROOT / "docs/getting-started-eks.md").read_text()
    for name in PLACEHOLDERS:  # the walkthrough says what to put in each
        assert f"{name}=" in walkthrough, name
    assert "deploy/iam/karpweb-observe-policy.json" in walkthrough and "deploy/iam/karpweb-control-policy.json" in walkthrough
