"""Open mode, the answer to the open-reservation trap (issue 12).

With reserved capacity on, karpweb (as Karpenter) launches on-demand instances with
CapacityReservationPreference `none`, so open ODCRs that no selector term names sit idle but
billed. An EC2NodeClass in open mode launches its on-demand instances with preference `open`:
EC2 then runs them inside a matching open reservation when one has room. Such an instance stays
`on-demand` (upstream's rule: reserved means targeted), so it is never relabelled (relabelling is
what caused upstream's drift loops); karpweb records where it runs (`OpenReservationInstance`),
shows it on the reservation page and in the unselected-reservations report, and EC2 counts it in
the reservation's used units.

The setting is karpweb's: the model field, and on a real cluster the annotation
`karpweb.io/open-reservations: "true"` on the EC2NodeClass (Karpenter ignores annotations)."""

from __future__ import annotations

import logging

from django.db import transaction
from django.utils import timezone

from reservations.models import OPEN_RESERVATIONS_ANNOTATION, CapacityReservation, EC2NodeClass, OpenReservationInstance
from scheduling.adapters.kube import clusters as kube_clusters
from scheduling.audit import record_change

log = logging.getLogger(__name__)


class OpenModeConflict(Exception):
    """The EC2NodeClass changed after the edit read it."""


def annotation(enabled: bool) -> str | None:
    return "true" if enabled else None


@transaction.atomic
def set_open_mode(node_class: EC2NodeClass, enabled: bool, *, user, source: str, read_version: str | None = None) -> bool:
    """Turn open mode on or off; returns False when nothing changed. With a real cluster the
    annotation is written first (a stale `read_version` is refused there); the audit log records
    who changed it."""
    node_class = EC2NodeClass.objects.select_for_update().get(pk=node_class.pk)
    if read_version is not None and node_class.resource_version and read_version != node_class.resource_version:
        raise OpenModeConflict(
            f"EC2NodeClass {node_class.name} changed after version {read_version} was read; reload it and try again")
    if node_class.open_reservations == enabled:
        return False
    annotations = dict(node_class.annotations or {})
    if enabled:
        annotations[OPEN_RESERVATIONS_ANNOTATION] = "true"
    else:
        annotations.pop(OPEN_RESERVATIONS_ANNOTATION, None)
    version = node_class.resource_version
    adapter = kube_clusters.writer_for(node_class.cluster)
    if adapter is not None:  # the class's own cluster's API server, not whichever the settings name
        written = _write_to_cluster(adapter, node_class, enabled)
        version = written["metadata"]["resourceVersion"]
    elif version.isdigit() or not version:
        version = str(int(version or 0) + 1)
    EC2NodeClass.objects.filter(pk=node_class.pk).update(open_reservations=enabled, annotations=annotations,
                                                         resource_version=version)
    record_change(user=user, source=source, obj=node_class, action="change",
                  changes={"open_reservations": [not enabled, enabled]})
    return True


def _write_to_cluster(adapter, node_class: EC2NodeClass, enabled: bool) -> dict:
    try:
        return adapter.set_annotations(node_class.name, {OPEN_RESERVATIONS_ANNOTATION: annotation(enabled)},
                                       node_class.resource_version)
    except Exception as exc:
        if getattr(exc, "conflict", False):
            raise OpenModeConflict(str(exc)) from exc
        raise


def sync_open_instances(cloud, now=None, clusters=None) -> dict:
    """DescribeInstances, then `record_open_instances`; an EC2 error leaves the records as they were."""
    from scheduling.adapters.ec2.interface import CloudAPIError

    try:
        memberships = cloud.describe_instances()
    except CloudAPIError as exc:
        log.warning("open-mode instances not synced: %s", exc)
        return {"open_instances_errors": 1}
    return {"open_instances": record_open_instances(memberships, now, clusters)}


@transaction.atomic
def record_open_instances(memberships, now=None, clusters=None) -> int:
    """Store which on-demand instances EC2 runs inside a reservation (DescribeInstances'
    `open_reservation_id`); instances no longer reported are forgotten. Returns how many there are.
    The node on each instance is looked up in `clusters` (the clusters of the account the
    instances were described in; default: the scope's)."""

    now = now or timezone.now()
    found = {m.instance_id: m for m in memberships if getattr(m, "open_reservation_id", None)}
    reservations = {r.reservation_id: r for r in CapacityReservation.objects.filter(
        reservation_id__in={m.open_reservation_id for m in found.values()})}
    found = {iid: m for iid, m in found.items() if m.open_reservation_id in reservations}
    nodes = {}
    for name, provider_id in _node_provider_ids(clusters):
        nodes[provider_id.rstrip("/").rsplit("/", 1)[-1]] = name
    OpenReservationInstance.objects.exclude(instance_id__in=list(found)).delete()
    existing = {row.instance_id: row for row in OpenReservationInstance.objects.filter(instance_id__in=list(found))}
    for iid, m in found.items():
        row = existing.get(iid) or OpenReservationInstance(instance_id=iid, first_seen=now)
        row.reservation = reservations[m.open_reservation_id]
        row.instance_type, row.availability_zone = m.instance_type, m.zone
        row.node_name = nodes.get(iid, "")
        row.last_seen = now
        row.save()
    return len(found)


def _node_provider_ids(clusters) -> list[tuple[str, str]]:
    """(name, providerID) of the nodes of `clusters` (default: the scope's) that have one."""
    from fleet.scope import unscoped
    from scheduling.models import Node

    if clusters is None or clusters == [None]:
        return list(Node.objects.exclude(provider_id="").values_list("name", "provider_id"))
    with unscoped():  # the account's every cluster, whichever one's scope the step runs in
        return list(Node.objects.filter(cluster__in=[cluster.pk for cluster in clusters]).exclude(provider_id="")
                    .values_list("name", "provider_id"))
