"""The fleet: the AWS accounts karpweb reads reservations in and the Kubernetes clusters it mirrors.

Every Kubernetes-side row (NodePools, NodeClaims, nodes, pods, EC2NodeClasses, decisions, ...)
belongs to one Cluster; every capacity reservation is seen by one or more AwsAccounts
(reservations.models.ReservationVisibility). fleet/scope.py says which cluster code works on."""

import base64
import binascii
import ipaddress
import re
import secrets
from pathlib import Path
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.urls import reverse

from fleet import access
from fleet.endpoints import SECRET_REFERENCE, endpoint_problem
from scheduling.choices import Mode
from scheduling.engine.coexistence import ABSENT, AUTO, PRESENT

ACCOUNT_ID = re.compile(r"^[0-9]{12}$")
# RFC 1123 label, as Kubernetes names a namespace: lower-case letters, digits and "-", at most 63.
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
# us-east-1, eu-central-2, us-gov-west-1, cn-north-1, ap-southeast-5, us-isob-east-1.
REGION = re.compile(r"^[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-[0-9]{1,2}$")
ROLE_ARN = re.compile(r"^arn:aws[a-z-]*:iam::[0-9]{12}:role/[\w+=,.@/-]{1,512}$")
SHARD = re.compile(r"^[a-z0-9]([-a-z0-9]{0,30}[a-z0-9])?$")
# An SQS queue's name (1 to 80 letters, digits, "-" and "_"; ".fifo" for a FIFO queue) or its URL.
QUEUE_NAME = re.compile(r"^[A-Za-z0-9_-]{1,80}(\.fifo)?$")
QUEUE_URL = re.compile(r"^https?://[^\s/]+/[0-9]{12}/[A-Za-z0-9_-]{1,80}(\.fifo)?$")
# SQS's own hosts name their region: sqs.us-east-1.amazonaws.com, us-east-1.queue.amazonaws.com.
SQS_HOST_REGION = re.compile(r"^(?:sqs\.([a-z0-9-]+)|([a-z0-9-]+)\.queue)\.amazonaws\.com(?:\.cn)?$")
PEM_CERTIFICATE = b"-----BEGIN CERTIFICATE-----"
# The Celery queue the default shard's clusters are served on: Celery's own default, the one every
# worker consumes today, so a single-cluster install runs exactly as before.
DEFAULT_SHARD = "default"
DEFAULT_QUEUE = "celery"


def validate_account_id(value: str) -> None:
    if not ACCOUNT_ID.match(value or ""):
        raise ValidationError('"%(value)s" is not an AWS account ID (12 digits, e.g. 123456789012)',
                              code="invalid_account_id", params={"value": value})


def validate_role_arn(value: str) -> None:
    if value and not ROLE_ARN.match(value):
        raise ValidationError('"%(value)s" is not an IAM role ARN '
                              "(arn:aws:iam::123456789012:role/karpweb-reader; blank uses karpweb's own credentials)",
                              code="invalid_role_arn", params={"value": value})


def validate_region(value: str, where: str = "") -> None:
    if not isinstance(value, str) or not REGION.match(value):
        raise ValidationError('%(where)s"%(value)s" is not an AWS region name (e.g. us-east-1)',
                              code="invalid_region", params={"where": where, "value": value})


def validate_regions(value) -> None:
    if not isinstance(value, list):
        raise ValidationError("a list of region names is expected, e.g. [\"us-east-1\", \"eu-west-1\"]",
                              code="not_a_list")
    for index, region in enumerate(value):
        validate_region(region, where=f"entry {index + 1}: ")
    if len(set(value)) != len(value):
        raise ValidationError("a region is named twice", code="duplicate_region")


def validate_cluster_name(value: str) -> None:
    if not DNS_LABEL.match(value or ""):
        raise ValidationError('"%(value)s" is not a DNS label (lower-case letters, digits and "-", '
                              "starting and ending with a letter or digit, at most 63 characters)",
                              code="invalid_name", params={"value": value})


def validate_shard(value: str) -> None:
    if not SHARD.match(value or ""):
        raise ValidationError('"%(value)s" is not a shard name (lower-case letters, digits and "-", '
                              "at most 32 characters, e.g. default or eu)", code="invalid_shard", params={"value": value})


def validate_queue(value: str) -> None:
    if value and not (QUEUE_NAME.match(value) or QUEUE_URL.match(value)):
        raise ValidationError('"%(value)s" is neither an SQS queue name (letters, digits, "-" and "_", at most 80) nor '
                              "its URL (https://sqs.us-east-1.amazonaws.com/123456789012/karpweb-interruptions)",
                              code="invalid_queue", params={"value": value[:200]})


