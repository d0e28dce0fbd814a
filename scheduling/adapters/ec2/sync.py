"""Writing what the cloud says into the models: reservations, utilization samples, EC2NodeClass
status, and the catalogue (instance types and offerings).

Works on any :class:`~.interface.CloudProvider` (EC2 or the simulated world). All API calls happen
first; the database writes then happen in one transaction, so a failing API call leaves the
models as they were (and the class conditions say why).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from reservations.models import CapacityReservation, EC2NodeClass, UtilizationSample, record_visibility
from reservations.status import write_node_class_status
from scheduling.engine.instancetypes import RESERVED_PRICE_DIVISOR
from scheduling.engine.timeutil import parse_time
from scheduling.models import CapacityType, InstanceType, Offering

from .interface import Catalogue, CloudAPIError, InstanceTypeInfo
from .status import REASON_API_ERROR, REASON_UNAUTHORIZED, ReservationStatus, to_engine

log = logging.getLogger(__name__)

MIB = 2**20
BATCH_SIZE = 500

RESERVATION_FIELDS = [
    "arn", "owner_id", "region", "instance_type", "instance_platform", "availability_zone",
    "availability_zone_id", "tenancy", "total_instance_count", "available_instance_count", "state",
    "instance_match_criteria", "reservation_type", "interruptible", "ebs_optimized", "ephemeral_storage",
    "create_date", "start_date", "end_date", "end_date_type", "ultraserver_type", "placement_group_arn",
    "outpost_arn", "unused_reservation_billing_owner_id", "capacity_allocations", "committed_instance_count",
    "commitment_end_date", "delivery_preference", "capacity_reservation_fleet_id", "interruptible_allocation",
    "interruption_source_id", "tags", "last_seen", "counted_at",
]  # fmt: skip


@dataclass
class ReservationSyncStats:
    reservations_created: int = 0
    reservations_updated: int = 0
    reservations_gone: int = 0  # rows EC2 no longer lists as usable (expired, cancelled, ...)
    samples: int = 0
    offerings: int = 0
    node_classes_changed: int = 0
    errors: list[str] = field(default_factory=list)


@dataclass
class CatalogueSyncStats:
    instance_types: int = 0
    offerings_created: int = 0
    offerings_updated: int = 0
    offerings_removed: int = 0
    price_source: str = ""
    notes: list[str] = field(default_factory=list)


def reservation_row(r: Mapping[str, Any], region: str, now: datetime, counted_at: datetime | None = None) -> dict[str, Any]:
    """CapacityReservation model fields from one EC2 ``CapacityReservation`` dict; `counted_at`: the
    clock just before EC2 was asked (reservations.ledger compares launches with it)."""

    def when(key: str) -> datetime | None:
        return parse_time(r[key]) if r.get(key) else None

    commitment = r.get("CommitmentInfo") or {}
    return {
        "reservation_id": r["CapacityReservationId"],
        "arn": r.get("CapacityReservationArn") or "",
        "owner_id": r.get("OwnerId") or "",
        "region": region,
        "instance_type": r["InstanceType"],
        "instance_platform": r.get("InstancePlatform") or "Linux/UNIX",
        "availability_zone": r["AvailabilityZone"],
        "availability_zone_id": r.get("AvailabilityZoneId") or "",
        "tenancy": r.get("Tenancy") or "default",
        "total_instance_count": int(r.get("TotalInstanceCount") or 0),
        "available_instance_count": int(r.get("AvailableInstanceCount") or 0),
        "state": r.get("State") or "active",
        "instance_match_criteria": r.get("InstanceMatchCriteria") or "targeted",
        "reservation_type": r.get("ReservationType") or "default",
        "interruptible": bool(r.get("Interruptible")),
        "ebs_optimized": bool(r.get("EbsOptimized")),
        "ephemeral_storage": bool(r.get("EphemeralStorage")),
        "create_date": when("CreateDate"),
        "start_date": when("StartDate"),
        "end_date": when("EndDate"),
        "end_date_type": r.get("EndDateType") or ("limited" if r.get("EndDate") else "unlimited"),
        "ultraserver_type": r.get("UltraserverType") or "",
        "placement_group_arn": r.get("PlacementGroupArn") or "",
        "outpost_arn": r.get("OutpostArn") or "",
        "unused_reservation_billing_owner_id": r.get("UnusedReservationBillingOwnerId") or "",
        "capacity_allocations": capacity_allocations(r),
        "committed_instance_count": commitment.get("CommittedInstanceCount"),
        "commitment_end_date": parse_time(commitment["CommitmentEndDate"]) if commitment.get("CommitmentEndDate") else None,
        "delivery_preference": r.get("DeliveryPreference") or "",
        "capacity_reservation_fleet_id": r.get("CapacityReservationFleetId") or "",
        "interruptible_allocation": {k: v for k, v in (r.get("InterruptibleCapacityAllocation") or {}).items()
                                     if k in ("InstanceCount", "TargetInstanceCount", "Status",
                                              "InterruptibleCapacityReservationId", "InterruptionType")},
        "interruption_source_id": (r.get("InterruptionInfo") or {}).get("SourceCapacityReservationId") or "",
        "tags": {t["Key"]: t["Value"] for t in r.get("Tags") or []},
        "last_seen": now,
        "counted_at": counted_at,
    }


def capacity_allocations(r: Mapping[str, Any]) -> list[dict[str, Any]]:
    """EC2's CapacityAllocations (the units running instances use), as it counted them with the counts."""
    return [{"AllocationType": a.get("AllocationType"), "Count": a.get("Count")} for a in r.get("CapacityAllocations") or []]


