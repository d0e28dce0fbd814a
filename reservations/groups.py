"""Capacity Reservation groups as karpweb stores them: the members each group term resolves to
(synced from EC2's Resource Groups API, or entered in the admin for the simulated world), handed
to the engine as WORLD.json `capacityReservationGroups` (by `scheduling.world`), and the group a launch targets."""

from __future__ import annotations

import contextlib
import logging

from django.db import transaction
from django.utils import timezone

from fleet.scope import unscoped
from reservations.models import CapacityReservation, CapacityReservationGroup, EC2NodeClass
from scheduling.engine.groups import group_arns, group_target
from scheduling.engine.timeutil import format_time
from scheduling.engine.world import parse_world
from scheduling.world import reservation_item

log = logging.getLogger(__name__)


def named_group_arns(clusters=None) -> list[str]:
    """Every group ARN an EC2NodeClass's selector terms name, sorted: the scope's classes, or those of
    `clusters` (the clusters one EC2 step serves: the same account may run several), or with
    `clusters="fleet"` every cluster's."""
    classes = EC2NodeClass.objects
    with contextlib.ExitStack() as stack:
        if clusters is not None and clusters != [None]:
            stack.enter_context(unscoped())
            if clusters != "fleet":
                classes = classes.filter(cluster__in=[cluster.pk for cluster in clusters])
        arns = set()
        for terms in classes.values_list("capacity_reservation_selector_terms", flat=True):
            arns.update(group_arns(terms))
    return sorted(arns)


def sync_groups(provider, now=None, clusters=None) -> dict:
    """List the members of every group the selector terms of `clusters` (default: the scope's) name
    (ListGroupResources, every page) and store them; groups no term of any cluster names any more are
    forgotten (another account's step lists its own). A provider without a Resource
    Groups API (the simulated world) leaves the stored groups alone."""
    lister = getattr(provider, "group_members", None)
    if lister is None:
        return {"groups": CapacityReservationGroup.objects.count()}
    from scheduling.adapters.ec2.interface import CloudAPIError

    now = now or timezone.now()
    arns = named_group_arns(clusters)
    members, errors = {}, []
    for arn in arns:
        try:
            members[arn] = lister(arn)
        except CloudAPIError as exc:
            errors.append(f"{arn}: {exc.code}: {exc.message}")
    for error in errors:
        log.warning("Capacity Reservation group not synced (its stored members are kept): %s", error)
    with transaction.atomic():
        named = arns if clusters is None or clusters == [None] else named_group_arns("fleet")
        CapacityReservationGroup.objects.exclude(arn__in=named).delete()
        for arn, ids in members.items():
            store_group(arn, ids, now)
    return {"groups": len(members), "group_errors": len(errors)}


def store_group(arn: str, reservation_ids, now=None) -> CapacityReservationGroup:
    ids = sorted(set(reservation_ids))
    group, _ = CapacityReservationGroup.objects.update_or_create(
        arn=arn, defaults={"reservation_ids": ids, "synced_at": now or timezone.now()})
    group.reservations.set(CapacityReservation.objects.filter(reservation_id__in=ids))
    return group


def launch_group_arn(node_class: EC2NodeClass | None, reservation_id: str, now=None) -> str | None:
    """The group a launch into `reservation_id` targets for this EC2NodeClass (the engine's rule,
    `scheduling.engine.groups.group_target`, on the stored groups and reservations); None to
    target the reservation itself."""
    if node_class is None or not reservation_id:
        return None
    arns = group_arns(node_class.capacity_reservation_selector_terms)
    if not arns:
        return None
    groups = [g for g in CapacityReservationGroup.objects.filter(arn__in=arns) if reservation_id in (g.reservation_ids or [])]
    if not groups:
        return None
    now = now or timezone.now()
    member_ids = {rid for group in groups for rid in group.reservation_ids}
    world = parse_world({
        "now": format_time(now),
        "capacityReservations": [reservation_item(r) for r in CapacityReservation.objects.filter(reservation_id__in=member_ids)],
        "capacityReservationGroups": [{"GroupArn": g.arn, "CapacityReservationIds": g.reservation_ids} for g in groups],
    })
    by_id = {r.id: r for r in world.reservations}
    if reservation_id not in by_id:
        return None
    return group_target(by_id[reservation_id], arns, world.reservation_groups, by_id, now)