def validate_endpoint(value: str) -> None:
    problem = endpoint_problem(value) if value else ""
    if problem:
        raise ValidationError('"%(value)s" is not an API server URL: it %(problem)s (e.g. https://0123456789ABCDEF.gr7.'
                              "us-east-1.eks.amazonaws.com)", code="invalid_endpoint",
                              params={"value": value[:200], "problem": problem})


def kubeconfig_dir() -> Path | None:
    """KARPWEB_KUBECONFIG_DIR, resolved: the one directory a cluster's kubeconfig path may name."""
    configured = getattr(settings, "KARPWEB_KUBECONFIG_DIR", "")
    return Path(configured).resolve() if configured else None


def kubeconfig_problem(value: str) -> str:
    """"" when `value` is a Secret reference, a path inside KARPWEB_KUBECONFIG_DIR, or the deployment's
    own KUBECONFIG (its operator's, trusted: the first cluster's row names it, fleet/defaults.py); else why not."""
    from django.conf import settings

    if value and value == (getattr(settings, "KARPWEB_KUBECONFIG", "") or ""):
        return ""
    if value.startswith("secret:"):
        return "" if SECRET_REFERENCE.match(value) else (
            'is not a Secret reference ("secret:<namespace>/<name>[/<key>]", e.g. secret:karpweb/prod-eu-kubeconfig)')
    allowed = kubeconfig_dir()
    if allowed is None:
        return ("is a file path, and KARPWEB_KUBECONFIG_DIR names no directory kubeconfigs may be read from: "
                "set it, or keep the kubeconfig in a Secret (secret:<namespace>/<name>)")
    if "\x00" in value or not value.startswith("/"):
        return "is not an absolute path"
    if not Path(value).resolve().is_relative_to(allowed):
        return f"is outside KARPWEB_KUBECONFIG_DIR ({allowed})"
    return ""


def validate_kubeconfig(value: str) -> None:
    problem = kubeconfig_problem(value) if value else ""
    if problem:
        raise ValidationError('"%(value)s" %(problem)s', code="invalid_kubeconfig",
                              params={"value": value[:200], "problem": problem})


def queue_problem(value: str, account_id: str, region: str) -> str:
    """"" when the interruption queue `value` (a name, or a URL) is in `account_id` and `region`; a
    name is always looked up there. A URL elsewhere would let another account's messages drain nodes."""
    if not value or not value.startswith(("https://", "http://")):
        return ""
    parts = urlsplit(value)
    owner = parts.path.strip("/").split("/")[0]
    if owner != account_id:
        return f"is in account {owner}, not the cluster's account {account_id}"
    from scheduling.adapters.ec2.client import setting

    configured = setting("KARPWEB_SQS_ENDPOINT_URL", setting("KARPWEB_EC2_ENDPOINT_URL")) or ""
    if configured and parts.netloc == urlsplit(configured).netloc:
        return ""  # the SQS endpoint the settings name (a VPC endpoint, the test server) serves the account's queues
    found = SQS_HOST_REGION.match(parts.hostname or "")
    if parts.scheme != "https" or not found:
        return "is not an https:// URL of SQS (https://sqs.<region>.amazonaws.com/<account>/<queue>)"
    if region and (found.group(1) or found.group(2)) != region:
        return f"is in region {found.group(1) or found.group(2)}, not the cluster's region {region}"
    return ""


# What the audit log says of an external ID: never the value.
EXTERNAL_ID_HIDDEN = "(karpweb's, not shown again)"


def new_external_id() -> str:
    """An sts:ExternalId karpweb makes for an account (one per account, 32 random URL-safe characters)."""
    return "karpweb-" + secrets.token_urlsafe(24)


def validate_ca_bundle(value: str) -> None:
    """Base64 of a PEM certificate bundle, as EKS's certificateAuthority.data and Karpenter's CLUSTER_CA_BUNDLE."""
    if not value:
        return
    try:
        pem = base64.b64decode("".join(value.split()), validate=True)
    except (binascii.Error, ValueError):
        raise ValidationError("is not base64: give the PEM bundle base64-encoded, as EKS's certificateAuthority.data",
                              code="invalid_ca_bundle") from None
    if PEM_CERTIFICATE not in pem:
        raise ValidationError("decodes to no PEM certificate (-----BEGIN CERTIFICATE-----)", code="invalid_ca_bundle")


def validate_service_cidr(value: str) -> None:
    if not value:
        return
    try:
        ipaddress.ip_network(value, strict=True)
    except ValueError as exc:
        raise ValidationError('"%(value)s" is not a CIDR block (e.g. 10.100.0.0/16): %(why)s', code="invalid_cidr",
                              params={"value": value[:64], "why": str(exc)}) from None