def sync_reservations(provider: Any, now: datetime | None = None) -> ReservationSyncStats:
    """One sync: every reservation EC2 lists as usable (owned or shared), the fate of rows it no
    longer lists, one utilization sample per listed reservation, the reserved offerings, and each
    EC2NodeClass's status.capacityReservations and CapacityReservationsReady."""
    now = now or timezone.now()
    stats = ReservationSyncStats()
    region = getattr(getattr(provider, "config", None), "region", "")

    # --- the API calls --------------------------------------------------------------------
    read_at = timezone.now()  # the clock, not `now`: a launch EC2 answered before it is in these counts
    try:
        listed = provider.inventory()
    except CloudAPIError as exc:
        listed = None
        stats.errors.append(f"inventory: {exc.code}: {exc.message}")
    node_classes = list(EC2NodeClass.objects.order_by("name"))
    statuses: dict[str, ReservationStatus] = {
        nc.name: provider.nodeclass_status(nc.name, nc.capacity_reservation_selector_terms) for nc in node_classes
    }
    seen: dict[str, dict[str, Any]] = {}
    for r in listed or []:
        seen[r["CapacityReservationId"]] = r
    for status in statuses.values():
        for r in status.reservations:
            seen.setdefault(r["CapacityReservationId"], r)
    gone: dict[str, dict[str, Any]] = {}
    if listed is not None:
        known = set(
            CapacityReservation.objects.exclude(state__in=("expired", "cancelled", "failed")).values_list(
                "reservation_id", flat=True
            )
        )
        missing = sorted(known - set(seen))
        if missing:
            try:
                gone = {r["CapacityReservationId"]: r for r in provider.reservations_by_id(missing)}
            except CloudAPIError as exc:
                stats.errors.append(f"reservations by id: {exc.code}: {exc.message}")
                missing = []
            for rid in missing:
                if rid not in gone:  # EC2 forgot it entirely
                    gone[rid] = {"CapacityReservationId": rid, "State": "expired"}

    # --- the writes ---------------------------------------------------------------------------
    with transaction.atomic():
        # A reservation only a class's (cached, up to a minute old) query returned keeps the moment
        # of its last read: stamping it now would call launches since then counted.
        fresh = {r["CapacityReservationId"] for r in listed or []}
        before = dict(CapacityReservation.objects.fleet().filter(reservation_id__in=list(set(seen) - fresh))
                      .values_list("reservation_id", "counted_at"))
        rows = [reservation_row(r, region, now, read_at if rid in fresh else before.get(rid))
                for rid, r in seen.items()]
        existing = set(
            CapacityReservation.objects.filter(reservation_id__in=[r["reservation_id"] for r in rows]).values_list(
                "reservation_id", flat=True
            )
        )
        CapacityReservation.objects.bulk_create(
            [CapacityReservation(**row) for row in rows],
            batch_size=BATCH_SIZE,
            update_conflicts=True,
            unique_fields=["reservation_id"],
            update_fields=RESERVATION_FIELDS,
        )
        # Which of the fleet's accounts see them (the working cluster's, and their owners): a
        # cluster scope reads only those (reservations.models.ReservationVisibility).
        record_visibility(CapacityReservation.objects.fleet().filter(
            reservation_id__in=[r["reservation_id"] for r in rows]).values_list("pk", flat=True))
        stats.reservations_created = len(rows) - len(existing)
        stats.reservations_updated = len(existing)
        for rid, r in gone.items():
            update = {"state": r.get("State") or "expired"}
            if "AvailableInstanceCount" in r:
                update["available_instance_count"] = int(r["AvailableInstanceCount"])
                update["capacity_allocations"] = capacity_allocations(r)
            if r.get("CapacityReservationArn"):
                update["last_seen"] = now
            stats.reservations_gone += CapacityReservation.objects.filter(reservation_id=rid).update(**update)

        by_id = {r.reservation_id: r for r in CapacityReservation.objects.filter(reservation_id__in=list(seen) + list(gone))}
        samples = [
            UtilizationSample(
                reservation=by_id[rid],
                sampled_at=now,
                used=by_id[rid].used_instance_count,
                available=by_id[rid].available_instance_count,
                total=by_id[rid].total_instance_count,
            )
            for rid in seen
        ]
        UtilizationSample.objects.bulk_create(samples, batch_size=BATCH_SIZE)
        stats.samples = len(samples)
        stats.offerings = _write_reserved_offerings(provider, list(seen.values()), list(gone), by_id, now)

        for nc in EC2NodeClass.objects.select_for_update().filter(name__in=[nc.name for nc in node_classes]).order_by("name"):
            condition = statuses[nc.name].condition
            if condition and condition["reason"] in (REASON_API_ERROR, REASON_UNAUTHORIZED):
                # EC2 did not answer for this class: say why, but keep the reservations it had (as
                # upstream keeps the status on an error), so that no reservation looks unavailable.
                if nc.set_condition(condition["type"], condition["status"], condition["reason"], condition["message"], now=now):
                    nc.save(update_fields=["conditions"])
                    stats.node_classes_changed += 1
                continue
            stats.node_classes_changed += write_node_class_status(nc, statuses[nc.name].result, now)
    return stats


