"""EC2NodeClass launch status, after every EC2 sync (AWS only): what each class's launches resolve
to (``status.amis``, ``subnets``, ``securityGroups``, ``instanceProfile``) and the conditions
Karpenter writes for them, up to ``Ready``. The engine refuses to plan for a NodePool whose class is
not Ready, so the pool's page, ``simulate`` and the API say why. While Karpenter controls the
cluster, its own status is the truth (the Kubernetes sync mirrors it): karpweb resolves nothing."""

from django.utils import timezone

from fleet.connection import is_kubernetes
from reservations.models import EC2NodeClass
from scheduling.adapters.kube.interface import Condition
from scheduling.models import Mode
from scheduling.modes import control_refusal, global_mode

LAUNCH_CONDITIONS = ("AMIsReady", "SubnetsReady", "SecurityGroupsReady", "InstanceProfileReady", "ValidationSucceeded")


def launch_configured(spec: dict) -> bool:
    """A class written for launching (Karpenter's required amiSelectorTerms)."""
    return bool((spec or {}).get("amiSelectorTerms"))


def refresh_launch_status(cloud, cluster, now=None) -> dict:
    now = now or timezone.now()
    if is_kubernetes() and control_refusal():
        return {"launch_status": "Karpenter's"}
    create = global_mode() == Mode.CONTROL  # observe mode creates no instance profile
    changed = 0
    for node_class in EC2NodeClass.objects.order_by("name"):
        if not launch_configured(node_class.spec):
            continue
        resolved = cloud.resolve_node_class(node_class.name, node_class.uid, node_class.spec, create_profile=create,
                                            status_profile=(node_class.status_launch or {}).get("instanceProfile", ""))
        if write(node_class, resolved.status_fields(), resolved.conditions, now):
            changed += 1
            if is_kubernetes():
                cluster.set_conditions("EC2NodeClass", node_class.name,
                                       [Condition(c["type"], c["status"], c["reason"], c["message"])
                                        for c in node_class.conditions if c["type"] in (*LAUNCH_CONDITIONS, "Ready")],
                                       status_fields=node_class.status_launch)
    return {"node_classes_launch_changed": changed}


def write(node_class: EC2NodeClass, status: dict, conditions: list[dict], now) -> bool:
    """Store the resolution; Ready is True when every launch condition and CapacityReservationsReady
    (when present) are. Returns whether anything changed."""
    changed = node_class.status_launch != status
    node_class.status_launch = status
    for c in conditions:
        changed |= node_class.set_condition(c["type"], c["status"], c["reason"], c["message"], now=now)
    bad = [c for c in node_class.conditions
           if c["type"] in (*LAUNCH_CONDITIONS, "CapacityReservationsReady") and c["status"] != "True"]
    message = "; ".join(f"{c['type']} is {c['status']} ({c['reason']}): {c['message']}" for c in bad)
    changed |= node_class.set_condition("Ready", "False" if bad else "True", "UnhealthyDependents" if bad else "Ready",
                                        message, now=now)
    if changed:
        node_class.save(update_fields=["status_launch", "conditions"])
    return changed