class ClusterQuerySet(access.RequesterQuerySet):
    """Cluster.objects: the clusters the requester may see (fleet/access.py); every one outside requests."""

    def requester_q(self, requester):
        return models.Q(pk__in=list(requester.cluster_roles)) | models.Q(account_id__in=list(requester.account_roles))


class AccountQuerySet(access.RequesterQuerySet):
    """AwsAccount.objects: the accounts the requester may see (bound, or holding a cluster it sees)."""

    def requester_q(self, requester):
        return models.Q(pk__in=list(requester.account_roles)) | models.Q(
            pk__in=Cluster._base_manager.filter(pk__in=list(requester.cluster_roles)).values("account_id"))


def shard_queue(shard: str) -> str:
    """The Celery queue that serves a shard's clusters: `celery` (Celery's default, what every worker
    consumes) for the default shard, `karpweb-shard-<shard>` for any other."""
    return DEFAULT_QUEUE if shard == DEFAULT_SHARD else f"karpweb-shard-{shard}"


class AwsAccount(models.Model):
    """An AWS account karpweb reads (and, in control mode, buys and launches) in."""

    account_id = models.CharField("account ID", max_length=12, unique=True, validators=[validate_account_id],
                                  help_text="12 digits.")
    name = models.CharField(max_length=64, unique=True, help_text='What people call it, e.g. "ml-prod".')
    role_arn = models.CharField(
        "role ARN", max_length=2048, blank=True, validators=[validate_role_arn],
        help_text="The IAM role karpweb assumes through STS to work in this account; blank: karpweb's own credentials.")
    external_id = models.CharField(
        "external ID", max_length=1224, blank=True, default=new_external_id, editable=False,
        help_text="The sts:ExternalId karpweb sends when it assumes the role: made by karpweb, shown once to the "
                  "administrator for the role's trust policy, never to viewers.")
    regions = models.JSONField(default=list, blank=True, validators=[validate_regions],
                               help_text='The regions karpweb reads reservations in, e.g. ["us-east-1"].')
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = AccountQuerySet.as_manager()

    class Meta:
        ordering = ["name"]
        verbose_name = "AWS account"

    def __str__(self):
        return f"{self.name} ({self.account_id})"

    def get_absolute_url(self):
        return reverse("fleet:account", args=[self.account_id])