def refresh_reservations(provider: Any, launched: Sequence[str], refused: Sequence[str] = (),
                         now: datetime | None = None) -> int:
    """Right after launches into (`launched`) or refused by (`refused`) these reservations: their
    counts, states and reserved offerings as EC2 has them now, not at the next sync, so that the
    next batch does not plan into units that are gone. A reservation EC2 refused for want of
    capacity stays at no free unit until the next full sync (EC2's count may lag its refusal, as
    upstream's availability cache assumes). Returns the reservations refreshed."""
    ids = sorted(set(launched) | set(refused))
    if not ids:
        return 0
    now = now or timezone.now()
    read_at = timezone.now()
    try:
        found = provider.reservations_by_id(ids)
    except CloudAPIError as exc:
        log.warning("reservations not refreshed after the launches (%s: %s); the next sync will", exc.code, exc.message)
        return 0
    region = getattr(getattr(provider, "config", None), "region", "")
    with transaction.atomic():
        for r in found:
            row = reservation_row(r, region, now, read_at)
            if r["CapacityReservationId"] in refused:
                row["available_instance_count"] = 0
            CapacityReservation.objects.filter(reservation_id=row["reservation_id"]).update(
                **{field: row[field] for field in REFRESHED_FIELDS})
        by_id = {r.reservation_id: r for r in CapacityReservation.objects.filter(reservation_id__in=ids)}
        _write_reserved_offerings(provider, [r for r in found if r["CapacityReservationId"] in by_id], [], by_id, now)
    return len(found)


REFRESHED_FIELDS = ("state", "total_instance_count", "available_instance_count", "end_date", "last_seen", "counted_at",
                    "interruptible_allocation")


def _write_reserved_offerings(
    provider: Any,
    reservations: Sequence[Mapping[str, Any]],
    gone_ids: Sequence[str],
    rows: Mapping[str, CapacityReservation],
    now: datetime,
) -> int:
    """One reserved Offering per reservation whose instance type is in the catalogue, priced at
    the on-demand price / 10,000,000 and available when the engine finds no reason against it."""
    types = {it.name: it for it in InstanceType.objects.filter(name__in={r["InstanceType"] for r in reservations})}
    on_demand: dict[tuple[str, str], float] = {}
    for name, zone, price in Offering.objects.filter(
        instance_type__name__in=list(types), capacity_type=CapacityType.ON_DEMAND, reservation__isnull=True
    ).values_list("instance_type__name", "zone", "price"):
        on_demand[(name, zone)] = price
    written = 0
    for r in reservations:
        it = types.get(r["InstanceType"])
        if it is None:
            continue  # the catalogue has not been synced for this type yet
        zone = r["AvailabilityZone"]
        prices = [p for (name, z), p in on_demand.items() if name == it.name]
        od_price = on_demand.get((it.name, zone), min(prices) if prices else 0.0)
        engine = to_engine(r, available_count=provider.available_instance_count(r["CapacityReservationId"]))
        Offering.objects.update_or_create(
            reservation=rows[r["CapacityReservationId"]],
            defaults={
                "instance_type": it,
                "capacity_type": CapacityType.RESERVED,
                "zone": zone,
                "zone_id": r.get("AvailabilityZoneId") or "",
                "price": od_price / RESERVED_PRICE_DIVISOR,
                "available": engine.unavailable_reason(now) is None and (it.name, zone) in on_demand,
                "updated_at": now,
            },
        )
        written += 1
    Offering.objects.filter(reservation__reservation_id__in=list(gone_ids)).update(available=False, updated_at=now)
    return written


