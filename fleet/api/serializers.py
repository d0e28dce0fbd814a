"""AWS accounts and clusters as the API shows and takes them (camelCase, as the rest of the API)."""

from django.core.exceptions import ValidationError as DjangoValidationError
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.validators import UniqueValidator

from fleet.models import (
    AwsAccount, Cluster, validate_account_id, validate_ca_bundle, validate_cluster_name, validate_endpoint,
    validate_kubeconfig, validate_queue, validate_region, validate_regions, validate_role_arn, validate_service_cidr, validate_shard,
)
from reservations.api.serializers import ro, when
from scheduling.api.base import SlugField, StrictInputMixin
from scheduling.choices import Mode
from scheduling.loop.health import failing_steps, with_health

# Model field -> API field, for the errors a model's clean() names.
API_NAMES = {"account_id": "accountID", "role_arn": "roleARN", "external_id": "externalID", "is_default": "isDefault",
             "ca_bundle": "caBundle", "service_cidr": "serviceCIDR", "interruption_queue": "interruptionQueue"}


@extend_schema_field({"type": "array", "items": {"type": "string", "example": "us-east-1"}})
class RegionListField(serializers.JSONField):
    def __init__(self, **kwargs):
        super().__init__(validators=[validate_regions], **kwargs)


class ModelCleanMixin:
    """Runs the model's clean() on the object as it would be saved, its errors under the API's names."""

    def validate(self, attrs):
        attrs = super().validate(attrs)
        instance = self.instance or self.Meta.model()
        values = {name: getattr(instance, name) for name in attrs} if self.instance is not None else {}
        for name, value in attrs.items():
            setattr(instance, name, value)
        try:
            instance.clean()
        except DjangoValidationError as exc:
            raise serializers.ValidationError(
                {API_NAMES.get(field, field): messages for field, messages in exc.message_dict.items()}) from None
        finally:
            if self.instance is not None:
                for name, value in values.items():
                    setattr(instance, name, value)
        return attrs


class AwsAccountSerializer(ModelCleanMixin, StrictInputMixin, serializers.ModelSerializer):
    url = serializers.HyperlinkedIdentityField(view_name="fleet-api:awsaccount-detail", lookup_field="account_id")
    accountID = serializers.CharField(
        source="account_id", max_length=12, help_text="12 digits.",
        validators=[validate_account_id, UniqueValidator(AwsAccount.objects.all(), "an account with this ID exists")])
    name = serializers.CharField(max_length=64, validators=[UniqueValidator(AwsAccount.objects.all(),
                                                                            "an account with this name exists")])
    roleARN = serializers.CharField(source="role_arn", max_length=2048, required=False, allow_blank=True,
                                    validators=[validate_role_arn],
                                    help_text="The IAM role karpweb assumes; blank: karpweb's own credentials.")
    regions = RegionListField(required=False, help_text="The regions karpweb reads reservations in.")
    clusters = serializers.SlugRelatedField(many=True, read_only=True, slug_field="name")
    createdAt = when("created_at", null=False)
    updatedAt = when("updated_at", null=False)

    class Meta:
        model = AwsAccount
        fields = ["url", "accountID", "name", "roleARN", "regions", "clusters", "createdAt", "updatedAt"]


class ExternalIDSerializer(serializers.Serializer):
    """The one answer that shows an account's external ID (it is not shown again)."""

    accountID = serializers.CharField(read_only=True)
    externalID = serializers.CharField(read_only=True, help_text="Put it in the role's trust policy "
                                       '(Condition StringEquals "sts:ExternalId").')


class FailingStepSerializer(serializers.Serializer):
    step = serializers.CharField(help_text="The loop step (sync_kubernetes, provision, lifecycle, ...).")
    since = serializers.DateTimeField(help_text="Its first failure since its last success.")
    error = serializers.CharField(help_text="The last failure's first line.")


class ClusterSerializer(ModelCleanMixin, StrictInputMixin, serializers.ModelSerializer):
    url = serializers.HyperlinkedIdentityField(view_name="fleet-api:cluster-detail", lookup_field="name")
    name = serializers.CharField(
        max_length=63, help_text="A DNS label, unique in the fleet.",
        validators=[validate_cluster_name, UniqueValidator(Cluster.objects.all(), "a cluster with this name exists")])
    account = SlugField(slug_field="account_id", queryset=AwsAccount.objects.all(),
                                           help_text="The AWS account ID (an account karpweb knows).")
    region = serializers.CharField(max_length=32, required=False, allow_blank=True, validators=[validate_region])
    connection = serializers.ChoiceField(choices=Cluster.Connection.choices, required=False)
    kubeconfig = serializers.CharField(max_length=1024, required=False, allow_blank=True, validators=[validate_kubeconfig],
                                       help_text='A kubeconfig path inside KARPWEB_KUBECONFIG_DIR or '
                                                 '"secret:<namespace>/<name>[/<key>]".')
    endpoint = serializers.CharField(max_length=512, required=False, allow_blank=True, validators=[validate_endpoint],
                                     help_text="The API server's URL nodes join (blank: DescribeCluster; the default "
                                               "cluster: KARPWEB_CLUSTER_ENDPOINT).")
    caBundle = serializers.CharField(source="ca_bundle", required=False, allow_blank=True, validators=[validate_ca_bundle],
                                     help_text="The cluster's CA, base64 PEM (blank: DescribeCluster; the default "
                                               "cluster: KARPWEB_CLUSTER_CA_BUNDLE).")
    serviceCIDR = serializers.CharField(source="service_cidr", max_length=43, required=False, allow_blank=True,
                                        validators=[validate_service_cidr],
                                        help_text="The Service CIDR nodes get (blank: DescribeCluster; the default "
                                                  "cluster: KARPWEB_CLUSTER_CIDR).")
    interruptionQueue = serializers.CharField(
        source="interruption_queue", max_length=1024, required=False, allow_blank=True, validators=[validate_queue],
        help_text="The SQS queue (name or URL) of its interruption events (blank: none; the default cluster: "
                  "KARPWEB_INTERRUPTION_QUEUE).")
    mode = serializers.ChoiceField(choices=Mode.choices, required=False, allow_blank=True,
                                   help_text='observe, control, or "" to follow the global mode.')
    karpenter = serializers.ChoiceField(choices=Cluster.Karpenter.choices, required=False)
    shard = serializers.CharField(max_length=32, required=False, validators=[validate_shard])
    queue = serializers.CharField(read_only=True, help_text="The Celery queue that serves its shard.")
    isDefault = serializers.BooleanField(source="is_default", required=False,
                                         help_text="The cluster code works on when it opens no scope.")
    createdAt = when("created_at", null=False)
    updatedAt = when("updated_at", null=False)
    failingSteps = serializers.SerializerMethodField(
        help_text="Its loop steps whose newest run failed: step, since (the first failure after its last success) "
                  "and the last error's first line. Empty: healthy.")

    class Meta:
        model = Cluster
        fields = ["url", "name", "account", "region", "connection", "kubeconfig", "endpoint", "caBundle", "serviceCIDR",
                  "interruptionQueue", "mode", "karpenter", "shard", "queue", "isDefault", "createdAt", "updatedAt",
                  "failingSteps"]

    @extend_schema_field(FailingStepSerializer(many=True))
    def get_failingSteps(self, cluster) -> list:
        if not hasattr(cluster, "step_sync_kubernetes_status"):  # a row just written: read its health
            cluster = with_health(Cluster.objects.filter(pk=cluster.pk)).first() or cluster
        return [step.as_dict() for step in failing_steps(cluster)]