class Cluster(models.Model):
    """A Kubernetes cluster karpweb mirrors, in one account and one region."""

    class Connection(models.TextChoices):
        SIMULATED = "simulated", "simulated (the embedded world)"
        IN_CLUSTER = "in-cluster", "in-cluster service account"
        KUBECONFIG = "kubeconfig", "kubeconfig"
        EKS = "eks", "EKS (endpoint and token from the account's credentials)"

    class Karpenter(models.TextChoices):
        AUTO = AUTO, "auto (detect its leader Lease)"
        PRESENT = PRESENT, "present (never control)"
        ABSENT = ABSENT, "absent"

    name = models.CharField(max_length=63, unique=True, validators=[validate_cluster_name],
                            help_text="A DNS label, unique in the fleet (EKS: the cluster's name).")
    account = models.ForeignKey(AwsAccount, on_delete=models.PROTECT, related_name="clusters")
    region = models.CharField(max_length=32, blank=True, validators=[validate_region],
                              help_text="Where its nodes run (blank: the simulated world's or the SDK's default).")
    connection = models.CharField(max_length=16, choices=Connection.choices, default=Connection.SIMULATED)
    kubeconfig = models.CharField(
        max_length=1024, blank=True, validators=[validate_kubeconfig],
        help_text='A kubeconfig path inside KARPWEB_KUBECONFIG_DIR, or a Secret reference '
                  '"secret:<namespace>/<name>[/<key>]" (connection kubeconfig).')
    endpoint = models.CharField(max_length=512, blank=True, validators=[validate_endpoint],
                                help_text="The API server's URL nodes join, when karpweb cannot read it from the "
                                          "kubeconfig or EKS (blank: DescribeCluster; the default cluster: "
                                          "KARPWEB_CLUSTER_ENDPOINT).")
    ca_bundle = models.TextField(
        "CA bundle", blank=True, validators=[validate_ca_bundle],
        help_text="The API server's certificate authority, base64 PEM, as nodes get it (blank: DescribeCluster; the "
                  "default cluster: KARPWEB_CLUSTER_CA_BUNDLE).")
    service_cidr = models.CharField(
        "service CIDR", max_length=43, blank=True, validators=[validate_service_cidr],
        help_text="The cluster's Service CIDR, as nodes get it (blank: DescribeCluster; the default cluster: "
                  "KARPWEB_CLUSTER_CIDR).")
    interruption_queue = models.CharField(
        max_length=1024, blank=True, validators=[validate_queue],
        help_text="The SQS queue (name or URL) its EventBridge rules send EC2 interruption events to, read with its "
                  "account's credentials (blank: none; the default cluster: KARPWEB_INTERRUPTION_QUEUE).")
    mode = models.CharField(max_length=10, choices=Mode.choices, blank=True,
                            help_text="Blank follows the global mode (KARPWEB_MODE).")
    karpenter = models.CharField(max_length=8, choices=Karpenter.choices, default=Karpenter.AUTO,
                                 help_text="Whether Karpenter runs in it (as KARPWEB_KARPENTER says for one cluster).")
    shard = models.CharField(max_length=32, default=DEFAULT_SHARD, validators=[validate_shard],
                             help_text="Which Celery queue and watch process serve it.")
    karpenter_role_arn = models.CharField(
        "Karpenter's role ARN", max_length=2048, blank=True, validators=[validate_role_arn],
        help_text="The IAM role Karpenter's controller runs as here: the reservation doctor simulates its policies "
                  "(iam:SimulatePrincipalPolicy). Blank: not checked.")
    is_default = models.BooleanField(
        "default", default=False,
        help_text="The cluster code works on when it opens no scope (needed once the fleet has several).")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = ClusterQuerySet.as_manager()

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["is_default"], condition=models.Q(is_default=True),
                                               name="at_most_one_default_cluster")]

    def __str__(self):
        return self.name

    def get_absolute_url(self):
        return reverse("fleet:cluster", args=[self.name])

    def clean(self):
        super().clean()
        if self.connection == self.Connection.KUBECONFIG and not self.kubeconfig:
            raise ValidationError({"kubeconfig": "a path or a Secret reference is required when the connection is "
                                                 "kubeconfig"})
        if self.connection == self.Connection.EKS and not self.region:
            raise ValidationError({"region": "an EKS cluster needs its region"})
        if self.interruption_queue and self.account_id:
            problem = queue_problem(self.interruption_queue, self.account.account_id,
                                    self.region or getattr(settings, "KARPWEB_AWS_REGION", "") or "")
            if problem:
                raise ValidationError({"interruption_queue": f"the queue {problem}"})
        if self.connection == self.Connection.EKS and (self.endpoint or self.ca_bundle) and self.account_id:
            from scheduling.adapters.kube.eks import join_settings_problems

            problems = join_settings_problems(self)
            if problems:
                raise ValidationError(problems)
        if self.is_default:
            other = Cluster.objects.filter(is_default=True).exclude(pk=self.pk).values_list("name", flat=True).first()
            if other:
                raise ValidationError({"is_default": f'cluster "{other}" is the default; unflag it first'})

    @property
    def queue(self) -> str:
        """The Celery queue its loop runs on (shard_queue)."""
        return shard_queue(self.shard)

    @property
    def is_simulated(self) -> bool:
        return self.connection == self.Connection.SIMULATED


class RoleBinding(models.Model):
    """A role (viewer or operator) for a user or a group (a karpweb group, or a group the identity
    provider names in its groups claim) on the whole fleet, on one account (its clusters and the
    reservations it sees) or on one cluster (fleet/access.py enforces it)."""

    class Role(models.TextChoices):
        VIEWER = "viewer"
        OPERATOR = "operator"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE,
                             related_name="role_bindings")
    group = models.CharField(max_length=255, blank=True,
                             help_text="A karpweb group or an identity provider's group name (instead of a user).")
    role = models.CharField(max_length=8, choices=Role.choices)
    account = models.ForeignKey(AwsAccount, null=True, blank=True, on_delete=models.CASCADE, related_name="bindings")
    cluster = models.ForeignKey(Cluster, null=True, blank=True, on_delete=models.CASCADE, related_name="bindings")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["user__username", "group", "role"]
        constraints = [
            models.CheckConstraint(condition=models.Q(user__isnull=False, group="") | models.Q(user__isnull=True) & ~models.Q(group=""),
                                   name="binding_names_a_user_or_a_group"),
            models.CheckConstraint(condition=models.Q(account__isnull=True) | models.Q(cluster__isnull=True),
                                   name="binding_is_on_an_account_or_a_cluster"),
        ]

    def __str__(self):
        who = self.user.get_username() if self.user_id else f"group {self.group}"
        return f"{who}: {self.role} on {self.scope_label}"

    @property
    def scope_label(self) -> str:
        if self.cluster_id:
            return f"cluster {self.cluster.name}"
        if self.account_id:
            return f"account {self.account.account_id}"
        return "the fleet"

    def clean(self):
        if bool(self.user_id) == bool(self.group):
            raise ValidationError({"group": "name a user or a group, not both and not neither"})
        if self.account_id and self.cluster_id:
            raise ValidationError({"cluster": "a binding is on an account or a cluster (or, with neither, the fleet)"})