def instance_type_row(info: InstanceTypeInfo, now: datetime) -> dict[str, Any]:
    family, _, size = info.name.partition(".")
    return {
        "name": info.name,
        "cpu_millicores": info.vcpus * 1000,
        "memory_bytes": info.memory_mib * MIB,
        "max_pods": info.max_pods,
        "arch": info.architecture,
        "os": "linux",
        "family": family,
        "size": size,
        "gpu_count": info.gpu_count,
        "gpu_name": info.gpu_name,
        "bare_metal": info.bare_metal,
        "labels": dict(info.labels),
        "resources": dict(info.resources),
        "instance_store_gb": info.instance_store_gb,
        "synced_at": now,
    }


def sync_catalogue(provider: Any, now: datetime | None = None, catalogue: Catalogue | None = None) -> CatalogueSyncStats:
    """Instance types and their on-demand and spot offerings into the models. Pools the cloud no
    longer offers are removed (reserved offerings are left to :func:`sync_reservations`)."""
    now = now or timezone.now()
    catalogue = catalogue or provider.catalogue()
    stats = CatalogueSyncStats(price_source=catalogue.price_source, notes=list(catalogue.notes))
    priced = {it.name for it in catalogue.instance_types if it.on_demand_price is not None}
    with transaction.atomic():
        rows = [instance_type_row(it, now) for it in catalogue.instance_types]
        InstanceType.objects.bulk_create(
            [InstanceType(**row) for row in rows],
            batch_size=BATCH_SIZE,
            update_conflicts=True,
            unique_fields=["name"],
            update_fields=[k for k in rows[0] if k != "name"] if rows else ["synced_at"],
        )
        stats.instance_types = len(rows)
        type_ids = dict(InstanceType.objects.filter(name__in=[r["name"] for r in rows]).values_list("name", "id"))

        existing = {
            (o.instance_type_id, o.capacity_type, o.zone): o
            for o in Offering.objects.filter(instance_type_id__in=type_ids.values(), reservation__isnull=True)
        }
        to_create, to_update, wanted = [], [], set()
        for o in catalogue.offerings:
            if o.capacity_type == CapacityType.RESERVED or o.instance_type not in type_ids:
                continue
            if o.capacity_type == CapacityType.ON_DEMAND and o.instance_type not in priced:
                continue  # no price anywhere: the engine cannot order it
            key = (type_ids[o.instance_type], o.capacity_type, o.zone)
            wanted.add(key)
            row = existing.get(key)
            if row is None:
                to_create.append(
                    Offering(
                        instance_type_id=key[0], capacity_type=o.capacity_type, zone=o.zone, zone_id=o.zone_id,
                        price=o.price or 0.0, available=o.available, updated_at=now,
                    )
                )
            else:
                row.zone_id, row.price, row.available, row.updated_at = o.zone_id, o.price or 0.0, o.available, now
                to_update.append(row)
        Offering.objects.bulk_create(to_create, batch_size=BATCH_SIZE)
        Offering.objects.bulk_update(to_update, ["zone_id", "price", "available", "updated_at"], batch_size=BATCH_SIZE)
        stale = [row.id for key, row in existing.items() if key not in wanted]
        Offering.objects.filter(id__in=stale).delete()
        stats.offerings_created, stats.offerings_updated, stats.offerings_removed = len(to_create), len(to_update), len(stale)
    if len(priced) < len(catalogue.instance_types):
        stats.notes.append(
            f"{len(catalogue.instance_types) - len(priced)} instance type(s) have no on-demand price and no offerings"
        )
    return stats


def collect_launch_templates(provider: Any, now: datetime | None = None) -> list[str]:
    """Delete karpweb's launch templates for EC2NodeClasses that are gone and for reservations that
    can no longer be launched into (expired, cancelled, ended, gone): one template per class,
    data and reservation accumulates otherwise, against EC2's 5,000 per region. What counts as live
    is what the models say after the last successful sync (a failed sync leaves them as they were)."""
    from reservations.models import CapacityReservationGroup

    now = now or timezone.now()
    live_classes = set(EC2NodeClass.objects.values_list("name", flat=True))
    live_targets = set(CapacityReservation.objects.usable(now).values_list("reservation_id", flat=True))
    live_targets |= set(CapacityReservationGroup.objects.values_list("arn", flat=True))
    deleted = provider.collect_launch_templates(live_classes, live_targets)
    if deleted:
        log.info("deleted %d launch templates no launch can use: %s", len(deleted), ", ".join(deleted))
    return deleted
