"""Label keys and values the engine gives a meaning to (kubernetes-sigs/karpenter and
aws/karpenter-provider-aws `pkg/apis/v1/labels.go`)."""

ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
ZONE_ID = "topology.k8s.aws/zone-id"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
ARCH = "kubernetes.io/arch"
OS = "kubernetes.io/os"
WINDOWS_BUILD = "node.kubernetes.io/windows-build"
HOSTNAME = "kubernetes.io/hostname"
CAPACITY_TYPE = "karpenter.sh/capacity-type"
NODEPOOL = "karpenter.sh/nodepool"
# Lifecycle labels Karpenter puts on a node once registered / initialized.
REGISTERED = "karpenter.sh/registered"
INITIALIZED = "karpenter.sh/initialized"
RESERVATION_ID = "karpenter.k8s.aws/capacity-reservation-id"
RESERVATION_TYPE = "karpenter.k8s.aws/capacity-reservation-type"
RESERVATION_INTERRUPTIBLE = "karpenter.k8s.aws/capacity-reservation-interruptible"
# A pseudo-label for `matchFields: metadata.name`; only existing nodes carry it.
NODE_NAME_FIELD = "metadata.name"

ON_DEMAND = "on-demand"
SPOT = "spot"
RESERVED = "reserved"
CAPACITY_TYPES = (ON_DEMAND, SPOT, RESERVED)
# The launch preference: reserved before spot before on-demand.
CAPACITY_TYPE_PREFERENCE = {RESERVED: 0, SPOT: 1, ON_DEMAND: 2}

RESERVATION_DEFAULT = "default"
RESERVATION_CAPACITY_BLOCK = "capacity-block"

# Every label a node gets from its reservation; demotion removes all of them (issue 5).
RESERVATION_LABELS = (RESERVATION_ID, RESERVATION_TYPE, RESERVATION_INTERRUPTIBLE)

# Labels whose value comes from the chosen offering rather than from the instance type.
OFFERING_LABELS = frozenset({ZONE, ZONE_ID, CAPACITY_TYPE, *RESERVATION_LABELS})

# Labels the AWS provider sets from the instance type (pkg/apis/v1/labels.go).
AWS_INSTANCE_LABELS = frozenset(
    "karpenter.k8s.aws/" + suffix
    for suffix in (
        "instance-hypervisor", "instance-encryption-in-transit-supported", "instance-category",
        "instance-family", "instance-generation", "instance-local-nvme", "instance-size",
        "instance-cpu", "instance-cpu-manufacturer", "instance-cpu-sustained-clock-speed-mhz",
        "instance-memory", "instance-ebs-bandwidth", "instance-network-bandwidth",
        "instance-gpu-name", "instance-gpu-manufacturer", "instance-gpu-count",
        "instance-gpu-memory", "instance-accelerator-name", "instance-accelerator-manufacturer",
        "instance-accelerator-count", "instance-capability-flex",
    )
)

# Labels that an instance type defines; a type without one of them is treated as not having it.
INSTANCE_LABELS = frozenset({INSTANCE_TYPE, ARCH, OS, REGION, WINDOWS_BUILD}) | AWS_INSTANCE_LABELS

# Well-known labels: a NodePool need not constrain them, the instance types and offerings do
# (upstream `WellKnownLabels`, with the AWS additions).
WELL_KNOWN_LABELS = INSTANCE_LABELS | OFFERING_LABELS | {NODEPOOL}

# Deprecated keys a requirement may still name, read as their current names (upstream
# `NormalizedLabels`, applied to every requirement: pods', NodePools', template labels).
NORMALIZED_LABELS = {
    "failure-domain.beta.kubernetes.io/zone": ZONE,
    "failure-domain.beta.kubernetes.io/region": REGION,
    "beta.kubernetes.io/arch": ARCH,
    "beta.kubernetes.io/os": OS,
    "beta.kubernetes.io/instance-type": INSTANCE_TYPE,
}

DEFAULT_ARCH = "amd64"
DEFAULT_OS = "linux"
